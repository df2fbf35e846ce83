//! What the device offers for updating descriptor sets in place (C13).
//!
//! A rebind rewrites a graph's descriptor sets with `vkUpdateDescriptorSets`
//! instead of re-recording its command buffer. Updating a set that an
//! executable command buffer has bound invalidates that command buffer
//! unless the set's bindings were created `UPDATE_AFTER_BIND` or
//! `UPDATE_UNUSED_WHILE_PENDING`. seam uses the second
//! (`descriptorBindingUpdateUnusedWhilePending`, Vulkan 1.2 descriptor
//! indexing): it needs no `UPDATE_AFTER_BIND_POOL` pools or layouts and no
//! update-after-bind limits, and what it allows — updating once no
//! submission that uses the descriptors is pending — is all a rebind may
//! do anyway, since the replays queued before it must run with the old
//! bindings (so the backend waits for them first). `UPDATE_AFTER_BIND` would
//! allow no more: a descriptor a pending replay uses must not change under
//! it either way.

use super::{Adapter, Instance};
use ash::vk;

/// Whether the device reports `descriptorBindingUpdateUnusedWhilePending`
/// (queried only where the instance and the device are Vulkan ≥ 1.2).
pub(super) fn update_unused_while_pending(instance: &Instance, adapter: &Adapter) -> bool {
    if instance.api < vk::API_VERSION_1_2 {
        return false;
    }
    // SAFETY: `adapter.phys` was enumerated from this live instance (the
    // caller, `Gpu::new`, checks `adapter.of` first).
    let props = unsafe {
        instance
            .instance
            .get_physical_device_properties(adapter.phys)
    };
    if props.api_version < vk::API_VERSION_1_2 {
        return false;
    }
    let mut indexing = vk::PhysicalDeviceDescriptorIndexingFeatures::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut indexing);
    // SAFETY: as above; the instance and the device are ≥ 1.2, so features2
    // and the descriptor indexing features are core; the chain lives across
    // the call.
    unsafe {
        instance
            .instance
            .get_physical_device_features2(adapter.phys, &mut features)
    };
    indexing.descriptor_binding_update_unused_while_pending == vk::TRUE
}
