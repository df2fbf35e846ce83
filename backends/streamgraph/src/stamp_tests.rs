//! Node timing by stamp kernels (C10, `backend/stamps.rs`) on the stream
//! backend, through core's `Device`, against the recording fake driver
//! with `set_node_stamps(true)` (as CUDA's driver): one event node, then a
//! stamp kernel before the first launch and after each, each recorded
//! beside the launches, set to a buffer of the graph's own before it is
//! instantiated. Each fake node takes 1 ms of the fake's device clock, but
//! one recorded beside the others none, and a stamp writes the clock (ns)
//! when it runs.

use crate::backend_tests::assert_clean;
use crate::fake::{Call, FakeDriver};
use crate::node_tests::traced_replays_tile;
use crate::update_tests::{set_before_instantiating, set_in_graph};
use seam::{ops, Device, NodeTiming};
use seam_kernels::stamp::STAMP;

fn stamps_launched(d: &FakeDriver) -> usize {
    d.log()
        .iter()
        .filter(|c| matches!(c, Call::LaunchKernel { name, .. } if name == STAMP.name))
        .count()
}

/// Three launches, node-timed with stamps: the capture records one event
/// node and four stamp kernels (into the scratch word), each beside the
/// launches and each joined one launch later (the launch after the next
/// waits for it), then the graph gets a buffer of four stamps and its four stamp
/// nodes are set to it, in the graph, before it is instantiated; every
/// traced replay has three node spans tagged with it, tiling its span in
/// capture order from its event node, each as long as its launch (1 ms: no
/// launch waits for a stamp); a rebind keeps them; a graph captured with
/// node timing off records no stamp; the stamp buffer is freed with its
/// graph. Mutations: `stamp` skipped after a launch, or launched in line
/// (`launch_kernel`: spans of 2 ms), or joining nothing (`None`),
/// `set_stamps` setting nothing or
/// setting after instantiating, `read_marks` reading the events instead,
/// `read_stamps` not chaining the starts, the stamp buffer never freed →
/// red.
#[test]
fn stamp_kernels_time_every_launch_of_a_traced_replay() {
    let (b, d) = crate::fake::backend(false);
    d.set_node_stamps(true);
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
    let memory = d.live_memory();
    dev.set_node_timing(true).unwrap();
    d.clear_log();
    let s = dev.capture().unwrap();
    chain();
    let timed = s.end_graph().unwrap();
    let log = d.log();
    let events = log
        .iter()
        .filter(|c| matches!(c, Call::RecordInCapture(_)))
        .count();
    assert_eq!((events, stamps_launched(&d)), (1, 4), "{log:?}");
    assert_eq!(
        set_in_graph(&d),
        [0, 2, 4, 6],
        "the stamp nodes, between the launches"
    );
    assert_eq!(
        d.beside_joins(),
        [(0, None), (2, Some(0)), (4, Some(2)), (6, Some(4))],
        "each stamp beside the launches, joined by the launch after the next"
    );
    assert!(set_before_instantiating(&log), "{log:?}");
    let last_alloc = log.iter().rev().find(|c| matches!(c, Call::Alloc { .. }));
    assert!(
        matches!(last_alloc, Some(Call::Alloc { bytes: 32, .. })),
        "a buffer of 4 stamps: {log:?}"
    );
    // The scratch word and the graph's stamps.
    assert_eq!(d.live_memory(), memory + 2);
    dev.set_node_timing(false).unwrap();
    d.clear_log();
    let s = dev.capture().unwrap();
    chain();
    let untimed = s.end_graph().unwrap();
    assert_eq!(stamps_launched(&d), 0, "{:?}", d.log());

    traced_replays_tile(&dev, &timed, &untimed, (x.id(), z.id()), 1_000_000);
    drop(timed);
    assert_eq!(
        d.live_memory(),
        memory + 1,
        "the graph's stamps freed with it"
    );
    drop((untimed, x, y, z));
    drop(dev);
    assert_eq!(d.live(), (0, 0, 0), "graphs, execs, events");
    assert_eq!(d.live_memory(), 0);
    assert_clean(&d);
}

/// A stamp kernel that fails to record, or a stamp buffer that cannot be
/// made or set, leaves the graph untimed (no node spans), never refused;
/// its event lives as long as its event node, its stamp buffer as long as
/// the graph that may write it. Mutations: `stamp` ignoring a failure
/// (the graph's stamps then miss a launch: a span over two), `set_stamps` reporting a
/// failed set as timed, `end_and_instantiate` destroying the event of an
/// untimed stamp graph → red.
#[test]
fn a_stamp_that_cannot_be_recorded_or_set_leaves_the_graph_untimed() {
    for fail in ["launch_kernel", "alloc", "set_kernel_node"] {
        let (b, d) = crate::fake::backend(false);
        d.set_node_stamps(true);
        let dev = Device::new(Box::new(b));
        let x = dev.buffer_from(&[1.0f32; 4]).unwrap();
        dev.set_node_timing(true).unwrap();
        let s = dev.capture().unwrap();
        dev.launch(&ops::add(x.id(), x.id(), x.id(), 4)).unwrap();
        // launch_kernel: the stamp after the next launch (the launch
        // itself goes first); the others fail when the capture ends.
        d.fail_next_after(fail, usize::from(fail == "launch_kernel"));
        dev.launch(&ops::add(x.id(), x.id(), x.id(), 4)).unwrap();
        dev.launch(&ops::add(x.id(), x.id(), x.id(), 4)).unwrap();
        let g = s.end_graph().unwrap();
        assert_eq!(d.live(), (1, 1, 1), "{fail}: graph, exec and its one event");
        dev.set_tracing(true);
        g.replay().unwrap();
        let log = dev.take_trace_log("t").unwrap();
        assert!(log.node_spans.is_empty(), "{fail}: {:?}", log.node_spans);
        let runs = d.runs();
        assert_eq!(runs.len(), 1, "{fail}: the replay ran");
        drop((g, x));
        drop(dev);
        assert_eq!(d.live(), (0, 0, 0), "{fail}");
        assert_eq!(d.live_memory(), 0, "{fail}");
        assert_clean(&d);
    }
}
