//! Command buffers: recording, with the descriptor sets and every object the
//! recorded commands use, so none of them can be destroyed while the command
//! buffer may still run.

use super::audit::Audit;
use super::device::{Pipeline, QueryPool, Shared};
use super::memory::Buffer;
use super::{drv, PUSH_CONSTANT_BYTES};
use ash::vk;
use seam::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Descriptor sets in a command buffer's first pool; each further pool
/// doubles, up to the max.
const POOL_FIRST: u32 = 16;
const POOL_MAX: u32 = 1024;

/// A query command, checked against the pool's state in submission order.
#[derive(Clone, Copy, Debug)]
pub(super) enum QueryOp {
    Reset { first: u32, count: u32 },
    Write(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Initial,
    Recording,
    Executable,
}

struct Inner {
    shared: Arc<Shared>,
    /// A pool of its own, so recording needs no lock shared with others.
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    descriptor_pools: Vec<vk::DescriptorPool>,
    /// Pool sets are being allocated from; earlier ones are full.
    current_pool: usize,
    state: State,
    /// Recorded for replay (SIMULTANEOUS_USE) rather than one submission.
    reusable: bool,
    /// Serial of its last submission (0: not submitted since `begin`).
    last_serial: AtomicU64,
    dispatches: usize,
    /// What the recorded commands use, held while the buffer may run.
    pipelines: Vec<Pipeline>,
    buffers: Vec<Buffer>,
    queries: Vec<(QueryPool, Vec<QueryOp>)>,
    /// seam's barrier audit of the recorded commands (`audit.rs`).
    audit: Audit,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.shared.leaked() {
            return;
        }
        let d = &self.shared.device;
        // SAFETY: the last reference is gone and every pending submission of
        // this command buffer holds one, so it is not pending; the sets from
        // these pools are used only by it. Destroying the command pool frees
        // the command buffer.
        unsafe {
            for &p in &self.descriptor_pools {
                d.destroy_descriptor_pool(p, None);
            }
            d.destroy_command_pool(self.pool, None);
        }
    }
}

/// A primary command buffer. Recording methods need `&mut self` and are
/// refused while a submission of it is pending.
pub struct CommandBuffer(Arc<Inner>);

