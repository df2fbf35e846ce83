//! The raw-Vulkan anchor: the chain of N dependent `scale_add`
//! dispatches recorded with ash alone, the floor seam's Vulkan replay is
//! held to. It uses what the seam Vulkan backend uses, nothing less:
//!
//! - the same SPIR-V (`seam_kernels::spirv`), patched with `DenormPreserve
//!   32` where the device reports `shaderDenormPreserveFloat32`, by the
//!   backend's own `float_controls.rs` (included from its source, not copied);
//! - one set of storage buffers (the op's signature) and the 64-byte
//!   parameter block (`seam::Params` then the eight view offsets, all zero
//!   here: `seam::ops::IMMEDIATE_BYTES`) as push constants, the way a
//!   hand-written Vulkan program passes them (the backend reads the block
//!   from a uniform buffer of its own per dispatch, so that a graph update
//!   writes it without recording again: its `spirv.rs`);
//! - the same memory type preference (host-visible coherent on a CPU or
//!   integrated device, device-local elsewhere; `SEAM_VULKAN_STAGING=1`
//!   forces device-local as in the backend), in a plain allocation where
//!   the backend makes a dedicated one (the chain's buffer is 4 bytes to
//!   4 MiB; dedicated allocations were measured to matter for 8 GiB of
//!   GEMV weights, `probe.rs`);
//! - the same barriers: the global compute/transfer memory barrier before
//!   every dispatch, and the host-read barrier at the end;
//! - one command buffer recorded with SIMULTANEOUS_USE, submitted with a
//!   fence, waited for by polling the fence for the backend's spin budget
//!   (`SEAM_VULKAN_SPIN_US`, 50 µs by default) and then blocking.
//!   `SEAM_BENCH_RAW_WAIT=timeline` signals a timeline semaphore instead
//!   of the fence and polls its counter (`vkGetSemaphoreCounterValue`) for
//!   the same budget, then blocks in `vkWaitSemaphores`: the alternative
//!   wait measured against the fence; the arm's name says which.
//!
//! What it leaves out is what a hand-written program would: the pipeline,
//! the descriptor set (both bindings on the one buffer) and the push
//! constants are bound once, before the first dispatch, where the backend
//! binds them again for every dispatch (one descriptor set per launch).
//!
//! The one `unsafe` module of the bench (`#[allow(unsafe_code)]` in
//! `lib.rs`); every block says why it is sound. Every object is owned by
//! [`RawVulkan`] and destroyed by its `Drop`, after the queue is idle.

use ash::vk;
use seam::{ops, DType, Launch, OpKind, RawBuffer, RawView};
use std::ffi::CString;
use std::time::{Duration, Instant};

// The backend's float-controls patch, compiled here from the backend's own
// source, with the SPIR-V reading it uses. The raw arm keeps the parameter
// block in push constants (the backend's parameter patch, also in
// `spirv.rs`, is not used here).
#[path = "../../../backends/vulkan/src/float_controls.rs"]
#[allow(dead_code)]
mod float_controls;
mod memory;
/// `seam-bench probe gemv`: kernel variants on the raw device.
pub mod probe;
mod setup;
#[path = "../../../backends/vulkan/src/spirv.rs"]
#[allow(dead_code)]
mod spirv;
pub mod stamps;
pub use memory::Alloc;

/// How long any wait may take before it is an error (as in the backend).
const TIMEOUT_NS: u64 = 20_000_000_000;

fn vkerr(call: &'static str) -> impl Fn(vk::Result) -> String {
    move |e| format!("{call}: {e}")
}

/// The stages the backend's global barrier orders (compute and transfer).
const STAGES: vk::PipelineStageFlags = vk::PipelineStageFlags::from_raw(
    vk::PipelineStageFlags::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags::TRANSFER.as_raw(),
);

/// The backend's global barrier before every dispatch: earlier shader and
/// transfer writes before later reads and writes.
fn global_barrier() -> vk::MemoryBarrier<'static> {
    vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(
            vk::AccessFlags::SHADER_READ
                | vk::AccessFlags::SHADER_WRITE
                | vk::AccessFlags::TRANSFER_READ
                | vk::AccessFlags::TRANSFER_WRITE,
        )
}

/// A buffer and its memory.
#[derive(Clone, Copy)]
struct Mem {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
}

