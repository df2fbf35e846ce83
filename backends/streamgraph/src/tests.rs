//! The shared capture logic against the recording fake driver: the order of
//! driver calls CUDA and HIP both make, checked without a GPU.

use crate::fake::{Call, FakeDriver};
use crate::{EventTimer, StreamGraphs};
use seam::{DeviceSpan, ErrorKind, RawGraph, ReplayTarget};

type Graphs = StreamGraphs<FakeDriver>;

/// Capture one kernel into the current exec; returns its exec id.
fn capture_current(g: &mut Graphs, d: &FakeDriver, kernel: &'static str) -> u32 {
    g.begin_capture(d, false, false).unwrap();
    d.kernel(kernel);
    g.end_capture(d).unwrap();
    d.last_exec()
}

fn assert_clean(d: &FakeDriver) {
    assert!(d.violations().is_empty(), "{:?}", d.violations());
}

#[test]
fn capture_is_begin_launches_end_instantiate_upload_then_launch() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    g.begin_capture(&d, false, false).unwrap();
    assert!(g.is_capturing());
    d.kernel("scale_add");
    d.kernel("add");
    g.end_capture(&d).unwrap();
    assert!(!g.is_capturing());
    g.replay(&d, ReplayTarget::Current).unwrap();
    g.replay(&d, ReplayTarget::Current).unwrap();
    assert_eq!(
        d.log(),
        vec![
            Call::BeginCapture,
            Call::Kernel("scale_add"),
            Call::Kernel("add"),
            Call::EndCapture(1),
            Call::Instantiate { graph: 1, exec: 2 },
            Call::Upload(2),
            Call::Launch(2),
            Call::Launch(2),
        ]
    );
    assert_eq!(d.kernels_of(2), ["scale_add", "add"]);
    assert_eq!(g.live(), 1);
    assert_clean(&d);
}

#[test]
fn destroy_waits_for_the_stream_then_destroys_exec_before_graph() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    g.begin_capture(&d, false, false).unwrap();
    d.kernel("k");
    let h = g.end_capture_graph(&d).unwrap();
    assert_eq!(h, RawGraph(1), "the first handle of a fresh table");
    g.replay(&d, ReplayTarget::Graph(h)).unwrap();
    d.clear_log();
    g.destroy_graph(&d, h).unwrap();
    assert_eq!(
        d.log(),
        vec![Call::Sync, Call::DestroyExec(2), Call::DestroyGraph(1)]
    );
    assert_eq!(g.live(), 0);
    assert_eq!(d.live(), (0, 0, 0));
    assert_eq!(
        g.destroy_graph(&d, h),
        Err(ErrorKind::UnknownGraph { id: h.0 })
    );
    assert_eq!(
        g.replay(&d, ReplayTarget::Graph(h)),
        Err(ErrorKind::UnknownGraph { id: h.0 })
    );
    assert_clean(&d);
}

#[test]
fn replacing_the_current_exec_waits_for_its_pending_replay() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    let first = capture_current(&mut g, &d, "a");
    g.replay(&d, ReplayTarget::Current).unwrap();
    d.clear_log();
    g.begin_capture(&d, false, false).unwrap();
    d.kernel("b");
    g.end_capture(&d).unwrap();
    let second = d.last_exec();
    let log = d.log();
    let sync = log.iter().position(|c| *c == Call::Sync).expect("a wait");
    let destroy = log
        .iter()
        .position(|c| *c == Call::DestroyExec(first))
        .expect("the old exec destroyed");
    assert!(sync < destroy, "{log:?}");
    // The new exec was made (and uploaded) before the old one went.
    assert!(log.contains(&Call::Upload(second)));
    g.replay(&d, ReplayTarget::Current).unwrap();
    assert_eq!(d.log().last(), Some(&Call::Launch(second)));
    assert_eq!(g.live(), 1);
    assert_clean(&d);
}

#[test]
fn a_failed_wait_keeps_the_running_exec_and_drops_the_new_one() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    let first = capture_current(&mut g, &d, "a");
    g.replay(&d, ReplayTarget::Current).unwrap();
    g.begin_capture(&d, false, false).unwrap();
    d.kernel("b");
    d.fail_next("synchronize");
    assert!(g.end_capture(&d).is_err());
    assert!(!g.is_capturing());
    assert_eq!(g.live(), 1);
    d.synchronize_for_test();
    g.replay(&d, ReplayTarget::Current).unwrap();
    assert_eq!(d.log().last(), Some(&Call::Launch(first)));
    assert_eq!(d.live(), (1, 1, 0));
    assert_clean(&d);
}

