//! The queue timeline: command buffers submitted in order, each with a
//! fence and a serial, held until its fence has signalled; polls and waits
//! collect completed submissions oldest first.

use super::*;

impl Gpu {
    pub fn command_buffer(&self) -> Result<CommandBuffer, ErrorKind> {
        CommandBuffer::new(self.shared.clone())
    }

    /// Whether a submission of `cmd` may still be running (as of the last poll).
    pub fn is_pending(&self, cmd: &CommandBuffer) -> bool {
        cmd.last_serial() > self.shared.completed()
    }

    /// Submit an executable command buffer; returns the submission's serial.
    /// The submission holds `cmd` (and so everything it uses) until it has
    /// completed. With [`MAX_IN_FLIGHT`] submissions pending, it first waits
    /// for the oldest.
    pub fn submit(&mut self, cmd: &CommandBuffer) -> Result<u64, ErrorKind> {
        self.poll()?;
        if !cmd.of(&self.shared) {
            return Err(ErrorKind::driver(
                "vkQueueSubmit",
                "the command buffer belongs to another device",
            ));
        }
        cmd.check_submit()?;
        let serial = self.next_serial;
        // Query commands of this submission, in queue order (see
        // `QueryPoolInner`): the pools' states after it, committed once it
        // is submitted.
        let queries = cmd.query_ops();
        let mut after = Vec::with_capacity(queries.len());
        for (pool, ops) in queries {
            let mut next = lock(&pool.0.written).clone();
            for op in ops {
                match *op {
                    QueryOp::Reset { first, count } => {
                        next[first as usize..(first + count) as usize].fill(false)
                    }
                    QueryOp::Write(q) if next[q as usize] => {
                        return Err(ErrorKind::driver(
                            "vkQueueSubmit",
                            format!("timestamp query {q} is written again without a reset"),
                        ))
                    }
                    QueryOp::Write(q) => next[q as usize] = true,
                }
            }
            after.push(next);
        }
        if self.in_flight.len() >= MAX_IN_FLIGHT {
            self.wait_fences(1)?;
            self.collect_front()?;
        }
        let fence = match self.free_fences.pop() {
            Some(f) => f,
            // SAFETY: valid create info; the device is live.
            None => unsafe {
                self.shared
                    .device
                    .create_fence(&vk::FenceCreateInfo::default(), None)
            }
            .map_err(drv("vkCreateFence"))?,
        };
        // Host access to the buffers it uses finishes before the submission
        // and is refused after it (`Buffer::host_lock`). The first
        // `HOST_LOCKS_INLINE` locks are held without allocating.
        let mut host: [Option<MutexGuard<'_, crate::sys::memory::Mapped>>; HOST_LOCKS_INLINE] =
            Default::default();
        let mut more_host = Vec::new();
        for (i, lock) in cmd
            .buffers()
            .iter()
            .filter_map(|b| b.host_lock())
            .enumerate()
        {
            match host.get_mut(i) {
                Some(slot) => *slot = Some(lock),
                None => more_host.push(lock),
            }
        }
        let cmds = [cmd.handle()];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: `cmd` is executable and, unless recorded SIMULTANEOUS_USE,
        // not pending or already submitted once (checked by `check_submit`);
        // every object it uses is alive (it holds them) and stays so (the
        // submission holds it). The fence is unsignaled and in no pending
        // submission (fresh, or reset when its submission was collected);
        // the queue is used only through `&mut self`.
        if let Err(e) = unsafe { self.shared.device.queue_submit(self.queue, &submit, fence) } {
            self.free_fences.push(fence);
            return Err(ErrorKind::driver("vkQueueSubmit", e));
        }
        self.next_serial += 1;
        cmd.submitted(serial);
        drop(more_host);
        drop(host);
        for ((pool, _), next) in queries.iter().zip(after) {
            *lock(&pool.0.written) = next;
            pool.0.last_use.fetch_max(serial, Ordering::AcqRel);
        }
        self.in_flight.push_back(Submission {
            serial,
            fence,
            _cmd: cmd.clone_ref(),
        });
        Ok(serial)
    }

    /// Collect completed submissions, in order: their command buffers (and
    /// what those hold) are released and their fences reused.
    pub fn poll(&mut self) -> Result<(), ErrorKind> {
        while let Some(front) = self.in_flight.front() {
            // SAFETY: live fence, owned by this `Gpu`.
            let done = unsafe { self.shared.device.get_fence_status(front.fence) }
                .map_err(drv("vkGetFenceStatus"))?;
            if !done {
                break;
            }
            self.collect_front()?;
        }
        Ok(())
    }

    fn collect_front(&mut self) -> Result<(), ErrorKind> {
        let Some(done) = self.in_flight.pop_front() else {
            return Ok(());
        };
        self.shared.completed.store(done.serial, Ordering::Release);
        // SAFETY: the fence has signalled, so its submission completed and it
        // is in no pending submission.
        let reset = unsafe { self.shared.device.reset_fences(&[done.fence]) };
        match reset {
            Ok(()) => self.free_fences.push(done.fence),
            // SAFETY: as above; a fence that cannot be reset is not reused.
            Err(_) => unsafe { self.shared.device.destroy_fence(done.fence, None) },
        }
        reset.map_err(drv("vkResetFences"))
    }

    /// Wait until no submission of `cmd` is pending: for every submission
    /// up to its last one (earlier ones too, so they can be collected in
    /// order), at most [`FENCE_TIMEOUT_NS`] for each. Then none holds `cmd`.
    pub fn wait_for(&mut self, cmd: &CommandBuffer) -> Result<(), ErrorKind> {
        let last = cmd.last_serial();
        self.poll()?;
        let count = self
            .in_flight
            .iter()
            .take_while(|s| s.serial <= last)
            .count();
        self.wait_fences(count)?;
        while self.in_flight.front().is_some_and(|s| s.serial <= last) {
            self.collect_front()?;
        }
        Ok(())
    }

    /// How many submissions are pending (as of the last poll), and how
    /// many the in-flight queue holds without growing.
    #[cfg(test)]
    pub fn pending(&self) -> (usize, usize) {
        (self.in_flight.len(), self.in_flight.capacity())
    }

    /// Wait for every submission, at most [`FENCE_TIMEOUT_NS`] for each.
    pub fn wait_idle(&mut self) -> Result<(), ErrorKind> {
        self.wait_fences(self.in_flight.len())?;
        while !self.in_flight.is_empty() {
            self.collect_front()?;
        }
        Ok(())
    }

    /// Wait for the fences of the oldest `count` submissions: poll them for
    /// the spin budget (`SEAM_VULKAN_SPIN_US`, `seam::wait`), then block in
    /// `vkWaitForFences`, at most [`FENCE_TIMEOUT_NS`] for each. Allocates
    /// nothing.
    fn wait_fences(&self, count: usize) -> Result<(), ErrorKind> {
        if count == 0 {
            return Ok(());
        }
        let start = std::time::Instant::now();
        let mut status = FenceSet {
            device: &self.shared.device,
            pending: &self.in_flight,
            end: count,
            next: 0,
        };
        seam::wait::wait(crate::SPIN.current(), &mut status, || start.elapsed()).map(drop)
    }
}

/// The fences one wait is for (those of `pending[..end]`), polled in
/// order: `next` is the first not yet seen signalled (a signalled fence
/// stays signalled until this `Gpu` resets it, after the wait).
struct FenceSet<'a> {
    device: &'a ash::Device,
    pending: &'a VecDeque<Submission>,
    end: usize,
    next: usize,
}

