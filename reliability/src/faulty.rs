//! `FaultyBackend`: a wrapper that fails the k-th call into any backend.
//!
//! Every trait method counts except the pure queries core may call at any
//! time (`info`, `capture_support`, `supports_capture`, `device_timing`,
//! `live_resources`): the ones `seam::testing::Forward` passes to its hooks. The failing call
//! returns [`ErrorKind::Injected`] naming itself and does *not* reach the
//! wrapped backend: it models a call that failed before doing anything, which
//! is the one failure every backend can produce. After it fires once the plan
//! disarms itself, so recovery runs on a healthy backend.
//!
//! The wrapper also records the wrapped backend's live counts when it is
//! dropped (after core's teardown has run), so a test can check that dropping
//! a `Device` leaves nothing behind.

use seam::testing::{Forward, Hooks};
use seam::{Backend, ErrorKind, ResourceCounts};
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

/// A backend that fails where its [`FaultPlan`] says, and otherwise
/// forwards (`FaultyBackend::new(inner, Faults(plan))`).
pub type FaultyBackend = Forward<Faults>;

/// The fault plan as [`Forward`] hooks: every forwarded call is gated, and
/// the wrapped backend's live counts are recorded when it is dropped (after
/// core's `State::drop` has run, before the wrapped backend's own drop).
pub struct Faults(pub Arc<FaultPlan>);

impl Hooks for Faults {
    fn before(&mut self, call: &'static str) -> Result<(), ErrorKind> {
        self.0.gate(call)
    }
    fn on_drop(&mut self, inner: &dyn Backend) {
        *lock(&self.0.at_drop) = Some(inner.live_resources());
    }
}
