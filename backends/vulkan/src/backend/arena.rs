//! Descriptor sets for one command buffer, from pools that grow on demand.

use crate::raw::Gpu;
use ash::vk;
use seam::ErrorKind;

/// Descriptor sets in an arena's first pool; each further pool doubles, up to the max.
const POOL_FIRST: u32 = 16;
const POOL_MAX: u32 = 1024;

/// Descriptor sets for one command buffer, from pools that grow on demand.
#[derive(Default)]
pub(super) struct Arena {
    pools: Vec<vk::DescriptorPool>,
    /// Pool sets are being allocated from; earlier ones are full.
    current: usize,
}

impl Arena {
    pub(super) fn set(
        &mut self,
        gpu: &Gpu,
        layout: vk::DescriptorSetLayout,
        buffers: &[vk::Buffer],
    ) -> Result<vk::DescriptorSet, ErrorKind> {
        loop {
            if self.current == self.pools.len() {
                let size = (POOL_FIRST << self.pools.len().min(6)).min(POOL_MAX);
                self.pools.push(gpu.create_descriptor_pool(size)?);
            }
            if let Some(set) = gpu.descriptor_set(self.pools[self.current], layout, buffers)? {
                return Ok(set);
            }
            self.current += 1;
        }
    }

    pub(super) fn reset(&mut self, gpu: &Gpu) -> Result<(), ErrorKind> {
        for &pool in &self.pools[..self.pools.len().min(self.current + 1)] {
            gpu.reset_descriptor_pool(pool)?;
        }
        self.current = 0;
        Ok(())
    }

    pub(super) fn destroy(self, gpu: &Gpu) {
        for pool in self.pools {
            gpu.destroy_descriptor_pool(pool);
        }
    }
}
