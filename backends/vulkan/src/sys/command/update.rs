//! C13 on Vulkan: a graph's recorded dispatches updated in place — the
//! descriptor sets rewritten (UPDATE_AFTER_BIND where the device has it, so
//! the command buffer stays executable; otherwise it is recorded again from
//! its own log, as it is for new workgroup counts) and the parameter
//! blocks written — after the update is checked whole (the barrier audit
//! again, over the new bindings) so a refused update changes nothing.

use super::*;

/// A rebind of one recorded dispatch (C13): what the launch records now.
pub struct DispatchUpdate<'a> {
    /// The dispatch's number in record order, from 0 (a graph records one
    /// dispatch per launch, so it is the launch's index in capture order).
    pub index: usize,
    pub pipeline: &'a Pipeline,
    pub bindings: &'a [(&'a Buffer, seam::ops::Access)],
    pub params: [u8; PARAM_BYTES as usize],
    pub groups: (u32, u32, u32),
}

/// What [`CommandBuffer::check_update`] passed: `changes`, checked against
/// one command buffer as it was then (its generation).
pub struct Checked<'c, 'a> {
    changes: &'c [DispatchUpdate<'a>],
    generation: u64,
}

/// Descriptor writes passed to one `vkUpdateDescriptorSets`, built on the
/// stack (an update of more writes makes several calls).
const WRITES: usize = 32;

