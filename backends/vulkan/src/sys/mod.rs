//! The thin unsafe layer: every Vulkan call of the crate, each checked and
//! returned as a `Result` naming the call. Nothing above this module uses
//! `unsafe`, and nothing it exports can be misused into undefined behaviour
//! from safe code:
//! - every object is an owning type destroyed by its `Drop`, never a copyable
//!   handle (no double destroy, no use after destroy);
//! - what the device may still use is kept alive by reference counts: a
//!   command buffer holds the buffers, pipelines and query pools it records,
//!   and a pending submission holds its command buffer until its fence has
//!   signalled (`device/queue.rs`); re-recording a pending command buffer, host
//!   access to a buffer a pending submission uses, resubmitting a
//!   ONE_TIME_SUBMIT buffer and rewriting a timestamp query without a reset
//!   are refused with an error;
//! - a wait that timed out at teardown leaks the device and every object of
//!   it instead of destroying what may still run.
//!
//! The backend above (`backend/mod.rs`) therefore keeps no lifetime
//! bookkeeping of its own: it drops what it no longer needs.

use ash::vk;
use seam::ErrorKind;

/// How long any wait on the device may take before it is reported as an error.
pub const FENCE_TIMEOUT_NS: u64 = 20_000_000_000;

/// The fix printed when there is no loader or no driver.
pub const INSTALL_HINT: &str =
    "no Vulkan loader/ICD: install mesa-vulkan-drivers for the CPU device (lavapipe)";

/// Size of a dispatch's parameter block: `seam::Launch::immediates`
/// (`Params`, then each binding's view offset), read by the kernel from a
/// uniform buffer (`crate::spirv`).
pub const PARAM_BYTES: u32 = seam::ops::IMMEDIATE_BYTES as u32;

/// Most storage buffers one pipeline binds (a user kernel's limit; the
/// catalogue's ops take 1 to 3).
pub const MAX_BINDINGS: usize = seam::kernel::MAX_BINDINGS;

pub(crate) fn drv(call: &'static str) -> impl Fn(vk::Result) -> ErrorKind {
    move |r| ErrorKind::driver(call, r)
}

mod audit;
mod command;
mod device;
mod instance;
mod memory;
mod validation;

pub use command::{CommandBuffer, DispatchUpdate};
#[cfg(test)]
pub(crate) use device::MAX_IN_FLIGHT;
pub use device::{Gpu, Pipeline, QueryPool};
pub use instance::{Adapter, Instance};
pub use memory::{Buffer, HOST_COHERENT};
pub use validation::{take as take_validation_messages, Validation};

/// The first Vulkan device, for the `sys` layer's own tests; `None`
/// (saying so) where there is none, and a failure instead where
/// `SEAM_REQUIRE_DEVICES` names vulkan:0.
#[cfg(test)]
pub(crate) fn test_gpu() -> Option<Gpu> {
    let gpu = Instance::shared().and_then(|i| {
        let a = i.adapters()?.into_iter().next().ok_or("no adapter")?;
        Gpu::new(i, a).map_err(|e| e.to_string())
    });
    match gpu {
        Ok(g) => Some(g),
        Err(e) => {
            assert!(
                !seam::testing::is_required("vulkan:0"),
                "{} requires vulkan:0: {e}",
                seam::testing::REQUIRE_ENV
            );
            eprintln!("no Vulkan device ({e}): skipped");
            None
        }
    }
}
