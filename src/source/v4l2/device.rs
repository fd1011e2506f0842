//! An open V4L2 capture device: capabilities, formats, controls and mmap
//! streaming, over the raw ioctls in [`super::sys`].

use std::ffi::{c_ulong, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::sys::*;

/// One frame size a device offers for a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeOffer {
    /// Exactly this size.
    Discrete(u32, u32),
    /// Any size in a range, on a step grid.
    Stepwise {
        /// Smallest width.
        min_w: u32,
        /// Largest width.
        max_w: u32,
        /// Width step.
        step_w: u32,
        /// Smallest height.
        min_h: u32,
        /// Largest height.
        max_h: u32,
        /// Height step.
        step_h: u32,
    },
}

/// A pixel format a device offers, with its sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatOffer {
    /// The V4L2 fourcc.
    pub fourcc: u32,
    /// The driver's description.
    pub description: String,
    /// Sizes offered (may be empty when the driver does not enumerate them).
    pub sizes: Vec<SizeOffer>,
}

/// A control a device offers.
#[derive(Clone, Debug, PartialEq)]
pub struct ControlInfo {
    /// V4L2 control id.
    pub id: u32,
    /// The driver's name, e.g. "Exposure, Absolute".
    pub name: String,
    /// The name as used in configs: lower case, runs of other characters as `_` ("exposure_absolute").
    pub key: String,
    /// `integer`, `boolean`, `menu`, ...
    pub kind: &'static str,
    /// Minimum value.
    pub min: i64,
    /// Maximum value.
    pub max: i64,
    /// Step.
    pub step: u64,
    /// Default value.
    pub default: i64,
    /// Menu entries `(value, name)` for menu controls.
    pub menu: Vec<(i64, String)>,
    /// A 64-bit control (tegracam's gain, exposure, frame rate): `VIDIOC_S_CTRL` would refuse it.
    pub wide: bool,
    /// Read-only or inactive right now.
    pub read_only: bool,
}

/// The config key for a control name.
pub fn control_key(name: &str) -> String {
    let mut key = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            key.push(c.to_ascii_lowercase());
        } else if !key.ends_with('_') && !key.is_empty() {
            key.push('_');
        }
    }
    key.trim_end_matches('_').to_string()
}

struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this process; access is
// serialised by the owning `Device` (&mut self).
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from a successful mmap and are unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// An open device node.
pub struct Device {
    fd: OwnedFd,
    path: PathBuf,
    buffers: Vec<Mapping>,
    streaming: bool,
}

/// A dequeued buffer: index, bytes used, flags, timestamp, driver sequence.
#[derive(Clone, Copy, Debug)]
pub struct Dequeued {
    /// Buffer index.
    pub index: u32,
    /// Valid bytes.
    pub bytes: usize,
    /// `V4L2_BUF_FLAG_*`.
    pub flags: u32,
    /// Driver timestamp in nanoseconds (its clock given by `flags`).
    pub timestamp_ns: u64,
    /// Driver frame counter.
    pub sequence: u32,
}

