//! A seam backend that lives outside seam: every call is a job on a worker
//! thread with its own queue, in front of another backend (here seam's CPU
//! reference). It is what an engine's own backend often is, an asynchronous
//! front over a device API, and it is certified the way any backend would
//! be: `cargo test` in this crate runs seam's whole conformance suite on it
//! (`tests/conformance.rs`).
//!
//! What makes it more than a forwarder:
//! - **Asynchrony.** `launch`, `replay`, `write`, `free`, `destroy_graph`
//!   and the capture calls return as soon as their job is queued (a write's
//!   bytes are copied first, so the caller may reuse them). Only calls that
//!   must answer (`alloc`, `read`, `synchronize`, `end_capture_graph`, ...)
//!   wait, behind everything queued before them. The suite's stream-order
//!   cases then see a device whose host calls return before the work ran.
//! - **Deferred errors.** A queued job that fails cannot fail its own call,
//!   which has returned. Its error is kept and returned by the next call,
//!   naming the call that failed (as a CUDA kernel fault surfaces at the
//!   next synchronising call), so no failure is lost.
//! - **Ordered teardown.** Dropping the backend closes the queue and joins
//!   the worker, which finishes every queued job before dropping the inner
//!   backend.

// `unsafe` only where the trait declares it: the trust boundary's methods
// forward to the inner backend, each with why its guarantees hold there.
#![deny(unsafe_code)]

use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, DeviceSpan, ErrorKind, Launch, OpKind, RawBuffer,
    RawGraph, Registration, ReplayTarget, ResourceCounts,
};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// The queue backend's description of itself: one device, a worker queue in
/// front of the CPU reference, so it declares what the CPU reference does
/// (the defaults of `Registration::new`: Native capture, device timing,
/// every capability).
pub const REGISTRATION: Registration = Registration::new(
    "queue",
    None,
    || Ok(1),
    |index| {
        let inner = Box::new(seam_cpu::CpuBackend::new(index));
        QueueBackend::new(inner, index).map(|b| Box::new(b) as Box<dyn Backend>)
    },
);

type Job = Box<dyn FnOnce(&mut dyn Backend) + Send>;

/// The first failure of a queued job, until a call reports it.
type Deferred = Arc<Mutex<Option<(&'static str, ErrorKind)>>>;

/// A backend whose calls run, in order, on a worker thread.
pub struct QueueBackend {
    info: DeviceInfo,
    support: CaptureSupport,
    timing: Result<(), String>,
    node_timing: seam::NodeTiming,
    queue: Option<mpsc::Sender<Job>>,
    worker: Option<JoinHandle<()>>,
    deferred: Deferred,
}

fn worker_gone() -> ErrorKind {
    ErrorKind::Unavailable {
        reason: "the queue's worker thread has stopped".into(),
    }
}

impl QueueBackend {
    /// Put `inner` behind a worker thread; device `queue:<index>`.
    pub fn new(inner: Box<dyn Backend>, index: usize) -> Result<QueueBackend, ErrorKind> {
        let behind = inner.info().clone();
        let info = DeviceInfo {
            backend: REGISTRATION.name.into(),
            index,
            name: format!("worker queue over {} ({})", behind.id(), behind.name),
            driver: behind.driver.clone(),
        };
        let support = inner.capture_support();
        let timing = inner.device_timing();
        let node_timing = inner.node_timing();
        let (queue, jobs) = mpsc::channel::<Job>();
        let worker = std::thread::Builder::new()
            .name(format!("seam-queue:{index}"))
            .spawn(move || {
                let mut inner = inner;
                for job in jobs {
                    job(&mut *inner);
                }
                // Every queued job has run; now the inner backend tears down.
                drop(inner);
            })
            .map_err(|e| ErrorKind::Unavailable {
                reason: format!("could not start the queue's worker thread: {e}"),
            })?;
        Ok(QueueBackend {
            info,
            support,
            timing,
            node_timing,
            queue: Some(queue),
            worker: Some(worker),
            deferred: Arc::default(),
        })
    }

    /// Return (once) the error of a queued job that failed.
    fn take_deferred(&self) -> Result<(), ErrorKind> {
        let failed = self
            .deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match failed {
            None => Ok(()),
            Some((call, e)) => Err(ErrorKind::Driver {
                driver_call: format!("{call} (queued earlier, reported by the next call)"),
                message: e.to_string(),
            }),
        }
    }

    fn send(&self, job: Job) -> Result<(), ErrorKind> {
        let queue = self.queue.as_ref().ok_or_else(worker_gone)?;
        queue.send(job).map_err(|_| worker_gone())
    }

    /// Queue `f` and return at once; a failure is reported by a later call.
    fn post(
        &self,
        call: &'static str,
        f: impl FnOnce(&mut dyn Backend) -> Result<(), ErrorKind> + Send + 'static,
    ) -> Result<(), ErrorKind> {
        self.take_deferred()?;
        let deferred = self.deferred.clone();
        self.send(Box::new(move |b| {
            if let Err(e) = f(b) {
                deferred
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert((call, e));
            }
        }))
    }

    /// Run `f` behind everything queued so far and wait for its answer. A
    /// queued job that failed before it is reported first.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Backend) -> Result<T, ErrorKind> + Send + 'static,
    ) -> Result<T, ErrorKind> {
        self.take_deferred()?;
        let (answer, answered) = mpsc::sync_channel(1);
        self.send(Box::new(move |b| {
            let _ = answer.send(f(b));
        }))?;
        let r = answered.recv().map_err(|_| worker_gone())?;
        self.take_deferred()?;
        r
    }
}

