//! NVRTC: runtime compilation of CUDA C to a cubin or PTX.

use super::{check_rtc, nvrtc};
use cudarc::nvrtc::sys as rtc;
use seam::ErrorKind;
use seam_streamgraph::rtc::{compile_error, log_buffer, log_text, RtcInput};
use std::ffi::{c_char, c_int};
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
    let input = RtcInput::new("nvrtc", source, name, options)?;
    let mut prog: rtc::nvrtcProgram = ptr::null_mut();
    // SAFETY: source and name are NUL-terminated and outlive the program
    // (`input` is dropped after it); no headers are passed; `prog` is a
    // valid out-pointer.
    check_rtc("nvrtcCreateProgram", unsafe {
        rtc::nvrtcCreateProgram(
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
    let compiled =
        unsafe { rtc::nvrtcCompileProgram(prog.0, input.option_count(), input.options()) };
    if compiled != rtc::nvrtcResult::NVRTC_SUCCESS {
        let log = program_log(&prog);
        return Err(compile_error(
            "nvrtcCompileProgram",
            name,
            format!("{compiled:?}"),
            log,
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
    let mut log = log_buffer(size);
    // SAFETY: the program is live; the buffer holds at least the size NVRTC
    // reported.
    check_rtc("nvrtcGetProgramLog", unsafe {
        rtc::nvrtcGetProgramLog(prog.0, log.as_mut_ptr() as *mut c_char)
    })?;
    Ok(log_text(&log))
}
