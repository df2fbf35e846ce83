//! The Metal backend, on objc2-metal. It exists only on Apple targets; on
//! every other target this crate is a shim whose [`device_count`] says why,
//! so `seam-backends --features metal` builds everywhere. CI type-checks the
//! real backend for `aarch64-apple-darwin` (`cargo xtask seam-guard`); it runs
//! only on an Apple machine (docs/metal.md).
//!
//! Decisions, each made once:
//! - **Devices.** `MTLCopyAllDevices` (which falls back to
//!   `MTLCreateSystemDefaultDevice` where the former is missing), `metal:0`…
//!   in its order. One `MTLCommandQueue` per device.
//! - **Memory.** Every buffer is `MTLResourceStorageModeShared` (unified on
//!   Apple silicon), sized up to whole 32-bit words since kernels see every
//!   buffer as `array<u32>`. write/read commit queued work, wait for it, then
//!   copy through `contents`.
//! - **Kernels.** MSL that naga generated from the shared WGSL at build time
//!   ([`msl`]): one library per op, compiled with `newLibraryWithSource` on
//!   first use (fast math off: C11 compares against the CPU reference), one
//!   pipeline per entry point, cached; `prepare` builds them ahead of a
//!   capture (C7). Buffers are bound at indices 0..8 in signature order,
//!   `Params` at [`msl::PARAMS_INDEX`] (8) with `setBytes`, naga's
//!   buffer-size block at [`msl::SIZES_INDEX`] (9): one layout
//!   ([`lowering`]) for the catalogue and user kernels.
//! - **User kernels** (`seam::kernel`) are compiled when registered
//!   (`prepare` of `OpKind::User`): their WGSL checked against the
//!   definition by `seam::wgsl`, lowered to MSL by naga at run time
//!   with the code build.rs lowers the catalogue with, plus bounds checks
//!   ([`user`]), then compiled by Metal; a refusal is `KernelCompile` with
//!   naga's or Metal's log. Threads per threadgroup are the definition's
//!   `workgroup_size`, the grid its `grid` (3-D). Cached per device.
//! - **Eager launches** are encoded into one serial compute encoder of one
//!   command buffer, committed at the next write, read, synchronize, replay,
//!   or after 256 launches. A serial encoder runs dispatches in order, and
//!   Metal's hazard tracking orders encoders and command buffers on the queue.
//! - **Capture is Native** where the device supports compute in indirect
//!   command buffers (GPU family Apple3+ or Mac2, macOS 11 / iOS 13): end
//!   capture encodes every recorded launch into an `MTLIndirectCommandBuffer`
//!   (concurrent-dispatch commands, each with a barrier after the one before
//!   it, pipelines made with `supportIndirectCommandBuffers`), `Params` and
//!   buffer sizes in one argument buffer owned by the graph. A replay is its
//!   own compute encoder: `useResource:usage:` for every buffer, then
//!   `executeCommandsInBuffer:withRange:`, committed at once. Elsewhere, or
//!   with `SEAM_METAL_CAPTURE=emulated`, capture is Emulated: the recorded
//!   launches are re-encoded on every replay. `capture_support` says which.
//! - **Conditional bodies (C14) are Emulated**: unrolled into indirect
//!   dispatches gated on the device (`bodies.rs`,
//!   `seam_kernels::conditional`), re-encoded at every replay.
//! - **Graph update (C13)** is Native where capture is: each captured
//!   launch keeps the ICB command it was encoded at (`update.rs`), and
//!   `update_launches` waits for the graph's in-flight replays (so replays
//!   queued before the update keep the old bindings), then re-encodes only
//!   the changed commands (`indirectComputeCommandAtIndex` → `reset` → the
//!   same calls capture made), their `Params` and sizes rewritten in the
//!   argument buffer; what the ICB holds follows the rebind. With Emulated
//!   capture it is Emulated: core re-records.
//! - **Lifetimes.** A committed command buffer keeps every graph it replays
//!   alive until it has completed, so destroying a graph whose replay is in
//!   flight (C8) defers the release; buffers bound directly are retained by
//!   the command buffer itself.
//! - **Waits** are bounded: command buffer status is polled, and one that has
//!   not completed after 20 s is an error naming `MTLCommandBuffer.status`
//!   (`waitUntilCompleted` would wait forever on a hung GPU).
//!
//! `unsafe` lives only in `sys`, each block with its `SAFETY` reason.

mod dispatch;
pub mod lowering;
pub mod msl;
pub mod user;
// Used by the real backend only; unit-tested everywhere.
#[cfg_attr(not(target_vendor = "apple"), allow(dead_code))]
mod update;

#[cfg(target_vendor = "apple")]
mod backend;
#[cfg(target_vendor = "apple")]
mod bodies;
#[cfg(target_vendor = "apple")]
mod kernels;
#[cfg(target_vendor = "apple")]
#[allow(unsafe_code)]
mod sys;

#[cfg(target_vendor = "apple")]
pub use backend::MetalBackend;

use seam::{Backend, ErrorKind};

/// Why there is no Metal device on a non-Apple target.
pub const NOT_APPLE: &str = "Metal is only available on Apple platforms (macOS/iOS)";

/// How many Metal devices this machine has, or why there are none.
pub fn device_count() -> Result<usize, String> {
    #[cfg(target_vendor = "apple")]
    {
        Ok(sys::device_count())
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        Err(NOT_APPLE.into())
    }
}

/// Open `metal:<index>`.
pub fn open(index: usize) -> Result<Box<dyn Backend>, ErrorKind> {
    #[cfg(target_vendor = "apple")]
    {
        Ok(Box::new(MetalBackend::open(index)?))
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        Err(ErrorKind::Unavailable {
            reason: format!("metal:{index}: {NOT_APPLE}"),
        })
    }
}

#[cfg(all(test, not(target_vendor = "apple")))]
mod shim_tests {
    #[test]
    fn the_shim_says_why_there_is_no_device() {
        assert_eq!(super::device_count(), Err(super::NOT_APPLE.to_string()));
        match super::open(0) {
            Err(seam::ErrorKind::Unavailable { reason }) => {
                assert!(reason.contains("Apple"), "{reason}")
            }
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("opened a Metal device off Apple"),
        }
    }
}

/// The Metal backend's description of itself (`seam::registration`).
/// Capture is Native with indirect command buffers, Emulated without them
/// (or with `SEAM_METAL_CAPTURE=emulated`).
pub const REGISTRATION: seam::Registration =
    seam::Registration::new("metal", Some("metal"), device_count, open)
        .with_capture(&[seam::CaptureKind::Native, seam::CaptureKind::Emulated])
        .with_timing(seam::DeclaredTiming::Untimed(
            "the Metal backend does not sample GPU timestamps: replays are timed on the host only",
        ))
        .with_node_timing(seam::DeclaredNodeTiming::Unavailable(
            "the Metal backend does not sample GPU timestamps (no counter sample buffers)",
        ));
