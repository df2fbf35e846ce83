//! hipRTC: runtime compilation of CUDA C / HIP C to an AMD code object.

use seam::ErrorKind;
use seam_streamgraph::driver_result;
use seam_streamgraph::rtc::{compile_error, log_buffer, log_text, RtcInput};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

/// hipRTC's handle and entry points (in libamdhip64 since ROCm 4.2; not
/// bound by hip-runtime-sys 0.1.2). `hiprtcResult` is a C enum: an int.
type HiprtcProgram = *mut c_void;
const HIPRTC_SUCCESS: c_int = 0;

#[link(name = "amdhip64")]
extern "C" {
    fn hiprtcVersion(major: *mut c_int, minor: *mut c_int) -> c_int;
    fn hiprtcGetErrorString(result: c_int) -> *const c_char;
    fn hiprtcCreateProgram(
        prog: *mut HiprtcProgram,
        src: *const c_char,
        name: *const c_char,
        num_headers: c_int,
        headers: *const *const c_char,
        include_names: *const *const c_char,
    ) -> c_int;
    fn hiprtcCompileProgram(
        prog: HiprtcProgram,
        num_options: c_int,
        options: *const *const c_char,
    ) -> c_int;
    fn hiprtcGetProgramLogSize(prog: HiprtcProgram, size: *mut usize) -> c_int;
    fn hiprtcGetProgramLog(prog: HiprtcProgram, log: *mut c_char) -> c_int;
    fn hiprtcGetCodeSize(prog: HiprtcProgram, size: *mut usize) -> c_int;
    fn hiprtcGetCode(prog: HiprtcProgram, code: *mut c_char) -> c_int;
    fn hiprtcDestroyProgram(prog: *mut HiprtcProgram) -> c_int;
}

fn check_rtc(call: &'static str, r: c_int) -> Result<(), ErrorKind> {
    driver_result(call, r == HIPRTC_SUCCESS, || {
        // SAFETY: hiprtcGetErrorString takes any code and returns a static
        // NUL-terminated string, or null.
        let text = unsafe { hiprtcGetErrorString(r) };
        if text.is_null() {
            return format!("hiprtcResult {r}");
        }
        // SAFETY: non-null, static, NUL-terminated (above).
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    })
}

/// hipRTC's version (major, minor).
pub fn hiprtc_version() -> Result<(i32, i32), ErrorKind> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: writes two ints.
    check_rtc("hiprtcVersion", unsafe {
        hiprtcVersion(&mut major, &mut minor)
    })?;
    Ok((major, minor))
}

struct Program(HiprtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: destroys the program created in hiprtc_compile, once.
        let _ = unsafe { hiprtcDestroyProgram(&mut self.0) };
    }
}

/// Compile CUDA C / HIP C with hipRTC into an AMD code object. A compile
/// error carries hipRTC's log. Needs no GPU.
pub fn hiprtc_compile(source: &str, name: &str, options: &[String]) -> Result<Vec<u8>, ErrorKind> {
    let input = RtcInput::new("hiprtc", source, name, options)?;
    let mut prog: HiprtcProgram = ptr::null_mut();
    // SAFETY: source and name are NUL-terminated and outlive the program
    // (`input` is dropped after it); no headers are passed; `prog` is a
    // valid out-pointer.
    check_rtc("hiprtcCreateProgram", unsafe {
        hiprtcCreateProgram(
            &mut prog,
            input.source(),
            input.name(),
            0,
            ptr::null(),
            ptr::null(),
        )
    })?;
    let prog = Program(prog);

    // SAFETY: the program is live; `input` holds option_count pointers to
    // NUL-terminated options, alive for the call.
    let compiled = unsafe { hiprtcCompileProgram(prog.0, input.option_count(), input.options()) };
    if let Err(what) = check_rtc("hiprtcCompileProgram", compiled) {
        let log = program_log(&prog);
        return Err(compile_error("hiprtcCompileProgram", name, what, log));
    }
    let mut size: usize = 0;
    // SAFETY: the program compiled; writes one size.
    check_rtc("hiprtcGetCodeSize", unsafe {
        hiprtcGetCodeSize(prog.0, &mut size)
    })?;
    let mut image = vec![0u8; size];
    if size > 0 {
        // SAFETY: the buffer holds exactly the size hipRTC reported.
        check_rtc("hiprtcGetCode", unsafe {
            hiprtcGetCode(prog.0, image.as_mut_ptr() as *mut c_char)
        })?;
    }
    Ok(image)
}

fn program_log(prog: &Program) -> Result<String, ErrorKind> {
    let mut size: usize = 0;
    // SAFETY: the program is live; writes one size.
    check_rtc("hiprtcGetProgramLogSize", unsafe {
        hiprtcGetProgramLogSize(prog.0, &mut size)
    })?;
    let mut log = log_buffer(size);
    // SAFETY: the program is live; the buffer holds at least the size hipRTC
    // reported.
    check_rtc("hiprtcGetProgramLog", unsafe {
        hiprtcGetProgramLog(prog.0, log.as_mut_ptr() as *mut c_char)
    })?;
    Ok(log_text(&log))
}
