//! The host-side cost of seam's CUDA/HIP path, without a GPU: eager
//! launches and graph rebinds through `Device` on a `StreamBackend` over
//! the quiet fake driver, for an instruction-counting profiler:
//!
//! ```text
//! cargo build --release -p seam-streamgraph --example host_profile
//! valgrind --tool=callgrind --toggle-collect='host_profile::eager' \
//!     target/release/examples/host_profile eager
//! valgrind --tool=callgrind --toggle-collect='host_profile::rebinds' \
//!     target/release/examples/host_profile rebind
//! valgrind --tool=callgrind --toggle-collect='host_profile::params' \
//!     target/release/examples/host_profile params 1000
//! ```
//!
//! `eager`: 100,000 `scale_add` launches over two buffers. `rebind`: a
//! captured chain of 1,000 `scale_add` launches over `x`, rebound 200 times
//! alternating `x` → `y` → `x`. `params [N]`: a captured chain of N (1,000)
//! launches, 200 updates of one launch's parameters each, never coming
//! back to a set the graph ran (measured loop: `params`; per update, the
//! cost should not grow with N). The measured loops are `eager` and
//! `rebinds` (setup and warm-up are outside them), so the collected
//! instruction count divided by 100,000 launches, or by 200 × 1,000 nodes,
//! is the cost of one. It measures nothing itself: it only runs the loops.

use seam::{ops, BufferId, Change, DType, Device, GraphId, GraphRef};
use std::hint::black_box;

const LAUNCHES: usize = 100_000;
const NODES: usize = 1_000;
const REBINDS: usize = 200;
const N: u32 = 1 << 16;

fn device() -> Device {
    let (b, fake) = seam_streamgraph::fake::backend(false);
    fake.set_quiet(true);
    Device::new(Box::new(b))
}

/// The measured eager loop (`--toggle-collect` names it).
#[inline(never)]
fn eager(dev: &Device, a: BufferId, b: BufferId) {
    eager_loop(dev, a, b, LAUNCHES);
}

#[inline(never)]
fn eager_loop(dev: &Device, a: BufferId, b: BufferId, count: usize) {
    for _ in 0..count {
        dev.launch(black_box(&ops::scale_add(a, b, N, 2.0, 1.0)))
            .unwrap();
    }
}

/// The measured rebinds (`--toggle-collect` names it).
#[inline(never)]
fn rebinds(dev: &Device, graph: GraphId, x: BufferId, y: BufferId) {
    rebind_loop(dev, graph, x, y, REBINDS);
}

#[inline(never)]
fn rebind_loop(dev: &Device, graph: GraphId, x: BufferId, y: BufferId, count: usize) {
    for i in 0..count {
        let pair = if i % 2 == 0 { (x, y) } else { (y, x) };
        dev.update(
            GraphRef::Handle(graph),
            &Change::rebinds(black_box(&[pair])),
        )
        .unwrap();
    }
}

/// The measured parameter updates (`--toggle-collect` names it).
#[inline(never)]
fn params(dev: &Device, graph: GraphId, nodes: usize) {
    params_loop(dev, graph, nodes, 1, REBINDS);
}

/// Update `count` times the parameters of one launch of a graph of
/// `nodes`, a different launch and a value never used before each time
/// (a KV-cache slot moving every step): no update comes back to a set.
#[inline(never)]
fn params_loop(dev: &Device, graph: GraphId, nodes: usize, first: usize, count: usize) {
    for i in first..first + count {
        let change = Change::Params {
            index: i * 7 % nodes,
            params: seam::Params::dims(N, 0, 0).with_scalars(2.0 + i as f32, 1.0),
        };
        dev.update(GraphRef::Handle(graph), black_box(&[change]))
            .unwrap();
    }
}

fn main() {
    let what = std::env::args().nth(1).unwrap_or_else(|| "both".into());
    // `params` mode: the graph's launch count (default NODES).
    let nodes: usize = std::env::args()
        .nth(2)
        .map_or(NODES, |n| n.parse().expect("a launch count"));
    let dev = device();
    let [x, y, z] = [(); 3].map(|_| dev.alloc(DType::F32, N as usize).unwrap());
    if what == "eager" || what == "both" {
        eager_loop(&dev, x, z, 100);
        eager(&dev, x, z);
        dev.synchronize().unwrap();
    }
    if what == "rebind" || what == "both" {
        dev.low_level().begin_capture().unwrap();
        for _ in 0..NODES {
            dev.launch(&ops::scale_add(x, z, N, 2.0, 1.0)).unwrap();
        }
        let graph = dev.low_level().end_capture_graph().unwrap();
        rebind_loop(&dev, graph, x, y, 2);
        rebinds(&dev, graph, x, y);
        dev.replay(GraphRef::Handle(graph)).unwrap();
        dev.synchronize().unwrap();
    }
    if what == "params" {
        dev.low_level().begin_capture().unwrap();
        for _ in 0..nodes {
            dev.launch(&ops::scale_add(x, z, N, 2.0, 1.0)).unwrap();
        }
        let graph = dev.low_level().end_capture_graph().unwrap();
        params_loop(&dev, graph, nodes, REBINDS + 1, 2);
        params(&dev, graph, nodes);
        dev.replay(GraphRef::Handle(graph)).unwrap();
        dev.synchronize().unwrap();
    }
}
