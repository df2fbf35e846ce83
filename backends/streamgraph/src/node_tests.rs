//! Node timing (C10) on the stream backend, through core's `Device`,
//! against the recording fake driver: an event record node before a
//! node-timed graph's first launch and after each, read once per traced
//! replay. (Each fake kernel takes 1 ms of the fake's device clock.)

use crate::backend_tests::assert_clean;
use crate::fake::Call;
use seam::{ops, BufferId, Change, Device, DeviceSpan, EventKind, Graph, NodeTiming};

/// Three launches, node-timed: every traced replay has three node spans
/// tagged with it, 1 ms each, tiling its span in capture order; after a
/// rebind (patched in place) the same indices come back; a graph captured
/// with node timing off has none; every event is destroyed at teardown.
/// Mutations: `replay` not marking the replay unread, `read_nodes` not
/// chaining the starts, `take_device_spans` not reading the unread
/// graphs, `stamp` skipped after a launch → red.
#[test]
fn every_launch_of_a_traced_replay_has_its_span() {
    let (b, d) = crate::fake::backend(false);
    let dev = Device::new(Box::new(b));
    assert_eq!(dev.node_timing(), NodeTiming::Native);
    let x = dev.buffer_from(&[1.0f32; 4]).unwrap();
    let y = dev.buffer_from(&[2.0f32; 4]).unwrap();
    let z = dev.buffer_from(&[0.0f32; 4]).unwrap();
    let chain = || {
        dev.launch(&ops::add(x.id(), y.id(), z.id(), 4)).unwrap();
        dev.launch(&ops::mul(z.id(), y.id(), x.id(), 4)).unwrap();
        dev.launch(&ops::add(x.id(), z.id(), y.id(), 4)).unwrap();
    };
    dev.set_node_timing(true).unwrap();
    let s = dev.capture().unwrap();
    chain();
    let timed = s.end_graph().unwrap();
    dev.set_node_timing(false).unwrap();
    let s = dev.capture().unwrap();
    chain();
    let untimed = s.end_graph().unwrap();
    let in_capture = d
        .log()
        .iter()
        .filter(|c| matches!(c, Call::RecordInCapture(_)))
        .count();
    assert_eq!(
        in_capture, 4,
        "one event before the launches, one after each"
    );

    traced_replays_tile(&dev, &timed, &untimed, (x.id(), z.id()), 1_000_000);
    drop((timed, untimed, x, y, z));
    drop(dev);
    assert_eq!(d.live(), (0, 0, 0), "graphs, execs, events");
    assert_clean(&d);
}

/// With tracing on: `timed` replayed twice, `untimed` once, `timed`
/// rebound (`rebind`, patched in place) and replayed again. Each of the
/// three traced replays of `timed` has one node span per launch (three),
/// tagged with it, each `node_ns` long, tiling its span in capture order
/// from its start; `untimed` has none.
pub(crate) fn traced_replays_tile(
    dev: &Device,
    timed: &Graph,
    untimed: &Graph,
    rebind: (BufferId, BufferId),
    node_ns: u64,
) {
    dev.set_tracing(true);
    timed.replay().unwrap();
    timed.replay().unwrap();
    untimed.replay().unwrap();
    dev.update(
        timed,
        &[Change::Rebind {
            old: rebind.0,
            new: rebind.1,
        }],
    )
    .unwrap();
    timed.replay().unwrap();
    let log = dev.take_trace_log("t").unwrap();
    assert_eq!(log.node_timing_unavailable, None);
    let g = timed.id().number();
    let replays: Vec<u64> = log
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Replay { graph: Some(n), .. } if n == g))
        .map(|e| e.seq)
        .collect();
    assert_eq!(replays.len(), 3);
    assert_eq!(log.node_spans.len(), 9, "{:?}", log.node_spans);
    for tag in replays {
        let whole = log.device_spans.iter().find(|s| s.tag == tag).unwrap();
        let nodes: Vec<&DeviceSpan> = log.node_spans.iter().filter(|s| s.tag == tag).collect();
        assert_eq!(nodes.len(), 3);
        let mut at = whole.start_ns;
        for (i, s) in nodes.iter().enumerate() {
            assert_eq!(s.nodes.unwrap().first, i as u32);
            assert_eq!((s.start_ns, s.end_ns), (at, at + node_ns), "{nodes:?}");
            at = s.end_ns;
        }
        assert!(at <= whole.end_ns);
    }
}

/// A driver without events has no node timing, and says why; turning it
/// on is refused. Mutation: `set_node_timing` accepting it → red.
#[test]
fn no_events_no_node_timing() {
    let (b, d) = crate::fake::backend(false);
    d.set_events_available(false);
    let dev = Device::new(Box::new(b));
    assert!(matches!(dev.node_timing(), NodeTiming::Unavailable(_)));
    assert!(dev.set_node_timing(true).is_err());
}

/// Node events are not leaked, nor destroyed while a graph's event record
/// node names them: an aborted node-timed capture destroys them after its
/// graph; one that fails to record leaves the graph untimed (no node
/// spans), its events kept, unread, until the graph goes (the fake
/// driver's violations hold the order). Mutations: `drop_events` → `()`,
/// `untime` destroying the events → red.
#[test]
fn node_events_of_captures_that_go_are_destroyed() {
    let (b, d) = crate::fake::backend(false);
    let dev = Device::new(Box::new(b));
    let x = dev.buffer_from(&[1.0f32; 4]).unwrap();
    dev.set_node_timing(true).unwrap();
    {
        let _s = dev.capture().unwrap();
        dev.launch(&ops::add(x.id(), x.id(), x.id(), 4)).unwrap();
        // Dropped: the capture is aborted.
    }
    assert_eq!(d.live(), (0, 0, 0), "graphs, execs, events after an abort");
    let s = dev.capture().unwrap();
    d.fail_next("record_event_in_capture");
    dev.launch(&ops::add(x.id(), x.id(), x.id(), 4)).unwrap();
    let g = s.end_graph().unwrap();
    assert_eq!(
        d.live(),
        (1, 1, 2),
        "the graph is kept, untimed, with its two events (the one its first node records, the one that failed)"
    );
    dev.set_tracing(true);
    g.replay().unwrap();
    let log = dev.take_trace_log("t").unwrap();
    assert!(log.node_spans.is_empty());
    drop((g, x));
    drop(dev);
    assert_eq!(d.live(), (0, 0, 0), "graphs, execs, events at the end");
    assert_clean(&d);
}
