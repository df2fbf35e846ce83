//! Write and read through a staging buffer, for device-local memory on
//! discrete devices.

use super::{Garbage, VulkanBackend};
use crate::raw::RawBuf;
use ash::vk;
use seam::{ErrorKind, RawBuffer};

/// Largest staging buffer; bigger writes and reads go in chunks.
const STAGING_MAX: u64 = 64 << 20;

impl VulkanBackend {
    const STAGING_MEMORY: &'static [vk::MemoryPropertyFlags] = &[
        vk::MemoryPropertyFlags::from_raw(
            vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw()
                | vk::MemoryPropertyFlags::HOST_CACHED.as_raw(),
        ),
        vk::MemoryPropertyFlags::from_raw(
            vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw(),
        ),
    ];

    /// The staging buffer, at least `size` bytes. Every staged copy is waited
    /// for before returning, so it is idle here; a smaller one is retired.
    fn staging(&mut self, size: u64) -> Result<&RawBuf, ErrorKind> {
        if self.staging.as_ref().is_some_and(|s| s.size < size) {
            if let Some(old) = self.staging.take() {
                let serial = self.pending_serial();
                self.retire(serial, Garbage::Buffer(old));
            }
        }
        if self.staging.is_none() {
            let s = self
                .gpu
                .create_buffer(size.clamp(1 << 20, STAGING_MAX), Self::STAGING_MEMORY)?;
            if s.mapped.is_none() {
                self.gpu.destroy_buffer(s);
                return Err(ErrorKind::driver(
                    "vkMapMemory",
                    "staging memory is not mappable",
                ));
            }
            self.staging = Some(s);
        }
        self.staging
            .as_ref()
            .ok_or_else(|| ErrorKind::driver("vkCreateBuffer", "no staging buffer"))
    }

    /// Record a copy between two buffers into the eager batch, after a barrier.
    fn record_copy(
        &mut self,
        src: vk::Buffer,
        src_offset: u64,
        dst: vk::Buffer,
        dst_offset: u64,
        size: u64,
    ) -> Result<(), ErrorKind> {
        let cmd = self.eager()?.cmd;
        self.gpu.barrier(cmd);
        self.gpu.copy(cmd, src, src_offset, dst, dst_offset, size);
        Ok(())
    }

    pub(super) fn staged_write(
        &mut self,
        id: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        let dst = self.buffer(id)?.buffer;
        // Each chunk is copied to staging, copied on the queue after a barrier
        // (so after queued work), and waited for before staging is reused;
        // on return `data` may be reused.
        for (i, chunk) in data.chunks(STAGING_MAX as usize).enumerate() {
            let staging = self.staging(chunk.len() as u64)?;
            let src = staging.buffer;
            staging
                .mapped
                .as_ref()
                .ok_or_else(|| ErrorKind::driver("vkMapMemory", "staging is not mapped"))?
                .write(0, chunk)?;
            let at = (offset + i * STAGING_MAX as usize) as u64;
            self.record_copy(src, 0, dst, at, chunk.len() as u64)?;
            self.wait_all()?;
        }
        Ok(())
    }

    pub(super) fn staged_read(
        &mut self,
        id: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        let src = self.buffer(id)?.buffer;
        for (i, chunk) in out.chunks_mut(STAGING_MAX as usize).enumerate() {
            let dst = self.staging(chunk.len() as u64)?.buffer;
            let at = (offset + i * STAGING_MAX as usize) as u64;
            self.record_copy(src, at, dst, 0, chunk.len() as u64)?;
            self.wait_all()?;
            self.staging
                .as_ref()
                .and_then(|s| s.mapped.as_ref())
                .ok_or_else(|| ErrorKind::driver("vkMapMemory", "staging is not mapped"))?
                .read(0, chunk)?;
        }
        Ok(())
    }
}
