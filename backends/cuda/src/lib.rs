//! The CUDA backend of seam, on cudarc (driver API, NVRTC, cuBLAS).
//!
//! - Libraries are loaded at run time: this crate builds, and a binary using
//!   it starts, on a machine with no CUDA at all; [`device_count`] then says
//!   what is missing instead of panicking.
//! - Kernels are the CUDA C of `seam-kernels`, compiled by NVRTC for the
//!   device's architecture once per process and loaded once per backend.
//! - The backend is seam-streamgraph's `StreamBackend` (buffer table,
//!   launches, capture/replay/destroy, device timing, teardown: the code HIP
//!   runs) over this crate's `sys` stream. Capture is native: stream capture
//!   (thread-local mode) → instantiate → upload; replay is `cuGraphLaunch`.
//! - GEMM goes through cuBLAS (`cublasGemmEx`, f32 compute) with a workspace
//!   set at `prepare`, so a prepared GEMM can be captured (C7).
//! - Conditional bodies (C14) are the driver's conditional nodes, each body
//!   captured on a stream of its own (`sys/conditional.rs`), a WHILE
//!   bounded by an iteration counter its setter keeps; on where the driver
//!   has them (CUDA 12.4), off with `SEAM_CUDA_CONDITIONAL=0`.
//!
//! All `unsafe` lives in `sys` (driver, NVRTC, cuBLAS bindings); the rest
//! is safe Rust.

mod backend;
mod compile;
#[allow(unsafe_code)]
mod sys;

pub use backend::{Cublas, CudaBackend, GemmRoute, Nvrtc};

use seam::{Backend, ErrorKind};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Number of CUDA devices, or what is missing and what to install.
///
/// Never panics: a missing libcuda / libnvrtc is detected before cudarc would
/// panic on it, and any panic from the bindings is caught and reported.
pub fn device_count() -> Result<usize, String> {
    catch_unwind(|| {
        sys::driver()?;
        sys::nvrtc()?;
        sys::device_count().map_err(|e| e.to_string())
    })
    .unwrap_or_else(|panic| {
        Err(format!(
            "no usable CUDA driver: the CUDA bindings panicked while probing ({}); install the NVIDIA driver",
            panic_text(&*panic)
        ))
    })
}

/// Open CUDA device `index` (`cuda:<index>`).
pub fn open(index: usize) -> Result<Box<dyn Backend>, ErrorKind> {
    catch_unwind(AssertUnwindSafe(|| backend::open(index)))
        .unwrap_or_else(|panic| {
            Err(ErrorKind::Unavailable {
                reason: format!(
                    "cuda:{index}: the CUDA bindings panicked while opening the device ({})",
                    panic_text(&*panic)
                ),
            })
        })
        .map(|b| Box::new(b) as Box<dyn Backend>)
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests;

/// The CUDA backend's description of itself (`seam::registration`): a
/// graph holding conditional bodies is captured untimed (a body's launches
/// run as often as the device decides, and a node-timed graph keeps one
/// stamp per launch).
pub const REGISTRATION: seam::Registration =
    seam::Registration::new("cuda", Some("cuda"), device_count, open).with_body_node_timing(
        seam::DeclaredNodeTiming::Unavailable(
            "a body's launches run as often as the device decides and a node-timed graph keeps one stamp per launch: a graph holding a conditional body is captured untimed",
        ),
    );
