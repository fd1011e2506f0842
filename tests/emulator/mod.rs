//! A Jetson board that behaves: a FUSE filesystem (the `fuser` crate, test-only) mounted over a
//! copy of a fixture tree's `sys/`, answering reads and writes the way the kernel and NVIDIA's
//! services do, so that jetdetect's real file I/O meets a board rather than plain files:
//!
//! * cpufreq and devfreq snap a frequency to the table (a floor up, a ceiling down), clamp it to
//!   the hardware range, and refuse a floor above the ceiling or a ceiling below the floor with
//!   EINVAL (kernel 4.9 `cpufreq_set_policy` / `min_freq_store`);
//! * a rail-gated GPU's devfreq node is absent until `railgate_enable` is written 0, then stays;
//! * the EMC `rate` moves on its own unless `mrq_rate_locked` is 1 (Nano: `clk_rate` unless
//!   `clk_state` is 1);
//! * while `nvfancontrol` runs (JetPack 5/6) it rewrites `pwm1`; on JetPack 4, while
//!   `temp_control` is 1, the kernel sets `target_pwm` from the temperature;
//! * a switch of the nvpmodel mode (the stand-in `nvpmodel` records it in
//!   `var/lib/nvpmodel/status`) applies that mode from `etc/nvpmodel.conf`: online cores, CPU and GPU
//!   ceilings (floors pulled down under them), the EMC cap.
//!
//! Everything outside `sys/` (etc, usr, var, run) stays a plain directory. The emulator reads
//! nvpmodel.conf with its own small reader, not jetdetect's, so the two can disagree.
//! Mounting needs root and /dev/fuse; [`EmulatedBoard::mount`] says why when it cannot.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

const TTL: Duration = Duration::ZERO;

enum Node {
    Dir(BTreeMap<String, u64>),
    File(Vec<u8>),
    Link(PathBuf),
}

struct Entry {
    parent: u64,
    name: String,
    node: Node,
    hidden: bool,
}

/// The board's state: every `sys/` node, and what the services are doing.
pub struct Model {
    root: PathBuf,
    entries: Vec<Entry>,
    mode: Option<u32>,
    emc_reads: u64,
    /// Every value written, as `(path under sys/, value, accepted)`, in order.
    pub writes: Vec<(String, String, bool)>,
}

fn number(v: &str) -> Result<u64, Errno> {
    v.trim().parse().map_err(|_| Errno::EINVAL)
}

impl Model {
    fn load(root: &Path) -> std::io::Result<Model> {
        let mut m = Model {
            root: root.to_path_buf(),
            entries: Vec::new(),
            mode: None,
            emc_reads: 0,
            writes: Vec::new(),
        };
        m.entries.push(Entry {
            parent: 1,
            name: String::new(),
            node: Node::Dir(BTreeMap::new()),
            hidden: false,
        });
        m.load_dir(&root.join("sys"), 1)?;
        m.mode = m.status_mode();
        Ok(m)
    }

