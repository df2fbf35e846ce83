//! The wgpu device and queue, with the two things every call needs: wgpu
//! errors turned into seam errors that name the call, and bounded waits.
//! With `SEAM_WGPU_VALIDATION=1` the validation layer's messages are errors
//! of the call that raised them too (`validation.rs`), and [`Teardown`]
//! fails the device's teardown on any message it saw.

use seam::ErrorKind;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long any wait for the device may take before it is an error.
pub const WAIT_LIMIT: Duration = Duration::from_secs(20);

/// What device and node timing need: timestamp queries, written inside
/// compute passes (where every dispatch of an eager batch or a replay is).
pub const TIMESTAMPS: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);

/// Errors no scope caught (wgpu would otherwise panic in its default handler).
type Uncaptured = Arc<Mutex<Vec<String>>>;

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    uncaptured: Uncaptured,
    /// `SEAM_WGPU_VALIDATION=1`: validation messages fail the call.
    pub(crate) validating: bool,
    /// Every validation message this device's calls returned, `<call>: <message>`.
    raised: Arc<Mutex<Vec<String>>>,
}

/// Declared last in the backend, so it drops after every wgpu object of the
/// device (and so after wgpu destroys the Vulkan device): a validation
/// message raised then, or returned by any call of the device, panics here
/// with every message, as the Vulkan backend's teardown does (a case that
/// swallowed the error still fails).
pub struct Teardown {
    name: String,
    validating: bool,
    raised: Arc<Mutex<Vec<String>>>,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        if !self.validating {
            return;
        }
        let mut all = self
            .raised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        all.extend(
            crate::validation::take()
                .into_iter()
                .map(|m| format!("teardown: {m}")),
        );
        if !all.is_empty() && !std::thread::panicking() {
            panic!(
                "wgpu device ({}): drop: validation: {}",
                self.name,
                all.join(" | ")
            );
        }
    }
}

impl Gpu {
    /// Request a device with immediates (push constants), the adapter's
    /// own limits, and [`TIMESTAMPS`] where the adapter has both.
    pub fn request(adapter: &wgpu::Adapter) -> Result<Gpu, ErrorKind> {
        Gpu::request_with(adapter, adapter.limits())
    }

    /// [`Gpu::request`] with `limits` (at most the adapter's): tests hold
    /// the backend to limits lower than the adapter's.
    pub fn request_with(adapter: &wgpu::Adapter, limits: wgpu::Limits) -> Result<Gpu, ErrorKind> {
        let mut features = wgpu::Features::IMMEDIATES;
        if adapter.features().contains(TIMESTAMPS) {
            features |= TIMESTAMPS;
        }
        let desc = wgpu::DeviceDescriptor {
            label: Some("seam"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|e| ErrorKind::driver("wgpu::Adapter::request_device", e))?;
        let uncaptured = Uncaptured::default();
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(e.to_string());
        }));
        let validating = crate::validation::requested();
        // Anything raised while the device was requested belongs to this call.
        let raised = Arc::new(Mutex::new(Vec::new()));
        let gpu = Gpu {
            device,
            queue,
            limits,
            uncaptured,
            validating,
            raised,
        };
        gpu.validated("wgpu::Adapter::request_device")?;
        Ok(gpu)
    }

    /// The teardown check of this device (see [`Teardown`]).
    pub fn teardown(&self, name: &str) -> Teardown {
        Teardown {
            name: name.to_string(),
            validating: self.validating,
            raised: self.raised.clone(),
        }
    }

    /// Fail `call` with the validation messages raised on this thread since
    /// the last call, if validation is on and there are any.
    pub fn validated(&self, call: &'static str) -> Result<(), ErrorKind> {
        if !self.validating {
            return Ok(());
        }
        let raised = crate::validation::take();
        if raised.is_empty() {
            return Ok(());
        }
        let message = raised.join(" | ");
        self.raised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{call}: {message}"));
        Err(ErrorKind::driver(call, format!("validation: {message}")))
    }

    /// Forget the messages the device's calls returned (a test that raised
    /// one on purpose).
    #[cfg(test)]
    pub(crate) fn forget_raised(&self) {
        self.raised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Run `f` inside validation, out-of-memory and internal error scopes;
    /// an error any of them caught (or an uncaptured one) names `call`.
    pub fn checked<T>(&self, call: &'static str, f: impl FnOnce() -> T) -> Result<T, ErrorKind> {
        let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        // Scopes pop innermost first; on native wgpu the futures are ready at once.
        let errors = [
            pollster::block_on(validation.pop()),
            pollster::block_on(oom.pop()),
            pollster::block_on(internal.pop()),
        ];
        if let Some(e) = errors.into_iter().flatten().next() {
            // The layer's messages, if any, are about the same call.
            let _ = self.validated(call);
            return Err(ErrorKind::driver(call, e));
        }
        self.take_uncaptured(call)?;
        self.validated(call)?;
        Ok(out)
    }

    /// Report (and clear) errors that reached the uncaptured handler, naming `call`.
    pub fn take_uncaptured(&self, call: &'static str) -> Result<(), ErrorKind> {
        let mut errors = self.uncaptured.lock().unwrap_or_else(|p| p.into_inner());
        if errors.is_empty() {
            return Ok(());
        }
        let message = errors.join("; ");
        errors.clear();
        Err(ErrorKind::driver(call, message))
    }

    /// Wait (at most [`WAIT_LIMIT`]) for `submission`, or for everything
    /// submitted: poll it for the spin budget (`SEAM_WGPU_SPIN_US`,
    /// `seam::wait`), then block in `wgpu::Device::poll`.
    pub fn wait(&self, submission: Option<wgpu::SubmissionIndex>) -> Result<(), ErrorKind> {
        let start = Instant::now();
        let mut status = Submitted {
            device: &self.device,
            submission,
            start,
        };
        seam::wait::wait(crate::SPIN.current(), &mut status, || start.elapsed())?;
        self.take_uncaptured("wgpu::Device::poll")?;
        self.validated("wgpu::Device::poll")
    }
}

