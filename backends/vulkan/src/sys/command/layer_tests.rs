//! What the Khronos layer itself reports, checked by recording what the
//! barrier audit would refuse: synchronization validation must be on
//! exactly when asked (`SEAM_VULKAN_VALIDATION=sync`), or CI's validated
//! runs would check less than they say.

use super::super::instance::Instance;
use super::super::memory::HOST_COHERENT;
use super::super::validation::{take, Validation};
use super::super::Gpu;
use ash::vk;
use std::sync::Arc;

/// Two copies into the same bytes with no barrier between them, the second
/// recorded past the audit: under `Sync` the layer reports a write-after-
/// write hazard; under `Core` (the layer's core checks alone) it does not.
/// Mutations: the validation-features extension or its struct left out of
/// the instance in `Sync` mode (`Instance::with`'s `== Validation::Sync`
/// → `!=`) → red.
#[test]
fn synchronization_validation_is_on_exactly_when_asked() {
    for (mode, hazard) in [(Validation::Sync, true), (Validation::Core, false)] {
        let instance = match Instance::with(mode) {
            Ok(i) => Arc::new(i),
            Err(e) => {
                assert!(
                    !seam::testing::is_required("vulkan:0"),
                    "{} requires vulkan:0 (and CI installs the layer): {e}",
                    seam::testing::REQUIRE_ENV
                );
                eprintln!("no validated Vulkan instance ({e}): skipped");
                return;
            }
        };
        let adapter = instance.adapters().unwrap().into_iter().next();
        let Some(adapter) = adapter else {
            eprintln!("no Vulkan device: skipped");
            return;
        };
        let gpu = Gpu::new(instance, adapter).unwrap();
        let host = [vk::MemoryPropertyFlags::HOST_VISIBLE | HOST_COHERENT];
        let (src, dst) = (
            gpu.create_buffer(256, &host).unwrap(),
            gpu.create_buffer(256, &host).unwrap(),
        );
        let mut cmd = gpu.command_buffer().unwrap();
        cmd.begin(false).unwrap();
        cmd.barrier().unwrap();
        cmd.copy(&src, 0, &dst, 0, 256).unwrap();
        take();
        let inner = cmd.recording("test").unwrap();
        let region = [vk::BufferCopy {
            src_offset: 0,
            dst_offset: 0,
            size: 256,
        }];
        // SAFETY: the command buffer is recording; both buffers are live
        // (held by this test and by the command buffer's first copy), made
        // with TRANSFER_SRC and TRANSFER_DST usage; the region is inside
        // both and they do not overlap.
        unsafe {
            inner
                .shared
                .device
                .cmd_copy_buffer(inner.cmd, src.handle(), dst.handle(), &region)
        };
        let said = take();
        let reported = said
            .iter()
            .any(|m| m.contains("SYNC-HAZARD-WRITE-AFTER-WRITE"));
        assert_eq!(reported, hazard, "{mode:?}: {said:?}");
        cmd.end().unwrap();
        drop(cmd);
        take();
    }
}
