//! Core's launch and replay paths allocate nothing in steady state (issue
//! 20): after a warm-up, 1,000 eager launches and 1,000 replays through
//! `Device::launch` and `Device::replay`, tracing off, on
//! `seam::testing::NullBackend`, make zero heap allocations on the calling
//! thread. A test binary of its own because it installs a counting global
//! allocator. It counts; it times nothing.
//!
//! The calls are built inside the loop with the `ops::*` constructors, as a
//! user's hot loop builds them, so the count covers `OpCall` too.
//!
//! `NullBackend` logs every call it gets into a `Vec` shared with the test:
//! the warm-up grows it, and it is cleared (keeping its capacity) before the
//! counted loops, so its pushes do not reallocate there. That log is the test
//! backend's, not core's.
//!
//! Mutations: `validate::lower` collecting its metas into a `Vec` again,
//! `Launch::buffers` or the `ops::*` constructors back on `Vec` → red.

// A `GlobalAlloc` can only be implemented with `unsafe`; each block says why
// it is sound.
#![allow(unsafe_code)]

use seam::testing::NullBackend;
use seam::{ops, CaptureSupport, DType, Device, GraphRef};

#[path = "support/counting.rs"]
mod counting;
use counting::allocations;
#[path = "support/graphs.rs"]
mod graphs;

const N: usize = 1_000;

#[test]
fn eager_launches_and_replays_allocate_nothing() {
    let null = NullBackend::new(CaptureSupport::Native);
    let log = null.log();
    let dev = Device::new(Box::new(null));
    let n = 64u32;
    let [a, b, c] = [(); 3].map(|_| dev.alloc(DType::F32, n as usize).unwrap());

    // One launch of every arity, and one op of each validation shape.
    let eager = |dev: &Device| {
        for _ in 0..N / 4 {
            dev.launch(&ops::fill(a, n, 1.0f32.to_bits())).unwrap();
            dev.launch(&ops::scale_add(a, b, n, 2.0, 1.0)).unwrap();
            dev.launch(&ops::add(a, b, c, n)).unwrap();
            dev.launch(&ops::rms_norm(a, b, c, 8, 8, 1e-5)).unwrap();
        }
    };
    let graph = graphs::capture_both(&dev, [a, b, c], n);
    let replays = |dev: &Device| graphs::replay_alternating(dev, graph, N);

    // Warm-up: twice the counted work, so the null backend's log has the
    // capacity for it; then emptied, keeping that capacity.
    for _ in 0..2 {
        eager(&dev);
        replays(&dev);
    }
    log.lock().unwrap().clear();

    let launched = allocations(|| eager(&dev));
    let replayed = allocations(|| replays(&dev));
    assert_eq!(
        log.lock().unwrap().len(),
        2 * N,
        "every launch and replay reached the backend"
    );
    assert_eq!(
        (launched, replayed),
        (0, 0),
        "heap allocations in {N} eager launches, {N} replays"
    );
    assert_eq!(
        dev.replay_count(GraphRef::Handle(graph)).unwrap(),
        3 * N as u64 / 2
    );
}

/// The counter sees what it must: a launch that records into an open
/// capture does allocate (core keeps each recorded launch), so a counter
/// that counted nothing would fail here.
#[test]
fn the_counter_counts() {
    let dev = Device::new(Box::new(NullBackend::new(CaptureSupport::Native)));
    let a = dev.alloc(DType::F32, 4).unwrap();
    dev.low_level().begin_capture().unwrap();
    let counted = allocations(|| {
        for _ in 0..8 {
            dev.launch(&ops::fill(a, 4, 0)).unwrap();
        }
    });
    dev.low_level().abort_capture().unwrap();
    assert!(counted > 0, "recording 8 launches allocated nothing?");
}