    fn load_dir(&mut self, dir: &Path, ino: u64) -> std::io::Result<()> {
        let mut names: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let meta = std::fs::symlink_metadata(e.path())?;
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(e.path())?)
            } else if meta.is_dir() {
                Node::Dir(BTreeMap::new())
            } else {
                Node::File(std::fs::read(e.path())?)
            };
            let child = self.add(ino, &e.file_name().to_string_lossy(), node);
            if meta.is_dir() && !meta.file_type().is_symlink() {
                self.load_dir(&e.path(), child)?;
            }
        }
        Ok(())
    }

    fn add(&mut self, parent: u64, name: &str, node: Node) -> u64 {
        self.entries.push(Entry { parent, name: name.to_string(), node, hidden: false });
        let ino = self.entries.len() as u64;
        if let Node::Dir(d) = &mut self.entries[parent as usize - 1].node {
            d.insert(name.to_string(), ino);
        }
        ino
    }

    fn entry(&self, ino: u64) -> Option<&Entry> {
        self.entries.get((ino as usize).checked_sub(1)?)
    }

    /// The path of `ino` under `sys/`, e.g. `devices/system/cpu/cpu0/online`.
    fn rel(&self, ino: u64) -> String {
        let mut parts = Vec::new();
        let mut i = ino;
        while i != 1 {
            let e = &self.entries[i as usize - 1];
            parts.push(e.name.clone());
            i = e.parent;
        }
        parts.reverse();
        parts.join("/")
    }

    /// Resolves a path under `sys/`, following symbolic links as the kernel would.
    fn resolve(&self, rel: &str) -> Option<u64> {
        let mut stack: Vec<u64> = vec![1];
        let mut parts: Vec<String> =
            rel.split('/').filter(|p| !p.is_empty()).map(String::from).rev().collect();
        let mut hops = 0;
        while let Some(part) = parts.pop() {
            let cur = *stack.last()?;
            match part.as_str() {
                "." => continue,
                ".." => {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                    continue;
                }
                _ => {}
            }
            let Node::Dir(d) = &self.entry(cur)?.node else { return None };
            let child = *d.get(&part)?;
            if let Node::Link(target) = &self.entry(child)?.node {
                hops += 1;
                if hops > 16 {
                    return None;
                }
                parts.extend(
                    target.to_string_lossy().split('/').filter(|p| !p.is_empty()).map(String::from).rev(),
                );
                continue;
            }
            stack.push(child);
        }
        stack.last().copied()
    }

    /// The entry at `rel` itself (a link is not followed at the last step).
    fn entry_at(&self, rel: &str) -> Option<u64> {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        match &self.entry(self.resolve(dir)?)?.node {
            Node::Dir(d) => d.get(name).copied(),
            _ => None,
        }
    }

    fn text(&self, rel: &str) -> Option<String> {
        match &self.entry(self.resolve(rel)?)?.node {
            Node::File(b) => Some(String::from_utf8_lossy(b).trim().to_string()),
            _ => None,
        }
    }

    fn num(&self, rel: &str) -> Option<u64> {
        self.text(rel)?.parse().ok()
    }

    fn set(&mut self, rel: &str, value: impl ToString) {
        if let Some(ino) = self.resolve(rel) {
            self.entries[ino as usize - 1].node = Node::File(format!("{}\n", value.to_string()).into_bytes());
        }
    }

    /// The value a test can read as jetdetect would (the live one, for readings).
    pub fn value(&mut self, rel: &str) -> Option<String> {
        let ino = self.resolve(rel)?;
        Some(String::from_utf8_lossy(&self.show(ino)).trim().to_string())
    }

    fn table(&self, dir: &str, file: &str) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .text(&format!("{dir}/{file}"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        v.sort_unstable();
        v
    }

    /// Snaps `want` to the table: a floor to the lowest entry at or above it, a ceiling to the
    /// highest at or below it (cpufreq's RELATION_L / RELATION_H), clamped to the table's range.
    fn snap(table: &[u64], want: u64, floor: bool) -> u64 {
        let (Some(&lo), Some(&hi)) = (table.first(), table.last()) else { return want };
        let w = want.clamp(lo, hi);
        if floor {
            *table.iter().find(|&&f| f >= w).unwrap_or(&hi)
        } else {
            *table.iter().rev().find(|&&f| f <= w).unwrap_or(&lo)
        }
    }

    fn service_active(&self, unit: &str) -> bool {
        std::fs::read_to_string(self.root.join("run/systemd-standin").join(unit))
            .is_ok_and(|s| s.trim() == "active")
    }

    fn status_mode(&self) -> Option<u32> {
        let s = std::fs::read_to_string(self.root.join("var/lib/nvpmodel/status")).ok()?;
        s.split_whitespace().find_map(|w| w.strip_prefix("pmode:")?.parse().ok())
    }

    /// The fan value the thermal controller (kernel or nvfancontrol) would choose now.
    fn thermal_pwm(&self) -> u64 {
        let hottest = (0..16)
            .filter_map(|i| self.num(&format!("class/thermal/thermal_zone{i}/temp")))
            .max()
            .unwrap_or(40_000);
        (hottest.saturating_sub(30_000) / 250).min(255)
    }

    /// What a read returns: settings as stored, readings as the hardware has them now.
    fn show(&mut self, ino: u64) -> Vec<u8> {
        self.sync_mode();
        let rel = self.rel(ino);
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
        let live = match name {
            "rate"
                if dir.ends_with("clk/emc")
                    && self.text(&format!("{dir}/mrq_rate_locked")).as_deref() != Some("1") =>
            {
                // Unlocked, the memory clock follows the load.
                self.emc_reads += 1;
                let (lo, hi) = (
                    self.num(&format!("{dir}/min_rate")).unwrap_or(0),
                    self.num(&format!("{dir}/max_rate")).unwrap_or(0),
                );
                Some([lo, (lo + hi) / 2, hi, (lo + hi) / 3][(self.emc_reads % 4) as usize])
            }
            "clk_rate" if dir.ends_with("override.emc") => {
                match self.text(&format!("{dir}/clk_state")).as_deref() {
                    Some("1") => self.num(&format!("{dir}/clk_update_rate")),
                    _ => {
                        self.emc_reads += 1;
                        Some(if self.emc_reads.is_multiple_of(2) { 204_000_000 } else { 1_600_000_000 })
                    }
                }
            }
            "pwm1" if self.service_active("nvfancontrol") => Some(self.thermal_pwm()),
            "target_pwm" if self.text(&format!("{dir}/temp_control")).as_deref() == Some("1") => {
                Some(self.thermal_pwm())
            }
            "cur_freq" | "scaling_cur_freq" => {
                let (minf, maxf, table) = if name == "cur_freq" {
                    ("min_freq", "max_freq", self.table(dir, "available_frequencies"))
                } else {
                    ("scaling_min_freq", "scaling_max_freq", self.table(dir, "scaling_available_frequencies"))
                };
                let mid = table.get(table.len() / 2).copied().unwrap_or(0);
                let (lo, hi) = (
                    self.num(&format!("{dir}/{minf}")).unwrap_or(0),
                    self.num(&format!("{dir}/{maxf}")).unwrap_or(u64::MAX),
                );
                Some(mid.clamp(lo, hi.max(lo)))
            }
            _ => None,
        };
        match (live, &self.entries[ino as usize - 1].node) {
            (Some(v), _) => format!("{v}\n").into_bytes(),
            (None, Node::File(b)) => b.clone(),
            _ => Vec::new(),
        }
    }

    /// A write, answered as the driver would.
    fn store(&mut self, ino: u64, value: &str) -> Result<(), Errno> {
        self.sync_mode();
        let rel = self.rel(ino);
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
        let v = value.trim();
        let result = self.store_at(dir, name, v);
        self.writes.push((rel.clone(), v.to_string(), result.is_ok()));
        result
    }

    fn store_at(&mut self, dir: &str, name: &str, v: &str) -> Result<(), Errno> {
        const READ_ONLY: [&str; 8] = [
            "available_frequencies",
            "scaling_available_frequencies",
            "cpuinfo_max_freq",
            "cpuinfo_min_freq",
            "cur_freq",
            "scaling_cur_freq",
            "temp",
            "type",
        ];
        if READ_ONLY.contains(&name) {
            return Err(Errno::EACCES);
        }
        let path = format!("{dir}/{name}");
        match name {
            "scaling_min_freq" | "scaling_max_freq" | "min_freq" | "max_freq" => {
                let cpu = name.starts_with("scaling");
                let table = self
                    .table(dir, if cpu { "scaling_available_frequencies" } else { "available_frequencies" });
                let floor = name.ends_with("min_freq");
                let f = Self::snap(&table, number(v)?, floor);
                let (minf, maxf) =
                    if cpu { ("scaling_min_freq", "scaling_max_freq") } else { ("min_freq", "max_freq") };
                let other = self.num(&format!("{dir}/{}", if floor { maxf } else { minf }));
                match other {
                    Some(max) if floor && f > max => return Err(Errno::EINVAL),
                    Some(min) if !floor && f < min => return Err(Errno::EINVAL),
                    _ => {}
                }
                self.set(&path, f);
            }
            "railgate_enable" => {
                if v == "0" {
                    // Powered: the GPU registers with devfreq, and stays registered.
                    for e in &mut self.entries {
                        e.hidden = false;
                    }
                }
                self.set(&path, v);
            }
            "rate" if dir.ends_with("clk/emc") => {
                let (lo, hi) = (
                    self.num(&format!("{dir}/min_rate")).unwrap_or(0),
                    self.num(&format!("{dir}/max_rate")).unwrap_or(u64::MAX),
                );
                self.set(&path, number(v)?.clamp(lo, hi));
            }
            "mrq_rate_locked" | "clk_state" | "temp_control" | "online" => match v {
                "0" | "1" => self.set(&path, v),
                _ => return Err(Errno::EINVAL),
            },
            "pwm1" | "target_pwm" => match number(v)? {
                p if p <= 255 => self.set(&path, p),
                _ => return Err(Errno::EINVAL),
            },
            _ => self.set(&path, v),
        }
        Ok(())
    }

    /// Applies a new nvpmodel mode when the stand-in recorded one: what NVIDIA's nvpmodel writes.
    fn sync_mode(&mut self) {
        let Some(id) = self.status_mode() else { return };
        if self.mode == Some(id) {
            return;
        }
        self.mode = Some(id);
        let conf = std::fs::read_to_string(self.root.join("etc/nvpmodel.conf")).unwrap_or_default();
        // PARAM name -> (key -> path under sys/); then the chosen mode's `NAME KEY VALUE` lines.
        let mut params: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut current: Option<String> = None;
        let mut settings: Vec<(String, String, String)> = Vec::new();
        let mut in_mode = false;
        for line in conf.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            if line.starts_with('<') {
                in_mode = line.contains("POWER_MODEL") && line.contains(&format!("ID={id} "));
                current = line
                    .strip_prefix("< PARAM")
                    .and_then(|r| r.split("NAME=").nth(1))
                    .map(|n| n.trim_end_matches(['>', ' ']).to_string());
                continue;
            }
            let w: Vec<&str> = line.split_whitespace().collect();
            if let (Some(p), [key, path]) = (&current, w.as_slice()) {
                params
                    .entry(p.clone())
                    .or_default()
                    .insert(key.to_string(), path.trim_start_matches("/sys/").to_string());
            } else if let (true, [a, b, c]) = (in_mode, w.as_slice()) {
                settings.push((a.to_string(), b.to_string(), c.to_string()));
            }
        }
        // A CPU cluster param names its first core; it covers the cores up to the next cluster's.
        let mut firsts: Vec<u64> = params
            .iter()
            .filter_map(|(n, p)| n.starts_with("CPU_").then(|| p.get("MAX_FREQ"))?)
            .filter_map(|p| p.split('/').find_map(|s| s.strip_prefix("cpu")?.parse().ok()))
            .collect();
        firsts.sort_unstable();
        for (param, key, value) in settings {
            let Some(p) = params.get(&param) else { continue };
            if param == "CPU_ONLINE" {
                if let Some(path) = p.get(&key) {
                    self.set(path, value);
                }
                continue;
            }
            let Some(path) = p.get(&key) else { continue };
            if param == "EMC" {
                self.set(path, value);
                continue;
            }
            let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
            let targets: Vec<String> =
                match dir.split('/').find_map(|s| s.strip_prefix("cpu")?.parse::<u64>().ok()) {
                    Some(first) => {
                        let end = firsts.iter().find(|&&f| f > first).copied().unwrap_or(first + 64);
                        (first..end)
                            .map(|c| dir.replace(&format!("cpu{first}/"), &format!("cpu{c}/")))
                            .filter(|d| self.resolve(d).is_some())
                            .collect()
                    }
                    None => vec![dir.to_string()],
                };
            for d in targets {
                let cpu = file.starts_with("scaling");
                let table = self
                    .table(&d, if cpu { "scaling_available_frequencies" } else { "available_frequencies" });
                let (minf, maxf) =
                    if cpu { ("scaling_min_freq", "scaling_max_freq") } else { ("min_freq", "max_freq") };
                let want: i64 = value.parse().unwrap_or(0);
                if key == "MAX_FREQ" {
                    let f = if want < 0 {
                        *table.last().unwrap_or(&0)
                    } else {
                        Self::snap(&table, want as u64, false)
                    };
                    self.set(&format!("{d}/{maxf}"), f);
                    if self.num(&format!("{d}/{minf}")).is_some_and(|m| m > f) {
                        self.set(&format!("{d}/{minf}"), f);
                    }
                } else if key == "MIN_FREQ" {
                    let max = self.num(&format!("{d}/{maxf}")).unwrap_or(u64::MAX);
                    let f = if want <= 0 {
                        *table.first().unwrap_or(&0)
                    } else {
                        Self::snap(&table, want as u64, true)
                    };
                    self.set(&format!("{d}/{minf}"), f.min(max));
                }
            }
        }
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let e = self.entry(ino)?;
        let (kind, size, perm) = match &e.node {
            Node::Dir(_) => (FileType::Directory, 0, 0o755),
            Node::File(b) => (FileType::RegularFile, b.len() as u64, 0o644),
            Node::Link(t) => (FileType::Symlink, t.as_os_str().len() as u64, 0o777),
        };
        let t = SystemTime::UNIX_EPOCH;
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind,
            perm,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }
}

