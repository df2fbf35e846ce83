//! The only `unsafe` in the HIP backend: thin, checked bindings over
//! hip-runtime-sys (HIP runtime) and hipRTC, one file per library, laid out
//! like the CUDA backend's `sys`:
//! - here: error text, the runtime and its devices;
//! - [`driver`]: the backend's stream, which is its
//!   [`seam_streamgraph::StreamDriver`] (memory, modules, kernel launches,
//!   the patch of a graph's kernel node);
//! - [`graph`]: the stream's [`seam_streamgraph::GraphDriver`] half
//!   (capture, graphs, replays, events);
//! - [`hiprtc`]: runtime compilation (entry points the -sys crate does not
//!   bind, declared there; they live in the same libamdhip64).
//!
//! Every call returns a `Result` whose error names the HIP call; every
//! handle is an owning type whose `Drop` releases it; a wrapper whose
//! soundness depends on its arguments takes a type that proves them
//! (`KernelLaunch`, checked by seam-streamgraph).
//!
//! HIP has no contexts to make current: a device is selected per thread with
//! `hipSetDevice`, which the backend calls at the top of every seam call.

mod driver;
mod graph;
mod hiprtc;

pub use driver::{Function, Stream};

pub use hiprtc::{hiprtc_compile, hiprtc_version};

use hip_runtime_sys as hip;
use seam::ErrorKind;
use seam_streamgraph::driver_result;
use std::ffi::{c_char, c_int, CStr};

fn error_name(r: hip::hipError_t) -> String {
    // SAFETY: hipGetErrorName returns a pointer to a static NUL-terminated
    // string for every code (an "unknown" string for codes it does not know).
    let name = unsafe { hip::hipGetErrorName(r) };
    if name.is_null() {
        format!("{r:?}")
    } else {
        // SAFETY: non-null, static, NUL-terminated (above).
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    }
}

pub(crate) fn describe(r: hip::hipError_t) -> String {
    // SAFETY: as error_name: a static string or null.
    let text = unsafe { hip::hipGetErrorString(r) };
    let name = error_name(r);
    if text.is_null() {
        name
    } else {
        // SAFETY: non-null, static, NUL-terminated.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{name}: {text}")
    }
}

pub(crate) fn check(call: &'static str, r: hip::hipError_t) -> Result<(), ErrorKind> {
    driver_result(call, r == hip::hipError_t::hipSuccess, || describe(r))
}

// ----- runtime and devices -----

/// `hipRuntimeGetVersion` (major·10⁷ + minor·10⁵ + build).
pub fn runtime_version() -> Result<i32, ErrorKind> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check("hipRuntimeGetVersion", unsafe {
        hip::hipRuntimeGetVersion(&mut v)
    })?;
    Ok(v)
}

/// `hipDriverGetVersion`.
pub fn driver_version() -> Result<i32, ErrorKind> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check("hipDriverGetVersion", unsafe {
        hip::hipDriverGetVersion(&mut v)
    })?;
    Ok(v)
}

/// Number of HIP devices; `Err((error name, text))` as the runtime said it
/// (no device is `hipErrorNoDevice`, not zero, on ROCm).
pub fn device_count() -> Result<usize, (String, ErrorKind)> {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    let r = unsafe { hip::hipGetDeviceCount(&mut n) };
    match check("hipGetDeviceCount", r) {
        Ok(()) => Ok(n.max(0) as usize),
        Err(e) => Err((error_name(r), e)),
    }
}

/// Select the device for the calling thread.
pub(crate) fn set_device(id: c_int) -> Result<(), ErrorKind> {
    // SAFETY: takes an int; an invalid ordinal is reported as an error.
    check("hipSetDevice", unsafe { hip::hipSetDevice(id) })
}

/// The device's name and its gfx architecture (`gfx90a:sramecc+:xnack-`).
pub fn device_name_and_arch(ordinal: usize) -> Result<(String, String), ErrorKind> {
    let id = c_int::try_from(ordinal).map_err(|_| {
        ErrorKind::driver(
            "hipGetDeviceProperties",
            format!("ordinal {ordinal} out of range"),
        )
    })?;
    // A zeroed struct (all plain integers and char arrays) with slack after
    // it, so a runtime whose struct grew cannot write past our buffer.
    #[repr(C)]
    struct Props {
        p: hip::hipDeviceProp_t,
        _slack: [u8; 4096],
    }
    // SAFETY: hipDeviceProp_t is plain old data; all-zero is a valid value.
    let mut props: Box<Props> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: writes at most one hipDeviceProp_t (792 bytes on ROCm 5.2,
    // the size these bindings have) into the boxed buffer.
    check("hipGetDeviceProperties", unsafe {
        hip::hipGetDeviceProperties(&mut props.p, id)
    })?;
    let text = |buf: &[c_char]| {
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok((text(&props.p.name), text(&props.p.gcnArchName)))
}
