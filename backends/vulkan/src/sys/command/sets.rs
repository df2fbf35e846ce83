//! Each dispatch's own descriptor set, from the command buffer's pools.

use super::*;

/// Descriptor sets in a command buffer's first pool; each further pool
/// doubles, up to the max.
const POOL_FIRST: u32 = 16;
const POOL_MAX: u32 = 1024;

impl Inner {
    /// One descriptor set of `layout` pointing binding i at `bindings[i]`,
    /// from this command buffer's pools (a new pool when they are full).
    pub(super) fn descriptor_set(
        &mut self,
        layout: vk::DescriptorSetLayout,
        bindings: &[(&Buffer, seam::ops::Access)],
    ) -> Result<vk::DescriptorSet, ErrorKind> {
        let d = &self.shared.device;
        let set = loop {
            if self.current_pool == self.descriptor_pools.len() {
                let sets = (POOL_FIRST << self.descriptor_pools.len().min(6)).min(POOL_MAX);
                let sizes = [vk::DescriptorPoolSize::default()
                    .ty(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(sets * crate::sys::MAX_BINDINGS as u32)];
                let mut info = vk::DescriptorPoolCreateInfo::default()
                    .max_sets(sets)
                    .pool_sizes(&sizes);
                if self.shared.rebind_in_place {
                    // The set layouts are UPDATE_AFTER_BIND_POOL (`Gpu::layout`).
                    info = info.flags(vk::DescriptorPoolCreateFlags::UPDATE_AFTER_BIND);
                }
                // SAFETY: valid create info living across the call; the
                // UPDATE_AFTER_BIND flag only with the feature enabled.
                let pool = unsafe { d.create_descriptor_pool(&info, None) }
                    .map_err(drv("vkCreateDescriptorPool"))?;
                self.descriptor_pools.push(pool);
            }
            let layouts = [layout];
            let info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(self.descriptor_pools[self.current_pool])
                .set_layouts(&layouts);
            let mut set = vk::DescriptorSet::null();
            // SAFETY: live pool (owned here, used through `&mut self` only)
            // and live layout; `info` asks for one set (one layout), so the
            // driver writes exactly `set`. Called through the function
            // pointer rather than ash's wrapper, which returns a `Vec`.
            let result =
                unsafe { (d.fp_v1_0().allocate_descriptor_sets)(d.handle(), &info, &mut set) };
            match result {
                vk::Result::SUCCESS if set != vk::DescriptorSet::null() => break set,
                vk::Result::SUCCESS => {
                    return Err(ErrorKind::driver(
                        "vkAllocateDescriptorSets",
                        "returned none",
                    ))
                }
                vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL => {
                    self.current_pool += 1
                }
                e => return Err(ErrorKind::driver("vkAllocateDescriptorSets", e)),
            }
        };
        let info = |i: usize| {
            [vk::DescriptorBufferInfo::default()
                .buffer(bindings[i].0.handle())
                .offset(0)
                .range(vk::WHOLE_SIZE)]
        };
        crate::stack::with_slice(bindings.len(), info, |infos| {
            let write = |i: usize| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&infos[i])
            };
            crate::stack::with_slice(infos.len(), write, |writes| {
                // SAFETY: the set is fresh (bound in no command buffer yet),
                // it has one storage-buffer binding per write, and every
                // buffer is live and made with STORAGE_BUFFER usage; `infos`
                // outlives the call.
                unsafe { d.update_descriptor_sets(writes, &[]) }
            })
        });
        Ok(set)
    }
}