impl Drop for QueueBackend {
    fn drop(&mut self) {
        // Closing the queue ends the worker's loop once it has run every job.
        self.queue = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

#[allow(unsafe_code)] // the trait's `unsafe fn`s (the trust boundary, seam::Backend)
impl Backend for QueueBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn capture_support(&self) -> CaptureSupport {
        self.support.clone()
    }
    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.call(move |b| b.alloc(bytes))
    }
    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        // SAFETY (for every forwarding call below): jobs run on the inner
        // backend in the order they were posted, with the arguments core
        // gave this backend; so what core guarantees this call holds for
        // the inner one when the job runs.
        self.post("free", move |b| unsafe { b.free(buffer) })
    }
    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        let data = data.to_vec();
        // SAFETY: forwarded in order, unchanged (see `free`).
        self.post("write", move |b| unsafe { b.write(buffer, offset, &data) })
    }
    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        let len = out.len();
        let bytes = self.call(move |b| {
            let mut v = vec![0u8; len];
            // SAFETY: forwarded in order, unchanged (see `free`).
            unsafe { b.read(buffer, offset, &mut v) }.map(|()| v)
        })?;
        out.copy_from_slice(&bytes);
        Ok(())
    }
    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        let launch = launch.clone();
        // SAFETY: forwarded in order, unchanged (see `free`).
        self.post("launch", move |b| unsafe { b.launch(&launch) })
    }
    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.call(|b| b.synchronize())
    }
    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        let ops = ops.to_vec();
        self.call(move |b| b.prepare(&ops))
    }
    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.call(|b| b.begin_capture())
    }
    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        self.call(|b| b.end_capture_into_current())
    }
    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.call(|b| b.end_capture_graph())
    }
    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        // SAFETY: forwarded in order, unchanged (see `free`).
        self.post("replay", move |b| unsafe { b.replay(target) })
    }
    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        // SAFETY: forwarded in order, unchanged (see `free`).
        self.post("destroy_graph", move |b| unsafe { b.destroy_graph(graph) })
    }
    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.call(|b| b.abort_capture())
    }
    fn live_resources(&self) -> ResourceCounts {
        // A worker that has stopped holds nothing any more.
        self.call(|b| Ok(b.live_resources())).unwrap_or_default()
    }
    fn device_timing(&self) -> Result<(), String> {
        self.timing.clone()
    }
    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.call(move |b| b.set_device_timing(on))
    }
    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.post("begin_timed", move |b| b.begin_timed(tag))
    }
    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.post("end_timed", move |b| b.end_timed(tag))
    }
    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.call(|b| b.take_device_spans())
    }
    fn node_timing(&self) -> seam::NodeTiming {
        self.node_timing.clone()
    }
    fn set_node_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.call(move |b| b.set_node_timing(on))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seam::testing::{Forward, Hooks, NullBackend};

    /// Fails the first `launch` it sees.
    struct FailFirstLaunch(bool);
    impl Hooks for FailFirstLaunch {
        fn before(&mut self, call: &'static str) -> Result<(), ErrorKind> {
            if call == "launch" && !self.0 {
                self.0 = true;
                return Err(ErrorKind::Injected { call });
            }
            Ok(())
        }
    }

    fn queue_over_failing() -> QueueBackend {
        let inner = Forward::new(
            Box::new(NullBackend::new(CaptureSupport::Native)),
            FailFirstLaunch(false),
        );
        QueueBackend::new(Box::new(inner), 0).unwrap()
    }

    /// A queued launch that fails is not lost: its own call has returned
    /// `Ok`, and the next call returns its error, naming it, once.
    /// Mutation: `post` ignoring `f`'s error → red.
    #[test]
    fn a_failed_queued_job_is_reported_by_the_next_call() {
        let mut q = seam::testing::Direct::new(queue_over_failing());
        let buf = q.alloc(16).unwrap();
        let fill = seam::testing::RawCall::whole(
            seam::OpKind::Fill,
            DType::U32,
            &[buf],
            4,
            seam::Params::dims(4, 0, 0),
        );
        q.launch(&fill).expect("a queued launch returns at once");
        let e = q.synchronize().unwrap_err();
        assert!(
            matches!(&e, ErrorKind::Driver { driver_call, message }
                if driver_call.starts_with("launch (queued earlier")
                    && message.contains("injected fault in launch")),
            "{e}"
        );
        q.synchronize().expect("reported once");
    }

    /// Records the inner backend's live buffers when it is dropped.
    struct AtDrop(Arc<Mutex<Option<usize>>>);
    impl Hooks for AtDrop {
        fn on_drop(&mut self, inner: &dyn Backend) {
            *self.0.lock().unwrap() = Some(inner.live_resources().buffers);
        }
    }

    /// Dropping the backend runs every queued job, then drops the inner
    /// backend, before `drop` returns: 64 queued frees have all happened
    /// when the inner backend goes. Mutation: `Drop` without joining the
    /// worker → red (nothing recorded yet when `drop` returns).
    #[test]
    fn drop_finishes_the_queue_then_the_inner_backend() {
        let seen = Arc::new(Mutex::new(None));
        let inner = Forward::new(
            Box::new(NullBackend::new(CaptureSupport::Native)),
            AtDrop(seen.clone()),
        );
        let mut q = seam::testing::Direct::new(QueueBackend::new(Box::new(inner), 0).unwrap());
        let bufs: Vec<RawBuffer> = (0..64).map(|_| q.alloc(4).unwrap()).collect();
        for b in bufs {
            q.free(b).unwrap();
        }
        drop(q);
        assert_eq!(*seen.lock().unwrap(), Some(0));
    }
}
