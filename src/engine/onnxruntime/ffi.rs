//! Every `unsafe` of the ONNX Runtime engine, in one place: the C API calls that `ort` does
//! not expose without per-frame allocations, the view of the bound output tensor, and asking the
//! loader for a library by name (`needed`'s probe of what a library that will not load lacks).

use super::*;

/// An ONNX Runtime status as a result: `Ok` for success (null); otherwise its error, which
/// takes over (and later releases) the status. Success allocates nothing.
fn status(status: ort::sys::OrtStatusPtr) -> ort::Result<()> {
    // SAFETY: every status passed here was just returned by a C API call, and is not used again.
    unsafe { ort::Error::result_from_status(status) }
}

/// Runs `session` on the inputs and outputs bound in `binding`, through the C API's
/// `RunWithBinding`. `ort`'s `run_binding` also gathers the bound outputs into a new
/// `SessionOutputs` (heap allocations on every frame); here the outputs are tensors the
/// caller owns and reads in place, so the run is all that is needed.
pub(super) fn run_with_binding(session: &Session, binding: &ort::session::IoBinding) -> ort::Result<()> {
    let api = ort::api();
    // SAFETY: both pointers come from live objects the caller owns; `&mut self` at every call
    // site keeps a session from running on its binding twice at once.
    status(unsafe { (api.RunWithBinding)(session.ptr().cast_mut(), std::ptr::null(), binding.ptr()) })
}

/// Binds `value` to the input `name` again (`ort`'s `bind_input` also records the value
/// under a new `String` each time). The binding already holds `value` from the first bind
/// and keeps it alive; on GPU providers binding is when the host data is copied over.
pub(super) fn bind_input(
    binding: &ort::session::IoBinding,
    name: &CString,
    value: &impl AsPointer<Sys = ort::sys::OrtValue>,
) -> ort::Result<()> {
    let api = ort::api();
    // SAFETY: live binding and value; the name is NUL-terminated.
    status(unsafe { (api.BindInput)(binding.ptr().cast_mut(), name.as_ptr(), value.ptr()) })
}

/// The `len` f32 values of `output`, a host tensor bound as a session's output and written by
/// the run that just finished.
pub(super) fn host_output(output: &Tensor<f32>, len: usize) -> ort::Result<&[f32]> {
    let data = output.data_ptr().cast::<f32>();
    if data.is_null() {
        return Err(ort::Error::new("the output tensor has no data"));
    }
    // SAFETY: `output` is a host tensor of `len` f32 values allocated by ONNX Runtime's CPU
    // allocator and bound as the session's output; the run has finished writing it, and the
    // borrow of `output` keeps it alive and unbound for as long as the slice lives.
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// What the loader says when asked for `name`, or `None` when it loads it.
pub(super) fn loader_refuses(name: &str) -> Option<String> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: dlopen with a valid C string; the handle is closed at once. Loading runs the
    // library's constructors, as ONNX Runtime's own load of it would.
    unsafe {
        let handle = libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if !handle.is_null() {
            libc::dlclose(handle);
            return None;
        }
        let err = libc::dlerror();
        Some(match err.is_null() {
            true => "not found".into(),
            false => std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned(),
        })
    }
}
