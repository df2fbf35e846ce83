//! The replay workload of the allocation tests (core's, over the null
//! backend; the stream backend's, over the fake driver): one graph handle
//! (add, gemm) and the current exec (copy), replayed alternately. Included
//! with `#[path]` next to `counting.rs`.

use seam::{ops, BufferId, Device, GraphId, GraphRef};

/// Capture the graph handle and the current exec over `a`, `b`, `c` (each
/// at least `n` ≥ 64 f32 elements); the handle's id.
pub fn capture_both(dev: &Device, [a, b, c]: [BufferId; 3], n: u32) -> GraphId {
    dev.low_level().begin_capture().unwrap();
    dev.launch(&ops::add(a, b, c, n)).unwrap();
    dev.launch(&ops::gemm(a, b, c, 8, 8, 8)).unwrap();
    let graph = dev.low_level().end_capture_graph().unwrap();
    dev.low_level().begin_capture().unwrap();
    dev.launch(&ops::copy(c, a, n)).unwrap();
    dev.low_level().end_capture_into_current().unwrap();
    graph
}

/// `count` replays, alternating between `graph` and the current exec.
pub fn replay_alternating(dev: &Device, graph: GraphId, count: usize) {
    for i in 0..count {
        let target = if i % 2 == 0 {
            GraphRef::Handle(graph)
        } else {
            GraphRef::Current
        };
        dev.replay(target).unwrap();
    }
}
