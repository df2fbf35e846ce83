//! The only `unsafe` in the CUDA backend: thin, checked bindings over
//! cudarc's raw FFI, one file per library (cudarc's `sys` → `result` layer
//! is the model):
//! - here: loading (every library and symbol probed before the first call)
//!   and error text;
//! - [`driver`]: devices, the primary context, and the stream, which is the
//!   backend's [`seam_streamgraph::StreamDriver`] (memory, modules, kernel
//!   launches, the patch of a graph's kernel node);
//! - [`graph`]: the stream's [`seam_streamgraph::GraphDriver`] half
//!   (capture, graphs, replays, events);
//! - [`nvrtc`]: runtime compilation; [`cublas`]: the GEMM handle.
//!
//! Every call returns a `Result` whose error names the driver call; every
//! handle is an owning type whose `Drop` releases it; a wrapper whose
//! soundness depends on its arguments takes a type that proves them
//! (`KernelLaunch`, `VendorLaunch`: checked by seam-streamgraph).
//!
//! cudarc (`dynamic-loading`) opens libcuda / libnvrtc / libcublas on first
//! use and *panics* when a library or symbol is missing, so nothing here
//! calls into a library before [`driver`](fn@driver), [`nvrtc`](fn@nvrtc) or
//! [`cublas`](fn@cublas) has checked that it and every symbol this backend uses are present.
//!
//! Handles are only valid with their context current on the calling thread;
//! the backend makes its context current at the top of every seam call and
//! before dropping handles.

mod conditional;
mod cublas;
mod driver;
mod graph;
mod nvrtc;

pub use cublas::Blas;
pub use driver::{
    compute_capability, device_count, device_name, driver_version, Context, Function, Stream,
};
pub use nvrtc::{nvrtc_compile, nvrtc_supported_archs, nvrtc_version, ImageKind};

use cudarc::cublas::sys as blas;
use cudarc::driver::sys as cu;
use cudarc::nvrtc::sys as rtc;
use seam::ErrorKind;
use seam_streamgraph::driver_result;
use std::ffi::{c_char, CStr};
use std::ptr;
use std::sync::OnceLock;

/// Driver entry points this backend calls (cudarc's symbol names).
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuLaunchKernel",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuStreamIsCapturing",
    "cuGraphInstantiateWithFlags",
    "cuGraphUpload",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
    // C13: which node a captured launch added, and patching it in the exec
    // (in place) or in the graph (before instantiating a kept exec).
    "cuStreamGetCaptureInfo_v3",
    "cuGraphNodeGetType",
    "cuGraphGetNodes",
    "cuGraphExecKernelNodeSetParams_v2",
    "cuGraphKernelNodeSetParams_v2",
    "cuGetErrorString",
    // Launches that may start before the one before ends (CUDA 11.8).
    "cuLaunchKernelEx",
];

/// Event entry points device timing uses. Probed apart from
/// [`DRIVER_SYMBOLS`]: `cuEventElapsedTime_v2` needs a CUDA 12.8 driver,
/// and a driver without it should still run everything but timing.
const EVENT_SYMBOLS: &[&str] = &[
    "cuEventCreate",
    "cuEventRecord",
    "cuEventRecordWithFlags",
    "cuEventSynchronize",
    "cuEventElapsedTime_v2",
    "cuEventDestroy_v2",
    // Node timing's stamp kernels, recorded beside the launches (CUDA
    // 12.3, so in every driver that has the calls above).
    "cuStreamUpdateCaptureDependencies_v2",
];

/// Conditional nodes' entry points (C14): the handle, the node added to a
/// capture, and the capture of its body. Probed apart: a driver without
/// them runs everything but conditional bodies.
const CONDITIONAL_SYMBOLS: &[&str] = &[
    "cuGraphConditionalHandleCreate",
    "cuGraphAddNode_v2",
    "cuStreamUpdateCaptureDependencies_v2",
    "cuStreamBeginCaptureToGraph",
];

/// What turns conditional nodes off (`conditional_nodes`).
pub const CONDITIONAL_ENV: &str = "SEAM_CUDA_CONDITIONAL";

/// What turns early starts off (`early_starts`): `0`.
pub const EARLY_START_ENV: &str = "SEAM_CUDA_EARLY_START";

/// Whether kernels whose CUDA source may start early
/// (`seam::kernel::CudaSource::starts_early`) are launched so: unless
/// [`EARLY_START_ENV`] is `0`, read once per process (the backend also
/// needs a target that compiles the prelude's wait, `Target::waits_in_kernel`).
pub fn early_starts() -> bool {
    static EARLY: OnceLock<bool> = OnceLock::new();
    *EARLY.get_or_init(|| !turned_off(std::env::var(EARLY_START_ENV).ok().as_deref()))
}

