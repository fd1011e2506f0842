//! nvpmodel power modes: `/etc/nvpmodel.conf` read as nvpmodel reads it (the
//! `PARAM` definitions, then one `POWER_MODEL` block per mode), the current
//! mode from `nvpmodel -q`, switching with `nvpmodel -m ID`.
//!
//! A mode is a power budget: it sets the *ceilings* (GPU devfreq `max_freq`,
//! each CPU cluster's `scaling_max_freq`, the EMC cap) and the online cores.
//! jetdetect's profiles pin clocks inside the current mode, as jetson_clocks
//! does, and read the modes here to say which one would allow a clock the
//! current mode does not. Some switches (core counts, Orin "super" modes)
//! take full effect only after a reboot: nvpmodel says so and jetdetect
//! repeats it, never rebooting on its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::PowerError;

/// A clock ceiling as a mode gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ceiling {
    /// `-1`: the hardware's highest frequency.
    Highest,
    /// A frequency in the file's unit (Hz for the GPU and EMC, kHz for CPUs); `0` for the EMC means uncapped.
    At(u64),
}

impl Ceiling {
    /// The ceiling in the file's unit, given the hardware's highest frequency.
    pub fn resolve(self, highest: u64) -> u64 {
        match self {
            Ceiling::Highest => highest,
            Ceiling::At(v) => v.min(highest),
        }
    }
}

/// One `< POWER_MODEL ID=n NAME=s >` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Mode id.
    pub id: u32,
    /// Mode name, e.g. `MAXN` or `15W`.
    pub name: String,
    /// `GPU MAX_FREQ`, Hz.
    pub gpu_max: Option<Ceiling>,
    /// `(first core of the cluster, MAX_FREQ in kHz)` for each CPU cluster the mode caps.
    pub cpu_max: Vec<(usize, Ceiling)>,
    /// `EMC MAX_FREQ`, Hz (`0`: uncapped).
    pub emc_max: Option<Ceiling>,
    /// `(core, online)` from `CPU_ONLINE CORE_n v`.
    pub online: Vec<(usize, bool)>,
}

impl Mode {
    /// The ceiling this mode puts on `cpu` (the cluster whose first core is the nearest at or below it).
    pub fn cpu_ceiling(&self, cpu: usize) -> Option<Ceiling> {
        self.cpu_max
            .iter()
            .filter(|(first, _)| *first <= cpu)
            .max_by_key(|(first, _)| *first)
            .map(|(_, c)| *c)
    }

    /// How many cores the mode leaves online (`None` when it does not say).
    pub fn cores_online(&self) -> Option<usize> {
        (!self.online.is_empty()).then(|| self.online.iter().filter(|(_, on)| *on).count())
    }

    /// `id (NAME)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.id, self.name)
    }
}

fn ceiling(v: &str) -> Option<Ceiling> {
    match v.parse::<i64>().ok()? {
        -1 => Some(Ceiling::Highest),
        n if n >= 0 => Some(Ceiling::At(n as u64)),
        _ => None,
    }
}

/// The core number in a path such as `/sys/devices/system/cpu/cpu4/cpufreq/scaling_max_freq`.
fn core_of(path: &str) -> Option<usize> {
    path.split('/').find_map(|part| part.strip_prefix("cpu")?.parse().ok())
}

/// The modes in an nvpmodel.conf text. Only `POWER_MODEL` blocks make modes; the
/// `PARAM` definitions before them say which clock each name sets (a CPU cluster
/// is known by the core in its `MAX_FREQ` path).
pub fn parse_modes(conf: &str) -> Vec<Mode> {
    // PARAM name -> the core its MAX_FREQ file belongs to (CPU clusters only).
    let mut cpu_params: Vec<(String, usize)> = Vec::new();
    let mut param: Option<String> = None;
    let mut modes: Vec<Mode> = Vec::new();
    let mut in_mode = false;
    for line in conf.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(body) = line.strip_prefix('<').and_then(|l| l.strip_suffix('>')) {
            let mut words = body.split_whitespace();
            let kind = words.next().unwrap_or("");
            let attr = |key: &str| {
                body.split_whitespace()
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=').map(String::from))
            };
            in_mode = false;
            param = None;
            match kind {
                "PARAM" => param = attr("NAME"),
                "POWER_MODEL" => {
                    if let (Some(id), Some(name)) = (attr("ID").and_then(|v| v.parse().ok()), attr("NAME")) {
                        modes.push(Mode {
                            id,
                            name,
                            gpu_max: None,
                            cpu_max: Vec::new(),
                            emc_max: None,
                            online: Vec::new(),
                        });
                        in_mode = true;
                    }
                }
                _ => {}
            }
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if let (Some(p), ["MAX_FREQ", path, ..]) = (&param, words.as_slice()) {
            if p.starts_with("CPU") {
                if let Some(core) = core_of(path) {
                    cpu_params.push((p.clone(), core));
                }
            }
            continue;
        }
        let (true, Some(mode), [name, arg, value]) = (in_mode, modes.last_mut(), words.as_slice()) else {
            continue;
        };
        match (*name, *arg) {
            ("CPU_ONLINE", core) => {
                if let (Some(c), Ok(v)) =
                    (core.strip_prefix("CORE_").and_then(|c| c.parse().ok()), value.parse::<u8>())
                {
                    mode.online.push((c, v != 0));
                }
            }
            ("GPU", "MAX_FREQ") => mode.gpu_max = ceiling(value),
            ("EMC", "MAX_FREQ") => mode.emc_max = ceiling(value),
            (p, "MAX_FREQ") => {
                if let (Some((_, core)), Some(c)) = (cpu_params.iter().find(|(n, _)| n == p), ceiling(value))
                {
                    mode.cpu_max.push((*core, c));
                }
            }
            _ => {}
        }
    }
    modes
}

