//! Each dispatch's own descriptor set, from the command buffer's pools.

use super::*;

/// Descriptor sets in a command buffer's first pool; each further pool
/// doubles, up to the max.
const POOL_FIRST: u32 = 16;
const POOL_MAX: u32 = 1024;

/// The sets and storage-buffer descriptors of a command buffer's pool,
/// given how many pools it has made before: 16 sets, doubling per pool up
/// to 1024, each set with room for [`crate::sys::MAX_BINDINGS`] buffers
/// (and one uniform buffer, its parameter block).
fn pool_capacity(made: usize) -> (u32, u32) {
    let sets = (POOL_FIRST << made.min(6)).min(POOL_MAX);
    (sets, sets * crate::sys::MAX_BINDINGS as u32)
}

/// Allocate from the next pool (made when first needed): `current` is the
/// pool's index, `used` the sets taken from it.
fn next_pool(current: &mut usize, used: &mut u32) {
    *current += 1;
    *used = 0;
}

impl Inner {
    /// One descriptor set of `layout` pointing binding i at `bindings[i]`
    /// and the binding after them at the parameter block `params` (buffer,
    /// offset; `write_params`), from this command buffer's pools (the next,
    /// made if needed, when the current one holds its capacity or the
    /// driver says it is full).
    pub(super) fn descriptor_set(
        &mut self,
        layout: vk::DescriptorSetLayout,
        bindings: &[(&Buffer, seam::ops::Access)],
        params: (vk::Buffer, u64),
    ) -> Result<vk::DescriptorSet, ErrorKind> {
        let d = &self.shared.device;
        let set = loop {
            if self.current_pool == self.descriptor_pools.len() {
                let (sets, descriptors) = pool_capacity(self.descriptor_pools.len());
                let sizes = [
                    vk::DescriptorPoolSize::default()
                        .ty(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(descriptors),
                    vk::DescriptorPoolSize::default()
                        .ty(vk::DescriptorType::UNIFORM_BUFFER)
                        .descriptor_count(sets),
                ];
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
            if self.pool_used == pool_capacity(self.current_pool).0 {
                next_pool(&mut self.current_pool, &mut self.pool_used);
                continue;
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
                vk::Result::SUCCESS if set != vk::DescriptorSet::null() => {
                    self.pool_used += 1;
                    break set;
                }
                vk::Result::SUCCESS => {
                    return Err(ErrorKind::driver(
                        "vkAllocateDescriptorSets",
                        "returned none",
                    ))
                }
                vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL => {
                    next_pool(&mut self.current_pool, &mut self.pool_used)
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
        let block = [vk::DescriptorBufferInfo::default()
            .buffer(params.0)
            .offset(params.1)
            .range(PARAM_BYTES as u64)];
        crate::stack::with_slice(bindings.len(), info, |infos| {
            let write = |i: usize| match infos.get(i) {
                Some(info) => vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info),
                None => vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
                    .buffer_info(&block),
            };
            crate::stack::with_slice(infos.len() + 1, write, |writes| {
                // SAFETY: the set is fresh (bound in no command buffer yet),
                // its layout has one storage-buffer binding per buffer and
                // the uniform binding after them (`Gpu::layout`); every
                // buffer is live and made with STORAGE_BUFFER usage, and
                // the parameter buffer (live: this command buffer holds it)
                // with UNIFORM_BUFFER usage, the 64-byte block inside it at
                // an offset aligned to minUniformBufferOffsetAlignment
                // (`params::slot`); `infos` and `block` outlive the call.
                unsafe { d.update_descriptor_sets(writes, &[]) }
            })
        });
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::pool_capacity;
    use crate::sys::MAX_BINDINGS;

    /// 16 sets, then 32, 64, … up to 1024 and no further; each set with
    /// room for every binding a pipeline may have. (lavapipe's pools never
    /// run out, so no device here shows a pool too small.)
    #[test]
    fn pools_double_from_16_sets_to_1024_with_room_for_every_binding() {
        let sets: Vec<u32> = (0..9).map(|n| pool_capacity(n).0).collect();
        assert_eq!(sets, [16, 32, 64, 128, 256, 512, 1024, 1024, 1024]);
        for n in [0, 3, 6, 100] {
            let (sets, descriptors) = pool_capacity(n);
            assert_eq!(descriptors, sets * MAX_BINDINGS as u32, "pool {n}");
        }
    }
}