/// What turns kept execs off (`keep_execs`): `0`.
pub const KEEP_EXECS_ENV: &str = "SEAM_CUDA_KEEP_EXECS";

/// Whether a graph update back to launches a graph ran before switches to
/// an exec kept for them (`seam::kept`): unless
/// [`KEEP_EXECS_ENV`] is `0` (the per-node patch alone, as before kept
/// execs), read once per process.
pub fn keep_execs() -> bool {
    static KEEP: OnceLock<bool> = OnceLock::new();
    *KEEP.get_or_init(|| !turned_off(std::env::var(KEEP_EXECS_ENV).ok().as_deref()))
}

const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcGetNumSupportedArchs",
    "nvrtcGetSupportedArchs",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcDestroyProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
];

const CUBLAS_SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSetWorkspace_v2",
    "cublasSetMathMode",
    "cublasGemmEx",
];

/// Whether a cudarc-loaded library is present and has every symbol we use.
/// `Err(None)`: the library is absent; `Err(Some(names))`: symbols missing.
macro_rules! probe_library {
    ($sys:ident, $symbols:expr) => {{
        // SAFETY: opening the library runs its initialisers, which is exactly
        // what using it later does; nothing else is called.
        if !unsafe { $sys::is_culib_present() } {
            Err(None)
        } else {
            // SAFETY: is_culib_present just opened one of the same candidate
            // names, so culib() finds a library instead of panicking.
            let lib = unsafe { $sys::culib() };
            let missing: Vec<&str> = $symbols
                .iter()
                .copied()
                .filter(|name| {
                    // SAFETY: only looks the symbol up; the function type is a
                    // placeholder and the pointer is never called through it.
                    let symbol = unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) };
                    symbol.is_err()
                })
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(Some(missing.join(", ")))
            }
        }
    }};
}

/// The CUDA driver is loaded, complete, and `cuInit` succeeded. The error is
/// the text discovery shows: what failed and what to install.
pub fn driver() -> Result<(), String> {
    static DRIVER: OnceLock<Result<(), String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            match probe_library!(cu, DRIVER_SYMBOLS) {
                Ok(()) => {}
                Err(None) => {
                    return Err("no CUDA driver: libcuda.so could not be loaded; install the NVIDIA driver \
                         (and make libcuda.so.1 visible to the dynamic loader)"
                        .into())
                }
                Err(Some(missing)) => {
                    return Err(format!(
                        "CUDA driver too old: libcuda lacks {missing}; install an NVIDIA driver for CUDA 12.4 or newer"
                    ))
                }
            }
            // SAFETY: the library and the symbol are present (checked above); cuInit takes no pointers.
            let r = unsafe { cu::cuInit(0) };
            check("cuInit", r).map_err(|e| {
                format!("CUDA driver found but cuInit failed ({e}); check the NVIDIA driver installation")
            })
        })
        .clone()
}

/// The driver has every event entry point device timing uses.
pub fn events() -> Result<(), String> {
    static EVENTS: OnceLock<Result<(), String>> = OnceLock::new();
    EVENTS
        .get_or_init(|| {
            driver()?;
            match probe_library!(cu, EVENT_SYMBOLS) {
                Ok(()) => Ok(()),
                Err(None) => Err("no CUDA driver: libcuda.so could not be loaded".into()),
                Err(Some(missing)) => Err(format!(
                    "no device timing: libcuda lacks {missing}; install an NVIDIA driver for CUDA 12.8 or newer"
                )),
            }
        })
        .clone()
}

/// Whether a switch's value ([`CONDITIONAL_ENV`], [`KEEP_EXECS_ENV`],
/// [`EARLY_START_ENV`])
/// turns its feature off: `0` alone (unset or anything else leaves it on).
fn turned_off(value: Option<&str>) -> bool {
    value == Some("0")
}

/// Conditional nodes can be captured: the driver has their entry points and
/// is CUDA 12.4 or newer (WHILE nodes), and `SEAM_CUDA_CONDITIONAL=0` does
/// not turn them off (the suite's C14 passed with them on an H200, CUDA
/// 13.0, driver 580.159.04).
pub fn conditional_nodes() -> Result<(), String> {
    static COND: OnceLock<Result<(), String>> = OnceLock::new();
    if turned_off(std::env::var(CONDITIONAL_ENV).ok().as_deref()) {
        return Err(format!(
            "the cuda backend's conditional nodes are turned off ({CONDITIONAL_ENV}=0)"
        ));
    }
    COND.get_or_init(|| {
        driver()?;
        match probe_library!(cu, CONDITIONAL_SYMBOLS) {
            Ok(()) => {}
            Err(None) => return Err("no CUDA driver: libcuda.so could not be loaded".into()),
            Err(Some(missing)) => {
                return Err(format!(
                    "no conditional nodes: libcuda lacks {missing}; install an NVIDIA driver for CUDA 12.4 or newer"
                ))
            }
        }
        match driver::driver_version() {
            Ok(v) if v >= 12040 => Ok(()),
            Ok(v) => Err(format!(
                "no conditional nodes: the driver is CUDA {}.{}, WHILE nodes need 12.4",
                v / 1000,
                v % 1000 / 10
            )),
            Err(e) => Err(e.to_string()),
        }
    })
    .clone()
}