/// nvpmodel on this board.
pub struct Nvpmodel {
    /// The nvpmodel program.
    pub program: PathBuf,
    /// Known modes.
    pub modes: Vec<Mode>,
}

impl Nvpmodel {
    /// Finds `usr/sbin/nvpmodel` (or `usr/bin`) and `etc/nvpmodel.conf` under `root`.
    pub fn find(root: &Path) -> Option<Nvpmodel> {
        let program =
            ["usr/sbin/nvpmodel", "usr/bin/nvpmodel"].iter().map(|p| root.join(p)).find(|p| p.is_file())?;
        let conf = std::fs::read_to_string(root.join("etc/nvpmodel.conf")).unwrap_or_default();
        Some(Nvpmodel { program, modes: parse_modes(&conf) })
    }

    /// Resolves a mode given by name or id.
    pub fn resolve(&self, wanted: &str) -> Result<Mode, PowerError> {
        let found =
            self.modes.iter().find(|m| m.name.eq_ignore_ascii_case(wanted) || m.id.to_string() == wanted);
        found.cloned().ok_or_else(|| {
            let list: Vec<String> = self.modes.iter().map(Mode::label).collect();
            PowerError(format!(
                "[power] nvpmodel = '{wanted}': no such mode; this board has {}",
                list.join(", ")
            ))
        })
    }

    /// The mode with this id, if the conf defines it.
    pub fn mode(&self, id: u32) -> Option<&Mode> {
        self.modes.iter().find(|m| m.id == id)
    }

    fn run(&self, args: &[&str]) -> Result<String, PowerError> {
        let out = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| PowerError(format!("{}: cannot run: {e}", self.program.display())))?;
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(PowerError(format!(
                "{} {}: {}",
                self.program.display(),
                args.join(" "),
                text.trim()
            )));
        }
        Ok(text)
    }

    /// The current mode id (`nvpmodel -q` prints the name, then the id).
    pub fn current(&self) -> Result<u32, PowerError> {
        let text = self.run(&["-q"])?;
        text.lines().rev().find_map(|l| l.trim().parse::<u32>().ok()).ok_or_else(|| {
            PowerError(format!("{} -q: no mode id in its output: {}", self.program.display(), text.trim()))
        })
    }

    /// Switches to mode `id`; returns true when nvpmodel says a reboot is needed.
    pub fn set(&self, id: u32) -> Result<bool, PowerError> {
        let text = self.run(&["-m", &id.to_string()])?;
        Ok(text.to_ascii_lowercase().contains("reboot"))
    }
}

/// The current mode, and every mode, for messages and `clocks show`.
#[derive(Clone, Debug, Default)]
pub struct ModeContext {
    /// The current mode, when nvpmodel answered and the conf defines it.
    pub current: Option<Mode>,
    /// Every mode in the conf.
    pub modes: Vec<Mode>,
}

impl ModeContext {
    /// Asks nvpmodel under `root`; empty when it is not installed or does not answer.
    pub fn read(root: &Path) -> ModeContext {
        let Some(nv) = Nvpmodel::find(root) else { return ModeContext::default() };
        let current = nv.current().ok().and_then(|id| nv.mode(id).cloned());
        ModeContext { current, modes: nv.modes }
    }

    /// "mode 1 (MODE_15W)", or "the current nvpmodel mode" when unknown.
    pub fn current_label(&self) -> String {
        match &self.current {
            Some(m) => format!("nvpmodel mode {}", m.label()),
            None => "the current nvpmodel mode".into(),
        }
    }

