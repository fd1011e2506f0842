//! Every `unsafe` of the ONNX Runtime engine, in one place: the C API calls that `ort` does
//! not expose without per-frame allocations, and the view of the bound output tensor.

use super::*;

/// The message of an ONNX Runtime status, which is released; `Ok` for success (null).
pub(super) fn status(api: &ort::sys::OrtApi, status: ort::sys::OrtStatusPtr) -> Result<(), String> {
    if status.0.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null status from the C API carries a NUL-terminated message, and is
    // released exactly once, here, after the message is copied.
    unsafe {
        let message =
            std::ffi::CStr::from_ptr((api.GetErrorMessage)(status.0)).to_string_lossy().into_owned();
        (api.ReleaseStatus)(status.0);
        Err(message)
    }
}

/// Runs `session` on the inputs and outputs bound in `binding`, through the C API's
/// `RunWithBinding`. `ort`'s `run_binding` also gathers the bound outputs into a new
/// `SessionOutputs` (heap allocations on every frame); here the outputs are tensors the
/// caller owns and reads in place, so the run is all that is needed.
pub(super) fn run_with_binding(session: &Session, binding: &ort::session::IoBinding) -> Result<(), String> {
    let api = ort::api();
    // SAFETY: both pointers come from live objects the caller owns; `&mut self` at every call
    // site keeps a session from running on its binding twice at once.
    status(api, unsafe { (api.RunWithBinding)(session.ptr().cast_mut(), std::ptr::null(), binding.ptr()) })
}

/// Binds `value` to the input `name` again (`ort`'s `bind_input` also records the value
/// under a new `String` each time). The binding already holds `value` from the first bind
/// and keeps it alive; on GPU providers binding is when the host data is copied over.
pub(super) fn bind_input(
    binding: &ort::session::IoBinding,
    name: &CString,
    value: &impl AsPointer<Sys = ort::sys::OrtValue>,
) -> Result<(), String> {
    let api = ort::api();
    // SAFETY: live binding and value; the name is NUL-terminated.
    status(api, unsafe { (api.BindInput)(binding.ptr().cast_mut(), name.as_ptr(), value.ptr()) })
}

/// The `len` f32 values of `output`, a host tensor bound as a session's output and written by
/// the run that just finished.
pub(super) fn host_output(output: &Tensor<f32>, len: usize) -> Result<&[f32], String> {
    let data = output.data_ptr().cast::<f32>();
    if data.is_null() {
        return Err("the output tensor has no data".into());
    }
    // SAFETY: `output` is a host tensor of `len` f32 values allocated by ONNX Runtime's CPU
    // allocator and bound as the session's output; the run has finished writing it, and the
    // borrow of `output` keeps it alive and unbound for as long as the slice lives.
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}
