//! C13 on Vulkan: `update_launches`, the launches' new buffers, parameters
//! and workgroup counts lowered to `DispatchUpdate`s of the graph's command
//! buffer (`sys::CommandBuffer::update`), or a switch to a command buffer
//! kept for them.
//!
//! Kept variants (`seam::kept`): a graph that an update moves back to
//! launches it ran before gets a command buffer of its own for them,
//! recorded from the current one's log with its own descriptor sets and
//! parameter blocks (`CommandBuffer::variant`), and keeps the current one
//! as a spare; switching between kept launch sets then writes no
//! descriptor and waits for nothing. A rebind of every dispatch of a chain
//! of 1000 took 416 µs on an H100's NVIDIA driver, against 184 µs for the
//! CUDA backend's in the same run (53e519c, docs/bench.md); with kept
//! command buffers the switch took 168–180 µs, 1.04× the replay with it
//! (162b582, docs/bench.md). A command buffer whose
//! sets were rewritten runs as recorded, so one patched in place is kept
//! like any other. A node-timed graph (its timestamps are in query pools
//! of the graph's) is only ever patched in place. `SEAM_VULKAN_KEEP_VARIANTS=0`
//! turns kept variants off.

use super::VulkanBackend;
use crate::dispatch;
use crate::sys::{Buffer, DispatchUpdate, Pipeline};
use seam::kept::{after, Plan};
use seam::{ErrorKind, Launch, RawBuffer, ReplayTarget};

/// Updates a Vulkan backend applied, by how.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpdateCounts {
    /// Descriptor sets and parameter blocks rewritten in place.
    pub in_place: u64,
    /// In place, with the command buffer recorded again from its log.
    pub rerecorded: u64,
    /// A kept command buffer swapped in: nothing written.
    pub swapped: u64,
    /// A new command buffer made for a launch set the graph ran before.
    pub fresh: u64,
}

impl VulkanBackend {
    /// C13 (`update_launches`): a switch to a kept command buffer, or a
    /// fresh one for launches the graph ran before (see the module's
    /// docs), or in place: each changed launch's dispatch
    /// gets its new buffers in its own descriptor set and its new
    /// parameters in its own parameter block, once the replays queued
    /// before the update have completed (they run as recorded). The
    /// command buffer is recorded again from its own log only where the
    /// sets cannot be updated under it (no UPDATE_AFTER_BIND,
    /// [`Self::rebind_in_place`]) or workgroup counts change (see
    /// `CommandBuffer::update`).
    /// Anything `CommandBuffer::check_update` refuses is refused before any
    /// wait, and core then re-records the graph.
    pub(super) fn update(
        &mut self,
        target: ReplayTarget,
        now: &mut Vec<Launch>,
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        let graph = self.graphs.target_mut(target)?;
        let keeps = self.keep_variants && graph.nodes.is_none();
        let plan = match keeps {
            true => graph.runs.plan(now, changes),
            false => Plan::InPlace,
        };
        match plan {
            Plan::Nothing => return Ok(()),
            Plan::Swap(i) => {
                // The spare runs what the update asks for, and holds every
                // buffer it binds; replays queued before run the command
                // buffer they were submitted with.
                graph.runs.swap(&mut graph.cmd, i, now);
                self.updates.swapped += 1;
                return Ok(());
            }
            Plan::Fresh | Plan::InPlace => {}
        }
        let max_groups = self.gpu.adapter().max_group_count;
        // One pipeline per run of launches of one op and type (a rebind's
        // are usually all one), each change's by its index here.
        let mut pipelines: Vec<Pipeline> = Vec::new();
        let mut pipeline_of = Vec::with_capacity(changes.len());
        let mut last = None;
        for (_, launch) in changes {
            let key = (launch.op, launch.dtype);
            if last != Some(key) {
                pipelines.push(self.pipeline(launch.op, launch.dtype)?);
                last = Some(key);
            }
            pipeline_of.push(pipelines.len() - 1);
        }
        // Every change's bindings in one list, borrowed from `buffers`
        // (disjoint from `graphs` and `current`, borrowed mutably below).
        let VulkanBackend {
            gpu,
            buffers,
            graphs,
            ..
        } = self;
        let mut bindings = Vec::with_capacity(changes.len() * 3);
        // Looked up once per run of one buffer (a rebind's are all one).
        let mut last: Option<(RawBuffer, &Buffer)> = None;
        for (_, launch) in changes {
            let sig = launch.op.signature();
            for (v, binding) in launch.buffers.iter().zip(sig) {
                let id = v.buffer;
                let buf = match last {
                    Some((at, buf)) if at == id => buf,
                    _ => {
                        let buf = buffers.get(id)?;
                        last = Some((id, buf));
                        buf
                    }
                };
                bindings.push((buf, binding.access));
            }
        }
        let mut updates = Vec::with_capacity(changes.len());
        let mut from = 0;
        for ((index, launch), &p) in changes.iter().zip(&pipeline_of) {
            let n = launch.buffers.len().min(launch.op.signature().len());
            updates.push(DispatchUpdate {
                index: *index,
                pipeline: &pipelines[p],
                bindings: &bindings[from..from + n],
                params: launch.immediates(),
                groups: dispatch::groups(launch, max_groups)?,
            });
            from += n;
        }
        let graph = graphs.target_mut(target)?;
        let checked = graph.cmd.check_update(&updates)?;
        if plan == Plan::Fresh {
            // Made before anything changes: a refusal leaves the graph as
            // it was (core then records it again).
            let fresh = graph.cmd.variant(checked)?;
            // A spare pushed out may be pending: its submissions hold it.
            drop(graph.runs.make_room());
            let want = after(now, changes);
            drop(graph.runs.keep(&mut graph.cmd, fresh, now, want));
            self.updates.fresh += 1;
            return Ok(());
        }
        // Replays queued before the update run as recorded: the sets (and
        // the commands) change only once none of them is pending.
        gpu.wait_for(&graph.cmd)?;
        let rerecorded = graph.cmd.update(checked)?;
        if keeps {
            // Rewritten sets slow no replay: the command buffer stays keepable.
            graph.runs.patched(now, changes, false);
        }
        match rerecorded {
            true => self.updates.rerecorded += 1,
            false => self.updates.in_place += 1,
        }
        Ok(())
    }

    /// `buffer` is about to be freed: every kept command buffer that binds
    /// it is dropped (a pending one when its submission completes), and
    /// every launch set that names it forgotten.
    pub(super) fn forget_variants(&mut self, buffer: RawBuffer) {
        let targets: Vec<ReplayTarget> = self.graphs.iter().map(|(t, _)| t).collect();
        for t in targets {
            if let Ok(g) = self.graphs.target_mut(t) {
                drop(g.runs.forget(buffer));
            }
        }
    }
}
