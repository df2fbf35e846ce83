//! `FaultyBackend`: a wrapper that fails the k-th call into any backend.
//!
//! Every trait method counts except the three pure queries core may call at
//! any time (`info`, `capture_support`, `live_resources`). The failing call
//! returns [`ErrorKind::Injected`] naming itself and does *not* reach the
//! wrapped backend: it models a call that failed before doing anything, which
//! is the one failure every backend can produce. After it fires once the plan
//! disarms itself, so recovery runs on a healthy backend.
//!
//! The wrapper also records the wrapped backend's live counts when it is
//! dropped (after core's teardown has run), so a test can check that dropping
//! a `Device` leaves nothing behind.

use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, ErrorKind, Launch, OpKind, RawBuffer, RawGraph,
    ReplayTarget, ResourceCounts,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

const OFF: u64 = u64::MAX;

/// Shared between a `FaultyBackend` (owned by a `Device`) and the test.
#[derive(Debug)]
pub struct FaultPlan {
    calls: AtomicU64,
    fail_at: AtomicU64,
    recording: AtomicBool,
    log: Mutex<Vec<&'static str>>,
    fired: Mutex<Option<(u64, &'static str)>>,
    at_drop: Mutex<Option<ResourceCounts>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FaultPlan {
    /// A plan that injects nothing until armed.
    pub fn new() -> Arc<FaultPlan> {
        Arc::new(FaultPlan {
            calls: AtomicU64::new(0),
            fail_at: AtomicU64::new(OFF),
            recording: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
            fired: Mutex::new(None),
            at_drop: Mutex::new(None),
        })
    }

    /// Restart counting from 0 and fail call number `k` (0-based) from now on;
    /// `None` only counts. Also clears the call log and the last fault.
    pub fn arm(&self, k: Option<u64>) {
        self.calls.store(0, Ordering::SeqCst);
        lock(&self.log).clear();
        *lock(&self.fired) = None;
        self.fail_at.store(k.unwrap_or(OFF), Ordering::SeqCst);
        self.recording.store(true, Ordering::SeqCst);
    }

    /// Stop injecting and logging (counting goes on).
    pub fn disarm(&self) {
        self.fail_at.store(OFF, Ordering::SeqCst);
        self.recording.store(false, Ordering::SeqCst);
    }

    /// Calls counted since the last `arm`.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Names of the calls made since the last `arm`, in order.
    pub fn log(&self) -> Vec<&'static str> {
        lock(&self.log).clone()
    }

    /// The fault injected since the last `arm`: (call number, call name).
    pub fn fired(&self) -> Option<(u64, &'static str)> {
        *lock(&self.fired)
    }

    /// The wrapped backend's live counts when the wrapper was dropped.
    pub fn live_at_drop(&self) -> Option<ResourceCounts> {
        *lock(&self.at_drop)
    }

    fn gate(&self, call: &'static str) -> Result<(), ErrorKind> {
        let i = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.recording.load(Ordering::SeqCst) {
            lock(&self.log).push(call);
        }
        if self
            .fail_at
            .compare_exchange(i, OFF, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            *lock(&self.fired) = Some((i, call));
            return Err(ErrorKind::Injected { call });
        }
        Ok(())
    }
}

/// A backend that fails where its [`FaultPlan`] says, and otherwise forwards.
pub struct FaultyBackend {
    inner: Box<dyn Backend>,
    plan: Arc<FaultPlan>,
}

impl FaultyBackend {
    pub fn new(inner: Box<dyn Backend>, plan: Arc<FaultPlan>) -> FaultyBackend {
        FaultyBackend { inner, plan }
    }
}

impl Backend for FaultyBackend {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn capture_support(&self) -> CaptureSupport {
        self.inner.capture_support()
    }

    fn supports_capture(&self) -> bool {
        // A query with no error channel: counted, never failed.
        let _ = self.plan.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.supports_capture()
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.plan.gate("alloc")?;
        self.inner.alloc(bytes)
    }

    fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        self.plan.gate("free")?;
        self.inner.free(buffer)
    }

    fn write(&mut self, buffer: RawBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        self.plan.gate("write")?;
        self.inner.write(buffer, offset, data)
    }

    fn read(&mut self, buffer: RawBuffer, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.plan.gate("read")?;
        self.inner.read(buffer, offset, out)
    }

    fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        self.plan.gate("launch")?;
        self.inner.launch(launch)
    }

    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.plan.gate("synchronize")?;
        self.inner.synchronize()
    }

    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        self.plan.gate("prepare")?;
        self.inner.prepare(ops)
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.plan.gate("begin_capture")?;
        self.inner.begin_capture()
    }

    fn end_capture(&mut self) -> Result<(), ErrorKind> {
        self.plan.gate("end_capture")?;
        self.inner.end_capture()
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.plan.gate("end_capture_graph")?;
        self.inner.end_capture_graph()
    }

    fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.plan.gate("replay")?;
        self.inner.replay(target)
    }

    fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.plan.gate("destroy_graph")?;
        self.inner.destroy_graph(graph)
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.plan.gate("abort_capture")?;
        self.inner.abort_capture()
    }

    fn live_resources(&self) -> ResourceCounts {
        self.inner.live_resources()
    }
}

impl Drop for FaultyBackend {
    fn drop(&mut self) {
        // Core's `State::drop` has run by now; the inner backend has not.
        *lock(&self.plan.at_drop) = Some(self.inner.live_resources());
    }
}
