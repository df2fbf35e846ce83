//! The stream backend CUDA and HIP share: [`StreamBackend`] is the whole
//! `seam::Backend` (buffer table, kernel cache, launches, capture, replay,
//! destroy, device timing, teardown), written once over the driver calls
//! that differ ([`GraphDriver`], [`StreamDriver`]: `cuStreamBeginCapture` vs
//! `hipStreamBeginCapture`, 3- vs 5-argument instantiate, ...) and what each
//! vendor adds ([`Compiler`]: NVRTC or hipRTC; [`VendorBlas`]: cuBLAS, or
//! [`NoBlas`]). Because both
//! backends run this code, "HIP mirrors CUDA call for call" is a property of
//! one crate, tested here against a recording fake driver, without a GPU.
//!
//! - [`graphs`]: capture → instantiate → upload, replay, destroy (C1, C3, C8),
//!   and the node each captured launch added, kept with its graph, for
//!   in-place graph update (C13: `update_launches` patches the exec);
//! - [`timing`]: events around traced work, spans against a base event;
//! - [`launch`]: launches checked once (C12) and their arguments packed,
//!   before a driver's `unsafe` call;
//! - [`rtc`]: runtime-compiler inputs and logs, and driver error results;
//! - [`backend`]: the `seam::Backend` impl and teardown order;
//! - `fake` (feature `fake`, on in this crate's own tests): a recording
//!   fake driver, compiler and BLAS, for tests, shipped by no backend.
//!
//! No `unsafe` block runs here: each backend's `sys` layer implements the
//! driver traits, and the `unsafe fn`s of `seam::Backend` are implemented by
//! calling them with what core proved. The one `unsafe` text here is the
//! `owned_handle!` macro (`handle.rs`), which expands only inside a
//! backend's `sys` layer.

pub mod backend;
pub mod cache;
pub mod driver;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod graphs;
mod handle;
pub mod launch;
pub mod rtc;
mod tables;
pub mod testing;
pub mod timing;

pub use backend::StreamBackend;

pub use cache::OnceMap;
pub use driver::{
    Compiler, GraphDriver, NoBlas, NodeIn, OpKernels, SharedKernels, StreamDriver, VendorBlas,
};
pub use graphs::{Captured, LaunchNode, StreamGraphs};
pub use launch::{check_range, ArgPointers, Dims, KernelArgs, KernelLaunch, VendorLaunch};
pub use rtc::{compile_error, driver_result, RtcInput};
pub use timing::EventTimer;

#[cfg(test)]
mod backend_tests;
#[cfg(test)]
mod body_tests;
#[cfg(test)]
mod node_tests;
#[cfg(test)]
mod stamp_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unit_tests;
#[cfg(test)]
mod update_tests;
