//! The logical device: memory, pipelines, descriptors, command buffers, submission.

use super::{drv, Adapter, Instance, FENCE_TIMEOUT_NS, PUSH_CONSTANT_BYTES};
use ash::vk;
use seam::ErrorKind;
use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::Arc;
/// Host mapping of a host-visible, host-coherent allocation.
pub struct Mapped {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by the allocation; the backend
// that owns both is used from one thread at a time.
unsafe impl Send for Mapped {}

impl Mapped {
    /// Copy `data` to byte `offset` of the mapping.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        self.check(offset, data.len())?;
        // SAFETY: the range is inside the mapping (checked above) and the
        // caller has waited for every submission that could touch it.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copy from byte `offset` of the mapping into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.check(offset, out.len())?;
        // SAFETY: as in `write`; the memory is coherent, and the device's
        // writes were made visible to the host by the host barrier ending
        // every command buffer and the fence wait.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), ErrorKind> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(ErrorKind::driver(
                "mapped memory access",
                format!(
                    "{len} bytes at {offset} exceed the {}-byte mapping",
                    self.len
                ),
            )),
        }
    }
}

/// A buffer with its own memory.
pub struct RawBuf {
    pub buffer: vk::Buffer,
    pub memory: vk::DeviceMemory,
    pub size: u64,
    pub mapped: Option<Mapped>,
}

/// A logical device, its queue and the instance it came from.
pub struct Gpu {
    device: ash::Device,
    queue: vk::Queue,
    pub adapter: Adapter,
    /// Keeps the process-wide instance ([`Instance::shared`]) alive for the device.
    _instance: Arc<Instance>,
    /// Never destroy the device: a timed-out submission may still use it.
    leak: bool,
}

