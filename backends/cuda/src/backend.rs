//! The CUDA backend is seam-streamgraph's `StreamBackend` over the `sys`
//! stream (driver calls), [`Nvrtc`] (its kernels) and [`Cublas`] (its
//! GEMMs): the buffer table, launches, capture, replay, destroy, device
//! timing and teardown are the code the HIP backend runs. Safe Rust only.

use crate::compile::{self, Target};
use crate::sys::{self, Blas, Function, Stream};
use seam::{DeviceInfo, ErrorKind, OpKind};
use seam_streamgraph::{Compiler, OnceMap, SharedKernels, StreamBackend, VendorBlas, VendorLaunch};
use std::sync::Arc;

/// One CUDA device behind the seam.
pub type CudaBackend = StreamBackend<Stream, Nvrtc, Cublas>;

/// cuBLAS workspace: NVIDIA's recommended size for Hopper. Set once at
/// prepare so a captured GEMM never allocates (C7).
const CUBLAS_WORKSPACE_BYTES: usize = 32 << 20;

/// Kernels loaded into each device's primary context, which stays retained
/// for the process: backends opened later (one per conformance trial) reuse them.
static KERNELS: SharedKernels<Function> = OnceMap::new();

/// How a GEMM runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmRoute {
    /// cuBLAS `cublasGemmEx`, f32 compute (the default).
    Cublas,
    /// The NVRTC kernel in kernels/cuda/gemm.cu (`SEAM_CUDA_GEMM=kernel`),
    /// the one the HIP backend shares; kept runnable to cross-check it.
    Kernel,
}

impl GemmRoute {
    /// The route a backend opened now takes.
    pub fn from_env() -> GemmRoute {
        match std::env::var("SEAM_CUDA_GEMM").as_deref() {
            Ok("kernel") => GemmRoute::Kernel,
            _ => GemmRoute::Cublas,
        }
    }
}

/// NVRTC for the device's architecture.
pub struct Nvrtc {
    target: Target,
}

/// cuBLAS for GEMM, unless `SEAM_CUDA_GEMM=kernel` sends GEMM to the NVRTC
/// kernel ([`GemmRoute`]).
pub struct Cublas {
    route: GemmRoute,
    /// Created at prepare (or the first eager GEMM), never while capturing.
    handle: Option<Blas>,
}

impl Cublas {
    /// Where this backend's GEMMs go.
    pub fn gemm_route(&self) -> GemmRoute {
        self.route
    }
}

impl Compiler<Stream> for Nvrtc {
    fn image(&self, op: OpKind) -> Result<Arc<Vec<u8>>, ErrorKind> {
        compile::image(&self.target, op, op.dtypes()[0])
    }

    fn shared_kernels(&self) -> Option<&'static SharedKernels<Function>> {
        Some(&KERNELS)
    }

    fn subnormals(&self) -> seam::Subnormals {
        self.target.subnormals()
    }
}

impl VendorBlas<Stream> for Cublas {
    fn routes(&self, op: OpKind) -> bool {
        op == OpKind::Gemm && self.route == GemmRoute::Cublas
    }

    fn ready(&self) -> bool {
        self.handle.is_some()
    }

    fn prepare(&mut self, stream: &Stream) -> Result<(), ErrorKind> {
        if self.handle.is_none() {
            self.handle = Some(Blas::new(stream, CUBLAS_WORKSPACE_BYTES)?);
        }
        Ok(())
    }

    fn launch(&self, stream: &Stream, l: &VendorLaunch<'_, Stream>) -> Result<(), ErrorKind> {
        self.handle
            .as_ref()
            .ok_or_else(|| ErrorKind::driver("cublasCreate", "no handle: not prepared"))?
            .gemm_row_major(stream, l)
    }
}

/// Open device `index`: its primary context (retained for the process), a
/// non-blocking stream in it, and NVRTC's best target for it.
pub fn open(index: usize) -> Result<CudaBackend, ErrorKind> {
    let count = sys::device_count()?;
    if index >= count {
        return Err(ErrorKind::Unavailable {
            reason: format!("no CUDA device {index}: {count} found"),
        });
    }
    let mut stream = Stream::new(compile::context(index)?)?;
    let name = sys::device_name(index)?;
    let cc = sys::compute_capability(index)?;
    let target = Target::for_device(cc)?;
    stream.allow_early_starts(target.waits_in_kernel() && sys::early_starts());
    let info = DeviceInfo {
        backend: "cuda".into(),
        index,
        name,
        driver: driver_string(cc, &target)?,
    };
    let blas = Cublas {
        route: GemmRoute::from_env(),
        handle: None,
    };
    Ok(StreamBackend::new(info, stream, Nvrtc { target }, blas))
}

/// `CUDA 13.0 (NVIDIA 580.95.05), NVRTC 13.0, sm_90`.
fn driver_string(cc: (i32, i32), target: &Target) -> Result<String, ErrorKind> {
    let v = sys::driver_version()?;
    let (rm, rn) = sys::nvrtc_version()?;
    let kernel = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|s| nvidia_kernel_version(&s))
        .map(|k| format!(" (NVIDIA {k})"))
        .unwrap_or_default();
    Ok(format!(
        "CUDA {}.{}{kernel}, NVRTC {rm}.{rn}, compute {}.{} as {}",
        v / 1000,
        (v % 1000) / 10,
        cc.0,
        cc.1,
        target.arch
    ))
}

/// The kernel module's version from `/proc/driver/nvidia/version`
/// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu ...").
pub(crate) fn nvidia_kernel_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_owned)
}
