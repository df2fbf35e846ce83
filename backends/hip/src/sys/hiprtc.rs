//! hipRTC: runtime compilation of CUDA C / HIP C to an AMD code object.

use seam::ErrorKind;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
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
    if r == HIPRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a static NUL-terminated string (or null).
    let text = unsafe { hiprtcGetErrorString(r) };
    let msg = if text.is_null() {
        format!("hiprtcResult {r}")
    } else {
        // SAFETY: non-null, static, NUL-terminated.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(ErrorKind::driver(call, msg))
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
    let src = CString::new(source)
        .map_err(|_| ErrorKind::driver("hiprtcCreateProgram", "source contains NUL"))?;
    let cname = CString::new(name)
        .map_err(|_| ErrorKind::driver("hiprtcCreateProgram", "name contains NUL"))?;
    let opts: Vec<CString> = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| ErrorKind::driver("hiprtcCompileProgram", "option contains NUL"))?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();

    let mut prog: HiprtcProgram = ptr::null_mut();
    // SAFETY: source and name are NUL-terminated and outlive the program
    // (dropped at the end of this function); no headers are passed.
    check_rtc("hiprtcCreateProgram", unsafe {
        hiprtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            cname.as_ptr(),
            0,
            ptr::null(),
            ptr::null(),
        )
    })?;
    let prog = Program(prog);

    // SAFETY: opt_ptrs points at NUL-terminated strings that outlive the call.
    let compiled =
        unsafe { hiprtcCompileProgram(prog.0, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    if compiled != HIPRTC_SUCCESS {
        let log = program_log(&prog).unwrap_or_else(|e| format!("(no log: {e})"));
        let what = check_rtc("hiprtcCompileProgram", compiled)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return Err(ErrorKind::driver(
            "hiprtcCompileProgram",
            format!("{name}: {what}\n{log}"),
        ));
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
    let mut log = vec![0u8; size.max(1)];
    // SAFETY: the buffer holds at least the size hipRTC reported.
    check_rtc("hiprtcGetProgramLog", unsafe {
        hiprtcGetProgramLog(prog.0, log.as_mut_ptr() as *mut c_char)
    })?;
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Ok(String::from_utf8_lossy(&log[..end]).into_owned())
}