/// The raw device, its one pipeline (`scale_add`, f32) and the chain's
/// buffer and command buffer.
pub struct RawVulkan {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    /// The device's name, as `vkGetPhysicalDeviceProperties` gives it.
    pub name: String,
    /// Whether the module was patched with `DenormPreserve 32`.
    pub denorm_preserve: bool,
    /// Whether buffers live in host-visible memory (the backend's rule).
    pub host_visible: bool,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// The Vulkan version the instance was created for.
    api: u32,
    max_group_count: [u32; 3],
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    desc_pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    cmd_pool: vk::CommandPool,
    /// The chain, recorded once per case.
    chain: vk::CommandBuffer,
    /// Uploads and read-backs (one-time submits).
    xfer: vk::CommandBuffer,
    fence: vk::Fence,
    /// The timeline semaphore and the value of the last submit's signal,
    /// where `SEAM_BENCH_RAW_WAIT=timeline` and the device supports it.
    timeline: Option<(vk::Semaphore, u64)>,
    spin: Duration,
    x: Option<Mem>,
    staging: Option<(Mem, *mut u8)>,
    pending: bool,
}

/// A pipeline over `bindings` storage buffers and the 64-byte block.
struct Pipe {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
}

/// The SPIR-V and entry point of `scale_add` on f32.
fn kernel() -> Result<(&'static [u32], String), String> {
    let words = seam_kernels::spirv(OpKind::ScaleAdd).ok_or("no SPIR-V for scale_add")?;
    Ok((
        words,
        seam_kernels::entry_point(OpKind::ScaleAdd, DType::F32),
    ))
}

