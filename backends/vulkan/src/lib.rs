//! The Vulkan backend, on ash with the loader opened at run time (it builds
//! with no Vulkan SDK and reports a missing loader or driver as a reason).
//! Kernels are the WGSL sources of `seam-kernels`, turned into SPIR-V by naga
//! at build time: one module per op, the 64-byte immediate block
//! (`seam::Launch::immediates`: `Params` and each binding's view offset)
//! read from a uniform buffer, one block per dispatch (`spirv.rs` moves it
//! there from naga's push constants).
//!
//! Decisions, each made once:
//! - **Devices.** Every physical device with a compute queue is a device,
//!   `vulkan:0`… in enumeration order, named with its driver (driver
//!   properties where Vulkan 1.2 has them). One queue per device.
//! - **Memory.** On a CPU or integrated device (lavapipe, UMA) buffers live in
//!   host-visible, coherent memory, mapped once; write/read wait for queued
//!   work, then copy. On a discrete device buffers are device-local and
//!   write/read go through one staging buffer (64 MiB chunks) with a copy on
//!   the queue. Each buffer has its own allocation, dedicated to it
//!   (`VkMemoryDedicatedAllocateInfo`) at Vulkan 1.1: on the H200 a GEMV
//!   over 8 GiB of weights took 22 % less time from dedicated allocations.
//!   `SEAM_VULKAN_STAGING=1` forces the staging path anywhere (to
//!   test it on lavapipe). Buffer sizes round up to whole 16-byte quads
//!   (`seam_kernels::BUFFER_ROUND`): kernels see every buffer as `array<u32>`,
//!   and gemm reads b as `array<vec4<u32>>`.
//! - **Descriptors.** One descriptor set per launch, allocated at launch (or
//!   record) time from pools owned by the command buffer it is recorded into:
//!   an eager batch resets its pools when its submission completes, a graph
//!   frees them when it is destroyed. No push descriptors, so nothing beyond
//!   Vulkan 1.0 is required; `descriptorBindingUpdateUnusedWhilePending`
//!   (Vulkan 1.2) is enabled where the device has it.
//! - **Graph update is Native** (C13): a graph keeps, per launch, the
//!   descriptor set its dispatch bound. `update_launches` waits for the
//!   graph's pending replays (they keep the old bindings), rewrites the
//!   changed sets (`vkUpdateDescriptorSets`), writes the changed parameter
//!   blocks and, where workgroup counts change
//!   or the device cannot update a bound set, records the command buffer
//!   again from its own log with the same sets; the barrier audit is run
//!   again over the new bindings first, and over the commands as they are
//!   recorded again (docs/vulkan.md).
//! - **Eager launches** are recorded into one command buffer (ONE_TIME_SUBMIT)
//!   that is submitted at the next write, read, synchronize, replay, or after
//!   256 launches. A dispatch that touches a buffer an access since the
//!   last barrier touched (either writing), and the first of a command
//!   buffer, is preceded by a global compute/transfer memory barrier, which
//!   also orders it after every earlier submission; independent dispatches
//!   run with no barrier between them (`SEAM_VULKAN_BARRIERS=every`: one
//!   before every dispatch).
//!   A device records its eager batches in turn from a ring of eight made
//!   at the first launch; when the oldest is still pending, the next batch
//!   waits for it rather than making another.
//! - **Capture is Native.** begin/end capture record a command buffer without
//!   ONE_TIME_SUBMIT, with the same barriers (before every dispatch where
//!   the graph is node-timed); a replay is
//!   one `vkQueueSubmit` with a fence. Graph command buffers are recorded with
//!   SIMULTANEOUS_USE, so a replay never waits for the previous replay of the
//!   same graph: the leading barrier and the in-order queue make it start
//!   after everything submitted before it. The current exec and graph handles
//!   are separate command buffers (C3).
//! - **Conditional bodies are Emulated** (C14): unrolled into indirect
//!   dispatches, each copy gated on the device by a kernel that writes
//!   their workgroup counts (`seam_kernels::conditional`,
//!   `backend/bodies.rs`), after barriers whose scopes hold
//!   indirect-argument reads, audited (docs/vulkan.md).
//! - **Lifetimes.** Every submission gets a serial and a fence, and holds
//!   its command buffer, which holds every buffer, pipeline and query pool it
//!   records, until the fence has signalled. So a freed buffer, a destroyed
//!   graph (C8: destroy while its replay is in flight) or a replaced current
//!   exec is dropped at once and destroyed when the last pending use
//!   completes; a pending command buffer is never freed (`sys`). At most
//!   64 submissions are pending: the next waits for the oldest, so the host
//!   runs at most that far ahead of the device.
//! - **Validation.** `SEAM_VULKAN_VALIDATION=1|sync` turns Khronos
//!   validation messages into failures of the call that raised them, and
//!   every command buffer runs seam's barrier audit, which judges each
//!   barrier's stage and access masks as recorded (docs/vulkan.md).
//! - **Waits** poll the fences (`vkGetFenceStatus`) for a spin budget, 50 µs
//!   by default or `SEAM_VULKAN_SPIN_US` (0: always block), then block in
//!   `vkWaitForFences` (`seam::wait`, docs/vulkan.md). They are bounded: a
//!   fence that has not signalled after 20 s is an error naming
//!   `vkWaitForFences`.
//! - **Device timing** uses timestamp queries where the queue family has
//!   `timestampValidBits > 0`: each traced replay or eager launch is
//!   bracketed by two BOTTOM_OF_PIPE timestamps recorded into the eager batch
//!   (a replay flushes the batch first, so the begin marker precedes its
//!   submission and the end marker follows it). Query pools exist only while
//!   timing is on or spans are pending; see `backend/timing.rs`.
//! - **Pipelines** are created lazily per (op, variant) and cached; `prepare`
//!   creates them ahead of a capture (C7).
//! - **Views.** Descriptors bind whole buffers; each binding's element
//!   offset is pushed with the parameters (`p.o<k>`) and the kernels index
//!   from it, so a graph update that moves a view re-pushes constants only.
//! - **User kernels** (`seam::kernel`) are compiled when registered
//!   (`prepare`): their WGSL, prelude prepended, checked by naga against the
//!   definition and made SPIR-V at run time with bounds checks (`user.rs`),
//!   then a pipeline of `bindings.len()` storage buffers, cached per device
//!   by `OpKind::User`.
//! - **Subnormals.** Where the device reports `shaderDenormPreserveFloat32`
//!   (Vulkan 1.2) every module is compiled with SPIR-V `DenormPreserve 32`
//!   (`float_controls.rs` patches naga's output) and the device declares
//!   `Subnormals::Preserved`; elsewhere `MayFlush`, with the reason (C11).
//!
//! `unsafe` lives only in `sys`, each block with its `SAFETY` reason.

