//! Eager launches: recorded into a batch (one ONE_TIME_SUBMIT command
//! buffer) submitted at the next write, read, synchronize or replay, or
//! after [`EAGER_BATCH`] launches. A device keeps a ring of [`EAGER_RING`]
//! batches and records them in turn.

use super::VulkanBackend;
use crate::sys::CommandBuffer;
use seam::ErrorKind;

/// Eager launches recorded before the batch is submitted on its own.
pub(super) const EAGER_BATCH: usize = 256;

/// Eager batches a device keeps and records in turn: made together at the
/// first eager launch, so that steady launching never makes another; when
/// all of them are still pending, the next waits for the oldest.
pub(super) const EAGER_RING: usize = 8;

impl VulkanBackend {
    /// Submit the open eager batch, if any.
    pub(super) fn flush(&mut self) -> Result<(), ErrorKind> {
        let Some(mut batch) = self.eager.take() else {
            return Ok(());
        };
        let submitted = batch.end().and_then(|()| self.gpu.submit(&batch)).map(drop);
        // On failure the batch is dropped: its timestamps never happen.
        self.timing_batch_done(submitted.is_ok());
        submitted?;
        self.batches.push_back(batch);
        Ok(())
    }

    /// Submit the eager batch and wait for every submission.
    pub(super) fn wait_all(&mut self) -> Result<(), ErrorKind> {
        self.flush()?;
        self.gpu.wait_idle()
    }

    /// The open eager batch, starting one if needed: the oldest of the
    /// ring, waited for if its submission is still pending. The first
    /// launch makes the ring's [`EAGER_RING`] batches (and a launch after a
    /// failed submission dropped one makes it again).
    pub(super) fn eager(&mut self) -> Result<&mut CommandBuffer, ErrorKind> {
        if self.eager.is_none() {
            let mut batch = match self.batches.pop_front() {
                Some(b) => b,
                None => self.gpu.command_buffer()?,
            };
            while self.batches.len() + 1 < EAGER_RING {
                self.batches.push_back(self.gpu.command_buffer()?);
            }
            self.gpu.poll()?;
            if self.gpu.is_pending(&batch) {
                if let Err(e) = self.gpu.wait_for(&batch) {
                    self.batches.push_front(batch);
                    return Err(e);
                }
            }
            batch.begin(false)?;
            self.eager = Some(batch);
        }
        self.eager
            .as_mut()
            .ok_or_else(|| ErrorKind::driver("eager batch", "could not start one"))
    }

    /// The eager batches this device holds, open or not.
    #[cfg(test)]
    pub(super) fn eager_batches(&self) -> usize {
        self.batches.len() + usize::from(self.eager.is_some())
    }
}

/// Whether the eager batch has reached [`EAGER_BATCH`] launches.
pub(super) fn rec_full(batch: Option<&CommandBuffer>) -> bool {
    batch.is_some_and(|b| b.dispatches() >= EAGER_BATCH)
}