impl CommandBuffer {
    pub(super) fn new(shared: Arc<Shared>) -> Result<CommandBuffer, ErrorKind> {
        let d = &shared.device;
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(shared.adapter.queue_family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: valid create info for the device's queue family.
        let pool =
            unsafe { d.create_command_pool(&info, None) }.map_err(drv("vkCreateCommandPool"))?;
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: live pool, owned here.
        let cmd = match unsafe { d.allocate_command_buffers(&info) } {
            Ok(v) if !v.is_empty() => v[0],
            r => {
                // SAFETY: nothing was allocated from the pool, or it is unused.
                unsafe { d.destroy_command_pool(pool, None) };
                return Err(match r {
                    Err(e) => ErrorKind::driver("vkAllocateCommandBuffers", e),
                    Ok(_) => ErrorKind::driver("vkAllocateCommandBuffers", "returned none"),
                });
            }
        };
        Ok(CommandBuffer(Arc::new(Inner {
            shared,
            pool,
            cmd,
            descriptor_pools: Vec::new(),
            current_pool: 0,
            state: State::Initial,
            reusable: false,
            last_serial: AtomicU64::new(0),
            dispatches: 0,
            pipelines: Vec::new(),
            buffers: Vec::new(),
            queries: Vec::new(),
            audit: Audit::default(),
        })))
    }

    /// The command buffer, mutably: refused while a submission holds it.
    fn inner(&mut self, call: &'static str) -> Result<&mut Inner, ErrorKind> {
        Arc::get_mut(&mut self.0)
            .ok_or_else(|| ErrorKind::driver(call, "the command buffer is pending on the queue"))
    }

    /// The command buffer, recording.
    fn recording(&mut self, call: &'static str) -> Result<&mut Inner, ErrorKind> {
        let inner = self.inner(call)?;
        if inner.state != State::Recording {
            return Err(ErrorKind::driver(
                call,
                "the command buffer is not recording",
            ));
        }
        Ok(inner)
    }

    /// Dispatches recorded since `begin`.
    pub fn dispatches(&self) -> usize {
        self.0.dispatches
    }

    /// Begin recording (after resetting it and its descriptor sets);
    /// `reusable` records for replay (SIMULTANEOUS_USE, no ONE_TIME_SUBMIT),
    /// otherwise for one submission.
    pub fn begin(&mut self, reusable: bool) -> Result<(), ErrorKind> {
        let inner = self.inner("vkBeginCommandBuffer")?;
        let d = &inner.shared.device;
        // SAFETY: the command buffer is not pending (no submission holds it)
        // and nothing else records from this pool.
        unsafe { d.reset_command_pool(inner.pool, vk::CommandPoolResetFlags::empty()) }
            .map_err(drv("vkResetCommandPool"))?;
        inner.state = State::Initial;
        for &p in
            &inner.descriptor_pools[..inner.descriptor_pools.len().min(inner.current_pool + 1)]
        {
            // SAFETY: the sets of these pools are used only by this command
            // buffer, which is not pending and was just reset.
            unsafe { d.reset_descriptor_pool(p, vk::DescriptorPoolResetFlags::empty()) }
                .map_err(drv("vkResetDescriptorPool"))?;
        }
        inner.current_pool = 0;
        inner.pipelines.clear();
        inner.buffers.clear();
        inner.queries.clear();
        inner.dispatches = 0;
        inner.audit = Audit::default();
        inner.last_serial = AtomicU64::new(0);
        let flags = if reusable {
            vk::CommandBufferUsageFlags::SIMULTANEOUS_USE
        } else {
            vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT
        };
        let info = vk::CommandBufferBeginInfo::default().flags(flags);
        // SAFETY: the command buffer is in the initial state (its pool was
        // just reset) and its pool is used only here.
        unsafe { d.begin_command_buffer(inner.cmd, &info) }.map_err(drv("vkBeginCommandBuffer"))?;
        inner.state = State::Recording;
        inner.reusable = reusable;
        Ok(())
    }

    /// End recording, after a barrier that makes every write visible to the host.
    pub fn end(&mut self) -> Result<(), ErrorKind> {
        let inner = self.recording("vkEndCommandBuffer")?;
        let d = &inner.shared.device;
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)];
        // SAFETY: the command buffer is recording, outside a render pass.
        unsafe {
            d.cmd_pipeline_barrier(
                inner.cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
        // SAFETY: the command buffer is recording.
        unsafe { d.end_command_buffer(inner.cmd) }.map_err(drv("vkEndCommandBuffer"))?;
        inner.state = State::Executable;
        // One entry per buffer: a submission stamps each with its serial.
        let mut unique: Vec<Buffer> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for b in inner.buffers.drain(..) {
            if seen.insert(b.handle()) {
                unique.push(b);
            }
        }
        inner.buffers = unique;
        Ok(())
    }

    /// A global memory barrier: every earlier compute or transfer write (in
    /// this command buffer and in every earlier submission to the queue) is
    /// visible to every later compute or transfer access.
    pub fn barrier(&mut self) -> Result<(), ErrorKind> {
        let inner = self.recording("vkCmdPipelineBarrier")?;
        let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(
                vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE
                    | vk::AccessFlags::TRANSFER_READ
                    | vk::AccessFlags::TRANSFER_WRITE,
            )];
        inner.audit.barrier();
        // SAFETY: the command buffer is recording, outside a render pass.
        unsafe {
            inner.shared.device.cmd_pipeline_barrier(
                inner.cmd,
                stages,
                stages,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
        Ok(())
    }

    /// Bind `pipeline`, point binding i at `bindings[i]` (whole buffer), push
    /// the parameter block and dispatch `groups` workgroups. The kernels
    /// bound every access by the buffer's length (`arrayLength`).
    pub fn dispatch(
        &mut self,
        pipeline: &Pipeline,
        bindings: &[(&Buffer, seam::ops::Access)],
        params: &[u8; PUSH_CONSTANT_BYTES as usize],
        groups: (u32, u32),
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdDispatch";
        let inner = self.recording(CALL)?;
        let layout = &pipeline.0.layout;
        if !Arc::ptr_eq(&layout.shared, &inner.shared)
            || bindings.iter().any(|(b, _)| !b.of(&inner.shared))
        {
            return Err(ErrorKind::driver(
                CALL,
                "a pipeline or buffer of another device",
            ));
        }
        if bindings.len() != layout.bindings {
            return Err(ErrorKind::driver(
                CALL,
                format!(
                    "{} buffers for a pipeline of {} bindings",
                    bindings.len(),
                    layout.bindings
                ),
            ));
        }
        let a = &inner.shared.adapter;
        if groups.0 > a.max_group_count[0] || groups.1 > a.max_group_count[1] {
            return Err(ErrorKind::driver(
                CALL,
                format!(
                    "{groups:?} workgroups exceed maxComputeWorkGroupCount {:?}",
                    a.max_group_count
                ),
            ));
        }
        if let Some((b, _)) = bindings
            .iter()
            .find(|(b, _)| b.size() > a.max_storage_buffer_range)
        {
            return Err(ErrorKind::driver(
                CALL,
                format!("a {}-byte buffer exceeds maxStorageBufferRange", b.size()),
            ));
        }
        let accesses: Vec<(u64, bool)> = bindings
            .iter()
            .map(|(b, a)| {
                (
                    vk::Handle::as_raw(b.handle()),
                    *a == seam::ops::Access::Write,
                )
            })
            .collect();
        inner
            .audit
            .command("dispatch", &accesses)
            .map_err(|h| ErrorKind::driver(CALL, h))?;
        let set = inner.descriptor_set(layout.set_layout, bindings)?;
        let d = &inner.shared.device;
        // SAFETY: the command buffer is recording; pipeline, layout and set
        // are live (held below) and compatible: the set was allocated with
        // the pipeline's own set layout, every binding written; the push
        // range matches the layout's; the group counts are within limits.
        unsafe {
            d.cmd_bind_pipeline(
                inner.cmd,
                vk::PipelineBindPoint::COMPUTE,
                pipeline.0.pipeline,
            );
            d.cmd_bind_descriptor_sets(
                inner.cmd,
                vk::PipelineBindPoint::COMPUTE,
                layout.layout,
                0,
                &[set],
                &[],
            );
            d.cmd_push_constants(
                inner.cmd,
                layout.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                params,
            );
            d.cmd_dispatch(inner.cmd, groups.0, groups.1, 1);
        }
        if !inner
            .pipelines
            .last()
            .is_some_and(|p| Arc::ptr_eq(&p.0, &pipeline.0))
        {
            inner.pipelines.push(pipeline.clone());
        }
        inner
            .buffers
            .extend(bindings.iter().map(|(b, _)| (*b).clone()));
        inner.dispatches += 1;
        Ok(())
    }

    /// Copy `size` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
    pub fn copy(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Buffer,
        dst_offset: u64,
        size: u64,
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdCopyBuffer";
        let inner = self.recording(CALL)?;
        if !src.of(&inner.shared) || !dst.of(&inner.shared) {
            return Err(ErrorKind::driver(CALL, "a buffer of another device"));
        }
        let fits = |off: u64, len: u64| off.checked_add(size).is_some_and(|end| end <= len);
        if size == 0 || !fits(src_offset, src.size()) || !fits(dst_offset, dst.size()) {
            return Err(ErrorKind::driver(
                CALL,
                format!(
                    "{size} bytes from {src_offset} of {} to {dst_offset} of {} bytes",
                    src.size(),
                    dst.size()
                ),
            ));
        }
        if src.same(dst) && src_offset < dst_offset + size && dst_offset < src_offset + size {
            return Err(ErrorKind::driver(CALL, "source and destination overlap"));
        }
        inner
            .audit
            .command(
                "copy",
                &[
                    (vk::Handle::as_raw(src.handle()), false),
                    (vk::Handle::as_raw(dst.handle()), true),
                ],
            )
            .map_err(|h| ErrorKind::driver(CALL, h))?;
        let region = [vk::BufferCopy {
            src_offset,
            dst_offset,
            size,
        }];
        // SAFETY: recording; both buffers are live (held below), made with
        // TRANSFER_SRC and TRANSFER_DST usage; the ranges are inside them and
        // do not overlap (checked).
        unsafe {
            inner
                .shared
                .device
                .cmd_copy_buffer(inner.cmd, src.handle(), dst.handle(), &region)
        };
        inner.buffers.push(src.clone());
        inner.buffers.push(dst.clone());
        Ok(())
    }

    /// Record a reset of queries `first..first + count` of `pool`.
    pub fn reset_queries(
        &mut self,
        pool: &QueryPool,
        first: u32,
        count: u32,
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdResetQueryPool";
        let inner = self.recording(CALL)?;
        if !Arc::ptr_eq(&pool.0.shared, &inner.shared) {
            return Err(ErrorKind::driver(CALL, "a query pool of another device"));
        }
        if first
            .checked_add(count)
            .is_none_or(|end| end > pool.0.count)
        {
            return Err(ErrorKind::driver(CALL, "query range outside the pool"));
        }
        // SAFETY: recording, outside a render pass; the pool is live (held
        // below) and the range inside it.
        unsafe {
            inner
                .shared
                .device
                .cmd_reset_query_pool(inner.cmd, pool.0.pool, first, count)
        };
        inner.query_op(pool, QueryOp::Reset { first, count });
        Ok(())
    }

    /// Record a timestamp write into query `query` of `pool`, taken once every
    /// command submitted earlier to the queue has finished `stage`. The query
    /// must be reset, earlier in queue order, since it was last written:
    /// [`super::Gpu::submit`] refuses a submission that would break this.
    pub fn write_timestamp(
        &mut self,
        stage: vk::PipelineStageFlags,
        pool: &QueryPool,
        query: u32,
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdWriteTimestamp";
        let inner = self.recording(CALL)?;
        if inner.shared.adapter.timestamp_valid_bits == 0 {
            return Err(ErrorKind::driver(
                CALL,
                "the queue family has no timestamps",
            ));
        }
        if !Arc::ptr_eq(&pool.0.shared, &inner.shared) {
            return Err(ErrorKind::driver(CALL, "a query pool of another device"));
        }
        if query >= pool.0.count {
            return Err(ErrorKind::driver(CALL, "query outside the pool"));
        }
        // SAFETY: recording on a queue family with timestampValidBits > 0
        // (checked); the pool is a live timestamp pool (held below), the
        // query inside it; that it was reset and not written since is
        // checked in queue order when the command buffer is submitted.
        unsafe {
            inner
                .shared
                .device
                .cmd_write_timestamp(inner.cmd, stage, pool.0.pool, query)
        };
        inner.query_op(pool, QueryOp::Write(query));
        Ok(())
    }

    // ----- for `Gpu::submit` -----

    pub(super) fn handle(&self) -> vk::CommandBuffer {
        self.0.cmd
    }

    pub(super) fn last_serial(&self) -> u64 {
        self.0.last_serial.load(Ordering::Acquire)
    }

    pub(super) fn query_ops(&self) -> &[(QueryPool, Vec<QueryOp>)] {
        &self.0.queries
    }

    /// Whether it may be submitted now.
    pub(super) fn check_submit(&self) -> Result<(), ErrorKind> {
        if self.0.state != State::Executable {
            return Err(ErrorKind::driver(
                "vkQueueSubmit",
                "the command buffer is not executable",
            ));
        }
        if !self.0.reusable && self.last_serial() != 0 {
            return Err(ErrorKind::driver(
                "vkQueueSubmit",
                "a ONE_TIME_SUBMIT command buffer is submitted again",
            ));
        }
        Ok(())
    }

    /// Whether it was made by the device `shared`.
    pub(super) fn of(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.0.shared, shared)
    }

    /// Every buffer its commands use, once each (after `end`).
    pub(super) fn buffers(&self) -> &[Buffer] {
        &self.0.buffers
    }

    /// It was submitted as `serial`: so were the buffers it uses.
    pub(super) fn submitted(&self, serial: u64) {
        self.0.last_serial.store(serial, Ordering::Release);
        for b in &self.0.buffers {
            b.set_last_use(serial);
        }
    }

    /// Another reference, for the submission that holds it.
    pub(super) fn clone_ref(&self) -> CommandBuffer {
        CommandBuffer(self.0.clone())
    }
}

impl Inner {
    fn query_op(&mut self, pool: &QueryPool, op: QueryOp) {
        match self
            .queries
            .iter_mut()
            .find(|(p, _)| Arc::ptr_eq(&p.0, &pool.0))
        {
            Some((_, ops)) => ops.push(op),
            None => self.queries.push((pool.clone(), vec![op])),
        }
    }

