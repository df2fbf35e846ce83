//! Command buffers: recording, with the descriptor sets and every object the
//! recorded commands use, so none of them can be destroyed while the command
//! buffer may still run. A reusable (graph) command buffer also keeps, per
//! dispatch, the descriptor set it bound, so a rebind (C13) rewrites that
//! set in place and audits the barriers again (`CommandBuffer::update`).

mod copy;
mod held;
mod indirect;
#[cfg(test)]
mod layer_tests;
mod params;
mod queries;
mod record;
mod sets;
mod update;

pub use update::DispatchUpdate;

use super::audit::{Audit, Command};
use super::device::{Pipeline, QueryPool, Shared};
use super::memory::Buffer;
use super::{drv, PARAM_BYTES};
use ash::vk;
use held::Held;
use indirect::Counts;
use seam::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A query command, checked against the pool's state in submission order.
#[derive(Clone, Copy, Debug)]
pub(super) enum QueryOp {
    Reset { first: u32, count: u32 },
    Write(u32),
}

/// A query command as recorded: its op, and a write's pipeline stage.
#[derive(Clone, Copy, Debug)]
struct QueryCmd {
    op: QueryOp,
    stage: vk::PipelineStageFlags,
}

/// A command of a reusable command buffer, in record order.
enum Recorded {
    Barrier,
    Dispatch(Dispatch),
    /// A query reset or timestamp write (node timing): no memory access,
    /// recorded again as it was.
    Query(QueryPool, QueryCmd),
    /// A command the rebind does not know how to patch (a copy).
    Other,
}

/// One recorded dispatch: the descriptor set it owns (allocated for it
/// alone, bound by it alone) and what it was recorded with. Made only by
/// `CommandBuffer::dispatch` and changed only by `CommandBuffer::update`,
/// each after its checks, so it always holds: `set` is from this command
/// buffer's pools, of `pipeline`'s set layout, every binding written with
/// the buffer in `bindings` (live: held here, of this device, within
/// maxStorageBufferRange); `groups` is within maxComputeWorkGroupCount.
struct Dispatch {
    set: vk::DescriptorSet,
    pipeline: Pipeline,
    /// Binding i's buffer and whether the kernel writes it (reusable
    /// command buffers only: a one-time batch keeps no log and leaves this
    /// empty; its buffers are held in `Inner::buffers`).
    bindings: Vec<(Buffer, bool)>,
    params: [u8; PARAM_BYTES as usize],
    groups: (u32, u32, u32),
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
    /// Sets allocated from `current_pool` since `begin`: at the pool's
    /// capacity (`sets::pool_capacity`) the next pool is taken, whether or
    /// not the driver would hand out more (lavapipe's pools never run out).
    pool_used: u32,
    state: State,
    /// Recorded for replay (SIMULTANEOUS_USE) rather than one submission.
    reusable: bool,
    /// Serial of its last submission (0: not submitted since `begin`).
    last_serial: AtomicU64,
    dispatches: usize,
    /// Barriers recorded since `begin`.
    barriers: usize,
    /// (buffer, writes) of every access since the last barrier: what
    /// `barrier_for` decides by (the audit checks the decision on its own).
    unbarriered: Vec<(u64, bool)>,
    /// What the recorded commands use, held while the buffer may run.
    pipelines: Vec<Pipeline>,
    buffers: Held,
    queries: Vec<(QueryPool, Vec<QueryOp>)>,
    /// The dispatches' parameter blocks (`params.rs`), kept across `begin`
    /// as the descriptor pools are.
    params: Vec<Buffer>,
    /// seam's barrier audit of the commands being recorded (`audit.rs`):
    /// told of every dispatch and copy before it is recorded and of every
    /// barrier where it is; reset at `begin` and at `end` (an update checks
    /// the stretches it changes, a re-recording audits the log anew).
    audit: Audit,
    /// Reusable only: every barrier and dispatch in record order (the
    /// dispatches' own descriptor sets), for `rebind`.
    log: Vec<Recorded>,
    /// Reusable only: the log position of each dispatch, in dispatch order.
    dispatch_at: Vec<usize>,
    /// Reusable only: the log holds a command other than a barrier or a
    /// dispatch (`Recorded::Other`).
    logged_other: bool,
    /// A number no other command buffer state has (`next_generation`),
    /// new at every mutable access (`CommandBuffer::inner`): an update's
    /// check holds for the command buffer while it is unchanged.
    generation: u64,
}