impl Device {
    /// Opens `path` non-blocking, read-write.
    pub fn open(path: &Path) -> io::Result<Device> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
        // SAFETY: a valid C string; the returned fd is checked and owned below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh, valid descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Device { fd, path: path.to_path_buf(), buffers: Vec::new(), streaming: false })
    }

    fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// The device node path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// VIDIOC_QUERYCAP: (driver, card, device capabilities).
    pub fn capabilities(&self) -> io::Result<(String, String, u32)> {
        let mut cap: v4l2_capability = zeroed();
        xioctl(self.raw(), VIDIOC_QUERYCAP, &mut cap)?;
        let caps =
            if cap.capabilities & V4L2_CAP_DEVICE_CAPS != 0 { cap.device_caps } else { cap.capabilities };
        Ok((cstr(&cap.driver), cstr(&cap.card), caps))
    }

    /// True when the node captures single-planar video with streaming I/O.
    pub fn can_capture(caps: u32) -> bool {
        caps & V4L2_CAP_VIDEO_CAPTURE != 0 && caps & V4L2_CAP_STREAMING != 0
    }

    /// Every capture format with its sizes.
    pub fn formats(&self) -> io::Result<Vec<FormatOffer>> {
        let mut out = Vec::new();
        for index in 0.. {
            let mut d: v4l2_fmtdesc = zeroed();
            d.index = index;
            d.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
            match xioctl(self.raw(), VIDIOC_ENUM_FMT, &mut d) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => return Err(e),
            }
            let sizes = self.sizes(d.pixelformat).unwrap_or_default();
            out.push(FormatOffer { fourcc: d.pixelformat, description: cstr(&d.description), sizes });
        }
        Ok(out)
    }

    fn sizes(&self, fourcc: u32) -> io::Result<Vec<SizeOffer>> {
        let mut out = Vec::new();
        for index in 0.. {
            let mut s: v4l2_frmsizeenum = zeroed();
            s.index = index;
            s.pixel_format = fourcc;
            if xioctl(self.raw(), VIDIOC_ENUM_FRAMESIZES, &mut s).is_err() {
                break;
            }
            let z = s.size;
            if s.type_ == V4L2_FRMSIZE_TYPE_DISCRETE {
                // discrete {width, height} overlays the first two words.
                out.push(SizeOffer::Discrete(z.min_width, z.max_width));
            } else {
                out.push(SizeOffer::Stepwise {
                    min_w: z.min_width,
                    max_w: z.max_width,
                    step_w: z.step_width.max(1),
                    min_h: z.min_height,
                    max_h: z.max_height,
                    step_h: z.step_height.max(1),
                });
                break;
            }
        }
        Ok(out)
    }

    /// Discrete frame rates offered for a format and size, in frames per second.
    pub fn frame_rates(&self, fourcc: u32, width: u32, height: u32) -> Vec<f64> {
        let mut out = Vec::new();
        for index in 0..64 {
            let mut f: v4l2_frmivalenum = zeroed();
            f.index = index;
            f.pixel_format = fourcc;
            f.width = width;
            f.height = height;
            if xioctl(self.raw(), VIDIOC_ENUM_FRAMEINTERVALS, &mut f).is_err() {
                break;
            }
            let iv = f.ival[0];
            if iv.numerator > 0 {
                out.push(iv.denominator as f64 / iv.numerator as f64);
            }
            if f.type_ != V4L2_FRMIVAL_TYPE_DISCRETE {
                break;
            }
        }
        out
    }

    /// VIDIOC_S_FMT; returns what the driver actually set.
    pub fn set_format(&self, fourcc: u32, width: u32, height: u32) -> io::Result<v4l2_pix_format> {
        let mut f: v4l2_format = zeroed();
        f.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        f.fmt.pix = v4l2_pix_format {
            width,
            height,
            pixelformat: fourcc,
            field: V4L2_FIELD_ANY,
            ..Default::default()
        };
        xioctl(self.raw(), VIDIOC_S_FMT, &mut f)?;
        // SAFETY: for VIDEO_CAPTURE the driver fills the `pix` member.
        Ok(unsafe { f.fmt.pix })
    }

    /// VIDIOC_S_PARM with the frame interval for `fps`; returns the rate set, if the driver reports one.
    pub fn set_frame_rate(&self, fps: f64) -> io::Result<Option<f64>> {
        let mut p: v4l2_streamparm = zeroed();
        p.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        xioctl(self.raw(), VIDIOC_G_PARM, &mut p)?;
        // SAFETY: capture parameters for a capture buffer type.
        let cap = unsafe { p.parm.capture };
        if cap.capability & V4L2_CAP_TIMEPERFRAME == 0 {
            return Ok(None);
        }
        let mut p: v4l2_streamparm = zeroed();
        p.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        p.parm.capture = v4l2_captureparm {
            timeperframe: v4l2_fract { numerator: 1000, denominator: (fps * 1000.0).round() as u32 },
            ..Default::default()
        };
        xioctl(self.raw(), VIDIOC_S_PARM, &mut p)?;
        // SAFETY: as above.
        let t = unsafe { p.parm.capture.timeperframe };
        Ok((t.numerator > 0).then(|| t.denominator as f64 / t.numerator as f64))
    }

    /// Requests `count` mmap buffers, maps and queues them all, and starts streaming.
    pub fn start(&mut self, count: u32) -> io::Result<usize> {
        let mut req = v4l2_requestbuffers {
            count,
            type_: V4L2_BUF_TYPE_VIDEO_CAPTURE,
            memory: V4L2_MEMORY_MMAP,
            ..Default::default()
        };
        xioctl(self.raw(), VIDIOC_REQBUFS, &mut req)?;
        if req.count == 0 {
            return Err(io::Error::other("the driver granted no buffers"));
        }
        for index in 0..req.count {
            let mut b = self.buffer(index);
            xioctl(self.raw(), VIDIOC_QUERYBUF, &mut b)?;
            // SAFETY: maps the buffer the driver describes; the result is checked.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    b.length as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    self.raw(),
                    b.m.offset as libc::off_t,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            self.buffers.push(Mapping { ptr, len: b.length as usize });
        }
        for index in 0..req.count {
            self.queue(index)?;
        }
        let mut t: libc::c_int = V4L2_BUF_TYPE_VIDEO_CAPTURE as libc::c_int;
        xioctl(self.raw(), VIDIOC_STREAMON, &mut t)?;
        self.streaming = true;
        Ok(req.count as usize)
    }

    fn buffer(&self, index: u32) -> v4l2_buffer {
        let mut b: v4l2_buffer = zeroed();
        b.index = index;
        b.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        b.memory = V4L2_MEMORY_MMAP;
        b
    }

    /// Gives buffer `index` back to the driver.
    pub fn queue(&self, index: u32) -> io::Result<()> {
        let mut b = self.buffer(index);
        xioctl(self.raw(), VIDIOC_QBUF, &mut b)
    }

    /// Takes a filled buffer if one is ready (`Ok(None)` when none is).
    pub fn dequeue(&self) -> io::Result<Option<Dequeued>> {
        let mut b = self.buffer(0);
        match xioctl(self.raw(), VIDIOC_DQBUF, &mut b) {
            Ok(()) => Ok(Some(Dequeued {
                index: b.index,
                bytes: b.bytesused as usize,
                flags: b.flags,
                timestamp_ns: b.timestamp.tv_sec as u64 * 1_000_000_000 + b.timestamp.tv_usec as u64 * 1000,
                sequence: b.sequence,
            })),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The bytes of buffer `index` (valid until it is queued again).
    pub fn data(&self, index: u32, bytes: usize) -> &[u8] {
        let m = &self.buffers[index as usize];
        // SAFETY: the mapping is live for `self`'s lifetime and `bytes` is clamped to it.
        unsafe { std::slice::from_raw_parts(m.ptr as *const u8, bytes.min(m.len)) }
    }

    /// Waits up to `timeout_ms` for a frame; `Ok(false)` on timeout.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut p = libc::pollfd { fd: self.raw(), events: libc::POLLIN, revents: 0 };
        loop {
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if rc > 0
                && p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0
                && p.revents & libc::POLLIN == 0
            {
                return Err(io::Error::from_raw_os_error(libc::ENODEV));
            }
            return Ok(rc > 0);
        }
    }

    /// Every control, with menus, enumerated with `VIDIOC_QUERY_EXT_CTRL` (64-bit limits), or with
    /// `VIDIOC_QUERYCTRL` where a driver outside the control framework lacks it. Compound controls
    /// (arrays, structures) are left out: a config cannot set them.
    pub fn controls(&self) -> Vec<ControlInfo> {
        let mut out = Vec::new();
        let mut id = V4L2_CTRL_FLAG_NEXT_CTRL;
        loop {
            let mut q: v4l2_query_ext_ctrl = zeroed();
            q.id = id;
            match xioctl(self.raw(), VIDIOC_QUERY_EXT_CTRL, &mut q) {
                Ok(()) => {}
                Err(e) if out.is_empty() && e.raw_os_error() == Some(libc::ENOTTY) => {
                    return self.legacy_controls()
                }
                Err(_) => break,
            }
            id = q.id | V4L2_CTRL_FLAG_NEXT_CTRL;
            if q.flags & V4L2_CTRL_FLAG_DISABLED != 0
                || q.type_ == V4L2_CTRL_TYPE_CTRL_CLASS
                || q.type_ >= V4L2_CTRL_COMPOUND_TYPES
                || q.nr_of_dims > 0
            {
                continue;
            }
            let (name, flags) = (cstr(&q.name), q.flags);
            out.push(self.info(q.id, q.type_, name, [q.minimum, q.maximum, q.default_value], q.step, flags));
        }
        out
    }

    fn legacy_controls(&self) -> Vec<ControlInfo> {
        let mut out = Vec::new();
        let mut id = V4L2_CTRL_FLAG_NEXT_CTRL;
        loop {
            let mut q: v4l2_queryctrl = zeroed();
            q.id = id;
            if xioctl(self.raw(), VIDIOC_QUERYCTRL, &mut q).is_err() {
                break;
            }
            id = q.id | V4L2_CTRL_FLAG_NEXT_CTRL;
            if q.flags & V4L2_CTRL_FLAG_DISABLED != 0 || q.type_ == V4L2_CTRL_TYPE_CTRL_CLASS {
                continue;
            }
            let limits = [q.minimum as i64, q.maximum as i64, q.default_value as i64];
            out.push(self.info(q.id, q.type_, cstr(&q.name), limits, q.step.max(0) as u64, q.flags));
        }
        out
    }

    fn info(
        &self,
        id: u32,
        type_: u32,
        name: String,
        [min, max, default]: [i64; 3],
        step: u64,
        flags: u32,
    ) -> ControlInfo {
        let kind = match type_ {
            V4L2_CTRL_TYPE_INTEGER => "integer",
            V4L2_CTRL_TYPE_INTEGER64 => "integer64",
            V4L2_CTRL_TYPE_BOOLEAN => "boolean",
            V4L2_CTRL_TYPE_MENU => "menu",
            V4L2_CTRL_TYPE_INTEGER_MENU => "integer menu",
            V4L2_CTRL_TYPE_BUTTON => "button",
            _ => "other",
        };
        let mut menu = Vec::new();
        if type_ == V4L2_CTRL_TYPE_MENU {
            for i in min.max(0)..=max.min(255) {
                let mut m: v4l2_querymenu = zeroed();
                m.id = id;
                m.index = i as u32;
                if xioctl(self.raw(), VIDIOC_QUERYMENU, &mut m).is_ok() {
                    let name = m.name;
                    menu.push((i, cstr(&name)));
                }
            }
        }
        ControlInfo {
            id,
            key: control_key(&name),
            name,
            kind,
            min,
            max,
            step,
            default,
            menu,
            wide: type_ == V4L2_CTRL_TYPE_INTEGER64,
            read_only: flags & (V4L2_CTRL_FLAG_READ_ONLY | V4L2_CTRL_FLAG_INACTIVE) != 0,
        }
    }

    /// One control through `VIDIOC_G_EXT_CTRLS` / `VIDIOC_S_EXT_CTRLS`, which take 64-bit controls
    /// (`VIDIOC_G_CTRL`/`S_CTRL` refuse them) as well as 32-bit ones.
    fn ext_control(&self, request: c_ulong, c: &ControlInfo, value: i64) -> io::Result<i64> {
        let mut one = v4l2_ext_control { id: c.id, size: 0, reserved2: [0], value64: value };
        let mut all: v4l2_ext_controls = zeroed();
        all.which = V4L2_CTRL_WHICH_CUR_VAL;
        all.count = 1;
        all.controls = &mut one;
        xioctl(self.raw(), request, &mut all)?;
        let v = one.value64;
        Ok(if c.wide { v } else { v as i32 as i64 })
    }

    /// Reads a control's value.
    pub fn get_control(&self, c: &ControlInfo) -> io::Result<i64> {
        self.ext_control(VIDIOC_G_EXT_CTRLS, c, 0)
    }

    /// Sets a control; returns the value read back.
    pub fn set_control(&self, c: &ControlInfo, value: i64) -> io::Result<i64> {
        self.ext_control(VIDIOC_S_EXT_CTRLS, c, value)?;
        self.get_control(c)
    }

    /// True when another file handle owns the capture queue (it streams, or set it up): asking
    /// for zero buffers is refused with EBUSY then, and changes nothing otherwise. nvargus-daemon
    /// holds CSI nodes this way.
    pub fn is_busy(&self) -> bool {
        let mut req = v4l2_requestbuffers {
            count: 0,
            type_: V4L2_BUF_TYPE_VIDEO_CAPTURE,
            memory: V4L2_MEMORY_MMAP,
            ..Default::default()
        };
        matches!(xioctl(self.raw(), VIDIOC_REQBUFS, &mut req), Err(e) if e.raw_os_error() == Some(libc::EBUSY))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if self.streaming {
            let mut t: libc::c_int = V4L2_BUF_TYPE_VIDEO_CAPTURE as libc::c_int;
            let _ = xioctl(self.raw(), VIDIOC_STREAMOFF, &mut t);
        }
        self.buffers.clear(); // unmap before the fd closes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_names_become_config_keys() {
        assert_eq!(control_key("Exposure, Absolute"), "exposure_absolute");
        assert_eq!(control_key("White Balance Temperature, Auto"), "white_balance_temperature_auto");
        assert_eq!(control_key("Gain"), "gain");
        assert_eq!(control_key("  Brightness (x2) "), "brightness_x2");
    }

    #[test]
    fn opening_a_missing_device_is_an_error() {
        assert!(Device::open(Path::new("/dev/video-none-jd")).is_err());
    }
}
