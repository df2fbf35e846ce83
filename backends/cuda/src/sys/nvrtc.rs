//! NVRTC: runtime compilation of CUDA C to a cubin or PTX.

use super::{check_rtc, nvrtc};
use cudarc::nvrtc::sys as rtc;
use seam::ErrorKind;
use std::ffi::{c_char, c_int, CString};
use std::ptr;

fn rtc_ready() -> Result<(), ErrorKind> {
    nvrtc().map_err(|reason| ErrorKind::Unavailable { reason })
}

/// NVRTC's version (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32), ErrorKind> {
    rtc_ready()?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: writes two ints.
    check_rtc("nvrtcVersion", unsafe {
        rtc::nvrtcVersion(&mut major, &mut minor)
    })?;
    Ok((major, minor))
}

/// The `sm_XY` architectures this NVRTC can emit cubins for, as XY.
pub fn nvrtc_supported_archs() -> Result<Vec<i32>, ErrorKind> {
    rtc_ready()?;
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    check_rtc("nvrtcGetNumSupportedArchs", unsafe {
        rtc::nvrtcGetNumSupportedArchs(&mut n)
    })?;
    let mut archs = vec![0 as c_int; n.max(0) as usize];
    if !archs.is_empty() {
        // SAFETY: the buffer holds exactly the count NVRTC reported.
        check_rtc("nvrtcGetSupportedArchs", unsafe {
            rtc::nvrtcGetSupportedArchs(archs.as_mut_ptr())
        })?;
    }
    Ok(archs)
}

/// What NVRTC should hand back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Machine code for one `sm_XY` (needs `--gpu-architecture=sm_XY`).
    Cubin,
    /// PTX text, NUL-terminated (for `compute_XY`; the driver JITs it).
    Ptx,
}

struct Program(rtc::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: destroys the program created in compile, once.
        let _ = unsafe { rtc::nvrtcDestroyProgram(&mut self.0) };
    }
}

/// Compile CUDA C with NVRTC. A compile error carries NVRTC's log.
pub fn nvrtc_compile(
    source: &str,
    name: &str,
    options: &[String],
    kind: ImageKind,
) -> Result<Vec<u8>, ErrorKind> {
    rtc_ready()?;
    let src = CString::new(source)
        .map_err(|_| ErrorKind::driver("nvrtcCreateProgram", "source contains NUL"))?;
    let cname = CString::new(name)
        .map_err(|_| ErrorKind::driver("nvrtcCreateProgram", "name contains NUL"))?;
    let opts: Vec<CString> = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| ErrorKind::driver("nvrtcCompileProgram", "option contains NUL"))?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();

    let mut prog: rtc::nvrtcProgram = ptr::null_mut();
    // SAFETY: source and name are NUL-terminated and outlive the program
    // (dropped at the end of this function); no headers are passed.
    check_rtc("nvrtcCreateProgram", unsafe {
        rtc::nvrtcCreateProgram(
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
        unsafe { rtc::nvrtcCompileProgram(prog.0, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    if compiled != rtc::nvrtcResult::NVRTC_SUCCESS {
        let log = program_log(&prog).unwrap_or_else(|e| format!("(no log: {e})"));
        return Err(ErrorKind::driver(
            "nvrtcCompileProgram",
            format!("{name}: {compiled:?}\n{log}"),
        ));
    }

    let mut size: usize = 0;
    match kind {
        ImageKind::Cubin => {
            // SAFETY: the program compiled; writes one size.
            check_rtc("nvrtcGetCUBINSize", unsafe {
                rtc::nvrtcGetCUBINSize(prog.0, &mut size)
            })?;
            let mut image = vec![0u8; size];
            // SAFETY: the buffer holds exactly the size NVRTC reported.
            check_rtc("nvrtcGetCUBIN", unsafe {
                rtc::nvrtcGetCUBIN(prog.0, image.as_mut_ptr() as *mut c_char)
            })?;
            Ok(image)
        }
        ImageKind::Ptx => {
            // SAFETY: the program compiled; writes one size (NUL included).
            check_rtc("nvrtcGetPTXSize", unsafe {
                rtc::nvrtcGetPTXSize(prog.0, &mut size)
            })?;
            let mut image = vec![0u8; size];
            // SAFETY: the buffer holds exactly the size NVRTC reported.
            check_rtc("nvrtcGetPTX", unsafe {
                rtc::nvrtcGetPTX(prog.0, image.as_mut_ptr() as *mut c_char)
            })?;
            Ok(image)
        }
    }
}

fn program_log(prog: &Program) -> Result<String, ErrorKind> {
    let mut size: usize = 0;
    // SAFETY: the program is live; writes one size.
    check_rtc("nvrtcGetProgramLogSize", unsafe {
        rtc::nvrtcGetProgramLogSize(prog.0, &mut size)
    })?;
    let mut log = vec![0u8; size.max(1)];
    // SAFETY: the buffer holds at least the size NVRTC reported.
    check_rtc("nvrtcGetProgramLog", unsafe {
        rtc::nvrtcGetProgramLog(prog.0, log.as_mut_ptr() as *mut c_char)
    })?;
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Ok(String::from_utf8_lossy(&log[..end]).into_owned())
}
