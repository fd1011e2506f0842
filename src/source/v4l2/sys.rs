//! The slice of `linux/videodev2.h` jetdetect uses: structures, ioctl numbers
//! and constants, written out for 64-bit Linux (x86_64, aarch64). Sizes are
//! checked at compile time against the kernel ABI, since a wrong size gives a
//! wrong ioctl number and the kernel answers ENOTTY.

#![allow(missing_docs, non_camel_case_types)]

use libc::{c_int, c_ulong};

#[cfg(not(target_pointer_width = "64"))]
compile_error!("the V4L2 bindings are written for 64-bit Linux");

pub const V4L2_BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
pub const V4L2_MEMORY_MMAP: u32 = 1;
pub const V4L2_FIELD_ANY: u32 = 0;

pub const V4L2_CAP_VIDEO_CAPTURE: u32 = 0x0000_0001;
pub const V4L2_CAP_VIDEO_CAPTURE_MPLANE: u32 = 0x0000_1000;
pub const V4L2_CAP_META_CAPTURE: u32 = 0x0080_0000;
pub const V4L2_CAP_STREAMING: u32 = 0x0400_0000;
pub const V4L2_CAP_DEVICE_CAPS: u32 = 0x8000_0000;

pub const V4L2_CAP_TIMEPERFRAME: u32 = 0x1000;

pub const V4L2_BUF_FLAG_ERROR: u32 = 0x0040;
pub const V4L2_BUF_FLAG_TIMESTAMP_MASK: u32 = 0xe000;
pub const V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC: u32 = 0x2000;

pub const V4L2_FRMSIZE_TYPE_DISCRETE: u32 = 1;
pub const V4L2_FRMIVAL_TYPE_DISCRETE: u32 = 1;

pub const V4L2_CTRL_FLAG_DISABLED: u32 = 0x0001;
pub const V4L2_CTRL_FLAG_READ_ONLY: u32 = 0x0004;
pub const V4L2_CTRL_FLAG_INACTIVE: u32 = 0x0010;
pub const V4L2_CTRL_FLAG_NEXT_CTRL: u32 = 0x8000_0000;
pub const V4L2_CTRL_TYPE_INTEGER: u32 = 1;
pub const V4L2_CTRL_TYPE_BOOLEAN: u32 = 2;
pub const V4L2_CTRL_TYPE_MENU: u32 = 3;
pub const V4L2_CTRL_TYPE_BUTTON: u32 = 4;
pub const V4L2_CTRL_TYPE_CTRL_CLASS: u32 = 6;
pub const V4L2_CTRL_TYPE_INTEGER_MENU: u32 = 9;
pub const V4L2_CTRL_TYPE_INTEGER64: u32 = 5;
/// Types from here on are compound (arrays, structures): not settable from a config.
pub const V4L2_CTRL_COMPOUND_TYPES: u32 = 0x0100;
/// `which` for the extended-control ioctls: the current value.
pub const V4L2_CTRL_WHICH_CUR_VAL: u32 = 0;

/// `v4l2_fourcc(a, b, c, d)`.
pub const fn fourcc(code: &[u8; 4]) -> u32 {
    code[0] as u32 | (code[1] as u32) << 8 | (code[2] as u32) << 16 | (code[3] as u32) << 24
}

