//! The HIP backend is seam-streamgraph's `StreamBackend` over the `sys`
//! stream (HIP calls) and [`Hiprtc`] (hipRTC kernels; GEMM by the
//! gemm.cu kernel: Debian's ROCm has no hipBLAS). The buffer table,
//! launches, capture, replay, destroy, device timing and teardown are the
//! code the CUDA backend runs. Safe Rust only.

use crate::compile;
use crate::profile;
use crate::sys::{self, Function, Stream};
use seam::{DeviceInfo, ErrorKind, OpKind};
use seam_streamgraph::{Compiler, NoBlas, OnceMap, SharedKernels, StreamBackend};
use std::sync::Arc;

/// One HIP device behind the seam.
pub type HipBackend = StreamBackend<Stream, Hiprtc, NoBlas>;

/// Code objects loaded once per process per device, kept for backends
/// opened later (the conformance suite opens one per trial).
static LOADED: SharedKernels<Function> = OnceMap::new();

/// hipRTC for the device's gfx architecture. Every op, GEMM included, is a
/// kernel: preparing is loading its module (no vendor handle or workspace
/// to create, C7).
pub struct Hiprtc {
    arch: String,
}

impl Compiler<Stream> for Hiprtc {
    fn image(&self, op: OpKind) -> Result<Arc<Vec<u8>>, ErrorKind> {
        compile::image(&self.arch, op)
    }

    fn shared_kernels(&self) -> Option<&'static SharedKernels<Function>> {
        Some(&LOADED)
    }

    fn subnormals(&self) -> seam::Subnormals {
        let opts = crate::options::build_options(&self.arch, &crate::options::user_options());
        crate::options::subnormals(&self.arch, &opts)
    }
}

/// Open device `index`: its gfx architecture (or `SEAM_HIP_ARCH`) and a
/// non-blocking stream on it.
pub fn open(index: usize) -> Result<HipBackend, ErrorKind> {
    let count = crate::device_count().map_err(|reason| ErrorKind::Unavailable { reason })?;
    if index >= count {
        return Err(ErrorKind::Unavailable {
            reason: format!("no HIP device {index}: {count} found"),
        });
    }
    let stream = Stream::new(index)?;
    let (name, props_arch) = sys::device_name_and_arch(index)?;
    let arch = std::env::var("SEAM_HIP_ARCH").unwrap_or(props_arch);
    if !arch.starts_with("gfx") {
        return Err(ErrorKind::Unavailable {
            reason: format!(
                "hip:{index}: the runtime reported architecture {arch:?}; set SEAM_HIP_ARCH=gfx…"
            ),
        });
    }
    let info = DeviceInfo {
        backend: "hip".into(),
        index,
        name,
        driver: driver_string(&arch)?,
    };
    Ok(StreamBackend::new(info, stream, Hiprtc { arch }, NoBlas))
}

/// `ROCm runtime 5.2.21153 (driver 50221153), hipRTC 5.2, gfx90a`.
fn driver_string(arch: &str) -> Result<String, ErrorKind> {
    let raw = sys::runtime_version()?;
    let (version, build) = profile::decode_runtime_version(raw);
    let driver = sys::driver_version()?;
    let (rm, rn) = sys::hiprtc_version()?;
    let mut s =
        format!("ROCm runtime {version}.{build} (driver {driver}), hipRTC {rm}.{rn}, {arch}");
    if profile::requested() {
        s.push_str(", ");
        s.push_str(&profile::describe(crate::rocm_release(version)));
    }
    Ok(s)
}
