//! C13 on Vulkan: a graph's recorded dispatches updated in place — the
//! descriptor sets rewritten (UPDATE_AFTER_BIND where the device has it, so
//! the command buffer stays executable; otherwise it is recorded again from
//! its own log, as it is for new push constants) — after the update is
//! checked whole (the barrier audit again, over the new bindings) so a
//! refused update changes nothing.

use super::*;

/// A rebind of one recorded dispatch (C13): what the launch records now.
pub struct DispatchUpdate<'a> {
    /// The dispatch's number in record order, from 0 (a graph records one
    /// dispatch per launch, so it is the launch's index in capture order).
    pub index: usize,
    pub pipeline: &'a Pipeline,
    pub bindings: Vec<(&'a Buffer, seam::ops::Access)>,
    pub params: [u8; PUSH_CONSTANT_BYTES as usize],
    pub groups: (u32, u32, u32),
}

impl CommandBuffer {
    /// Whether `update(changes)` would be taken, checked without waiting:
    /// this is an ended graph (reusable) command buffer of barriers and
    /// dispatches only; each change names a recorded dispatch (a graph
    /// records one per launch, in capture order) and keeps its pipeline and
    /// the access of each binding; the new buffers are of this device and
    /// within maxStorageBufferRange, the workgroup count within
    /// maxComputeWorkGroupCount; and the command buffer with the new
    /// bindings passes the barrier audit (a rebind that made two dispatches
    /// alias unordered is refused). Nothing changes.
    pub fn check_update(&self, changes: &[DispatchUpdate<'_>]) -> Result<(), ErrorKind> {
        let at = self.0.dispatch_positions();
        self.0.check_update(&at, changes).map(drop)
    }

    /// Apply `changes` to the recorded dispatches, in place: each changed
    /// dispatch's own descriptor set is rewritten (`vkUpdateDescriptorSets`;
    /// with UPDATE_AFTER_BIND bindings the command buffer stays executable
    /// and its next submission reads the new descriptors) and, where
    /// parameters or workgroup counts change (recorded in the command
    /// buffer) or the device has no UPDATE_AFTER_BIND (`Inner::rerecords`),
    /// the command buffer is recorded again from its own log (the same
    /// sets, pipelines and barriers; nothing allocated). Refused while a submission of it is
    /// pending — the caller waits for the replays queued before the update,
    /// which so run as recorded — and in every case
    /// [`Self::check_update`] refuses; then nothing changes. If recording
    /// again fails, the command buffer is left unsubmittable (never half
    /// updated and executable). It then holds the buffers its dispatches
    /// bind now, and its audit is of those. Returns whether it recorded the
    /// command buffer again.
    pub fn update(&mut self, changes: &[DispatchUpdate<'_>]) -> Result<bool, ErrorKind> {
        const CALL: &str = "vkUpdateDescriptorSets";
        let inner = self.inner(CALL)?;
        // Where each dispatch sits in the log, found once: every lookup
        // below is O(1), so an update of all N dispatches costs O(N), not
        // O(N²) (6.3 ms for a rebind of 1000 on the H200 before).
        let at = inner.dispatch_positions();
        let audit = inner.check_update(&at, changes)?;
        let rerecord = inner.rerecords(&at, changes);
        // Buffers first, then (if needed) the commands.
        let mut infos: Vec<[vk::DescriptorBufferInfo; 1]> = Vec::new();
        let mut targets: Vec<(vk::DescriptorSet, u32)> = Vec::new();
        for c in changes {
            let d = inner.dispatch(&at, c.index)?;
            for (i, ((new, _), (old, _))) in c.bindings.iter().zip(&d.bindings).enumerate() {
                if !new.same(old) {
                    infos.push([vk::DescriptorBufferInfo::default()
                        .buffer(new.handle())
                        .offset(0)
                        .range(vk::WHOLE_SIZE)]);
                    targets.push((d.set, i as u32));
                }
            }
        }
        let writes: Vec<_> = infos
            .iter()
            .zip(&targets)
            .map(|(info, &(set, binding))| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(binding)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        if !writes.is_empty() {
            // SAFETY: every set is live (its pool is owned by this command
            // buffer) and is bound only by this command buffer's own
            // dispatch, which is not pending: no submission holds the
            // command buffer (`inner` is unique; the caller waited for the
            // replays queued before the update) and eager batches never
            // bind a graph's sets. Either its bindings were created
            // UPDATE_AFTER_BIND (`rebind_in_place`: the feature is enabled,
            // the layout UPDATE_AFTER_BIND_POOL, the pool UPDATE_AFTER_BIND),
            // so updating them after the bind leaves this executable command
            // buffer valid, or the command buffer is recorded again below
            // before any submission (`rerecords`).
            // Each write targets a storage-buffer binding the set's layout
            // has (binding counts checked), every buffer is live (held
            // below), of this device, made with STORAGE_BUFFER usage and
            // within maxStorageBufferRange (checked); `infos` outlives the
            // call.
            unsafe { inner.shared.device.update_descriptor_sets(&writes, &[]) };
        }
        for c in changes {
            let d = inner.dispatch_mut(&at, c.index)?;
            d.bindings = c
                .bindings
                .iter()
                .map(|(b, a)| ((*b).clone(), *a == seam::ops::Access::Write))
                .collect();
            d.params = c.params;
            d.groups = c.groups;
        }
        inner.audit = audit;
        // What it holds: every buffer a dispatch binds now, once each.
        let mut seen = std::collections::HashSet::new();
        let buffers: Vec<Buffer> = inner
            .log
            .iter()
            .filter_map(|r| match r {
                Recorded::Dispatch(d) => Some(&d.bindings),
                _ => None,
            })
            .flatten()
            .filter(|(b, _)| seen.insert(b.handle()))
            .map(|(b, _)| b.clone())
            .collect();
        inner.buffers = buffers;
        if rerecord {
            inner.rerecord()?;
        }
        Ok(rerecord)
    }

    // ----- for `Gpu::submit` -----
}

impl Inner {
    /// The log position of each dispatch, in dispatch order.
    fn dispatch_positions(&self) -> Vec<usize> {
        self.log
            .iter()
            .enumerate()
            .filter_map(|(i, r)| matches!(r, Recorded::Dispatch(_)).then_some(i))
            .collect()
    }

    /// The `index`-th dispatch of the log (`at`: [`Self::dispatch_positions`]).
    fn dispatch(&self, at: &[usize], index: usize) -> Result<&Dispatch, ErrorKind> {
        match at.get(index).map(|&i| &self.log[i]) {
            Some(Recorded::Dispatch(d)) => Ok(d),
            _ => Err(ErrorKind::driver(
                "vkUpdateDescriptorSets",
                "no such dispatch",
            )),
        }
    }

    fn dispatch_mut(&mut self, at: &[usize], index: usize) -> Result<&mut Dispatch, ErrorKind> {
        match at.get(index).map(|&i| &mut self.log[i]) {
            Some(Recorded::Dispatch(d)) => Ok(d),
            _ => Err(ErrorKind::driver(
                "vkUpdateDescriptorSets",
                "no such dispatch",
            )),
        }
    }

    /// Whether `update(changes)` records the command buffer again: a change
    /// of push constants or workgroup count (recorded in it), or of buffers
    /// on a device without UPDATE_AFTER_BIND storage buffers
    /// (`rebind_in_place`), where updating a bound set invalidates the
    /// command buffer. Otherwise only descriptor sets are rewritten.
    fn rerecords(&self, at: &[usize], changes: &[DispatchUpdate<'_>]) -> bool {
        changes.iter().any(|c| {
            self.dispatch(at, c.index).is_ok_and(|d| {
                d.params != c.params
                    || d.groups != c.groups
                    || (!self.shared.rebind_in_place
                        && c.bindings
                            .iter()
                            .zip(&d.bindings)
                            .any(|((n, _), (o, _))| !n.same(o)))
            })
        })
    }

    /// Record the command buffer again from its log: the same barriers and
    /// dispatches (each with its own set), then `end`'s host barrier.
    fn rerecord(&mut self) -> Result<(), ErrorKind> {
        let shared = self.shared.clone();
        let d = &shared.device;
        // Until it is executable again, a submission is refused.
        self.state = State::Initial;
        // SAFETY: the command buffer is not pending (the caller holds the
        // only reference) and nothing else records from this pool; its
        // descriptor pools are not reset, so the sets it binds stay.
        unsafe { d.reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty()) }
            .map_err(drv("vkResetCommandPool"))?;
        let info = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
        // SAFETY: the command buffer is in the initial state (its pool was
        // just reset) and its pool is used only here.
        unsafe { d.begin_command_buffer(self.cmd, &info) }.map_err(drv("vkBeginCommandBuffer"))?;
        self.state = State::Recording;
        for r in &self.log {
            match r {
                Recorded::Barrier => self.cmd_barrier(),
                Recorded::Dispatch(d) => self.cmd_dispatch(d),
                Recorded::Other => {
                    return Err(ErrorKind::driver(
                        "vkBeginCommandBuffer",
                        "a copy cannot be recorded again",
                    ))
                }
            }
        }
        self.cmd_end()
    }

    /// See [`CommandBuffer::check_update`]; returns the audit of the log
    /// with the new bindings.
    fn check_update(
        &self,
        at: &[usize],
        changes: &[DispatchUpdate<'_>],
    ) -> Result<Audit, ErrorKind> {
        const CALL: &str = "vkUpdateDescriptorSets";
        let refuse = |why: String| Err(ErrorKind::driver(CALL, why));
        if !self.reusable || self.state != State::Executable {
            return refuse("only an ended graph command buffer is updated".into());
        }
        if self.log.iter().any(|r| matches!(r, Recorded::Other)) || !self.queries.is_empty() {
            return refuse(
                "the command buffer records a copy or a query, which an update does not patch"
                    .into(),
            );
        }
        let adapter = &self.shared.adapter;
        for c in changes {
            let d = self.dispatch(at, c.index)?;
            if !Arc::ptr_eq(&d.pipeline.0, &c.pipeline.0) {
                return refuse(format!("dispatch #{}: another pipeline", c.index));
            }
            if c.bindings.len() != d.bindings.len()
                || c.bindings
                    .iter()
                    .zip(&d.bindings)
                    .any(|((_, n), (_, w))| (*n == seam::ops::Access::Write) != *w)
            {
                return refuse(format!("dispatch #{}: other bindings", c.index));
            }
            if c.bindings.iter().any(|(b, _)| !b.of(&self.shared)) {
                return refuse("a buffer of another device".into());
            }
            if let Some((b, _)) = c
                .bindings
                .iter()
                .find(|(b, _)| b.size() > adapter.max_storage_buffer_range)
            {
                return refuse(format!(
                    "a {}-byte buffer exceeds maxStorageBufferRange",
                    b.size()
                ));
            }
            if c.groups.0 > adapter.max_group_count[0]
                || c.groups.1 > adapter.max_group_count[1]
                || c.groups.2 > adapter.max_group_count[2]
            {
                return refuse(format!(
                    "{:?} workgroups exceed maxComputeWorkGroupCount {:?}",
                    c.groups, adapter.max_group_count
                ));
            }
        }
        // The audit again, over every command with the new bindings (the
        // last change of each dispatch, looked up by dispatch index).
        let mut change_of: Vec<Option<&DispatchUpdate<'_>>> = vec![None; at.len()];
        for c in changes {
            if let Some(slot) = change_of.get_mut(c.index) {
                *slot = Some(c);
            }
        }
        let mut audit = Audit::default();
        let mut n = 0;
        for r in &self.log {
            match r {
                Recorded::Barrier => audit.barrier(),
                Recorded::Dispatch(d) => {
                    let accesses: Vec<(u64, bool)> = match change_of.get(n).copied().flatten() {
                        Some(c) => c
                            .bindings
                            .iter()
                            .map(|(b, a)| {
                                (
                                    vk::Handle::as_raw(b.handle()),
                                    *a == seam::ops::Access::Write,
                                )
                            })
                            .collect(),
                        None => d
                            .bindings
                            .iter()
                            .map(|(b, w)| (vk::Handle::as_raw(b.handle()), *w))
                            .collect(),
                    };
                    n += 1;
                    audit
                        .command("dispatch", &accesses)
                        .map_err(|h| ErrorKind::driver(CALL, format!("after the update: {h}")))?;
                }
                Recorded::Other => return refuse("a copy in the command buffer".into()),
            }
        }
        Ok(audit)
    }
}
