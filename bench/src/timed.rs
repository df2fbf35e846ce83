//! A profiling wrapper: a [`Backend`] that forwards every call to the real
//! backend and adds up the wall time spent inside `launch` and `replay`. Put
//! behind a [`seam::Device`], it splits a seam call into core's share (lock,
//! validation, lowering, bookkeeping) and the backend's share (which includes
//! the driver call), without touching core.

use seam::testing::{Forward, Hooks};
use seam::Backend;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Nanoseconds spent inside the wrapped backend, by call.
#[derive(Debug, Default)]
pub struct Clock {
    pub launch_ns: AtomicU64,
    pub launches: AtomicU64,
    pub replay_ns: AtomicU64,
    pub replays: AtomicU64,
}

impl Clock {
    pub fn reset(&self) {
        for a in [
            &self.launch_ns,
            &self.launches,
            &self.replay_ns,
            &self.replays,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }
}

/// The wrapped backend, adding to a [`Clock`].
pub type Timed = Forward<Timing>;

/// The [`Forward`] hooks that add `launch` and `replay` times to a clock.
pub struct Timing(Arc<Clock>);

/// Build a [`Timed`] backend and the clock it adds to.
pub fn timed(inner: Box<dyn Backend>) -> (Timed, Arc<Clock>) {
    let clock = Arc::new(Clock::default());
    (Forward::new(inner, Timing(clock.clone())), clock)
}

impl Hooks for Timing {
    fn after(&mut self, call: &'static str, started: Instant) {
        let (ns, count) = match call {
            "launch" => (&self.0.launch_ns, &self.0.launches),
            "replay" => (&self.0.replay_ns, &self.0.replays),
            _ => return,
        };
        ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        count.fetch_add(1, Ordering::Relaxed);
    }
}