#[test]
fn current_exec_and_handles_never_alias() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    let current = capture_current(&mut g, &d, "into_x");
    g.begin_capture(&d, false, false).unwrap();
    d.kernel("into_y");
    let h = g.end_capture_graph(&d).unwrap();
    let handle = d.last_exec();
    assert_ne!(current, handle);
    d.clear_log();
    g.replay(&d, ReplayTarget::Current).unwrap();
    g.replay(&d, ReplayTarget::Graph(h)).unwrap();
    assert_eq!(d.log(), vec![Call::Launch(current), Call::Launch(handle)]);
    assert_eq!(d.kernels_of(current), ["into_x"]);
    assert_eq!(d.kernels_of(handle), ["into_y"]);
    // Destroying the handle leaves the current exec alone.
    g.destroy_graph(&d, h).unwrap();
    g.replay(&d, ReplayTarget::Current).unwrap();
    assert_eq!(d.log().last(), Some(&Call::Launch(current)));
    assert_eq!(g.live(), 1);
    assert_clean(&d);
}

#[test]
fn replay_without_a_current_exec_is_a_named_error() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    assert_eq!(
        g.replay(&d, ReplayTarget::Current),
        Err(ErrorKind::NoCurrentGraph)
    );
    assert!(d.log().is_empty());
}

#[test]
fn abort_ends_the_capture_and_discards_its_graph() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    g.begin_capture(&d, false, false).unwrap();
    d.kernel("k");
    g.abort_capture(&d).unwrap();
    assert!(!g.is_capturing());
    assert_eq!(
        d.log(),
        vec![
            Call::BeginCapture,
            Call::Kernel("k"),
            Call::EndCapture(1),
            Call::DestroyGraph(1),
            Call::IsCapturing,
        ]
    );
    assert_eq!(g.live(), 0);
    assert_eq!(d.live(), (0, 0, 0));
    // The stream is usable: a new capture works.
    capture_current(&mut g, &d, "after");
    assert_clean(&d);
}

#[test]
fn abort_of_an_invalidated_capture_destroys_nothing() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    g.begin_capture(&d, false, false).unwrap();
    d.invalidate_capture();
    g.abort_capture(&d).unwrap();
    assert_eq!(
        d.log(),
        vec![Call::BeginCapture, Call::EndCapture(0), Call::IsCapturing]
    );
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}

#[test]
fn abort_keeps_the_current_exec() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    let current = capture_current(&mut g, &d, "keep");
    g.begin_capture(&d, false, false).unwrap();
    d.kernel("drop");
    g.abort_capture(&d).unwrap();
    g.replay(&d, ReplayTarget::Current).unwrap();
    assert_eq!(d.log().last(), Some(&Call::Launch(current)));
    assert_eq!(g.live(), 1);
    assert_clean(&d);
}

#[test]
fn failed_instantiate_destroys_the_graph_and_ends_the_capture() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    g.begin_capture(&d, false, false).unwrap();
    d.kernel("k");
    d.fail_next("instantiate");
    assert!(g.end_capture(&d).is_err());
    assert!(!g.is_capturing());
    assert_eq!(d.log().last(), Some(&Call::DestroyGraph(1)));
    assert_eq!(g.live(), 0);
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}

#[test]
fn failed_upload_destroys_exec_then_graph() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    g.begin_capture(&d, false, false).unwrap();
    d.fail_next("upload");
    assert!(g.end_capture_graph(&d).is_err());
    let log = d.log();
    assert_eq!(
        &log[log.len() - 3..],
        &[Call::Upload(2), Call::DestroyExec(2), Call::DestroyGraph(1)]
    );
    assert_eq!(g.live(), 0);
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}

#[test]
fn failed_end_capture_leaves_nothing_open() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    g.begin_capture(&d, false, false).unwrap();
    d.fail_next("end_capture");
    assert!(g.end_capture(&d).is_err());
    assert!(!g.is_capturing());
    assert_eq!(g.live(), 0);
    assert_clean(&d);
}

#[test]
fn release_all_waits_then_destroys_every_exec_before_its_graph() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    capture_current(&mut g, &d, "c");
    for _ in 0..2 {
        g.begin_capture(&d, false, false).unwrap();
        d.kernel("h");
        let h = g.end_capture_graph(&d).unwrap();
        g.replay(&d, ReplayTarget::Graph(h)).unwrap();
    }
    g.begin_capture(&d, false, false).unwrap();
    d.kernel("open");
    d.clear_log();
    g.release_all(&d);
    let log = d.log();
    assert_eq!(
        &log[..3],
        &[
            Call::EndCapture(7),
            Call::DestroyGraph(7),
            Call::IsCapturing
        ]
    );
    assert_eq!(log[3], Call::Sync);
    // Then each exec, immediately followed by the graph it came from.
    assert_eq!(
        &log[4..],
        &[
            Call::DestroyExec(2),
            Call::DestroyGraph(1),
            Call::DestroyExec(4),
            Call::DestroyGraph(3),
            Call::DestroyExec(6),
            Call::DestroyGraph(5),
        ]
    );
    assert_eq!(g.live(), 0);
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}

// ----- device timing -----

