//! The raw device's memory: buffers of the backend's memory types, the
//! staging buffer and the copies through it, and (for `probe gemv`) the
//! weights in plain, dedicated or pooled allocations.

use super::{vkerr, Mem, RawVulkan};
use ash::vk;

/// How the probe's weights get their memory (`--alloc`): `plain`, one
/// `vkAllocateMemory` each (as the backend does); `dedicated`, the same with
/// `VkMemoryDedicatedAllocateInfo` (Vulkan 1.1); `pooled`, all weights bound
/// at aligned offsets of one allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alloc {
    Plain,
    Dedicated,
    Pooled,
}

impl std::str::FromStr for Alloc {
    type Err = String;
    fn from_str(s: &str) -> Result<Alloc, String> {
        match s {
            "plain" => Ok(Alloc::Plain),
            "dedicated" => Ok(Alloc::Dedicated),
            "pooled" => Ok(Alloc::Pooled),
            other => Err(format!("--alloc {other}: plain, dedicated or pooled")),
        }
    }
}

impl RawVulkan {
    /// A storage (and copy) buffer bound to memory of the first type in
    /// `prefer` that accepts it.
    pub(super) fn buffer(
        &self,
        size: u64,
        prefer: &[vk::MemoryPropertyFlags],
    ) -> Result<Mem, String> {
        let d = &self.device;
        let buffer = self.unbound(size)?;
        // SAFETY: `buffer` is live.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let types = &self.memory.memory_types[..self.memory.memory_type_count as usize];
        let index = prefer.iter().find_map(|want| {
            types.iter().enumerate().position(|(i, t)| {
                req.memory_type_bits & (1 << i) != 0 && t.property_flags.contains(*want)
            })
        });
        let Some(index) = index else {
            // SAFETY: the buffer was never bound or used.
            unsafe { d.destroy_buffer(buffer, None) };
            return Err(format!("no memory type with {prefer:?} accepts the buffer"));
        };
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(index as u32);
        // SAFETY: valid allocate info for a type the buffer accepts.
        let memory = match unsafe { d.allocate_memory(&info, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: the buffer was never bound or used.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(format!("vkAllocateMemory: {e}"));
            }
        };
        let mem = Mem {
            buffer,
            memory,
            size,
        };
        // SAFETY: fresh memory of an accepted type and size, offset 0; the
        // buffer is unbound.
        if let Err(e) = unsafe { d.bind_buffer_memory(buffer, memory, 0) } {
            self.destroy(mem);
            return Err(format!("vkBindBufferMemory: {e}"));
        }
        Ok(mem)
    }

    pub(super) fn destroy(&self, m: Mem) {
        // SAFETY: only called when no submission uses `m` (the queue is
        // idle: every submit is waited for before the next call).
        unsafe {
            self.device.destroy_buffer(m.buffer, None);
            self.device.free_memory(m.memory, None);
        }
    }