impl Gpu {
    pub fn new(instance: Arc<Instance>, adapter: Adapter) -> Result<Gpu, ErrorKind> {
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(adapter.queue_family)
            .queue_priorities(&priorities)];
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        // SAFETY: `adapter.phys` comes from this instance; `info` and its
        // queue array live across the call.
        let device = unsafe { instance.instance.create_device(adapter.phys, &info, None) }
            .map_err(drv("vkCreateDevice"))?;
        // SAFETY: the device was created with one queue of this family.
        let queue = unsafe { device.get_device_queue(adapter.queue_family, 0) };
        Ok(Gpu {
            device,
            queue,
            adapter,
            _instance: instance,
            leak: false,
        })
    }

    // ----- memory -----

    /// A storage buffer (also a copy source and destination) bound to fresh
    /// memory of the first type in `prefer` (memory property sets, best
    /// first) that the buffer accepts; mapped when the type is host-visible.
    pub fn create_buffer(
        &self,
        size: u64,
        prefer: &[vk::MemoryPropertyFlags],
    ) -> Result<RawBuf, ErrorKind> {
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info; the device is live.
        let buffer =
            unsafe { self.device.create_buffer(&info, None) }.map_err(drv("vkCreateBuffer"))?;
        match self.bind_memory(buffer, prefer) {
            Ok((memory, mapped)) => Ok(RawBuf {
                buffer,
                memory,
                size,
                mapped,
            }),
            Err(e) => {
                // SAFETY: the buffer was never bound or used.
                unsafe { self.device.destroy_buffer(buffer, None) };
                Err(e)
            }
        }
    }

    fn bind_memory(
        &self,
        buffer: vk::Buffer,
        prefer: &[vk::MemoryPropertyFlags],
    ) -> Result<(vk::DeviceMemory, Option<Mapped>), ErrorKind> {
        // SAFETY: `buffer` is live.
        let req = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        let mem = &self.adapter.memory;
        let types = &mem.memory_types[..mem.memory_type_count as usize];
        let index = prefer
            .iter()
            .find_map(|want| {
                types.iter().enumerate().position(|(i, t)| {
                    req.memory_type_bits & (1 << i) != 0 && t.property_flags.contains(*want)
                })
            })
            .ok_or_else(|| {
                ErrorKind::driver(
                    "vkAllocateMemory",
                    format!("no memory type with {prefer:?} accepts this buffer"),
                )
            })?;
        let flags = types[index].property_flags;
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(index as u32);
        // SAFETY: valid allocate info for a type the buffer accepts.
        let memory =
            unsafe { self.device.allocate_memory(&info, None) }.map_err(drv("vkAllocateMemory"))?;
        let bound = (|| {
            // SAFETY: fresh memory of an accepted type and size, offset 0.
            unsafe { self.device.bind_buffer_memory(buffer, memory, 0) }
                .map_err(drv("vkBindBufferMemory"))?;
            if !flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
                return Ok(None);
            }
            // SAFETY: host-visible memory, not mapped yet, whole range.
            let ptr = unsafe {
                self.device
                    .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            }
            .map_err(drv("vkMapMemory"))?;
            let ptr = NonNull::new(ptr.cast::<u8>())
                .ok_or_else(|| ErrorKind::driver("vkMapMemory", "returned a null pointer"))?;
            Ok(Some(Mapped {
                ptr,
                len: req.size as usize,
            }))
        })();
        match bound {
            Ok(mapped) => Ok((memory, mapped)),
            Err(e) => {
                // SAFETY: the memory is unused (binding or mapping failed).
                unsafe { self.device.free_memory(memory, None) };
                Err(e)
            }
        }
    }

    /// Destroy a buffer and free its memory (which unmaps it).
    pub fn destroy_buffer(&self, buf: RawBuf) {
        // SAFETY: the caller retires buffers only after every submission that
        // used them completed (serial tracking in the backend).
        unsafe {
            self.device.destroy_buffer(buf.buffer, None);
            self.device.free_memory(buf.memory, None);
        }
    }

    // ----- layouts and pipelines -----

    /// A descriptor set layout of `n` storage buffers (bindings 0..n) and a
    /// pipeline layout adding the 32-byte push-constant block.
    pub fn create_layouts(
        &self,
        n: u32,
    ) -> Result<(vk::DescriptorSetLayout, vk::PipelineLayout), ErrorKind> {
        let bindings: Vec<_> = (0..n)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: valid create info living across the call.
        let set_layout = unsafe { self.device.create_descriptor_set_layout(&info, None) }
            .map_err(drv("vkCreateDescriptorSetLayout"))?;
        let set_layouts = [set_layout];
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .offset(0)
            .size(PUSH_CONSTANT_BYTES)];
        let info = vk::PipelineLayoutCreateInfo::default()
            .set_layouts(&set_layouts)
            .push_constant_ranges(&ranges);
        // SAFETY: as above; `set_layout` is live.
        match unsafe { self.device.create_pipeline_layout(&info, None) } {
            Ok(layout) => Ok((set_layout, layout)),
            Err(e) => {
                // SAFETY: the set layout is unused.
                unsafe { self.device.destroy_descriptor_set_layout(set_layout, None) };
                Err(ErrorKind::driver("vkCreatePipelineLayout", e))
            }
        }
    }

    pub fn destroy_layouts(&self, set_layout: vk::DescriptorSetLayout, layout: vk::PipelineLayout) {
        // SAFETY: called at teardown, after every pipeline using them is destroyed.
        unsafe {
            self.device.destroy_pipeline_layout(layout, None);
            self.device.destroy_descriptor_set_layout(set_layout, None);
        }
    }

    pub fn create_shader_module(&self, words: &[u32]) -> Result<vk::ShaderModule, ErrorKind> {
        let info = vk::ShaderModuleCreateInfo::default().code(words);
        // SAFETY: `words` is a SPIR-V module naga produced and validated.
        unsafe { self.device.create_shader_module(&info, None) }
            .map_err(drv("vkCreateShaderModule"))
    }

    pub fn destroy_shader_module(&self, module: vk::ShaderModule) {
        // SAFETY: modules are only needed while creating pipelines.
        unsafe { self.device.destroy_shader_module(module, None) };
    }

    pub fn create_compute_pipeline(
        &self,
        layout: vk::PipelineLayout,
        module: vk::ShaderModule,
        entry: &CStr,
    ) -> Result<vk::Pipeline, ErrorKind> {
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(entry);
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(layout)];
        // SAFETY: live module and layout; the create info lives across the call.
        let pipes = unsafe {
            self.device
                .create_compute_pipelines(vk::PipelineCache::null(), &info, None)
        }
        .map_err(|(_, e)| ErrorKind::driver("vkCreateComputePipelines", e))?;
        pipes
            .into_iter()
            .next()
            .ok_or_else(|| ErrorKind::driver("vkCreateComputePipelines", "returned no pipeline"))
    }

    pub fn destroy_pipeline(&self, pipeline: vk::Pipeline) {
        // SAFETY: called at teardown, after the device is idle.
        unsafe { self.device.destroy_pipeline(pipeline, None) };
    }

    // ----- descriptors -----

    pub fn create_descriptor_pool(&self, sets: u32) -> Result<vk::DescriptorPool, ErrorKind> {
        let sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(sets * 3)];
        let info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(sets)
            .pool_sizes(&sizes);
        // SAFETY: valid create info living across the call.
        unsafe { self.device.create_descriptor_pool(&info, None) }
            .map_err(drv("vkCreateDescriptorPool"))
    }

    pub fn reset_descriptor_pool(&self, pool: vk::DescriptorPool) -> Result<(), ErrorKind> {
        // SAFETY: the caller resets a pool only after the submission using its
        // sets completed.
        unsafe {
            self.device
                .reset_descriptor_pool(pool, vk::DescriptorPoolResetFlags::empty())
        }
        .map_err(drv("vkResetDescriptorPool"))
    }

    pub fn destroy_descriptor_pool(&self, pool: vk::DescriptorPool) {
        // SAFETY: as for reset.
        unsafe { self.device.destroy_descriptor_pool(pool, None) };
    }

    /// One set of `layout` from `pool`, pointing binding i at `buffers[i]`
    /// (whole buffer). `Ok(None)` when the pool is exhausted.
    pub fn descriptor_set(
        &self,
        pool: vk::DescriptorPool,
        layout: vk::DescriptorSetLayout,
        buffers: &[vk::Buffer],
    ) -> Result<Option<vk::DescriptorSet>, ErrorKind> {
        let layouts = [layout];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: live pool and layout; the pool is used from this thread only.
        let set = match unsafe { self.device.allocate_descriptor_sets(&info) } {
            Ok(sets) => sets[0],
            Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {
                return Ok(None)
            }
            Err(e) => return Err(ErrorKind::driver("vkAllocateDescriptorSets", e)),
        };
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
            .iter()
            .map(|b| {
                [vk::DescriptorBufferInfo::default()
                    .buffer(*b)
                    .offset(0)
                    .range(vk::WHOLE_SIZE)]
            })
            .collect();
        let writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        // SAFETY: the set is fresh (not bound in any command buffer yet) and
        // every buffer is live; `infos` outlives the call.
        unsafe { self.device.update_descriptor_sets(&writes, &[]) };
        Ok(Some(set))
    }

    // ----- command buffers -----

    pub fn create_command_pool(&self) -> Result<vk::CommandPool, ErrorKind> {
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(self.adapter.queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create info.
        unsafe { self.device.create_command_pool(&info, None) }.map_err(drv("vkCreateCommandPool"))
    }

    pub fn destroy_command_pool(&self, pool: vk::CommandPool) {
        // SAFETY: teardown, after every command buffer from it completed.
        unsafe { self.device.destroy_command_pool(pool, None) };
    }

    pub fn allocate_command_buffer(
        &self,
        pool: vk::CommandPool,
    ) -> Result<vk::CommandBuffer, ErrorKind> {
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: live pool, used from this thread only.
        let bufs = unsafe { self.device.allocate_command_buffers(&info) }
            .map_err(drv("vkAllocateCommandBuffers"))?;
        bufs.into_iter()
            .next()
            .ok_or_else(|| ErrorKind::driver("vkAllocateCommandBuffers", "returned none"))
    }

    pub fn free_command_buffer(&self, pool: vk::CommandPool, cmd: vk::CommandBuffer) {
        // SAFETY: the caller frees a command buffer only when it is not
        // pending (its last submission completed, or it was never submitted).
        unsafe { self.device.free_command_buffers(pool, &[cmd]) };
    }

    /// Begin recording; `reusable` records for replay (SIMULTANEOUS_USE, no
    /// ONE_TIME_SUBMIT), otherwise for one submission.
    pub fn begin(&self, cmd: vk::CommandBuffer, reusable: bool) -> Result<(), ErrorKind> {
        let flags = if reusable {
            vk::CommandBufferUsageFlags::SIMULTANEOUS_USE
        } else {
            vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT
        };
        let info = vk::CommandBufferBeginInfo::default().flags(flags);
        // SAFETY: the buffer is not pending (fresh or its submission
        // completed); its pool allows implicit reset.
        unsafe { self.device.begin_command_buffer(cmd, &info) }.map_err(drv("vkBeginCommandBuffer"))
    }

    /// End recording, after a barrier that makes every write visible to the host.
    pub fn end(&self, cmd: vk::CommandBuffer) -> Result<(), ErrorKind> {
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)];
        // SAFETY: `cmd` is recording.
        unsafe {
            self.device.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
        // SAFETY: `cmd` is recording.
        unsafe { self.device.end_command_buffer(cmd) }.map_err(drv("vkEndCommandBuffer"))
    }

    /// A global memory barrier: every earlier compute or transfer write (in
    /// this command buffer and in every earlier submission to the queue) is
    /// visible to every later compute or transfer access.
    pub fn barrier(&self, cmd: vk::CommandBuffer) {
        let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(
                vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE
                    | vk::AccessFlags::TRANSFER_READ
                    | vk::AccessFlags::TRANSFER_WRITE,
            )];
        // SAFETY: `cmd` is recording.
        unsafe {
            self.device.cmd_pipeline_barrier(
                cmd,
                stages,
                stages,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
    }

    /// Bind, push the parameter block and dispatch `groups` workgroups.
    pub fn dispatch(
        &self,
        cmd: vk::CommandBuffer,
        pipeline: vk::Pipeline,
        layout: vk::PipelineLayout,
        set: vk::DescriptorSet,
        params: &[u8; PUSH_CONSTANT_BYTES as usize],
        groups: (u32, u32),
    ) {
        // SAFETY: `cmd` is recording; pipeline, layout and set are live and
        // compatible (all made for the same binding count); the push range
        // matches the layout's.
        unsafe {
            self.device
                .cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
            self.device.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                layout,
                0,
                &[set],
                &[],
            );
            self.device
                .cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, params);
            self.device.cmd_dispatch(cmd, groups.0, groups.1, 1);
        }
    }

    pub fn copy(
        &self,
        cmd: vk::CommandBuffer,
        src: vk::Buffer,
        src_offset: u64,
        dst: vk::Buffer,
        dst_offset: u64,
        size: u64,
    ) {
        let region = [vk::BufferCopy {
            src_offset,
            dst_offset,
            size,
        }];
        // SAFETY: `cmd` is recording; both buffers are live and the caller
        // keeps the ranges inside them.
        unsafe { self.device.cmd_copy_buffer(cmd, src, dst, &region) };
    }

    // ----- timestamp queries -----

    /// A pool of `count` timestamp queries. Its queries start unavailable and
    /// must be reset on the queue ([`Gpu::reset_queries`]) before they are written.
    pub fn create_query_pool(&self, count: u32) -> Result<vk::QueryPool, ErrorKind> {
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(count);
        // SAFETY: valid create info living across the call; the device is live.
        unsafe { self.device.create_query_pool(&info, None) }.map_err(drv("vkCreateQueryPool"))
    }

    pub fn destroy_query_pool(&self, pool: vk::QueryPool) {
        // SAFETY: the caller destroys a pool only when no pending or recording
        // command buffer uses it (every submission has completed and no batch
        // is open).
        unsafe { self.device.destroy_query_pool(pool, None) };
    }

    /// Record a reset of queries `first..first + count` of `pool`.
    pub fn reset_queries(
        &self,
        cmd: vk::CommandBuffer,
        pool: vk::QueryPool,
        first: u32,
        count: u32,
    ) {
        // SAFETY: `cmd` is recording and not inside a render pass; `pool` is
        // live and the caller keeps the range inside it. Query commands on one
        // queue execute in submission order, so the reset lands after every
        // earlier write to these queries and before every later one.
        unsafe { self.device.cmd_reset_query_pool(cmd, pool, first, count) };
    }

    /// Record a timestamp write into query `query` of `pool`, taken once every
    /// command submitted earlier to the queue has finished `stage`.
    pub fn write_timestamp(
        &self,
        cmd: vk::CommandBuffer,
        stage: vk::PipelineStageFlags,
        pool: vk::QueryPool,
        query: u32,
    ) {
        // SAFETY: `cmd` is recording on a queue family whose
        // timestampValidBits > 0 (the backend checks before timing); `pool` is
        // a live timestamp pool, `query` is inside it and was reset earlier in
        // submission order and not written since.
        unsafe { self.device.cmd_write_timestamp(cmd, stage, pool, query) };
    }

    /// Read queries `first..first + out.len()` of `pool` as 64-bit ticks,
    /// waiting for each to become available.
    pub fn query_results(
        &self,
        pool: vk::QueryPool,
        first: u32,
        out: &mut [u64],
    ) -> Result<(), ErrorKind> {
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: `pool` is live and the range is inside it; `out` holds one
        // u64 per query (stride 8 with TYPE_64). WAIT cannot block forever:
        // the caller reads only queries whose write was recorded into a
        // submission that has already completed (its fence was waited on).
        unsafe {
            self.device.get_query_pool_results(
                pool,
                first,
                out,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(drv("vkGetQueryPoolResults"))
    }

    // ----- submission -----

    pub fn create_fence(&self) -> Result<vk::Fence, ErrorKind> {
        // SAFETY: valid create info.
        unsafe {
            self.device
                .create_fence(&vk::FenceCreateInfo::default(), None)
        }
        .map_err(drv("vkCreateFence"))
    }

    pub fn reset_fence(&self, fence: vk::Fence) -> Result<(), ErrorKind> {
        // SAFETY: the fence is signaled and not in any pending submission.
        unsafe { self.device.reset_fences(&[fence]) }.map_err(drv("vkResetFences"))
    }

    pub fn destroy_fence(&self, fence: vk::Fence) {
        // SAFETY: the fence is not in a pending submission.
        unsafe { self.device.destroy_fence(fence, None) };
    }

    pub fn fence_signaled(&self, fence: vk::Fence) -> Result<bool, ErrorKind> {
        // SAFETY: live fence.
        unsafe { self.device.get_fence_status(fence) }.map_err(drv("vkGetFenceStatus"))
    }

    /// Wait for every fence, at most [`FENCE_TIMEOUT_NS`].
    pub fn wait(&self, fences: &[vk::Fence]) -> Result<(), ErrorKind> {
        if fences.is_empty() {
            return Ok(());
        }
        // SAFETY: live fences.
        match unsafe { self.device.wait_for_fences(fences, true, FENCE_TIMEOUT_NS) } {
            Ok(()) => Ok(()),
            Err(vk::Result::TIMEOUT) => Err(ErrorKind::driver(
                "vkWaitForFences",
                format!(
                    "the device did not finish within {} s",
                    FENCE_TIMEOUT_NS / 1_000_000_000
                ),
            )),
            Err(e) => Err(ErrorKind::driver("vkWaitForFences", e)),
        }
    }

    /// Submit one executable command buffer; `fence` signals when it completes.
    pub fn submit(&self, cmd: vk::CommandBuffer, fence: vk::Fence) -> Result<(), ErrorKind> {
        let cmds = [cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: `cmd` is executable (ended); reusable ones were recorded with
        // SIMULTANEOUS_USE, so a still-pending one may be submitted again;
        // the fence is unsignaled and in no other submission; the queue is
        // used from this thread only.
        unsafe { self.device.queue_submit(self.queue, &submit, fence) }
            .map_err(drv("vkQueueSubmit"))
    }
}

impl Gpu {
    /// Never destroy the device or instance: called when a wait timed out at
    /// teardown and work may still be running.
    pub fn leak(&mut self) {
        self.leak = true;
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.leak {
            return;
        }
        // SAFETY: the backend destroys every object made from this device (or
        // deliberately leaks those a timed-out submission may still use)
        // before dropping the `Gpu`; the shared instance outlives it.
        unsafe { self.device.destroy_device(None) };
    }
}
