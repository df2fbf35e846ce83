//! Write and read through a staging buffer, for device-local memory on
//! discrete devices.

use super::VulkanBackend;
use crate::sys::{Buffer, HOST_COHERENT};
use ash::vk;
use seam::{ErrorKind, RawBuffer};

/// Largest staging buffer; bigger writes and reads go in chunks.
const STAGING_MAX: u64 = 64 << 20;

impl VulkanBackend {
    const STAGING_MEMORY: &'static [vk::MemoryPropertyFlags] = &[
        vk::MemoryPropertyFlags::from_raw(
            HOST_COHERENT.as_raw() | vk::MemoryPropertyFlags::HOST_CACHED.as_raw(),
        ),
        HOST_COHERENT,
    ];

    /// The staging buffer, at least `size` bytes. Every staged copy is waited
    /// for before returning, so it is idle here; a smaller one is dropped.
    fn staging(&mut self, size: u64) -> Result<Buffer, ErrorKind> {
        if self.staging.as_ref().is_some_and(|s| s.size() < size) {
            self.staging = None;
        }
        if self.staging.is_none() {
            let s = self
                .gpu
                .create_buffer(size.clamp(1 << 20, STAGING_MAX), Self::STAGING_MEMORY)?;
            if !s.is_mapped() {
                return Err(ErrorKind::driver(
                    "vkMapMemory",
                    "staging memory is not mappable",
                ));
            }
            self.staging = Some(s);
            self.staging_made += 1;
        }
        self.staging
            .clone()
            .ok_or_else(|| ErrorKind::driver("vkCreateBuffer", "no staging buffer"))
    }

    /// Record a copy between two buffers into the eager batch, after a barrier.
    fn record_copy(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Buffer,
        dst_offset: u64,
        size: u64,
    ) -> Result<(), ErrorKind> {
        let batch = self.eager()?;
        batch.barrier()?;
        batch.copy(src, src_offset, dst, dst_offset, size)
    }

    pub(super) fn staged_write(
        &mut self,
        id: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        let dst = self.buffer(id)?.clone();
        // Each chunk is copied to staging, copied on the queue after a barrier
        // (so after queued work), and waited for before staging is reused;
        // on return `data` may be reused.
        for (i, chunk) in data.chunks(STAGING_MAX as usize).enumerate() {
            let staging = self.staging(chunk.len() as u64)?;
            staging.write(0, chunk)?;
            let at = (offset + i * STAGING_MAX as usize) as u64;
            self.record_copy(&staging, 0, &dst, at, chunk.len() as u64)?;
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
        let src = self.buffer(id)?.clone();
        for (i, chunk) in out.chunks_mut(STAGING_MAX as usize).enumerate() {
            let staging = self.staging(chunk.len() as u64)?;
            let at = (offset + i * STAGING_MAX as usize) as u64;
            self.record_copy(&src, at, &staging, 0, chunk.len() as u64)?;
            self.wait_all()?;
            staging.read(0, chunk)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every memory type the staging buffer may take is one the host can
    /// map and sees coherently (a copy through it needs no flush), cached
    /// first: lavapipe's memory is all of these, so only a discrete
    /// device's types (device-local without host access) would show a
    /// wrong preference, and CI has none.
    #[test]
    fn staging_memory_is_host_visible_and_coherent_cached_first() {
        let mappable =
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let prefs = VulkanBackend::STAGING_MEMORY;
        assert_eq!(prefs.len(), 2);
        assert_eq!(prefs[0], mappable | vk::MemoryPropertyFlags::HOST_CACHED);
        assert_eq!(prefs[1], mappable);
    }
}