#[test]
fn timed_work_is_bracketed_by_paired_events_on_one_base() {
    let d = FakeDriver::new();
    let mut t = EventTimer::<FakeDriver>::new();
    t.set(true);
    assert!(d.log().is_empty(), "switching on records nothing");
    t.begin(&d, 1).unwrap();
    d.kernel("a"); // 1 ms
    t.end(&d, 1).unwrap();
    d.kernel("gap"); // untimed
    t.begin(&d, 2).unwrap();
    d.kernel("b");
    d.kernel("c");
    t.end(&d, 2).unwrap();
    assert_eq!(
        d.log(),
        vec![
            Call::CreateEvent(1), // base
            Call::Record(1),
            Call::CreateEvent(2),
            Call::Record(2),
            Call::Kernel("a"),
            Call::CreateEvent(3),
            Call::Record(3),
            Call::Kernel("gap"),
            Call::CreateEvent(4),
            Call::Record(4),
            Call::Kernel("b"),
            Call::Kernel("c"),
            Call::CreateEvent(5),
            Call::Record(5),
        ]
    );
    d.clear_log();
    let spans = t.take(&d).unwrap();
    assert_eq!(
        spans,
        vec![
            DeviceSpan::whole(1, 0, 1_000_000),
            DeviceSpan::whole(2, 2_000_000, 4_000_000),
        ]
    );
    assert_eq!(
        d.log(),
        vec![
            Call::Wait(5),
            Call::Elapsed(1, 2),
            Call::Elapsed(2, 3),
            Call::Elapsed(1, 4),
            Call::Elapsed(4, 5),
        ]
    );
    assert!(t.take(&d).unwrap().is_empty());
    // Steady tracing reuses events: no new ones, one base.
    d.clear_log();
    t.begin(&d, 3).unwrap();
    t.end(&d, 3).unwrap();
    assert!(
        !d.log().iter().any(|c| matches!(c, Call::CreateEvent(_))),
        "{:?}",
        d.log()
    );
    assert_eq!(t.take(&d).unwrap()[0].tag, 3);
    t.release_all(&d);
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}

#[test]
fn timed_replays_get_one_span_each_in_order() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    let mut t = EventTimer::<FakeDriver>::new();
    capture_current(&mut g, &d, "k");
    t.set(true);
    for tag in 100..132 {
        t.begin(&d, tag).unwrap();
        g.replay(&d, ReplayTarget::Current).unwrap();
        t.end(&d, tag).unwrap();
    }
    let spans = t.take(&d).unwrap();
    assert_eq!(spans.len(), 32);
    for (i, s) in spans.iter().enumerate() {
        assert_eq!(s.tag, 100 + i as u64);
        assert_eq!(
            s.end_ns - s.start_ns,
            1_000_000,
            "one 1 ms kernel per replay"
        );
    }
    assert!(spans.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
    t.release_all(&d);
    g.release_all(&d);
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}

#[test]
fn timing_off_records_nothing_and_unpaired_markers_are_dropped() {
    let d = FakeDriver::new();
    let mut t = EventTimer::<FakeDriver>::new();
    t.begin(&d, 1).unwrap();
    t.end(&d, 1).unwrap();
    assert!(d.log().is_empty());
    t.set(true);
    // Work that failed to queue leaves a start without an end.
    t.begin(&d, 2).unwrap();
    t.begin(&d, 3).unwrap();
    t.end(&d, 3).unwrap();
    // An end without a start, or for another tag, is ignored.
    t.end(&d, 4).unwrap();
    let spans = t.take(&d).unwrap();
    assert_eq!(spans.iter().map(|s| s.tag).collect::<Vec<_>>(), [3]);
    t.set(false);
    t.begin(&d, 5).unwrap();
    t.end(&d, 5).unwrap();
    assert!(t.take(&d).unwrap().is_empty());
    t.release_all(&d);
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}

#[test]
fn a_failed_record_leaks_no_event() {
    let d = FakeDriver::new();
    let mut t = EventTimer::<FakeDriver>::new();
    t.set(true);
    t.begin(&d, 1).unwrap();
    d.fail_next("record_event");
    assert!(t.end(&d, 1).is_err());
    assert!(t.take(&d).unwrap().is_empty());
    t.release_all(&d);
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}

/// A capture that marks its launches with stamp kernels but ends without
/// anything to set them (`end_capture`, no `SetStamps`) is untimed: its
/// event node's event is kept, unread, and its replays read nothing.
/// Mutation: `no_stamps` answering "timed" → red.
#[test]
fn stamps_left_unset_leave_the_graph_untimed() {
    let d = FakeDriver::new();
    let mut g = Graphs::new();
    g.begin_capture(&d, true, true).unwrap();
    assert_eq!(g.next_stamp(), Some(0));
    d.kernel("add");
    g.end_capture(&d).unwrap();
    let c = g.captured_mut(ReplayTarget::Current).unwrap();
    assert!(c.nodes_mut().is_none(), "timed without its stamps set");
    assert_eq!(
        d.live(),
        (1, 1, 1),
        "graph, exec, and the event its node names"
    );
    g.release_all(&d);
    assert_eq!(d.live(), (0, 0, 0));
    assert_clean(&d);
}