impl CommandBuffer {
    /// Whether `update(changes)` would be taken, checked without waiting:
    /// this is an ended graph (reusable) command buffer of barriers and
    /// dispatches only; the changes name recorded dispatches (a graph
    /// records one per launch, in capture order) in increasing order, each
    /// at most once, and each keeps its pipeline and the access of each
    /// binding; the new buffers are of this device and within
    /// maxStorageBufferRange, the workgroup count within
    /// maxComputeWorkGroupCount; and the command buffer with the new
    /// bindings passes the barrier audit (a rebind that made two dispatches
    /// alias unordered is refused). Nothing changes. Costs O(bindings
    /// changed) where every changed dispatch follows a barrier of its own
    /// (a dependent chain, a node-timed graph), and O(dispatches in the
    /// stretch) for a stretch of independent ones; nothing is allocated. The pass is for
    /// [`Self::update`].
    pub fn check_update<'c, 'a>(
        &self,
        changes: &'c [DispatchUpdate<'a>],
    ) -> Result<Checked<'c, 'a>, ErrorKind> {
        self.0.check_update(changes)?;
        Ok(Checked {
            changes,
            generation: self.0.generation,
        })
    }

    /// Apply the changes `check_update` passed to the recorded dispatches,
    /// in place (checked again if the command buffer changed since): each changed
    /// dispatch's own descriptor set is rewritten (`vkUpdateDescriptorSets`;
    /// with UPDATE_AFTER_BIND bindings the command buffer stays executable
    /// and its next submission reads the new descriptors), each changed
    /// dispatch's parameter block is written (`params.rs`: the kernels read
    /// it from memory) and, where workgroup counts change (recorded in the
    /// command buffer) or the device has no UPDATE_AFTER_BIND (`Inner::rerecords`),
    /// the command buffer is recorded again from its own log (the same
    /// sets, pipelines and barriers; nothing allocated). Refused while a submission of it is
    /// pending — the caller waits for the replays queued before the update,
    /// which so run as recorded — and in every case
    /// [`Self::check_update`] would refuse now; then nothing changes. If recording
    /// again fails, the command buffer is left unsubmittable (never half
    /// updated and executable). It then holds the buffers its dispatches
    /// bind now. Returns whether it recorded the command buffer again.
    /// Nothing is allocated unless a buffer not held before is bound.
    pub fn update(&mut self, checked: Checked<'_, '_>) -> Result<bool, ErrorKind> {
        let Checked {
            changes,
            generation,
        } = checked;
        // The generation is new at every mutable access, never repeated:
        // equal, it is this command buffer as it was checked.
        let unchanged = self.0.generation == generation;
        let inner = self.inner("vkUpdateDescriptorSets")?;
        if !unchanged {
            inner.check_update(changes)?;
        }
        let rerecord = inner.rerecords(changes);
        // Buffers and parameters first, then (if needed) the commands.
        inner.write_sets(changes)?;
        inner.write_changed_params(changes)?;
        inner.apply(changes)?;
        if rerecord {
            inner.rerecord()?;
        }
        Ok(rerecord)
    }

    /// A new graph command buffer that runs what this one would with the
    /// changes `check_update` passed applied (a kept variant of the graph,
    /// `seam::kept`): this one's barriers and dispatches recorded again in
    /// their order, each dispatch with a descriptor set and parameter block
    /// of the new command buffer's own (a changed one with its new buffers,
    /// parameters and workgroup counts), audited as they are recorded.
    /// This one is left as it is and may be pending. Refused (nothing made)
    /// for a command buffer with timestamps (node timing) or a command an
    /// update does not patch, and wherever `check_update` refuses the
    /// changes for this command buffer now.
    pub fn variant(&self, checked: Checked<'_, '_>) -> Result<CommandBuffer, ErrorKind> {
        const CALL: &str = "vkBeginCommandBuffer";
        // Checked again, whatever the generation: a pass for another
        // command buffer would otherwise record its changes here, and the
        // check costs little next to recording the whole command buffer.
        let changes = checked.changes;
        let inner = &*self.0;
        inner.check_update(changes)?;
        let mut fresh = CommandBuffer::new(inner.shared.clone())?;
        fresh.begin(true)?;
        let mut next = changes.iter().peekable();
        let mut n = 0;
        for r in &inner.log {
            let d = match r {
                Recorded::Barrier => {
                    fresh.barrier()?;
                    continue;
                }
                Recorded::Dispatch(d) => d,
                Recorded::Query(..) | Recorded::Other => {
                    return Err(ErrorKind::driver(
                        CALL,
                        "a command buffer with timestamps or a command an update does not patch has no variant",
                    ))
                }
            };
            match next.next_if(|c| c.index == n) {
                Some(c) => fresh.dispatch(c.pipeline, c.bindings, &c.params, c.groups)?,
                None => {
                    let binding = |i: usize| {
                        let (b, writes) = &d.bindings[i];
                        let access = match writes {
                            true => seam::ops::Access::Write,
                            false => seam::ops::Access::Read,
                        };
                        (b, access)
                    };
                    crate::stack::with_slice(d.bindings.len(), binding, |b| {
                        fresh.dispatch(&d.pipeline, b, &d.params, d.groups)
                    })?
                }
            }
            n += 1;
        }
        fresh.end()?;
        Ok(fresh)
    }

    // ----- for `Gpu::submit` -----
}

impl Inner {
    /// The `index`-th dispatch of the log.
    fn dispatch(&self, index: usize) -> Result<&Dispatch, ErrorKind> {
        match self.dispatch_at.get(index).map(|&i| &self.log[i]) {
            Some(Recorded::Dispatch(d)) => Ok(d),
            _ => Err(ErrorKind::driver(
                "vkUpdateDescriptorSets",
                "no such dispatch",
            )),
        }
    }

