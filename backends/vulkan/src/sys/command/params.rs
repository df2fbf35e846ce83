//! Each dispatch's parameter block (`seam::Launch::immediates`), in uniform
//! buffers the command buffer owns: dispatch n's block at slot n. The
//! kernels read it there (`crate::spirv`), so a graph update that changes
//! parameters writes the block and leaves the commands as recorded.

use super::*;
use crate::sys::memory::create_uniform;

/// Bytes of one parameter buffer: 1024 blocks at the 64-byte stride.
const CHUNK_BYTES: u64 = 64 * 1024;

/// Where dispatch `n`'s block lives: (buffer, byte offset), on a device
/// whose uniform-buffer offsets are multiples of `align` (a power of two,
/// at most 256 by the Vulkan spec).
pub(super) fn slot(n: usize, align: u64) -> (usize, u64) {
    let stride = (PARAM_BYTES as u64).next_multiple_of(align.max(1));
    let per = (CHUNK_BYTES / stride).max(1);
    (n / per as usize, (n as u64 % per) * stride)
}

impl Inner {
    /// Write dispatch `n`'s block (its buffer made when first needed) and
    /// say where it is, for the dispatch's descriptor set.
    pub(super) fn write_params(
        &mut self,
        n: usize,
        params: &[u8; PARAM_BYTES as usize],
    ) -> Result<(vk::Buffer, u64), ErrorKind> {
        let (chunk, _) = slot(n, self.shared.adapter.min_uniform_offset_alignment);
        while self.params.len() <= chunk {
            self.params.push(create_uniform(&self.shared, CHUNK_BYTES)?);
        }
        self.rewrite_params(n, params)
    }

    /// Write the block of dispatch `n`, whose buffer exists. The command
    /// buffer is not pending (its caller holds it mutably, which no
    /// submission allows: `CommandBuffer::inner`), so no replay reads the
    /// block while it changes; the memory is coherent and a submission
    /// makes host writes before it visible to the device.
    pub(super) fn rewrite_params(
        &self,
        n: usize,
        params: &[u8; PARAM_BYTES as usize],
    ) -> Result<(vk::Buffer, u64), ErrorKind> {
        let (chunk, offset) = slot(n, self.shared.adapter.min_uniform_offset_alignment);
        let buf = self.params.get(chunk).ok_or_else(|| {
            ErrorKind::driver(
                "mapped memory write",
                "no parameter buffer for the dispatch",
            )
        })?;
        buf.write(offset as usize, params)?;
        Ok((buf.handle(), offset))
    }
}

#[cfg(test)]
mod tests {
    use super::{slot, CHUNK_BYTES};

    /// Blocks are 64 bytes apart, or the device's alignment where it is
    /// larger; each buffer holds as many as fit, and no block crosses its
    /// buffer's end.
    #[test]
    fn blocks_sit_at_the_aligned_stride_inside_their_buffer() {
        assert_eq!(slot(0, 64), (0, 0));
        assert_eq!(slot(1, 64), (0, 64));
        assert_eq!(slot(1, 16), (0, 64));
        assert_eq!(slot(1, 256), (0, 256));
        assert_eq!(slot(1023, 64), (0, 1023 * 64));
        assert_eq!(slot(1024, 64), (1, 0));
        assert_eq!(slot(256, 256), (1, 0));
        for align in [1, 4, 16, 64, 128, 256] {
            for n in 0..3000 {
                let (_, at) = slot(n, align);
                assert_eq!(at % align, 0, "align {align}, dispatch {n}");
                assert!(at + 64 <= CHUNK_BYTES, "align {align}, dispatch {n}");
            }
        }
    }
}