/// The four characters of a fourcc, for messages.
pub fn fourcc_str(v: u32) -> String {
    v.to_le_bytes().iter().map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '?' }).collect()
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_capability {
    pub driver: [u8; 16],
    pub card: [u8; 32],
    pub bus_info: [u8; 32],
    pub version: u32,
    pub capabilities: u32,
    pub device_caps: u32,
    pub reserved: [u32; 3],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_fmtdesc {
    pub index: u32,
    pub type_: u32,
    pub flags: u32,
    pub description: [u8; 32],
    pub pixelformat: u32,
    pub mbus_code: u32,
    pub reserved: [u32; 3],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct v4l2_pix_format {
    pub width: u32,
    pub height: u32,
    pub pixelformat: u32,
    pub field: u32,
    pub bytesperline: u32,
    pub sizeimage: u32,
    pub colorspace: u32,
    pub priv_: u32,
    pub flags: u32,
    pub ycbcr_enc: u32,
    pub quantization: u32,
    pub xfer_func: u32,
}

#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub union v4l2_format_fmt {
    pub pix: v4l2_pix_format,
    pub raw_data: [u8; 200],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_format {
    pub type_: u32,
    pub fmt: v4l2_format_fmt,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct v4l2_requestbuffers {
    pub count: u32,
    pub type_: u32,
    pub memory: u32,
    pub capabilities: u32,
    pub flags: u8,
    pub reserved: [u8; 3],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct v4l2_timecode {
    pub type_: u32,
    pub flags: u32,
    pub frames: u8,
    pub seconds: u8,
    pub minutes: u8,
    pub hours: u8,
    pub userbits: [u8; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union v4l2_buffer_m {
    pub offset: u32,
    pub userptr: c_ulong,
    pub fd: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_buffer {
    pub index: u32,
    pub type_: u32,
    pub bytesused: u32,
    pub flags: u32,
    pub field: u32,
    pub timestamp: libc::timeval,
    pub timecode: v4l2_timecode,
    pub sequence: u32,
    pub memory: u32,
    pub m: v4l2_buffer_m,
    pub length: u32,
    pub reserved2: u32,
    pub request_fd: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct v4l2_fract {
    pub numerator: u32,
    pub denominator: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct v4l2_captureparm {
    pub capability: u32,
    pub capturemode: u32,
    pub timeperframe: v4l2_fract,
    pub extendedmode: u32,
    pub readbuffers: u32,
    pub reserved: [u32; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union v4l2_streamparm_parm {
    pub capture: v4l2_captureparm,
    pub raw_data: [u8; 200],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_streamparm {
    pub type_: u32,
    pub parm: v4l2_streamparm_parm,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct v4l2_frmsize_stepwise {
    pub min_width: u32,
    pub max_width: u32,
    pub step_width: u32,
    pub min_height: u32,
    pub max_height: u32,
    pub step_height: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_frmsizeenum {
    pub index: u32,
    pub pixel_format: u32,
    pub type_: u32,
    /// `discrete` ({width, height}) or `stepwise`, by `type_`.
    pub size: v4l2_frmsize_stepwise,
    pub reserved: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_frmivalenum {
    pub index: u32,
    pub pixel_format: u32,
    pub width: u32,
    pub height: u32,
    pub type_: u32,
    /// `discrete` (a fract in the first two words) or `stepwise` (min, max, step fracts).
    pub ival: [v4l2_fract; 3],
    pub reserved: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_queryctrl {
    pub id: u32,
    pub type_: u32,
    pub name: [u8; 32],
    pub minimum: i32,
    pub maximum: i32,
    pub step: i32,
    pub default_value: i32,
    pub flags: u32,
    pub reserved: [u32; 2],
}

/// `VIDIOC_QUERY_EXT_CTRL`: like `v4l2_queryctrl`, with 64-bit limits (tegracam's gain, exposure and
/// frame rate are 64-bit controls).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_query_ext_ctrl {
    pub id: u32,
    pub type_: u32,
    pub name: [u8; 32],
    pub minimum: i64,
    pub maximum: i64,
    pub step: u64,
    pub default_value: i64,
    pub flags: u32,
    pub elem_size: u32,
    pub elems: u32,
    pub nr_of_dims: u32,
    pub dims: [u32; 4],
    pub reserved: [u32; 32],
}

/// One control of a `VIDIOC_G/S_EXT_CTRLS` call. The kernel's value is a union of `s32 value`
/// and `s64 value64` (and pointers for compound controls, not used here); on a little-endian CPU
/// (every Jetson, x86) the 32-bit value is the low half of `value64`.
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct v4l2_ext_control {
    pub id: u32,
    pub size: u32,
    pub reserved2: [u32; 1],
    pub value64: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct v4l2_ext_controls {
    pub which: u32,
    pub count: u32,
    pub error_idx: u32,
    pub request_fd: i32,
    pub reserved: [u32; 1],
    pub controls: *mut v4l2_ext_control,
}

#[repr(C, packed)]
#[derive(Clone, Copy)]
pub struct v4l2_querymenu {
    pub id: u32,
    pub index: u32,
    pub name: [u8; 32],
    pub reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct v4l2_control {
    pub id: u32,
    pub value: i32,
}

// The kernel ABI, checked.
const _: () = {
    assert!(std::mem::size_of::<v4l2_capability>() == 104);
    assert!(std::mem::size_of::<v4l2_fmtdesc>() == 64);
    assert!(std::mem::size_of::<v4l2_pix_format>() == 48);
    assert!(std::mem::size_of::<v4l2_format>() == 208);
    assert!(std::mem::size_of::<v4l2_requestbuffers>() == 20);
    assert!(std::mem::size_of::<v4l2_buffer>() == 88);
    assert!(std::mem::size_of::<v4l2_streamparm>() == 204);
    assert!(std::mem::size_of::<v4l2_frmsizeenum>() == 44);
    assert!(std::mem::size_of::<v4l2_frmivalenum>() == 52);
    assert!(std::mem::size_of::<v4l2_queryctrl>() == 68);
    assert!(std::mem::size_of::<v4l2_querymenu>() == 44);
    assert!(std::mem::size_of::<v4l2_control>() == 8);
    assert!(std::mem::size_of::<v4l2_query_ext_ctrl>() == 232);
    assert!(std::mem::size_of::<v4l2_ext_control>() == 20);
    assert!(std::mem::size_of::<v4l2_ext_controls>() == 32);
    assert!(cfg!(target_endian = "little"), "v4l2_ext_control's 32-bit value is read as the low half");
};

const fn ioc(dir: c_ulong, nr: c_ulong, size: usize) -> c_ulong {
    (dir << 30) | ((size as c_ulong) << 16) | ((b'V' as c_ulong) << 8) | nr
}
const R: c_ulong = 2;
const W: c_ulong = 1;
const RW: c_ulong = 3;

pub const VIDIOC_QUERYCAP: c_ulong = ioc(R, 0, std::mem::size_of::<v4l2_capability>());
pub const VIDIOC_ENUM_FMT: c_ulong = ioc(RW, 2, std::mem::size_of::<v4l2_fmtdesc>());
pub const VIDIOC_G_FMT: c_ulong = ioc(RW, 4, std::mem::size_of::<v4l2_format>());
pub const VIDIOC_S_FMT: c_ulong = ioc(RW, 5, std::mem::size_of::<v4l2_format>());
pub const VIDIOC_REQBUFS: c_ulong = ioc(RW, 8, std::mem::size_of::<v4l2_requestbuffers>());
pub const VIDIOC_QUERYBUF: c_ulong = ioc(RW, 9, std::mem::size_of::<v4l2_buffer>());
pub const VIDIOC_QBUF: c_ulong = ioc(RW, 15, std::mem::size_of::<v4l2_buffer>());
pub const VIDIOC_DQBUF: c_ulong = ioc(RW, 17, std::mem::size_of::<v4l2_buffer>());
pub const VIDIOC_STREAMON: c_ulong = ioc(W, 18, std::mem::size_of::<c_int>());
pub const VIDIOC_STREAMOFF: c_ulong = ioc(W, 19, std::mem::size_of::<c_int>());
pub const VIDIOC_G_PARM: c_ulong = ioc(RW, 21, std::mem::size_of::<v4l2_streamparm>());
pub const VIDIOC_S_PARM: c_ulong = ioc(RW, 22, std::mem::size_of::<v4l2_streamparm>());
pub const VIDIOC_G_CTRL: c_ulong = ioc(RW, 27, std::mem::size_of::<v4l2_control>());
pub const VIDIOC_S_CTRL: c_ulong = ioc(RW, 28, std::mem::size_of::<v4l2_control>());
pub const VIDIOC_QUERYCTRL: c_ulong = ioc(RW, 36, std::mem::size_of::<v4l2_queryctrl>());
pub const VIDIOC_QUERYMENU: c_ulong = ioc(RW, 37, std::mem::size_of::<v4l2_querymenu>());
pub const VIDIOC_ENUM_FRAMESIZES: c_ulong = ioc(RW, 74, std::mem::size_of::<v4l2_frmsizeenum>());
pub const VIDIOC_ENUM_FRAMEINTERVALS: c_ulong = ioc(RW, 75, std::mem::size_of::<v4l2_frmivalenum>());
pub const VIDIOC_G_EXT_CTRLS: c_ulong = ioc(RW, 71, std::mem::size_of::<v4l2_ext_controls>());
pub const VIDIOC_S_EXT_CTRLS: c_ulong = ioc(RW, 72, std::mem::size_of::<v4l2_ext_controls>());
pub const VIDIOC_QUERY_EXT_CTRL: c_ulong = ioc(RW, 103, std::mem::size_of::<v4l2_query_ext_ctrl>());

/// A zeroed value of a plain-data V4L2 structure.
pub fn zeroed<T: Copy>() -> T {
    // SAFETY: only used with the repr(C) plain-data structures above, for which
    // all-zero bytes are a valid value (integers, arrays, unions of those).
    unsafe { std::mem::zeroed() }
}

/// `ioctl(fd, request, arg)`, retried on EINTR.
pub fn xioctl<T>(fd: c_int, request: c_ulong, arg: &mut T) -> std::io::Result<()> {
    loop {
        // SAFETY: `arg` points to a live value of the structure the request expects
        // (the request number encodes its size, checked above).
        let rc = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
        if rc != -1 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A C string field as text.
pub fn cstr(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        // Values from <linux/videodev2.h> on 64-bit Linux.
        assert_eq!(VIDIOC_QUERYCAP, 0x8068_5600);
        assert_eq!(VIDIOC_S_FMT, 0xc0d0_5605);
        assert_eq!(VIDIOC_REQBUFS, 0xc014_5608);
        assert_eq!(VIDIOC_QBUF, 0xc058_560f);
        assert_eq!(VIDIOC_DQBUF, 0xc058_5611);
        assert_eq!(VIDIOC_STREAMON, 0x4004_5612);
        assert_eq!(VIDIOC_S_PARM, 0xc0cc_5616);
        assert_eq!(fourcc(b"YUYV"), 0x5659_5559);
        assert_eq!(fourcc_str(fourcc(b"MJPG")), "MJPG");
    }
}