    /// One descriptor set of `layout` pointing binding i at `bindings[i]`,
    /// from this command buffer's pools (a new pool when they are full).
    fn descriptor_set(
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
                    .descriptor_count(sets * 3)];
                let info = vk::DescriptorPoolCreateInfo::default()
                    .max_sets(sets)
                    .pool_sizes(&sizes);
                // SAFETY: valid create info living across the call.
                let pool = unsafe { d.create_descriptor_pool(&info, None) }
                    .map_err(drv("vkCreateDescriptorPool"))?;
                self.descriptor_pools.push(pool);
            }
            let layouts = [layout];
            let info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(self.descriptor_pools[self.current_pool])
                .set_layouts(&layouts);
            // SAFETY: live pool (owned here, used through `&mut self` only)
            // and live layout.
            match unsafe { d.allocate_descriptor_sets(&info) } {
                Ok(sets) if !sets.is_empty() => break sets[0],
                Ok(_) => {
                    return Err(ErrorKind::driver(
                        "vkAllocateDescriptorSets",
                        "returned none",
                    ))
                }
                Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {
                    self.current_pool += 1
                }
                Err(e) => return Err(ErrorKind::driver("vkAllocateDescriptorSets", e)),
            }
        };
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = bindings
            .iter()
            .map(|(b, _)| {
                [vk::DescriptorBufferInfo::default()
                    .buffer(b.handle())
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
        // SAFETY: the set is fresh (bound in no command buffer yet), it has
        // one storage-buffer binding per write, and every buffer is live and
        // made with STORAGE_BUFFER usage; `infos` outlives the call.
        unsafe { d.update_descriptor_sets(&writes, &[]) };
        Ok(set)
    }
}