impl seam::wait::FenceStatus for FenceSet<'_> {
    type Error = ErrorKind;

    fn signalled(&mut self) -> Result<bool, ErrorKind> {
        while self.next < self.end {
            let fence = self.pending[self.next].fence;
            // SAFETY: a live fence owned by the `Gpu` whose wait this is.
            let done =
                unsafe { self.device.get_fence_status(fence) }.map_err(drv("vkGetFenceStatus"))?;
            if !done {
                return Ok(false);
            }
            self.next += 1;
        }
        Ok(true)
    }

    /// Block on the first fence not seen signalled, then poll the rest
    /// (the queue mostly completes in order, so they have usually signalled
    /// by then), until all have.
    fn block(&mut self) -> Result<(), ErrorKind> {
        while !self.signalled()? {
            let fence = [self.pending[self.next].fence];
            // SAFETY: a live fence owned by the `Gpu` whose wait this is.
            match unsafe { self.device.wait_for_fences(&fence, true, FENCE_TIMEOUT_NS) } {
                // The loop's `signalled` sees this fence and moves past it.
                Ok(()) => {}
                Err(vk::Result::TIMEOUT) => {
                    return Err(ErrorKind::driver(
                        "vkWaitForFences",
                        format!(
                            "the device did not finish within {} s",
                            FENCE_TIMEOUT_NS / 1_000_000_000
                        ),
                    ))
                }
                Err(e) => return Err(ErrorKind::driver("vkWaitForFences", e)),
            }
        }
        Ok(())
    }
}
