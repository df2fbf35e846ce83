//! The thin unsafe layer: every Vulkan call of the crate, each checked and
//! returned as a `Result` naming the call. Nothing above this module uses
//! `unsafe`.
//!
//! The contract with the layer above (what makes these safe functions sound):
//! every handle passed in was created by the same [`Gpu`] and is still live;
//! a handle is destroyed only once no pending submission uses it (the
//! backend retires objects by submission serial, see `backend.rs`); command
//! buffers, pools and the queue are used from one thread at a time (the
//! backend is `&mut self` everywhere).

use ash::vk;
use seam::ErrorKind;

/// How long any wait on the device may take before it is reported as an error.
pub const FENCE_TIMEOUT_NS: u64 = 20_000_000_000;

/// The fix printed when there is no loader or no driver.
pub const INSTALL_HINT: &str =
    "no Vulkan loader/ICD: install mesa-vulkan-drivers for the CPU device (lavapipe)";

/// Size of the push-constant block (`seam::Params`).
pub const PUSH_CONSTANT_BYTES: u32 = seam::Params::BYTES as u32;

pub(crate) fn drv(call: &'static str) -> impl Fn(vk::Result) -> ErrorKind {
    move |r| ErrorKind::driver(call, r)
}

mod device;
mod instance;

pub use device::{Gpu, RawBuf};
pub use instance::{Adapter, Instance};