mod backend;
mod dispatch;
mod float_controls;
mod spirv;
mod stack;
#[allow(unsafe_code)]
mod sys;
mod user;

/// The spin budget of every fence wait (`seam::wait`): polled
/// (`vkGetFenceStatus`) this long, then blocked on (`vkWaitForFences`).
pub(crate) static SPIN: seam::wait::SpinSetting =
    seam::wait::SpinSetting::new("SEAM_VULKAN_SPIN_US");

pub use backend::{UpdateCounts, VulkanBackend};

use seam::{Backend, ErrorKind};

/// How many Vulkan devices with a compute queue this machine has, or why
/// there are none (with what to install).
pub fn device_count() -> Result<usize, String> {
    let instance = sys::Instance::shared()?;
    let adapters = instance.adapters()?;
    if adapters.is_empty() {
        return Err(format!(
            "{} (the loader found no device with a compute queue)",
            sys::INSTALL_HINT
        ));
    }
    Ok(adapters.len())
}

/// Open `vulkan:<index>`.
pub fn open(index: usize) -> Result<Box<dyn Backend>, ErrorKind> {
    Ok(Box::new(VulkanBackend::open(index)?))
}

/// The Vulkan backend's description of itself (`seam::registration`).
pub const REGISTRATION: seam::Registration =
    seam::Registration::new("vulkan", Some("vulkan"), device_count, open);

// The allocation tests' counting global allocator (core's, shared): a
// `GlobalAlloc` is implemented with `unsafe`; the file says why it is sound.
#[cfg(test)]
#[allow(unsafe_code)]
#[path = "../../../core/tests/support/counting.rs"]
mod counting;

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the child process of the test below.
    const CHILD: &str = "SEAM_VULKAN_TEST_NO_DRIVER";

    /// Where the loader finds no driver, `device_count` is an error saying
    /// what to install, and `vulkan:0` is unavailable (not a device that
    /// fails later). Run in a child process whose loader is pointed at no
    /// driver file: the instance is made once per process.
    #[test]
    fn no_driver_is_an_error_naming_what_to_install() {
        if std::env::var_os(CHILD).is_some() {
            let e = device_count().expect_err("no driver: no device");
            assert!(e.contains("mesa-vulkan-drivers"), "{e}");
            match VulkanBackend::open(0) {
                Err(ErrorKind::Unavailable { reason }) => {
                    assert!(reason.contains("mesa-vulkan-drivers"), "{reason}")
                }
                Err(e) => panic!("opened with no driver: {e}"),
                Ok(_) => panic!("opened with no driver"),
            }
            return;
        }
        let name = "tests::no_driver_is_an_error_naming_what_to_install";
        let none = "/nonexistent/seam-no-driver.json";
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--test-threads=1"])
            .env(CHILD, "1")
            .env("VK_ICD_FILENAMES", none)
            .env("VK_DRIVER_FILES", none)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "the child: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