/// A number never returned before.
fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
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
            pool_used: 0,
            state: State::Initial,
            reusable: false,
            last_serial: AtomicU64::new(0),
            dispatches: 0,
            barriers: 0,
            unbarriered: Vec::new(),
            pipelines: Vec::new(),
            buffers: Held::default(),
            queries: Vec::new(),
            params: Vec::new(),
            audit: Audit::default(),
            log: Vec::new(),
            dispatch_at: Vec::new(),
            logged_other: false,
            generation: next_generation(),
        })))
    }

    /// The command buffer, mutably: refused while a submission holds it.
    fn inner(&mut self, call: &'static str) -> Result<&mut Inner, ErrorKind> {
        let inner = Arc::get_mut(&mut self.0)
            .ok_or_else(|| ErrorKind::driver(call, "the command buffer is pending on the queue"))?;
        inner.generation = next_generation();
        Ok(inner)
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

    /// Barriers recorded since `begin`.
    #[cfg(test)]
    pub fn barriers(&self) -> usize {
        self.0.barriers
    }

    /// Descriptor pools made so far (kept across `begin`, which resets them).
    #[cfg(test)]
    pub fn descriptor_pools(&self) -> usize {
        self.0.descriptor_pools.len()
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
        // Every pool, used or not: resetting an empty one costs nothing
        // worth tracking which were used.
        for &p in &inner.descriptor_pools {
            // SAFETY: the sets of these pools are used only by this command
            // buffer, which is not pending and was just reset.
            unsafe { d.reset_descriptor_pool(p, vk::DescriptorPoolResetFlags::empty()) }
                .map_err(drv("vkResetDescriptorPool"))?;
        }
        inner.current_pool = 0;
        inner.pool_used = 0;
        inner.pipelines.clear();
        inner.buffers.clear();
        inner.queries.clear();
        inner.dispatches = 0;
        inner.barriers = 0;
        inner.unbarriered.clear();
        inner.audit.reset();
        inner.log.clear();
        inner.dispatch_at.clear();
        inner.logged_other = false;
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
        inner.cmd_end()?;
        // One entry per buffer: a submission stamps each with its serial.
        // Sorted and deduplicated in place (the order is the handles', the
        // one a submission takes their host locks in); a graph's counted,
        // for its updates.
        let reusable = inner.reusable;
        inner.buffers.seal(reusable);
        inner.audit.reset();
        Ok(())
    }

    /// A global memory barrier: every earlier compute or transfer write (in
    /// this command buffer and in every earlier submission to the queue) is
    /// visible to every later compute or transfer access.
    pub fn barrier(&mut self) -> Result<(), ErrorKind> {
        let inner = self.recording("vkCmdPipelineBarrier")?;
        inner.barriers += 1;
        inner.unbarriered.clear();
        if inner.reusable {
            inner.log.push(Recorded::Barrier);
        }
        inner.cmd_barrier();
        Ok(())
    }

    /// The global barrier, where a dispatch of `bindings` needs one: before
    /// the command buffer's first command, and before a command that
    /// touches a buffer an access since the last barrier touched, either
    /// of them writing. Independent dispatches (no such buffer) run with no
    /// barrier between them. Returns whether it recorded one.
    pub fn barrier_for(
        &mut self,
        bindings: &[(&Buffer, seam::ops::Access)],
    ) -> Result<bool, ErrorKind> {
        let inner = self.recording("vkCmdPipelineBarrier")?;
        let conflicts = bindings.iter().any(|(b, a)| {
            let (raw, writes) = (
                vk::Handle::as_raw(b.handle()),
                *a == seam::ops::Access::Write,
            );
            inner
                .unbarriered
                .iter()
                .any(|&(u, w)| u == raw && (w || writes))
        });
        let needed = inner.barriers == 0 || conflicts;
        if needed {
            self.barrier()?;
        }
        Ok(needed)
    }

    /// Bind `pipeline`, point binding i at `bindings[i]` (whole buffer) and
    /// the binding after them at the dispatch's parameter block, holding
    /// `params` (`Params` and the views' element offsets, which the kernels
    /// add to their indices), and dispatch `groups` workgroups.
    /// The kernels bound every access by the buffer's length (`arrayLength`).
    pub fn dispatch(
        &mut self,
        pipeline: &Pipeline,
        bindings: &[(&Buffer, seam::ops::Access)],
        params: &[u8; PARAM_BYTES as usize],
        groups: (u32, u32, u32),
    ) -> Result<(), ErrorKind> {
        self.record_dispatch(pipeline, bindings, params, Counts::Direct(groups))
    }

    /// [`Self::dispatch`] with its workgroup counts given directly or read
    /// by the device from a buffer (`indirect.rs`).
    fn record_dispatch(
        &mut self,
        pipeline: &Pipeline,
        bindings: &[(&Buffer, seam::ops::Access)],
        params: &[u8; PARAM_BYTES as usize],
        counts: Counts<'_>,
    ) -> Result<(), ErrorKind> {
        let call = counts.call();
        let inner = self.recording(call)?;
        let (groups, args) = match counts {
            Counts::Direct(groups) => (groups, None),
            Counts::Indirect(buffer, offset) => {
                inner.check_indirect(buffer, offset)?;
                ((0, 0, 0), Some((buffer, offset)))
            }
        };
        let layout = &pipeline.0.layout;
        if !Arc::ptr_eq(&layout.shared, &inner.shared)
            || bindings.iter().any(|(b, _)| !b.of(&inner.shared))
        {
            return Err(ErrorKind::driver(
                call,
                "a pipeline or buffer of another device",
            ));
        }
        if bindings.len() != layout.bindings {
            return Err(ErrorKind::driver(
                call,
                format!(
                    "{} buffers for a pipeline of {} bindings",
                    bindings.len(),
                    layout.bindings
                ),
            ));
        }
        let a = &inner.shared.adapter;
        if groups.0 > a.max_group_count[0]
            || groups.1 > a.max_group_count[1]
            || groups.2 > a.max_group_count[2]
        {
            return Err(ErrorKind::driver(
                call,
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
                call,
                format!("a {}-byte buffer exceeds maxStorageBufferRange", b.size()),
            ));
        }
        let access = |i: usize| {
            let (b, a) = bindings[i];
            (
                vk::Handle::as_raw(b.handle()),
                a == seam::ops::Access::Write,
            )
        };
        for (b, _) in bindings {
            if b.indirect() {
                inner.audit.indirect_args(vk::Handle::as_raw(b.handle()));
            }
        }
        if let Some((b, _)) = args {
            let raw = vk::Handle::as_raw(b.handle());
            inner.audit.indirect_args(raw);
            inner
                .audit
                .command(Command::Indirect, &[(raw, false)])
                .map_err(|h| ErrorKind::driver(call, h))?;
        }
        crate::stack::with_slice(bindings.len(), access, |accesses| {
            inner.audit.command(Command::Dispatch, accesses)
        })
        .map_err(|h| ErrorKind::driver(call, h))?;
        let block = inner.write_params(inner.dispatches, params)?;
        let set = inner.descriptor_set(layout.set_layout, bindings, block)?;
        let recorded = Dispatch {
            set,
            pipeline: pipeline.clone(),
            // Kept only where the log keeps the dispatch (a one-time batch
            // holds its buffers in `buffers` alone).
            bindings: if inner.reusable {
                bindings
                    .iter()
                    .map(|(b, a)| ((*b).clone(), *a == seam::ops::Access::Write))
                    .collect()
            } else {
                Vec::new()
            },
            params: *params,
            groups,
        };
        inner.cmd_dispatch(&recorded, args.map(|(b, at)| (b.handle(), at)));
        if !inner
            .pipelines
            .last()
            .is_some_and(|p| Arc::ptr_eq(&p.0, &pipeline.0))
        {
            inner.pipelines.push(pipeline.clone());
        }
        for (b, a) in bindings {
            inner.buffers.push(b);
            inner.unbarriered.push((
                vk::Handle::as_raw(b.handle()),
                *a == seam::ops::Access::Write,
            ));
        }
        if let Some((b, _)) = args {
            inner.buffers.push(b);
            inner
                .unbarriered
                .push((vk::Handle::as_raw(b.handle()), false));
        }
        inner.dispatches += 1;
        if inner.reusable {
            inner.dispatch_at.push(inner.log.len());
            // An indirect dispatch is not patched by an update: its graph
            // is recorded anew (`Recorded::Other`).
            match args {
                None => inner.log.push(Recorded::Dispatch(recorded)),
                Some(_) => {
                    inner.log.push(Recorded::Other);
                    inner.logged_other = true;
                }
            }
        }
        Ok(())
    }

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
        self.0.buffers.all()
    }

    /// It was submitted as `serial`: so were the buffers it uses.
    pub(super) fn submitted(&self, serial: u64) {
        self.0.last_serial.store(serial, Ordering::Release);
        for b in self.0.buffers.all() {
            b.set_last_use(serial);
        }
    }

    /// Another reference, for the submission that holds it.
    pub(super) fn clone_ref(&self) -> CommandBuffer {
        CommandBuffer(self.0.clone())
    }
}