/// One wait's submission (`None`: the last one made when each poll runs).
struct Submitted<'a> {
    device: &'a wgpu::Device,
    submission: Option<wgpu::SubmissionIndex>,
    start: Instant,
}

impl Submitted<'_> {
    /// Wait at most `timeout`: `Ok(false)` when it ran out first.
    fn poll(&self, timeout: Duration) -> Result<bool, ErrorKind> {
        let poll = wgpu::PollType::Wait {
            submission_index: self.submission.clone(),
            timeout: Some(timeout),
        };
        match self.device.poll(poll) {
            Ok(_) => Ok(true),
            Err(wgpu::PollError::Timeout) => Ok(false),
            Err(e) => Err(ErrorKind::driver("wgpu::Device::poll", e)),
        }
    }
}

impl seam::wait::FenceStatus for Submitted<'_> {
    type Error = ErrorKind;

    fn signalled(&mut self) -> Result<bool, ErrorKind> {
        self.poll(Duration::ZERO)
    }

    /// Block for what is left of [`WAIT_LIMIT`].
    fn block(&mut self) -> Result<(), ErrorKind> {
        if self.poll(WAIT_LIMIT.saturating_sub(self.start.elapsed()))? {
            return Ok(());
        }
        Err(ErrorKind::driver(
            "wgpu::Device::poll",
            format!(
                "the device did not finish queued work within {} s",
                WAIT_LIMIT.as_secs()
            ),
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::Submitted;
    use crate::backend::WgpuBackend;
    use libtest_mimic::Completion;
    use seam::testing::Direct;
    use seam::wait::{wait, SpinBudget, Waited};
    use std::time::{Duration, Instant};

    /// A submission that has finished is seen by the first poll: the wait
    /// returns without blocking (which would cost a wake-up, ~40 µs on the
    /// H200's driver). Mutation: `signalled` → `Ok(false)` (every wait
    /// blocks) → red.
    pub fn a_finished_submission_is_seen_by_a_poll(b: Direct<WgpuBackend>) -> Completion {
        let gpu = &b.gpu;
        let index = gpu.queue.submit([]);
        gpu.wait(Some(index.clone())).expect("wait");
        let mut done = Submitted {
            device: &gpu.device,
            submission: Some(index),
            start: Instant::now(),
        };
        let budget = SpinBudget(Duration::from_secs(1));
        let start = Instant::now();
        assert_eq!(
            wait(budget, &mut done, || start.elapsed()),
            Ok(Waited::Polled { polls: 1 })
        );
        Completion::Completed
    }
}
