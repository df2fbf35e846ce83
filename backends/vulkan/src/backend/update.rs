//! C13 on Vulkan: `update_launches`, the launches' new buffers, parameters
//! and workgroup counts lowered to `DispatchUpdate`s of the graph's command
//! buffer (`sys::CommandBuffer::update`).

use super::VulkanBackend;
use crate::dispatch;
use crate::sys::{Buffer, DispatchUpdate, Pipeline};
use seam::{ErrorKind, Launch, RawBuffer, ReplayTarget};

impl VulkanBackend {
    /// C13 in place (`update_launches`): each changed launch's dispatch
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
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
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
        let exec = &mut graphs.target_mut(target)?.cmd;
        let checked = exec.check_update(&updates)?;
        // Replays queued before the update run as recorded: the sets (and
        // the commands) change only once none of them is pending.
        gpu.wait_for(exec)?;
        if exec.update(checked)? {
            self.updates.1 += 1;
        } else {
            self.updates.0 += 1;
        }
        Ok(())
    }
}