    /// The backend's memory preference for buffers the kernels use.
    pub(super) fn prefer(&self) -> &'static [vk::MemoryPropertyFlags] {
        const HOST: &[vk::MemoryPropertyFlags] = &[
            vk::MemoryPropertyFlags::from_raw(
                vk::MemoryPropertyFlags::DEVICE_LOCAL.as_raw()
                    | vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                    | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw(),
            ),
            vk::MemoryPropertyFlags::from_raw(
                vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                    | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw(),
            ),
        ];
        const DEVICE: &[vk::MemoryPropertyFlags] = &[
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
        ];
        if self.host_visible {
            HOST
        } else {
            DEVICE
        }
    }

    /// A mapped host-visible buffer of at least `size` bytes for uploads
    /// and read-backs.
    pub(super) fn staging(&mut self, size: u64) -> Result<(Mem, *mut u8), String> {
        if let Some(s) = self.staging.filter(|(m, _)| m.size >= size) {
            return Ok(s);
        }
        if let Some((old, _)) = self.staging.take() {
            self.destroy(old);
        }
        let coherent =
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let m = self.buffer(size, &[coherent])?;
        // SAFETY: host-visible memory, not mapped yet, whole range.
        let ptr = match unsafe {
            self.device
                .map_memory(m.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        } {
            Ok(p) => p.cast::<u8>(),
            Err(e) => {
                self.destroy(m);
                return Err(format!("vkMapMemory: {e}"));
            }
        };
        self.staging = Some((m, ptr));
        Ok((m, ptr))
    }

    /// Record and run one copy between the chain's buffer and staging.
    pub(super) fn copy(&mut self, to_device: bool, size: u64) -> Result<(), String> {
        self.wait()?;
        let x = self.x.ok_or("no buffer")?;
        let (s, _) = self.staging(size)?;
        if to_device {
            self.transfer(s, x, size)
        } else {
            self.transfer(x, s, size)
        }
    }

    /// Record and run one copy of `size` bytes from `src` to `dst` (both
    /// owned by `self`, each at least `size` bytes).
    pub(super) fn transfer(&mut self, src: Mem, dst: Mem, size: u64) -> Result<(), String> {
        if size > src.size || size > dst.size {
            return Err(format!(
                "copy of {size} bytes between buffers of {} and {}",
                src.size, dst.size
            ));
        }
        self.wait()?;
        let (src, dst) = (src.buffer, dst.buffer);
        let d = &self.device;
        let cmd = self.xfer;
        let begin = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        let all = vk::PipelineStageFlags::COMPUTE_SHADER
            | vk::PipelineStageFlags::TRANSFER
            | vk::PipelineStageFlags::HOST;
        let before = [vk::MemoryBarrier::default()
            .src_access_mask(
                vk::AccessFlags::SHADER_WRITE
                    | vk::AccessFlags::TRANSFER_WRITE
                    | vk::AccessFlags::HOST_WRITE,
            )
            .dst_access_mask(vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE)];
        let after = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ | vk::AccessFlags::SHADER_READ)];
        let region = [vk::BufferCopy::default().size(size)];
        // SAFETY: `cmd` is not pending (waited above; its pool resets single
        // buffers); both buffers are live, `size` fits both (checked); the barriers
        // order the copy after earlier writes and before host reads.
        unsafe {
            d.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                .map_err(vkerr("vkResetCommandBuffer"))?;
            d.begin_command_buffer(cmd, &begin)
                .map_err(vkerr("vkBeginCommandBuffer"))?;
            d.cmd_pipeline_barrier(
                cmd,
                all,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                &before,
                &[],
                &[],
            );
            d.cmd_copy_buffer(cmd, src, dst, &region);
            d.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::TRANSFER,
                all,
                vk::DependencyFlags::empty(),
                &after,
                &[],
                &[],
            );
            d.end_command_buffer(cmd)
                .map_err(vkerr("vkEndCommandBuffer"))?;
        }
        self.submit_cmd(cmd)?;
        self.wait()
    }

    /// Write `data` into the chain's buffer (through staging).
    pub fn write(&mut self, data: &[f32]) -> Result<(), String> {
        let size = (data.len() * 4) as u64;
        if size == 0 {
            return Ok(());
        }
        self.wait()?;
        let (s, ptr) = self.staging(size)?;
        if s.size < size {
            return Err("staging buffer too small".into());
        }
        // SAFETY: `ptr` maps the whole staging buffer (≥ `size` bytes,
        // checked), which no pending submission uses (waited above).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), ptr, size as usize) };
        self.copy(true, size)
    }

    /// The first `k` floats of the chain's buffer.
    pub fn read(&mut self, k: usize) -> Result<Vec<f32>, String> {
        let size = (k * 4) as u64;
        self.copy(false, size)?;
        let (_, ptr) = self.staging(size)?;
        let mut out = vec![0f32; k];
        // SAFETY: the copy into staging completed (waited in `copy`) and the
        // mapping holds at least `size` bytes.
        unsafe { std::ptr::copy_nonoverlapping(ptr, out.as_mut_ptr().cast::<u8>(), size as usize) };
        Ok(out)
    }

    /// Upload `data` into `dst` through staging.
    pub(super) fn upload(&mut self, dst: Mem, data: &[f32]) -> Result<(), String> {
        let size = (data.len() * 4) as u64;
        self.wait()?;
        let (s, ptr) = self.staging(size)?;
        // SAFETY: `ptr` maps the whole staging buffer (≥ `size` bytes), which
        // no pending submission uses (waited above).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), ptr, size as usize) };
        self.transfer(s, dst, size)
    }

    /// The first `k` floats of `src`, through staging.
    pub(super) fn download(&mut self, src: Mem, k: usize) -> Result<Vec<f32>, String> {
        let size = (k * 4) as u64;
        let (s, _) = self.staging(size)?;
        self.transfer(src, s, size)?;
        let (_, ptr) = self.staging(size)?;
        let mut out = vec![0f32; k];
        // SAFETY: the copy completed (waited in `transfer`); the mapping
        // holds at least `size` bytes.
        unsafe { std::ptr::copy_nonoverlapping(ptr, out.as_mut_ptr().cast::<u8>(), size as usize) };
        Ok(out)
    }

    /// A storage (and copy) buffer of `size` bytes (at least 4), with no
    /// memory bound yet.
    pub(super) fn unbound(&self, size: u64) -> Result<vk::Buffer, String> {
        let info = vk::BufferCreateInfo::default()
            .size(size.max(4))
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info (size > 0) living across the call.
        unsafe { self.device.create_buffer(&info, None) }.map_err(vkerr("vkCreateBuffer"))
    }

    /// `n` weight buffers of `size` bytes, device-local, allocated as
    /// `alloc` says; with `Pooled`, the one allocation is returned too (the
    /// buffers' own `memory` is null, which `destroy` ignores). On an error
    /// whatever was made is destroyed.
    pub(super) fn weights(
        &self,
        n: usize,
        size: u64,
        alloc: Alloc,
    ) -> Result<(Vec<Mem>, Option<vk::DeviceMemory>), String> {
        if alloc == Alloc::Dedicated && self.api < vk::API_VERSION_1_1 {
            return Err(
                "--alloc dedicated needs Vulkan 1.1 (VkMemoryDedicatedAllocateInfo); the instance is at 1.0"
                    .into(),
            );
        }
        let (mut mems, mut pool) = (Vec::new(), None);
        if let Err(e) = self.make_weights(&mut mems, &mut pool, n, size, alloc) {
            for m in mems {
                self.destroy(m);
            }
            if let Some(memory) = pool {
                // SAFETY: nothing was submitted; the buffers bound to it are
                // destroyed above.
                unsafe { self.device.free_memory(memory, None) };
            }
            return Err(e);
        }
        Ok((mems, pool))
    }

    /// [`RawVulkan::weights`]' work, pushing each buffer (and the pool) as
    /// it is made so the caller can destroy them on an error.
    fn make_weights(
        &self,
        mems: &mut Vec<Mem>,
        pool: &mut Option<vk::DeviceMemory>,
        n: usize,
        size: u64,
        alloc: Alloc,
    ) -> Result<(), String> {
        if alloc == Alloc::Plain {
            for _ in 0..n {
                mems.push(self.buffer(size, self.prefer())?);
            }
            return Ok(());
        }
        let d = &self.device;
        for _ in 0..n {
            mems.push(Mem {
                buffer: self.unbound(size)?,
                memory: vk::DeviceMemory::null(),
                size,
            });
        }
        let first = mems.first().ok_or("no weights asked for")?.buffer;
        // SAFETY: the buffer is live.
        let req = unsafe { d.get_buffer_memory_requirements(first) };
        let types = &self.memory.memory_types[..self.memory.memory_type_count as usize];
        let index = types
            .iter()
            .enumerate()
            .position(|(i, t)| {
                req.memory_type_bits & (1 << i) != 0
                    && t.property_flags
                        .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
            })
            .ok_or("no device-local memory type accepts the weights")?;
        if alloc == Alloc::Pooled {
            let stride = req.size.div_ceil(req.alignment) * req.alignment;
            let info = vk::MemoryAllocateInfo::default()
                .allocation_size(stride * n as u64)
                .memory_type_index(index as u32);
            // SAFETY: valid allocate info for a type every buffer accepts.
            let memory =
                unsafe { d.allocate_memory(&info, None) }.map_err(vkerr("vkAllocateMemory"))?;
            *pool = Some(memory);
            for (i, m) in mems.iter().enumerate() {
                // SAFETY: each buffer at its own aligned, disjoint range of
                // the allocation; the buffers are unbound.
                unsafe { d.bind_buffer_memory(m.buffer, memory, stride * i as u64) }
                    .map_err(vkerr("vkBindBufferMemory"))?;
            }
            return Ok(());
        }
        for m in mems.iter_mut() {
            let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(m.buffer);
            let info = vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(index as u32)
                .push_next(&mut dedicated);
            // SAFETY: valid allocate info naming a live, unbound buffer of
            // this device; the instance is at Vulkan 1.1 or later (checked
            // in `weights`), where the struct is core.
            m.memory =
                unsafe { d.allocate_memory(&info, None) }.map_err(vkerr("vkAllocateMemory"))?;
            // SAFETY: the dedicated allocation of this very buffer, offset 0.
            unsafe { d.bind_buffer_memory(m.buffer, m.memory, 0) }
                .map_err(vkerr("vkBindBufferMemory"))?;
        }
        Ok(())
    }
}