/// NVRTC is loaded and complete.
pub fn nvrtc() -> Result<(), String> {
    static NVRTC: OnceLock<Result<(), String>> = OnceLock::new();
    NVRTC
        .get_or_init(|| match probe_library!(rtc, NVRTC_SYMBOLS) {
            Ok(()) => Ok(()),
            Err(None) => Err("no NVRTC: libnvrtc.so could not be loaded; install the CUDA toolkit's NVRTC \
                 (cuda-nvrtc) and put its lib directory (e.g. /usr/local/cuda/lib64) on the loader path"
                .into()),
            Err(Some(missing)) => Err(format!("NVRTC too old: libnvrtc lacks {missing}")),
        })
        .clone()
}

/// cuBLAS is loaded and complete.
pub fn cublas() -> Result<(), String> {
    static CUBLAS: OnceLock<Result<(), String>> = OnceLock::new();
    CUBLAS
        .get_or_init(|| match probe_library!(blas, CUBLAS_SYMBOLS) {
            Ok(()) => Ok(()),
            Err(None) => Err("no cuBLAS: libcublas.so could not be loaded; install the CUDA toolkit's cuBLAS \
                 (libcublas) and put its lib directory (e.g. /usr/local/cuda/lib64) on the loader path"
                .into()),
            Err(Some(missing)) => Err(format!("cuBLAS too old: libcublas lacks {missing}")),
        })
        .clone()
}

fn describe(r: cu::CUresult) -> String {
    let mut text: *const c_char = ptr::null();
    // SAFETY: cuGetErrorString only writes a pointer to a static string (or
    // fails for an unknown code, leaving `text` null).
    let ok = unsafe { cu::cuGetErrorString(r, &mut text) } == cu::CUresult::CUDA_SUCCESS;
    if ok && !text.is_null() {
        // SAFETY: the driver returned a NUL-terminated static string.
        let s = unsafe { CStr::from_ptr(text) };
        format!("{r:?}: {}", s.to_string_lossy())
    } else {
        format!("{r:?}")
    }
}

pub(crate) fn check(call: &'static str, r: cu::CUresult) -> Result<(), ErrorKind> {
    driver_result(call, r == cu::CUresult::CUDA_SUCCESS, || describe(r))
}

pub(crate) fn check_blas(call: &'static str, s: blas::cublasStatus_t) -> Result<(), ErrorKind> {
    let ok = s == blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS;
    driver_result(call, ok, || format!("{s:?}"))
}

pub(crate) fn check_rtc(call: &'static str, r: rtc::nvrtcResult) -> Result<(), ErrorKind> {
    driver_result(call, r == rtc::nvrtcResult::NVRTC_SUCCESS, || {
        format!("{r:?}")
    })
}

pub(crate) fn ready() -> Result<(), ErrorKind> {
    driver().map_err(|reason| ErrorKind::Unavailable { reason })
}

#[cfg(test)]
mod conditional_env_tests {
    /// `SEAM_CUDA_CONDITIONAL=0` turns conditional nodes off, and
    /// `SEAM_CUDA_KEEP_EXECS=0` kept execs; unset, `1` or anything else
    /// leaves them on. Mutations: the test negated or made constant → red.
    #[test]
    fn only_zero_turns_a_switch_off() {
        assert!(super::turned_off(Some("0")));
        for v in [None, Some("1"), Some(""), Some("off")] {
            assert!(!super::turned_off(v), "{v:?}");
        }
    }

    /// Conditional nodes are never reported where the driver cannot be
    /// loaded (every CI machine): the answer names what is missing.
    /// Mutation: `conditional_nodes` → `Ok(())` → red on a machine
    /// without a CUDA driver.
    #[test]
    fn no_driver_no_conditional_nodes() {
        if let Err(why) = super::driver() {
            let e = super::conditional_nodes().expect_err("conditional nodes without a driver");
            assert!(
                e.contains("driver") || e.contains("CUDA"),
                "{e} (driver: {why})"
            );
        }
    }
}
