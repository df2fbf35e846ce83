//! The CUDA and HIP backends' shared launch and replay paths allocate
//! nothing in steady state: after a warm-up, 1,000 eager
//! launches and 1,000 replays through `Device::launch` and
//! `Device::replay` (tracing off) on a `StreamBackend` over the fake
//! driver make zero heap allocations on the calling thread. A test binary
//! of its own because it installs a counting global allocator (core's
//! `tests/support/counting.rs`). It counts; it times nothing.
//!
//! What is counted: all of core's path (`Device`, validation, `OpCall`s
//! built in the loop with the `ops::*` constructors), all of
//! `StreamBackend`'s (buffer and kernel lookups, `bindings`, `check`'s
//! re-validation, `KernelLaunch`, `KernelArgs` and the `ArgPointers` array
//! that `cuLaunchKernel` / `hipModuleLaunchKernel` read; `StreamGraphs`'
//! replay), and the fake driver's `launch_kernel` and graph `launch` as
//! they run quiet (`FakeDriver::set_quiet`): they pack the arguments and
//! the pointer array as the real drivers do, count the launch and model the
//! stream, but keep no log (its entries hold names and buffer lists) and no
//! copy of each replayed graph's nodes; those would be the fake's
//! allocations, not the backend's. What is not counted: the real CUDA and
//! HIP `sys` layers (no GPU here; after the fake's packing they make one FFI
//! call each, with no Rust allocation), and whatever the driver libraries
//! allocate themselves (not Rust allocations).
//!
//! Mutations: `KernelLaunch::new` collecting its byte offsets into a `Vec`
//! again, or `StreamBackend::bindings` collecting into a `Vec` → red
//! (1,000 eager allocations; both tried), as would `KernelArgs::pointers`
//! returning a `Vec`; on the replay side, the fake copying each replayed
//! exec's nodes while quiet → red (tried).

// A `GlobalAlloc` can only be implemented with `unsafe`; each block says why
// it is sound.
#![allow(unsafe_code)]

use seam::{ops, DType, Device};
use seam_streamgraph::fake::FakeDriver;

#[path = "../../../core/tests/support/counting.rs"]
mod counting;
use counting::allocations;
#[path = "../../../core/tests/support/graphs.rs"]
mod graphs;

const N: usize = 1_000;

/// A device over a quiet fake driver, and an observer of that fake.
fn device() -> (Device, FakeDriver) {
    let (b, fake) = seam_streamgraph::fake::backend(false);
    fake.set_quiet(true);
    (Device::new(Box::new(b)), fake)
}

#[test]
fn eager_launches_and_replays_allocate_nothing() {
    let (dev, fake) = device();
    let n = 64u32;
    let [a, b, c] = [(); 3].map(|_| dev.alloc(DType::F32, n as usize).unwrap());
    let a8 = a.from_offset(8);

    // One to three bindings, one view at an offset, every launch shape
    // (elementwise, row, gemm tiles).
    let eager = |dev: &Device| {
        for _ in 0..N / 5 {
            dev.launch(&ops::fill(a, n, 1.0f32.to_bits())).unwrap();
            dev.launch(&ops::scale_add(a, b, n, 2.0, 1.0)).unwrap();
            dev.launch(&ops::add(a8, b, c, n - 8)).unwrap();
            dev.launch(&ops::rms_norm(a, b, c, 8, 8, 1e-5)).unwrap();
            dev.launch(&ops::gemm(a, b, c, 8, 8, 8)).unwrap();
        }
    };
    let graph = graphs::capture_both(&dev, [a, b, c], n);
    let replays = |dev: &Device| graphs::replay_alternating(dev, graph, N);

    // Warm-up: the first eager launch of each op loads its kernels (the
    // captures above loaded every module already); the fake's pending-exec
    // list gets its capacity.
    for _ in 0..2 {
        eager(&dev);
        replays(&dev);
    }
    let before = fake.launch_counts();
    let launched = allocations(|| eager(&dev));
    let replayed = allocations(|| replays(&dev));
    let after = fake.launch_counts();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (N as u64, N as u64),
        "every launch and replay reached the driver"
    );
    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!(
        (launched, replayed),
        (0, 0),
        "heap allocations in {N} eager launches, {N} replays"
    );
    dev.synchronize().unwrap();
}

/// The counter sees what it must: the same eager launches with the fake
/// logging (each entry holds the entry point's name and the buffer ids)
/// allocate, so a counter that counted nothing would fail here.
#[test]
fn the_counter_counts() {
    let (dev, fake) = device();
    let a = dev.alloc(DType::F32, 4).unwrap();
    dev.launch(&ops::fill(a, 4, 0)).unwrap();
    fake.set_quiet(false);
    let counted = allocations(|| {
        for _ in 0..8 {
            dev.launch(&ops::fill(a, 4, 0)).unwrap();
        }
    });
    assert!(counted >= 8, "8 logged launches allocated {counted} times");
    dev.synchronize().unwrap();
}