struct Fs(Arc<Mutex<Model>>);

impl Fs {
    fn model(&self) -> MutexGuard<'_, Model> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Filesystem for Fs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let m = self.model();
        let child = match m.entry(parent.0).map(|e| &e.node) {
            Some(Node::Dir(d)) => d.get(name.to_string_lossy().as_ref()).copied(),
            _ => None,
        };
        match child.filter(|&c| !m.entries[c as usize - 1].hidden).and_then(|c| m.attr(c)) {
            Some(a) => reply.entry(&TTL, &a, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.model().attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // O_TRUNC on a sysfs attribute changes nothing: the value is replaced by the write.
        match self.model().attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.model().entry(ino.0).map(|e| &e.node) {
            Some(Node::Link(t)) => reply.data(t.as_os_str().as_encoded_bytes()),
            _ => reply.error(Errno::EINVAL),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Direct I/O: every read reaches the board (readings move), none is served from a cache.
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let data = self.model().show(ino.0);
        let start = (offset as usize).min(data.len());
        let end = (start + size as usize).min(data.len());
        reply.data(&data[start..end]);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // sysfs: one write() is one value, whatever the offset.
        match self.model().store(ino.0, &String::from_utf8_lossy(data)) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let m = self.model();
        let Some(Entry { node: Node::Dir(d), parent, .. }) = m.entry(ino.0) else {
            reply.error(Errno::ENOTDIR);
            return;
        };
        let mut list: Vec<(u64, FileType, String)> =
            vec![(ino.0, FileType::Directory, ".".into()), (*parent, FileType::Directory, "..".into())];
        for (name, &child) in d {
            let e = &m.entries[child as usize - 1];
            if e.hidden {
                continue;
            }
            let kind = match e.node {
                Node::Dir(_) => FileType::Directory,
                Node::File(_) => FileType::RegularFile,
                Node::Link(_) => FileType::Symlink,
            };
            list.push((child, kind, name.clone()));
        }
        for (i, (child, kind, name)) in list.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

/// A fixture board copied to a temporary folder with its `sys/` served by the emulator.
pub struct EmulatedBoard {
    root: PathBuf,
    model: Arc<Mutex<Model>>,
    session: Option<fuser::BackgroundSession>,
}

impl EmulatedBoard {
    /// Copies `tests/fixtures/jetson/<board>` and mounts the emulator over its `sys/`. The paths in
    /// `rail_gated` (under `sys/`) stay hidden until the GPU's `railgate_enable` is written 0.
    /// Errors say why FUSE cannot be used here (not root, no /dev/fuse).
    pub fn mount(board: &str, tag: &str, rail_gated: &[&str]) -> Result<EmulatedBoard, String> {
        if unsafe { libc::geteuid() } != 0 {
            return Err("the board emulator mounts a FUSE filesystem: run the tests as root".into());
        }
        if !Path::new("/dev/fuse").exists() {
            return Err("/dev/fuse is missing: the board emulator needs the FUSE kernel module".into());
        }
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jetson").join(board);
        // Unique per mount: tests run in parallel and may mount the same board with the same tag.
        static MOUNTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MOUNTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("jd-emu-{}-{n}-{board}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(&fixture)
            .arg(&root)
            .status()
            .map_err(|e| e.to_string())?;
        if !ok.success() {
            return Err(format!("cannot copy {}", fixture.display()));
        }
        let mut model = Model::load(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        for rel in rail_gated {
            let ino = model.entry_at(rel).ok_or_else(|| format!("{board}: no sys/{rel} to rail-gate"))?;
            model.entries[ino as usize - 1].hidden = true;
        }
        std::fs::remove_dir_all(root.join("sys")).map_err(|e| e.to_string())?;
        std::fs::create_dir(root.join("sys")).map_err(|e| e.to_string())?;
        let model = Arc::new(Mutex::new(model));
        let mut config = fuser::Config::default();
        config.mount_options =
            vec![fuser::MountOption::FSName("jetdetect-board".into()), fuser::MountOption::Exec];
        let session = fuser::spawn_mount2(Fs(model.clone()), root.join("sys"), &config)
            .map_err(|e| format!("mounting the board emulator on {}: {e}", root.join("sys").display()))?;
        Ok(EmulatedBoard { root, model, session: Some(session) })
    }

    /// The folder that stands for `/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The board's state, for a test to look at (never hold it across file I/O on the tree).
    pub fn model(&self) -> MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A value as the board has it now, by path under `sys/`.
    pub fn value(&self, rel: &str) -> String {
        self.model().value(rel).unwrap_or_else(|| panic!("no sys/{rel} on the emulated board"))
    }

    /// Whether the stand-in systemd has `unit` running.
    pub fn service_active(&self, unit: &str) -> bool {
        self.model().service_active(unit)
    }
}

impl Drop for EmulatedBoard {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Mounts a board, or fails saying why: the emulator needs root and /dev/fuse, and a test that
/// mounts one is ignored where build.rs found neither (unless `JETDETECT_REQUIRE_FUSE` is set).
#[macro_export]
macro_rules! emulated {
    ($board:expr, $tag:expr) => {
        emulated!($board, $tag, &[])
    };
    ($board:expr, $tag:expr, $gated:expr) => {
        match $crate::emulator::EmulatedBoard::mount($board, $tag, $gated) {
            Ok(b) => b,
            Err(e) => panic!("the board emulator is unavailable: {e}"),
        }
    };
}
