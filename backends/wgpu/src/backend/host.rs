//! Host reads of device buffers: a word-aligned range copied into a
//! `MAP_READ` staging buffer (reused between reads, in chunks of at most
//! `STAGING_MAX`), mapped once the copy has finished (a bounded wait) and
//! copied out.

use super::{WgpuBackend, STAGING_MAX};
use seam::{ErrorKind, RawBuffer};
use std::sync::mpsc;

impl WgpuBackend {
    /// Copy `len` bytes at `start` (both word-aligned) of `src` back to the host.
    pub(super) fn read_words(
        &mut self,
        src: RawBuffer,
        start: u64,
        len: u64,
    ) -> Result<Vec<u8>, ErrorKind> {
        let source = self.buf(src)?.buffer.clone();
        let mut out = Vec::with_capacity(len as usize);
        let mut done = 0;
        while done < len {
            let chunk = (len - done).min(STAGING_MAX);
            let staging = self.staging_buffer(chunk)?;
            let read = self.read_chunk(&source, start + done, &staging, chunk);
            if read.is_err() {
                // The staging buffer may still be mapped or pending a map: never reuse it.
                self.staging = None;
            }
            out.extend_from_slice(&read?);
            done += chunk;
        }
        Ok(out)
    }

    /// One staged read: copy, submit, map with a bounded wait, copy out, unmap.
    fn read_chunk(
        &self,
        source: &wgpu::Buffer,
        at: u64,
        staging: &wgpu::Buffer,
        chunk: u64,
    ) -> Result<Vec<u8>, ErrorKind> {
        let mut encoder = self
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("seam read"),
            });
        encoder.copy_buffer_to_buffer(source, at, staging, 0, chunk);
        let commands = self
            .gpu
            .checked("wgpu::CommandEncoder::finish", || encoder.finish())?;
        let index = self
            .gpu
            .checked("wgpu::Queue::submit", || self.gpu.queue.submit([commands]))?;
        self.map_read(staging, chunk, index)
    }

    /// Map the first `len` bytes of the `MAP_READ` buffer `staging` once
    /// submission `index` (which writes them) has finished (a bounded
    /// wait), and copy them out; the buffer is unmapped again.
    pub(super) fn map_read(
        &self,
        staging: &wgpu::Buffer,
        len: u64,
        index: wgpu::SubmissionIndex,
    ) -> Result<Vec<u8>, ErrorKind> {
        let (tx, rx) = mpsc::channel();
        let slice = staging.slice(0..len);
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        // Waiting for the submission polls the device, and that poll runs
        // the map callbacks of what it finished: the result is here now.
        self.gpu.wait(Some(index))?;
        let mapped = rx.try_recv().map_err(|e| {
            ErrorKind::driver(
                "wgpu::BufferSlice::map_async",
                format!("no map result once its submission finished ({e})"),
            )
        })?;
        mapped.map_err(|e| ErrorKind::driver("wgpu::BufferSlice::map_async", e))?;
        let bytes = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| ErrorKind::driver("wgpu::BufferSlice::get_mapped_range", e))?;
            view.to_vec()
        };
        staging.unmap();
        Ok(bytes)
    }

    /// A `MAP_READ` staging buffer of at least `len` bytes, reused between reads.
    fn staging_buffer(&mut self, len: u64) -> Result<wgpu::Buffer, ErrorKind> {
        if let Some(s) = &self.staging {
            if s.size() >= len {
                return Ok(s.clone());
            }
        }
        let size = len.next_power_of_two().clamp(4096, STAGING_MAX).max(len);
        let staging = self.gpu.checked("wgpu::Device::create_buffer", || {
            self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("seam staging"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        self.staging = Some(staging.clone());
        Ok(staging)
    }
}