    /// Point each changed binding's descriptor at its new buffer (checked:
    /// `check_update`), [`WRITES`] writes per call.
    fn write_sets(&self, changes: &[DispatchUpdate<'_>]) -> Result<(), ErrorKind> {
        let mut infos = [[vk::DescriptorBufferInfo::default()]; WRITES];
        let mut targets = [(vk::DescriptorSet::null(), 0u32); WRITES];
        let mut n = 0;
        for c in changes {
            let d = self.dispatch(c.index)?;
            for (i, ((new, _), (old, _))) in c.bindings.iter().zip(&d.bindings).enumerate() {
                if new.same(old) {
                    continue;
                }
                infos[n] = [vk::DescriptorBufferInfo::default()
                    .buffer(new.handle())
                    .offset(0)
                    .range(vk::WHOLE_SIZE)];
                targets[n] = (d.set, i as u32);
                n += 1;
                if n == WRITES {
                    self.write(&infos, &targets);
                    n = 0;
                }
            }
        }
        self.write(&infos[..n], &targets[..n]);
        Ok(())
    }

    /// One `vkUpdateDescriptorSets`: binding `targets[i].1` of set
    /// `targets[i].0` gets `infos[i]` (at most [`WRITES`]).
    fn write(&self, infos: &[[vk::DescriptorBufferInfo; 1]], targets: &[(vk::DescriptorSet, u32)]) {
        let n = infos.len().min(targets.len()).min(WRITES);
        if n == 0 {
            return;
        }
        let writes: [vk::WriteDescriptorSet<'_>; WRITES] = std::array::from_fn(|i| {
            let w = vk::WriteDescriptorSet::default()
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER);
            match i < n {
                true => w
                    .dst_set(targets[i].0)
                    .dst_binding(targets[i].1)
                    .buffer_info(&infos[i]),
                false => w,
            }
        });
        // SAFETY: every set is live (its pool is owned by this command
        // buffer) and is bound only by this command buffer's own
        // dispatch, which is not pending: no submission holds the
        // command buffer (`update` holds it uniquely; the caller waited
        // for the replays queued before the update) and eager batches
        // never bind a graph's sets. Either its bindings were created
        // UPDATE_AFTER_BIND (`rebind_in_place`: the feature is enabled,
        // the layout UPDATE_AFTER_BIND_POOL, the pool UPDATE_AFTER_BIND),
        // so updating them after the bind leaves this executable command
        // buffer valid, or the command buffer is recorded again
        // (`rerecords`) before any submission.
        // Each of the first `n` writes targets a storage-buffer binding the
        // set's layout has (binding counts checked), every buffer is live
        // (the caller's, then held by `apply`), of this device, made with
        // STORAGE_BUFFER usage and within maxStorageBufferRange (checked);
        // `infos` outlives the call.
        unsafe { self.shared.device.update_descriptor_sets(&writes[..n], &[]) };
    }

    /// The log takes the changes (checked): each dispatch its new buffers
    /// (a clone only of a buffer that changed), parameters and workgroup
    /// counts, and the held set moves each changed binding from its old
    /// buffer to its new one.
    fn apply(&mut self, changes: &[DispatchUpdate<'_>]) -> Result<(), ErrorKind> {
        let Inner {
            log,
            dispatch_at,
            buffers,
            ..
        } = self;
        let mut counted = true;
        // A run of bindings moving from one buffer to one other (a rebind's
        // every binding, typically) moves in the held set at once.
        let mut run: Option<(u64, &Buffer, u32)> = None;
        for c in changes {
            let Some(Recorded::Dispatch(d)) = dispatch_at.get(c.index).map(|&i| &mut log[i]) else {
                return Err(ErrorKind::driver(
                    "vkUpdateDescriptorSets",
                    "no such dispatch",
                ));
            };
            for ((old, _), &(new, _)) in d.bindings.iter_mut().zip(c.bindings) {
                if old.same(new) {
                    continue;
                }
                let from = held::key(old);
                match &mut run {
                    Some((o, n, k)) if *o == from && n.same(new) => *k += 1,
                    _ => {
                        if let Some((o, n, k)) = run.replace((from, new, 1)) {
                            counted &= buffers.rebind(o, n, k);
                        }
                    }
                }
                *old = new.clone();
            }
            d.params = c.params;
            d.groups = c.groups;
        }
        if let Some((o, n, k)) = run {
            counted &= buffers.rebind(o, n, k);
        }
        let bound = || {
            log.iter()
                .filter_map(|r| match r {
                    Recorded::Dispatch(d) => Some(d.bindings.iter().map(|(b, _)| b)),
                    _ => None,
                })
                .flatten()
        };
        if counted {
            buffers.drop_unused();
        } else {
            // Not a counted set (never, for an ended graph): counted anew.
            buffers.recount(bound());
        }
        #[cfg(debug_assertions)]
        debug_assert!(
            buffers.counts_match(bound()),
            "held buffers after an update"
        );
        Ok(())
    }

    /// Write the parameter block of each changed dispatch whose parameters
    /// differ from those it holds.
    fn write_changed_params(&self, changes: &[DispatchUpdate<'_>]) -> Result<(), ErrorKind> {
        for c in changes {
            if self.dispatch(c.index)?.params != c.params {
                self.rewrite_params(c.index, &c.params)?;
            }
        }
        Ok(())
    }

    /// Whether `update(changes)` records the command buffer again: a change
    /// of workgroup count (recorded in it), or of buffers
    /// on a device without UPDATE_AFTER_BIND storage buffers
    /// (`rebind_in_place`), where updating a bound set invalidates the
    /// command buffer. Otherwise only descriptor sets are rewritten.
    fn rerecords(&self, changes: &[DispatchUpdate<'_>]) -> bool {
        changes.iter().any(|c| {
            self.dispatch(c.index).is_ok_and(|d| {
                d.groups != c.groups
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
    // Not inlined: once per update, and a profile tells its cost apart.
    #[inline(never)]
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
        // Audited anew as it is recorded: `check_update` audited the
        // changed stretches; this sees the commands actually recorded.
        self.audit.reset();
        let log = std::mem::take(&mut self.log);
        let recorded = self.record_log(&log);
        self.log = log;
        recorded?;
        let ended = self.cmd_end();
        self.audit.reset();
        ended
    }

    /// Record `log`'s commands, each dispatch audited before it.
    fn record_log(&mut self, log: &[Recorded]) -> Result<(), ErrorKind> {
        for r in log {
            match r {
                Recorded::Barrier => self.cmd_barrier(),
                Recorded::Dispatch(d) => {
                    let access = |i: usize| {
                        (
                            vk::Handle::as_raw(d.bindings[i].0.handle()),
                            d.bindings[i].1,
                        )
                    };
                    crate::stack::with_slice(d.bindings.len(), access, |a| {
                        self.audit.command(Command::Dispatch, a)
                    })
                    .map_err(|h| ErrorKind::driver("vkCmdDispatch", h))?;
                    self.cmd_dispatch(d, None)
                }
                Recorded::Query(pool, cmd) => self.cmd_query(pool, *cmd),
                Recorded::Other => {
                    return Err(ErrorKind::driver(
                        "vkBeginCommandBuffer",
                        "a copy cannot be recorded again",
                    ))
                }
            }
        }
        Ok(())
    }

    /// See [`CommandBuffer::check_update`].
    fn check_update(&self, changes: &[DispatchUpdate<'_>]) -> Result<(), ErrorKind> {
        const CALL: &str = "vkUpdateDescriptorSets";
        let refuse = |why: String| Err(ErrorKind::driver(CALL, why));
        if !self.reusable || self.state != State::Executable {
            return refuse("only an ended graph command buffer is updated".into());
        }
        if self.logged_other {
            return refuse(
                "the command buffer records a copy or a conditional body, which an update does not patch".into(),
            );
        }
        let adapter = &self.shared.adapter;
        // Log positions before `audited` are in stretches audited already.
        let mut audited = 0;
        for (k, c) in changes.iter().enumerate() {
            if k > 0 && changes[k - 1].index >= c.index {
                return refuse(format!(
                    "dispatch #{}: changes out of dispatch order, or one dispatch changed twice",
                    c.index
                ));
            }
            let d = self.dispatch(c.index)?;
            if !Arc::ptr_eq(&d.pipeline.0, &c.pipeline.0) {
                return refuse(format!("dispatch #{}: another pipeline", c.index));
            }
            if c.bindings.len() != d.bindings.len() {
                return refuse(format!("dispatch #{}: other bindings", c.index));
            }
            for ((b, access), (_, writes)) in c.bindings.iter().zip(&d.bindings) {
                if (*access == seam::ops::Access::Write) != *writes {
                    return refuse(format!("dispatch #{}: other bindings", c.index));
                }
                if !b.of(&self.shared) {
                    return refuse("a buffer of another device".into());
                }
                if b.size() > adapter.max_storage_buffer_range {
                    return refuse(format!(
                        "a {}-byte buffer exceeds maxStorageBufferRange",
                        b.size()
                    ));
                }
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
            let at = self.dispatch_at[c.index];
            if at >= audited {
                audited = self.audit_stretch(at, &changes[k..])?;
            }
        }
        Ok(())
    }

    /// The barrier audit again, with the new bindings, of the stretch of
    /// commands around log position `at` (a dispatch) that no barrier
    /// divides; `changes` are the update's from the first in the stretch
    /// on. Returns the log position where the stretch ends.
    ///
    /// Auditing only the stretches a change falls in is auditing the whole
    /// command buffer: the audit of a command depends only on the accesses
    /// since the last barrier and on whether there was one
    /// ([`Audit::after_barrier`]), and every stretch passed it with the bindings
    /// it has now (at record time, where a refused command is not logged,
    /// or at the update that last changed it; a refused update changes
    /// nothing).
    fn audit_stretch(&self, at: usize, changes: &[DispatchUpdate<'_>]) -> Result<usize, ErrorKind> {
        const CALL: &str = "vkUpdateDescriptorSets";
        let barrier = |r: &Recorded| matches!(r, Recorded::Barrier);
        let start = self.log[..at]
            .iter()
            .rposition(barrier)
            .map_or(0, |b| b + 1);
        let end = self.log[at + 1..]
            .iter()
            .position(barrier)
            .map_or(self.log.len(), |e| at + 1 + e);
        let dispatches = self.log[start..end]
            .iter()
            .filter(|r| matches!(r, Recorded::Dispatch(_)))
            .count();
        // The stretch starts after a barrier: every dispatch was audited when
        // it was recorded, and `Audit::command` refuses one before any
        // barrier.
        if dispatches == 1 {
            // One dispatch alone, as every dependent launch of a graph is
            // (`VulkanBackend::launch` records a barrier before a dispatch
            // that depends on the stretch before it): `Audit::barrier` leaves
            // no access since the barrier,
            // and `Audit::command` refuses only an access conflicting with an
            // earlier one since the last barrier, so the dispatch passes
            // whatever it binds. Nothing to run.
            return Ok(end);
        }
        let first = self.dispatch_at.partition_point(|&p| p < start);
        let mut audit = Audit::after_barrier(first, &super::record::global());
        let mut next = changes.iter().peekable();
        let in_stretch = self.log[start..end].iter().filter_map(|r| match r {
            Recorded::Dispatch(d) => Some(Ok(d)),
            // Timestamps access no memory.
            Recorded::Query(..) => None,
            // No barrier in the stretch; a copy is refused before.
            _ => Some(Err(ErrorKind::driver(CALL, "a copy in the command buffer"))),
        });
        for (n, d) in (first..).zip(in_stretch) {
            let d = d?;
            let raw = |b: &Buffer| vk::Handle::as_raw(b.handle());
            let checked = match next.next_if(|c| c.index == n) {
                Some(c) => {
                    let access = |i: usize| {
                        let (b, a) = c.bindings[i];
                        (raw(b), a == seam::ops::Access::Write)
                    };
                    crate::stack::with_slice(c.bindings.len(), access, |a| {
                        audit.command(Command::Dispatch, a)
                    })
                }
                None => {
                    let access = |i: usize| (raw(&d.bindings[i].0), d.bindings[i].1);
                    crate::stack::with_slice(d.bindings.len(), access, |a| {
                        audit.command(Command::Dispatch, a)
                    })
                }
            };
            checked.map_err(|h| ErrorKind::driver(CALL, format!("after the update: {h}")))?;
        }
        Ok(end)
    }
}
