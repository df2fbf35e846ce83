//! Heap allocations the Vulkan backend makes per eager launch and per
//! replay through `Device::launch` / `Device::replay`, after warm-up,
//! tracing off, counted on the calling thread by a counting global
//! allocator (a test binary of its own). It counts; it times nothing.
//! Driver allocations (the ICD's own `malloc`) are not Rust allocations and
//! are not counted.
//!
//! Core's share is zero (`core/tests/no_alloc.rs`), and so is this
//! backend's: an eager launch borrows its buffers and builds its
//! bindings, audit accesses and descriptor writes on the stack, allocates
//! its descriptor set through the raw entry point (ash's wrapper returns a
//! `Vec`) and keeps no binding list for a one-time batch; a batch's `end`
//! deduplicates its buffers in place; `Gpu::submit` holds its host-access
//! locks inline; a wait polls and blocks on the in-flight fences in place.
//! Neither depends on how far the device lags: eager launches cycle
//! through a ring of batches made at the first launch (waiting for the
//! oldest rather than making another), and the queue's pending submissions
//! are bounded, their queue and spare fences reserved at that bound.
//! Mutations: any of those back on a `Vec` → red.

// A `GlobalAlloc` can only be implemented with `unsafe`; each block says why
// it is sound.
#![allow(unsafe_code)]

use libtest_mimic::Completion;
use seam::{ops, DType, Device, GraphRef};

#[path = "../../device_trials.rs"]
mod device_trials;

#[path = "../../../core/tests/support/counting.rs"]
mod counting;
use counting::allocations;

fn main() {
    device_trials::run(
        "vulkan:0",
        &[],
        vulkan,
        &[(
            "allocations_per_launch_and_replay",
            allocations_per_launch_and_replay,
        )],
    )
}

fn vulkan() -> Result<Device, String> {
    seam_vulkan::device_count()?;
    let backend =
        seam_vulkan::open(0).map_err(|e| format!("vulkan:0 was found but does not open: {e}"))?;
    Ok(Device::new(backend))
}

const N: u64 = 1_000;

fn allocations_per_launch_and_replay(dev: Device) -> Completion {
    let n = 256u32;
    let [a, b, c] = [(); 3].map(|_| dev.alloc(DType::F32, n as usize).unwrap());
    dev.write(a, 0, &vec![1.0f32; n as usize]).unwrap();
    use seam::OpKind::*;
    dev.prepare(&[ScaleAdd, Add, Fill, Copy].map(|op| (op, DType::F32)))
        .unwrap();
    // One and three bindings too; 1,000 launches span four batches.
    let eager = |dev: &Device| {
        for _ in 0..N / 4 {
            dev.launch(&ops::scale_add(a, b, n, 1.0, 0.5)).unwrap();
            dev.launch(&ops::add(a, b, c, n)).unwrap();
            dev.launch(&ops::fill(b, n, 0)).unwrap();
            dev.launch(&ops::copy(c, b, n)).unwrap();
        }
        dev.synchronize().unwrap();
    };
    dev.low_level().begin_capture().unwrap();
    dev.launch(&ops::scale_add(a, b, n, 1.0, 0.5)).unwrap();
    dev.launch(&ops::add(a, b, c, n)).unwrap();
    let graph = dev.low_level().end_capture_graph().unwrap();
    let replays = |dev: &Device| {
        for i in 0..N {
            dev.replay(GraphRef::Handle(graph)).unwrap();
            if i % 100 == 99 {
                dev.synchronize().unwrap();
            }
        }
    };
    // Three rounds of four batches: every batch of the eager ring (eight)
    // has recorded its share of launches before the count.
    for _ in 0..3 {
        eager(&dev);
        replays(&dev);
    }
    let launched = allocations(|| eager(&dev));
    let replayed = allocations(|| replays(&dev));
    println!(
        "vulkan allocations: {launched} in {N} eager launches (with their batches' submits and one synchronize), {replayed} in {N} replays (with 10 synchronizes)"
    );
    assert_eq!(
        (launched, replayed),
        (0, 0),
        "heap allocations in {N} eager launches, {N} replays"
    );
    dev.destroy_graph(graph).unwrap();
    Completion::Completed
}
