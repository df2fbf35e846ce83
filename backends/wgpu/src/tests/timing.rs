//! Device and node timing on the device: spans from real timestamps.

use crate::backend::WgpuBackend;
use libtest_mimic::Completion;
use seam::testing::Direct;
use seam::{ops, Device};

/// Traced replays of a node-timed graph of 300 dependent launches (five
/// pieces of a replay: 16, 32, 64, 128, 60), with a traced eager launch
/// between replays, past the first query set (15 replays: over 4,096
/// stamps): every replay has its own span and 300 node spans, launch `i`
/// ending exactly where launch `i + 1` starts, all inside the replay's
/// span; every eager launch has its span, between the replays around it,
/// each span lasting a while and starting after the one before; and the
/// work is all done. Mutations: the query set of a stamp taken as
/// the first one (`stamp / QUERIES_PER_SET` → 0), a piece's stamps
/// numbered from the graph's start (`q + start` → `q`), the node record
/// dropped → red.
pub fn node_spans_tile_long_replays_across_query_sets(b: Direct<WgpuBackend>) -> Completion {
    const LAUNCHES: usize = 300;
    const REPLAYS: usize = 15;
    let d = Device::new(Box::new(b.into_inner()));
    let one = d.buffer_from(&[1u32; 64]).expect("upload");
    let x = d.buffer_from(&[0u32; 64]).expect("upload");
    d.set_node_timing(true).expect("node timing");
    let s = d.capture().expect("capture");
    for _ in 0..LAUNCHES {
        d.launch(&ops::add(one.id(), x.id(), x.id(), 64))
            .expect("launch");
    }
    let g = s.end_graph().expect("end");
    d.set_tracing(true);
    for _ in 0..REPLAYS {
        g.replay().expect("replay");
        d.launch(&ops::add(one.id(), x.id(), x.id(), 64))
            .expect("eager");
    }
    d.set_tracing(false);
    let log = d.take_trace_log("long").expect("trace");
    let want = (REPLAYS * (LAUNCHES + 1)) as u32;
    assert_eq!(x.read().expect("read"), vec![want; 64]);
    let replays: Vec<u64> = log
        .events
        .iter()
        .filter(|e| matches!(e.kind, seam::EventKind::Replay { .. }))
        .map(|e| e.seq)
        .collect();
    assert_eq!(replays.len(), REPLAYS);
    assert_eq!(
        log.device_spans.len(),
        2 * REPLAYS,
        "replays and eager launches"
    );
    assert_eq!(log.node_spans.len(), REPLAYS * LAUNCHES);
    // Real device times: each span takes time (its work does), and each
    // starts after the one before it ended, later than it started.
    let mut last = None;
    for w in &log.device_spans {
        assert!(w.end_ns > w.start_ns, "{w:?}");
        if let Some((start, end)) = last {
            assert!(
                w.start_ns >= end && w.start_ns > start,
                "{w:?} after {last:?}"
            );
        }
        last = Some((w.start_ns, w.end_ns));
    }
    for tag in replays {
        let whole = log
            .device_spans
            .iter()
            .find(|s| s.tag == tag)
            .expect("the replay's span");
        let mut nodes: Vec<_> = log.node_spans.iter().filter(|s| s.tag == tag).collect();
        nodes.sort_by_key(|s| s.nodes.map(|n| n.first));
        assert_eq!(nodes.len(), LAUNCHES, "replay {tag}");
        for (i, s) in nodes.iter().enumerate() {
            assert_eq!(s.nodes.map(|n| (n.first, n.count)), Some((i as u32, 1)));
            assert!(s.end_ns >= s.start_ns, "replay {tag}, launch {i}: {s:?}");
            if let Some(next) = nodes.get(i + 1) {
                assert_eq!(s.end_ns, next.start_ns, "replay {tag}, launch {i}");
            }
        }
        assert!(nodes[0].start_ns >= whole.start_ns, "replay {tag}");
        assert!(nodes[LAUNCHES - 1].end_ns <= whole.end_ns, "replay {tag}");
    }
    Completion::Completed
}