impl RawVulkan {
    /// A compute pipeline of `entry` in `words` over `bindings` storage
    /// buffers and the 64-byte push-constant block.
    fn pipe(&self, words: &[u32], entry: &str, bindings: u32) -> Result<Pipe, String> {
        let d = &self.device;
        let list: Vec<_> = (0..bindings)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&list);
        // SAFETY: valid create info living across the call.
        let set_layout = unsafe { d.create_descriptor_set_layout(&info, None) }
            .map_err(vkerr("vkCreateDescriptorSetLayout"))?;
        let mut pipe = Pipe {
            set_layout,
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
        };
        let set_layouts = [set_layout];
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .offset(0)
            .size(ops::IMMEDIATE_BYTES as u32)];
        let info = vk::PipelineLayoutCreateInfo::default()
            .set_layouts(&set_layouts)
            .push_constant_ranges(&ranges);
        // SAFETY: as above; the set layout is live.
        pipe.layout = match unsafe { d.create_pipeline_layout(&info, None) } {
            Ok(l) => l,
            Err(e) => {
                self.drop_pipe(&pipe);
                return Err(format!("vkCreatePipelineLayout: {e}"));
            }
        };
        let patched;
        let words = if self.denorm_preserve {
            patched = float_controls::denorm_preserve_f32(words)?;
            &patched[..]
        } else {
            words
        };
        let info = vk::ShaderModuleCreateInfo::default().code(words);
        // SAFETY: naga's validated module (patched only as the backend does).
        let module = match unsafe { d.create_shader_module(&info, None) } {
            Ok(m) => m,
            Err(e) => {
                self.drop_pipe(&pipe);
                return Err(format!("vkCreateShaderModule: {e}"));
            }
        };
        let entry = CString::new(entry).map_err(|e| e.to_string())?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(&entry);
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(pipe.layout)];
        // SAFETY: live module and layout; the create info lives across the call.
        let made = unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &info, None) };
        // SAFETY: the module is only needed while pipelines are created from it.
        unsafe { d.destroy_shader_module(module, None) };
        match made {
            Ok(p) => pipe.pipeline = p[0],
            Err((_, e)) => {
                self.drop_pipe(&pipe);
                return Err(format!("vkCreateComputePipelines: {e}"));
            }
        }
        Ok(pipe)
    }

    fn drop_pipe(&self, p: &Pipe) {
        // SAFETY: called with the queue idle (every submit is waited for);
        // null handles are ignored.
        unsafe {
            self.device.destroy_pipeline(p.pipeline, None);
            self.device.destroy_pipeline_layout(p.layout, None);
            self.device
                .destroy_descriptor_set_layout(p.set_layout, None);
        }
    }

    /// Record the chain of `n` dependent in-place `scale_add` dispatches over
    /// a buffer holding `x0`, as seam's replay of the same calls records it.
    pub fn chain(&mut self, x0: &[f32], n: u32, a: f32, b: f32) -> Result<(), String> {
        self.chain_stamped(x0, n, a, b, None)
    }

    /// [`Self::chain`], with a timestamp into `stamps.0` at stage
    /// `stamps.1` before the first dispatch and after each (the pool reset
    /// at the command buffer's start), as a node-timed graph records them
    /// (`stamps.rs`, the node-timing probe).
    pub fn chain_stamped(
        &mut self,
        x0: &[f32],
        n: u32,
        a: f32,
        b: f32,
        stamps: Option<(vk::QueryPool, vk::PipelineStageFlags)>,
    ) -> Result<(), String> {
        self.wait()?;
        let elems = x0.len() as u32;
        let size = (x0.len() as u64 * 4).max(4);
        if self.x.is_none_or(|m| m.size != size) {
            if let Some(old) = self.x.take() {
                self.destroy(old);
            }
            self.x = Some(self.buffer(size, self.prefer())?);
        }
        let x = self.x.ok_or("no buffer")?;
        let infos = [vk::DescriptorBufferInfo::default()
            .buffer(x.buffer)
            .offset(0)
            .range(vk::WHOLE_SIZE)];
        let writes: Vec<_> = (0..OpKind::ScaleAdd.signature().len() as u32)
            .map(|i| {
                vk::WriteDescriptorSet::default()
                    .dst_set(self.set)
                    .dst_binding(i)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&infos)
            })
            .collect();
        // SAFETY: live set and buffer; no submission is pending (waited
        // above), so the set is in use by none.
        unsafe { self.device.update_descriptor_sets(&writes, &[]) };
        self.write(x0)?;
        // The backend's launch geometry for the same call.
        let call = ops::scale_add(
            seam::BufferId::unknown(),
            seam::BufferId::unknown(),
            elems,
            a,
            b,
        );
        // SAFETY: never given to a backend: read for its geometry only.
        let launch = unsafe {
            Launch::new_unchecked(
                call.op,
                DType::F32,
                [RawView::whole(RawBuffer(0), elems as u64); 2].into(),
                call.params,
            )
        };
        let groups = seam_kernels::geometry::grid(
            seam_kernels::geometry::workgroups(&launch),
            [self.max_group_count[0], self.max_group_count[1]],
        )
        .map_err(|e| e.to_string())?;
        // The kernels' immediate block: Params, then the eight view offsets
        // (every binding here is a whole buffer: all zero), as seam pushes it.
        let mut params = [0u8; seam::ops::IMMEDIATE_BYTES];
        params[..seam::Params::BYTES].copy_from_slice(&call.params.to_bytes());
        let d = &self.device;
        let cmd = self.chain;
        let begin = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
        // SAFETY: `cmd` is not pending (waited above); its pool allows
        // resetting single buffers and is used only on this thread.
        unsafe {
            d.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                .map_err(vkerr("vkResetCommandBuffer"))?;
            d.begin_command_buffer(cmd, &begin)
                .map_err(vkerr("vkBeginCommandBuffer"))?;
        }
        // SAFETY: `cmd` is recording; pipeline, layout and set are live and
        // compatible (the set has the layout's own set layout, every
        // binding written above); the push range matches the layout's.
        unsafe {
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            d.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.layout,
                0,
                &[self.set],
                &[],
            );
            d.cmd_push_constants(cmd, self.layout, vk::ShaderStageFlags::COMPUTE, 0, &params);
        }
        let stamp = |k: u32| {
            if let Some((pool, stage)) = stamps {
                // SAFETY: `cmd` is recording, outside a render pass; the
                // pool holds n + 1 queries (`stamps.rs`), reset below
                // before the first write.
                unsafe { d.cmd_write_timestamp(cmd, stage, pool, k) };
            }
        };
        if let Some((pool, _)) = stamps {
            // SAFETY: as above; queries 0..=n are the pool's.
            unsafe { d.cmd_reset_query_pool(cmd, pool, 0, n + 1) };
        }
        stamp(0);
        let (stages, barrier) = (STAGES, [global_barrier()]);
        for k in 0..n {
            // SAFETY: `cmd` is recording, outside a render pass; the group
            // counts are within the device's limits (`grid` checked them).
            unsafe {
                d.cmd_pipeline_barrier(
                    cmd,
                    stages,
                    stages,
                    vk::DependencyFlags::empty(),
                    &barrier,
                    &[],
                    &[],
                );
                d.cmd_dispatch(cmd, groups.0, groups.1, 1);
            }
            stamp(k + 1);
        }
        let host = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)];
        // SAFETY: `cmd` is recording, outside a render pass.
        unsafe {
            d.cmd_pipeline_barrier(
                cmd,
                stages,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &host,
                &[],
                &[],
            );
            d.end_command_buffer(cmd)
                .map_err(vkerr("vkEndCommandBuffer"))?;
        }
        Ok(())
    }

    /// Submit `cmd` with the fence (nothing is pending: every submit is
    /// waited for before the next).
    fn submit_cmd(&mut self, cmd: vk::CommandBuffer) -> Result<(), String> {
        if self.pending {
            return Err("a submission is still pending".into());
        }
        let cmds = [cmd];
        if let Some((sem, value)) = self.timeline.as_mut() {
            *value += 1;
            let (sems, values) = ([*sem], [*value]);
            let mut ts =
                vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
            let submit = [vk::SubmitInfo::default()
                .command_buffers(&cmds)
                .signal_semaphores(&sems)
                .push_next(&mut ts)];
            // SAFETY: as below, with the timeline semaphore signalled to a
            // value above every earlier signal instead of the fence.
            unsafe {
                self.device
                    .queue_submit(self.queue, &submit, vk::Fence::null())
                    .map_err(vkerr("vkQueueSubmit"))?;
            }
            self.pending = true;
            return Ok(());
        }
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: `cmd` is executable (recorded by `chain` or `copy`) and
        // not pending (`pending` is false); every object it uses is owned
        // by `self` and lives until `Drop` has waited for the queue; the
        // fence is unsignalled (reset after every wait) and in no pending
        // submission.
        unsafe {
            self.device
                .queue_submit(self.queue, &submit, self.fence)
                .map_err(vkerr("vkQueueSubmit"))?;
        }
        self.pending = true;
        Ok(())
    }

    /// What `wait` polls: "a fence" or "a timeline semaphore".
    pub fn wait_kind(&self) -> &'static str {
        if self.timeline.is_some() {
            "a timeline semaphore"
        } else {
            "a fence"
        }
    }

    /// Queue one run of the recorded chain.
    pub fn submit(&mut self) -> Result<(), String> {
        self.submit_cmd(self.chain)
    }

    /// Wait for the pending submission, if any: poll the fence for the spin
    /// budget, then block (the backend's policy); reset the fence.
    pub fn wait(&mut self) -> Result<(), String> {
        if !self.pending {
            return Ok(());
        }
        let d = &self.device;
        let start = Instant::now();
        if let Some((sem, value)) = self.timeline {
            // SAFETY: a live timeline semaphore owned by `self`.
            while unsafe { d.get_semaphore_counter_value(sem) }
                .map_err(vkerr("vkGetSemaphoreCounterValue"))?
                < value
            {
                if start.elapsed() >= self.spin {
                    let (sems, values) = ([sem], [value]);
                    let info = vk::SemaphoreWaitInfo::default()
                        .semaphores(&sems)
                        .values(&values);
                    // SAFETY: as above; the info lives across the call.
                    unsafe { d.wait_semaphores(&info, TIMEOUT_NS) }
                        .map_err(vkerr("vkWaitSemaphores"))?;
                    break;
                }
            }
            self.pending = false;
            return Ok(());
        }
        loop {
            // SAFETY: a live fence owned by `self`.
            if unsafe { d.get_fence_status(self.fence) }.map_err(vkerr("vkGetFenceStatus"))? {
                break;
            }
            if start.elapsed() >= self.spin {
                // SAFETY: as above.
                unsafe { d.wait_for_fences(&[self.fence], true, TIMEOUT_NS) }
                    .map_err(vkerr("vkWaitForFences"))?;
                break;
            }
        }
        // SAFETY: the fence has signalled: its submission completed.
        unsafe { d.reset_fences(&[self.fence]) }.map_err(vkerr("vkResetFences"))?;
        self.pending = false;
        Ok(())
    }
}
