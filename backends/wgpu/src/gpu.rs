//! The wgpu device and queue, with the two things every call needs: wgpu
//! errors turned into seam errors that name the call, and bounded waits.

use seam::ErrorKind;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long any wait for the device may take before it is an error.
pub const WAIT_LIMIT: Duration = Duration::from_secs(20);

/// Errors no scope caught (wgpu would otherwise panic in its default handler).
type Uncaptured = Arc<Mutex<Vec<String>>>;

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    uncaptured: Uncaptured,
}

impl Gpu {
    /// Request a device with immediates (push constants) and the adapter's own limits.
    pub fn request(adapter: &wgpu::Adapter) -> Result<Gpu, ErrorKind> {
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("seam"),
            required_features: wgpu::Features::IMMEDIATES,
            required_limits: limits.clone(),
            memory_hints: wgpu::MemoryHints::Performance,
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
        Ok(Gpu {
            device,
            queue,
            limits,
            uncaptured,
        })
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
            return Err(ErrorKind::driver(call, e));
        }
        self.take_uncaptured(call)?;
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

    /// Wait (at most [`WAIT_LIMIT`]) for `submission`, or for everything submitted.
    pub fn wait(&self, submission: Option<wgpu::SubmissionIndex>) -> Result<(), ErrorKind> {
        let poll = wgpu::PollType::Wait {
            submission_index: submission,
            timeout: Some(WAIT_LIMIT),
        };
        match self.device.poll(poll) {
            Ok(_) => self.take_uncaptured("wgpu::Device::poll"),
            Err(wgpu::PollError::Timeout) => Err(ErrorKind::driver(
                "wgpu::Device::poll",
                format!(
                    "the device did not finish queued work within {} s",
                    WAIT_LIMIT.as_secs()
                ),
            )),
            Err(e) => Err(ErrorKind::driver("wgpu::Device::poll", e)),
        }
    }
}