    /// Modes whose ceiling (from `ceiling_of`, resolved against `highest`) reaches `wanted`, the
    /// lowest ceiling first: the smallest power budget that allows it.
    pub fn allowing(
        &self,
        wanted: u64,
        highest: u64,
        ceiling_of: impl Fn(&Mode) -> Option<Ceiling>,
    ) -> Vec<&Mode> {
        let mut found: Vec<(Ceiling, &Mode)> = self
            .modes
            .iter()
            .filter_map(|m| Some((ceiling_of(m)?, m)))
            .filter(|(c, _)| c.resolve(highest) >= wanted)
            .collect();
        // At an equal ceiling, a mode that caps the clock before one that uncaps everything.
        found.sort_by_key(|(c, _)| (c.resolve(highest), *c == Ceiling::Highest));
        found.into_iter().map(|(_, m)| m).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The shape of NVIDIA's Orin conf (jetson-containers' nvpmodel template, L4T R36): PARAM
    // definitions whose lines look like mode settings, then the modes.
    const ORIN: &str = "< PARAM TYPE=FILE NAME=CPU_ONLINE >\nCORE_0 /sys/devices/system/cpu/cpu0/online\n\
        < PARAM TYPE=CLOCK NAME=CPU_A78_0 >\n\
        FREQ_TABLE /sys/devices/system/cpu/cpu0/cpufreq/scaling_available_frequencies\n\
        MAX_FREQ /sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq\n\
        MIN_FREQ /sys/devices/system/cpu/cpu0/cpufreq/scaling_min_freq\n\
        < PARAM TYPE=CLOCK NAME=CPU_A78_1 >\nMAX_FREQ /sys/devices/system/cpu/cpu4/cpufreq/scaling_max_freq\n\
        < PARAM TYPE=CLOCK NAME=GPU >\nMAX_FREQ /sys/devices/17000000.ga10b/devfreq/17000000.ga10b/max_freq\n\
        < PARAM TYPE=FILE NAME=EMC >\nMAX_FREQ /sys/kernel/nvpmodel_emc_cap/emc_iso_cap\n\
        < POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE CORE_0 1\nCPU_ONLINE CORE_4 1\n\
        CPU_A78_0 MIN_FREQ 729600\nCPU_A78_0 MAX_FREQ -1\nCPU_A78_1 MAX_FREQ -1\nGPU MIN_FREQ 0\nGPU MAX_FREQ -1\n\
        EMC MAX_FREQ 0\n\
        < POWER_MODEL ID=1 NAME=MODE_15W >\nCPU_ONLINE CORE_0 1\nCPU_ONLINE CORE_4 0\n\
        CPU_A78_0 MAX_FREQ 1113600\nCPU_A78_1 MAX_FREQ 1113600\nGPU MAX_FREQ 420750000\nEMC MAX_FREQ 3199000000\n\
        < PM_CONFIG DEFAULT=0 >\n";

    #[test]
    fn modes_and_their_ceilings_are_read_from_the_conf() {
        let m = parse_modes(ORIN);
        assert_eq!(m.len(), 2, "the PARAM section makes no mode: {m:?}");
        assert_eq!((m[0].id, m[0].name.as_str()), (0, "MAXN"));
        assert_eq!(m[0].gpu_max, Some(Ceiling::Highest));
        assert_eq!(m[0].emc_max, Some(Ceiling::At(0)));
        assert_eq!(m[0].cores_online(), Some(2));
        assert_eq!(m[1].gpu_max, Some(Ceiling::At(420_750_000)));
        assert_eq!(m[1].cpu_max, vec![(0, Ceiling::At(1_113_600)), (4, Ceiling::At(1_113_600))]);
        assert_eq!(m[1].cpu_ceiling(5), Some(Ceiling::At(1_113_600)));
        assert_eq!(m[1].cores_online(), Some(1));
        assert_eq!(Ceiling::Highest.resolve(1_300_500_000), 1_300_500_000);
        let ctx = ModeContext { current: Some(m[1].clone()), modes: m };
        let allow: Vec<&str> =
            ctx.allowing(918_000_000, 1_300_500_000, |m| m.gpu_max).iter().map(|m| m.name.as_str()).collect();
        assert_eq!(allow, ["MAXN"]);
        assert_eq!(ctx.current_label(), "nvpmodel mode 1 (MODE_15W)");
    }

    #[test]
    fn a_conf_with_only_mode_names_still_lists_the_modes() {
        let conf =
            "< PARAM TYPE=FILE NAME=CPU_ONLINE >\n< POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE CORE_0 1\n\
                    < POWER_MODEL ID=1 NAME=5W >\n< PM_CONFIG DEFAULT=0 >\n";
        let m = parse_modes(conf);
        assert_eq!(m.iter().map(Mode::label).collect::<Vec<_>>(), ["0 (MAXN)", "1 (5W)"]);
        assert_eq!(m[1].gpu_max, None);
    }
}
