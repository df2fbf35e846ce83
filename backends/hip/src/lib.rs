//! The ROCm/HIP backend of seam, on hip-runtime-sys and hipRTC.
//!
//! - Behind the `rocm` feature, off by default: hip-runtime-sys links
//!   libamdhip64 when the program is built, so a binary with this backend
//!   will not start where ROCm is absent (decision D9: keep `rocm` out of
//!   binaries carried to other machines). Building needs libamdhip64-dev and
//!   `HIP_PATH=/usr` (Debian) or a ROCm install under /opt/rocm.
//! - Kernels are the CUDA C of `seam-kernels` (the CUDA backend's sources),
//!   compiled by hipRTC for the device's gfx architecture at first use, once
//!   per process per architecture, with the build options of [`options`].
//! - Capture is native and goes through `seam-streamgraph`, the code the CUDA
//!   backend runs: `hipStreamBeginCapture` → `hipStreamEndCapture` →
//!   5-argument `hipGraphInstantiate` → `hipGraphUpload` (where the runtime
//!   has it) → `hipGraphLaunch`.
//! - GEMM runs the gemm.cu kernel: Debian's ROCm packages have no hipBLAS.
//! - [`profile`]: `SEAM_HIP_PROFILE_REPLAY=1` makes the runtime replay graphs
//!   node by node so a profiler sees every replay.
//!
//! Without the feature only [`options`] and [`profile`] (pure logic, unit
//! tested everywhere) are built. All `unsafe` lives in `sys` (HIP runtime and
//! hipRTC bindings).

pub mod options;
pub mod profile;

#[cfg(feature = "rocm")]
mod backend;
#[cfg(feature = "rocm")]
mod compile;
#[cfg(feature = "rocm")]
#[allow(unsafe_code)]
mod sys;

#[cfg(feature = "rocm")]
pub use rocm::*;

#[cfg(feature = "rocm")]
mod rocm {
    pub use crate::backend::{HipBackend, Hiprtc};
    use crate::{compile, profile, sys};
    use seam::{Backend, ErrorKind, OpKind};
    use std::sync::OnceLock;

    /// The runtime's own answer, probed once per process (after the
    /// profiling switches, if asked for, are in the environment).
    fn probe() -> &'static Result<usize, String> {
        static PROBE: OnceLock<Result<usize, String>> = OnceLock::new();
        PROBE.get_or_init(|| {
            profile::apply_before_runtime_init();
            let version = match sys::runtime_version() {
                Ok(raw) => {
                    let (v, build) = profile::decode_runtime_version(raw);
                    format!("{v}.{build}")
                }
                Err(e) => return Err(format!("ROCm runtime found but unusable ({e})")),
            };
            match sys::device_count() {
                Ok(0) => Err(format!(
                    "ROCm runtime {version} found, no HIP device (hipGetDeviceCount: 0 devices)"
                )),
                Ok(n) => Ok(n),
                Err((name, _)) => Err(format!(
                    "ROCm runtime {version} found, no HIP device (hipGetDeviceCount: {name})"
                )),
            }
        })
    }

    /// Number of HIP devices, or the runtime's own reason there are none.
    pub fn device_count() -> Result<usize, String> {
        probe().clone()
    }

    /// Open HIP device `index` (`hip:<index>`).
    pub fn open(index: usize) -> Result<Box<dyn Backend>, ErrorKind> {
        crate::backend::open(index).map(|b| Box::new(b) as Box<dyn Backend>)
    }

    /// The HIP backend's description of itself (`seam::registration`).
    pub const REGISTRATION: seam::Registration =
        seam::Registration::new("hip", Some("rocm"), device_count, open);

    /// Compile `op`'s kernel for `arch` with hipRTC (no GPU needed), with
    /// the same options the backend uses; the code object's size.
    pub fn compile_kernel(arch: &str, op: OpKind) -> Result<usize, ErrorKind> {
        compile::compile(arch, op).map(|img| img.len())
    }

    /// hipRTC's version (major, minor).
    pub fn hiprtc_version() -> Result<(i32, i32), ErrorKind> {
        sys::hiprtc_version()
    }

    /// The ROCm release: the install's `.info/version` when it matches the
    /// runtime's major.minor (it knows the patch release), else the runtime's.
    pub(crate) fn rocm_release(runtime: profile::Version) -> profile::Version {
        let roots = [
            std::env::var("ROCM_PATH").ok(),
            std::env::var("HIP_PATH").ok(),
            Some("/opt/rocm".to_string()),
        ];
        roots
            .into_iter()
            .flatten()
            .filter_map(|r| std::fs::read_to_string(format!("{r}/.info/version")).ok())
            .filter_map(|t| profile::parse_release(&t))
            .find(|v| v.major == runtime.major && v.minor == runtime.minor)
            .unwrap_or(runtime)
    }
}

#[cfg(test)]
mod tests;
