//! C13 against the recording fake driver: kernel nodes patched in the
//! instantiated graph (`StreamBackend::update_launches`), checked without a GPU.

use crate::backend_tests::{add, assert_clean, backend, gemm, three, without_selects, Fake};
use crate::fake::{Call, FakeDriver};
use seam::testing::RawCall;
use seam::{
    Backend, DType, ErrorKind, GraphUser, OpKind, RawBuffer, RawGraph, ReplayTarget, ResourceCounts,
};

fn graph_of(d: &FakeDriver, exec: u32) -> u32 {
    d.log()
        .iter()
        .find_map(|c| match c {
            Call::Instantiate { graph, exec: e } if *e == exec => Some(*graph),
            _ => None,
        })
        .expect("instantiated")
}

fn patched(d: &FakeDriver) -> Vec<Call> {
    d.log()
        .into_iter()
        .filter(|c| matches!(c, Call::SetKernelNode { .. }))
        .collect()
}

/// Whether every graph kernel node set in `log` was set before the first
/// instantiation in it (an exec copies its graph's nodes when made).
pub(crate) fn set_before_instantiating(log: &[Call]) -> bool {
    let last_set = log
        .iter()
        .rposition(|c| matches!(c, Call::SetGraphKernelNode { .. }));
    let made = log
        .iter()
        .position(|c| matches!(c, Call::Instantiate { .. }));
    last_set < made
}

/// A graph of one `add` over `x`, `y` into `z` (4 elements), as a handle.
fn one_add(b: &mut Fake, [x, y, z]: [RawBuffer; 3]) -> ReplayTarget {
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    ReplayTarget::Graph(b.end_capture_graph().unwrap())
}

/// The graph kernel nodes set (for an exec instantiated next), in order.
pub(crate) fn set_in_graph(d: &FakeDriver) -> Vec<usize> {
    d.log()
        .into_iter()
        .filter_map(|c| match c {
            Call::SetGraphKernelNode { node, .. } => Some(node),
            _ => None,
        })
        .collect()
}

fn recaptured(d: &FakeDriver) -> bool {
    d.log()
        .iter()
        .any(|c| matches!(c, Call::BeginCapture | Call::Instantiate { .. }))
}

#[test]
fn update_support_is_native() {
    let (b, _d) = backend(true);
    assert_eq!(b.update_support(), seam::UpdateSupport::Native);
}

#[test]
fn an_update_patches_the_exec_for_later_launches_only() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 8);
    let [p, _, _] = three(&mut b, 8);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 8)).unwrap();
    b.launch(&add(z, z, z, 8)).unwrap();
    let h = b.end_capture_graph().unwrap();
    let exec = d.last_exec();
    let graph = graph_of(&d, exec);
    let captured = d.nodes_of(exec);
    assert_eq!(captured[0].buffers, [1, 2, 3]);
    // Queued before the update: runs the old launch, whatever comes after.
    b.replay(ReplayTarget::Graph(h)).unwrap();
    d.clear_log();
    b.update_launches(ReplayTarget::Graph(h), &[(0, add(p, y, z, 4))])
        .unwrap();
    assert_eq!(patched(&d), [Call::SetKernelNode { exec, node: 0 }]);
    assert!(!recaptured(&d), "{:?}", d.log());
    b.replay(ReplayTarget::Graph(h)).unwrap();
    let runs = d.runs();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].1, captured, "the replay queued before the update");
    assert_eq!(runs[1].1[0].name, "add_f32");
    assert_eq!(runs[1].1[0].buffers, [4, 2, 3], "the replay after it");
    assert_eq!(runs[1].1[0].params.map(|p| p.d0), Some(4));
    assert_eq!(runs[1].1[1], captured[1], "launch 1 untouched");
    // The exec is patched, not the graph it came from.
    assert_eq!(d.graph_nodes(graph), captured);
    assert_eq!(
        b.live_resources(),
        ResourceCounts {
            buffers: 6,
            graphs: 1,
            bytes: 192
        }
    );
    // The graph now holds `p`, and no longer `x`.
    assert!(matches!(
        b.free(p),
        Err(ErrorKind::BufferInUse { ref users, .. }) if *users == [GraphUser::Handle(h.0)]
    ));
    b.free(x).unwrap();
    assert_clean(&d);
}

#[test]
fn the_current_exec_is_patched_too() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    b.end_capture_into_current().unwrap();
    let exec = d.last_exec();
    d.clear_log();
    b.update_launches(ReplayTarget::Current, &[(0, add(y, y, x, 4))])
        .unwrap();
    assert_eq!(patched(&d), [Call::SetKernelNode { exec, node: 0 }]);
    assert_eq!(d.nodes_of(exec)[0].buffers, [2, 2, 1]);
    b.free(z).unwrap();
    assert_clean(&d);
}

#[test]
fn a_bad_update_patches_nothing() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    b.launch(&add(z, y, z, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    let exec = d.last_exec();
    let before = d.nodes_of(exec);
    d.clear_log();
    let t = ReplayTarget::Graph(h);
    // A launch past the graph, even alongside a good change.
    assert_eq!(
        b.update_launches(t, &[(0, add(y, y, z, 4)), (2, add(x, y, z, 4))]),
        Err(ErrorKind::NoSuchLaunch {
            index: 2,
            launches: 2
        })
    );
    // Past a buffer: the launch check refuses it before the driver.
    assert!(matches!(
        b.update_launches(t, &[(1, add(z, y, z, 5))]),
        Err(ErrorKind::OutOfRange { .. })
    ));
    let other_op = RawCall {
        op: OpKind::Mul,
        ..add(x, y, z, 4)
    };
    assert!(matches!(
        b.update_launches(t, &[(0, other_op)]),
        Err(ErrorKind::UpdateChangesOp { index: 0, .. })
    ));
    let other_dtype = RawCall {
        dtype: DType::F16,
        ..add(x, y, z, 4)
    };
    assert!(matches!(
        b.update_launches(t, &[(0, other_dtype)]),
        Err(ErrorKind::UpdateChangesDtype { index: 0, .. })
    ));
    assert_eq!(
        b.update_launches(ReplayTarget::Graph(RawGraph(99)), &[(0, add(x, y, z, 4))]),
        Err(ErrorKind::UnknownGraph { id: 99 })
    );
    b.begin_capture().unwrap();
    assert_eq!(
        b.update_launches(t, &[(0, add(y, y, z, 4))]),
        Err(ErrorKind::UpdateInCapture)
    );
    b.abort_capture().unwrap();
    assert!(patched(&d).is_empty(), "{:?}", d.log());
    assert_eq!(d.nodes_of(exec), before);
    // Nothing changed what the graph holds: x is still in use.
    assert!(matches!(b.free(x), Err(ErrorKind::BufferInUse { .. })));
    assert_clean(&d);
}

#[test]
fn a_vendor_launch_is_not_patched_in_place() {
    let (mut b, d) = backend(true);
    let [x, y, z] = three(&mut b, 4);
    let [p, _, _] = three(&mut b, 4);
    b.prepare(&[(OpKind::Gemm, DType::F32)]).unwrap();
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    b.launch(&gemm(x, y, z)).unwrap();
    b.launch(&add(z, y, x, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    let exec = d.last_exec();
    d.clear_log();
    let t = ReplayTarget::Graph(h);
    // The GEMM went to the vendor library: refused, so core re-records.
    let e = b.update_launches(t, &[(1, gemm(p, y, z))]).unwrap_err();
    assert!(
        e.to_string().contains("fakeGraphExecKernelNodeSetParams")
            && e.to_string().contains("vendor library"),
        "{e}"
    );
    // One kernel change and the vendor one: nothing is patched.
    assert!(b
        .update_launches(t, &[(0, add(p, y, z, 4)), (1, gemm(p, y, z))])
        .is_err());
    assert!(patched(&d).is_empty(), "{:?}", d.log());
    // The kernels around it keep their capture-order index.
    b.update_launches(t, &[(2, add(z, y, p, 4))]).unwrap();
    assert_eq!(patched(&d), [Call::SetKernelNode { exec, node: 2 }]);
    let nodes = d.nodes_of(exec);
    assert_eq!(nodes[1].name, "vendor_gemm");
    assert_eq!(nodes[2].buffers, [3, 2, 4]);
    assert_clean(&d);
}

#[test]
fn a_failed_node_query_or_patch_is_an_error_not_a_wrong_graph() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    // The kernel is recorded; only which node it is stays unknown.
    d.fail_next("captured_node");
    b.launch(&add(z, y, x, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    let exec = d.last_exec();
    assert_eq!(d.kernels_of(exec), ["add_f32", "add_f32"]);
    let t = ReplayTarget::Graph(h);
    let e = b.update_launches(t, &[(1, add(z, y, y, 4))]).unwrap_err();
    assert!(e.to_string().contains("graph node is unknown"), "{e}");
    // A patch the driver refuses is returned (core then re-records).
    d.fail_next("set_kernel_node");
    let e = b.update_launches(t, &[(0, add(y, y, z, 4))]).unwrap_err();
    assert!(e.to_string().contains("set_kernel_node"), "{e}");
    assert_eq!(d.nodes_of(exec)[0].buffers, [1, 2, 3]);
    b.update_launches(t, &[(0, add(y, y, z, 4))]).unwrap();
    assert_eq!(d.nodes_of(exec)[0].buffers, [2, 2, 3]);
    assert_clean(&d);
}

/// A node the driver reported for a launch but that is not one of its
/// graph's (here: the previous graph's node at the same index) is refused
/// by the membership check and patches nothing, in either graph. Mutation:
/// drop the membership check in the fake's `set_kernel_node` (the real
/// drivers' `has_node`) → the wrong exec node is patched and this goes red.
#[test]
fn a_node_of_another_graph_is_refused() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    let first = b.end_capture_graph().unwrap();
    let exec_a = d.last_exec();
    b.begin_capture().unwrap();
    d.misreport_next_node();
    b.launch(&add(z, y, x, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    let exec_b = d.last_exec();
    let (a, before) = (d.nodes_of(exec_a), d.nodes_of(exec_b));
    let e = b
        .update_launches(ReplayTarget::Graph(h), &[(0, add(y, y, y, 4))])
        .unwrap_err();
    assert!(e.to_string().contains("is not a node of graph"), "{e}");
    assert_eq!(d.nodes_of(exec_b), before);
    assert_eq!(d.nodes_of(exec_a), a);
    b.update_launches(ReplayTarget::Graph(first), &[(0, add(y, y, y, 4))])
        .unwrap();
    assert_eq!(d.nodes_of(exec_a)[0].buffers, [2, 2, 2]);
    assert_clean(&d);
}

#[test]
fn a_driver_that_needs_an_idle_stream_waits_before_patching() {
    let (mut b, d) = backend(false);
    d.set_update_needs_idle(true);
    let [x, y, z] = three(&mut b, 4);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    b.replay(ReplayTarget::Graph(h)).unwrap();
    d.clear_log();
    b.update_launches(ReplayTarget::Graph(h), &[(0, add(y, y, z, 4))])
        .unwrap();
    let log = without_selects(d.log());
    assert_eq!(log[0], Call::Sync, "{log:?}");
    assert!(matches!(log[1], Call::SetKernelNode { .. }), "{log:?}");
    assert_clean(&d);
}

/// The driver's ids of the buffers allocated since the log was cleared.
fn allocated(d: &FakeDriver) -> Vec<u32> {
    d.log()
        .iter()
        .filter_map(|c| match c {
            Call::Alloc { buffer, .. } => Some(*buffer),
            _ => None,
        })
        .collect()
}

fn instantiated(d: &FakeDriver) -> Vec<u32> {
    d.log()
        .iter()
        .filter_map(|c| match c {
            Call::Instantiate { exec, .. } => Some(*exec),
            _ => None,
        })
        .collect()
}

/// Updates that alternate a graph between two launch sets (`seam::kept`):
/// the first patches in place; the first one back makes a fresh exec,
/// instantiated after every kernel node was set in the graph, and drops
/// the patched one (it replays slower), once the stream is idle; the next
/// one away makes a clean exec of that set too; every switch after that
/// launches a kept exec and touches no node. Every replay runs what the
/// last update asked for. Mutations: `plan` never answering `Swap`
/// (patches on every switch), never `Fresh` (no second exec), `keep` or
/// `swap` losing the old exec's launch set or flag, the fresh exec patched
/// in the exec or set after instantiating, `after` ignoring the changes →
/// red.
#[test]
fn updates_back_and_forth_switch_execs_instead_of_patching() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    let [p, _, _] = three(&mut b, 4);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    b.launch(&add(z, y, z, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    let t = ReplayTarget::Graph(h);
    let first = d.last_exec();
    let to_p = [(0, add(p, y, z, 4))];
    let to_x = [(0, add(x, y, z, 4))];
    // Away: patched in place, no new exec.
    d.clear_log();
    b.update_launches(t, &to_p).unwrap();
    assert_eq!(
        patched(&d),
        [Call::SetKernelNode {
            exec: first,
            node: 0
        }]
    );
    assert!(instantiated(&d).is_empty(), "{:?}", d.log());
    b.replay(t).unwrap();
    // Back: a set the graph ran before gets a fresh exec, made from the
    // graph once its every kernel node was set; the patched exec is
    // destroyed after the stream is idle.
    d.clear_log();
    b.update_launches(t, &to_x).unwrap();
    let fresh = instantiated(&d);
    assert_eq!(fresh.len(), 1, "{:?}", d.log());
    let second = fresh[0];
    assert!(patched(&d).is_empty(), "{:?}", d.log());
    assert_eq!(set_in_graph(&d), [0, 1], "{:?}", d.log());
    let log = without_selects(d.log());
    let at = |want: &Call| log.iter().position(|c| c == want);
    assert!(set_before_instantiating(&log), "{log:?}");
    let gone = at(&Call::DestroyExec(first));
    assert!(gone.is_some() && at(&Call::Sync) < gone, "{log:?}");
    b.replay(t).unwrap();
    assert_eq!(d.runs().last().unwrap().1[0].buffers, [1, 2, 3]);
    // Away again: the set the patched exec ran gets a clean exec of its
    // own, and `second` is kept.
    d.clear_log();
    b.update_launches(t, &to_p).unwrap();
    let fresh = instantiated(&d);
    assert_eq!(fresh.len(), 1, "{:?}", d.log());
    let third = fresh[0];
    assert!(patched(&d).is_empty(), "{:?}", d.log());
    assert!(!d.log().contains(&Call::DestroyExec(second)));
    b.replay(t).unwrap();
    assert_eq!(d.runs().last().unwrap().1[0].buffers, [4, 2, 3]);
    // Every switch after that: no patch, no instantiation.
    for (changes, exec, buffer) in [(&to_x, second, 1), (&to_p, third, 4), (&to_x, second, 1)] {
        d.clear_log();
        b.update_launches(t, changes).unwrap();
        assert!(patched(&d).is_empty(), "{:?}", d.log());
        assert!(set_in_graph(&d).is_empty(), "{:?}", d.log());
        assert!(instantiated(&d).is_empty(), "{:?}", d.log());
        b.replay(t).unwrap();
        assert_eq!(d.log().last(), Some(&Call::Launch(exec)), "{:?}", d.log());
        let run = d.runs().last().cloned().unwrap();
        assert_eq!(run.1[0].buffers, [buffer, 2, 3]);
        assert_eq!(run.1[1].buffers, [3, 2, 3]);
    }
    // The same launch set again is no switch: nothing happens.
    d.clear_log();
    b.update_launches(t, &to_x).unwrap();
    assert!(patched(&d).is_empty() && instantiated(&d).is_empty());
    // A third set is patched in place, in the exec that runs now.
    d.clear_log();
    let [q, _, _] = three(&mut b, 4);
    let q_id = allocated(&d)[0];
    d.clear_log();
    b.update_launches(t, &[(1, add(z, q, z, 4))]).unwrap();
    assert_eq!(
        patched(&d),
        [Call::SetKernelNode {
            exec: second,
            node: 1
        }]
    );
    b.replay(t).unwrap();
    assert_eq!(d.runs().last().unwrap().1[1].buffers, [3, q_id, 3]);
    b.destroy_graph(h).unwrap();
    let log = d.log();
    for exec in [second, third] {
        assert!(log.contains(&Call::DestroyExec(exec)), "{log:?}");
    }
    assert_clean(&d);
}

/// An exec kept for a launch set binds buffers the graph no longer holds:
/// freeing one destroys that exec (after the stream is idle) and forgets
/// the set, so an update to a buffer made later, even in the freed one's
/// slot, is patched, never served by a stale exec. Mutation: `forget`
/// keeping everything → the free leaves the exec alive → red.
#[test]
fn freeing_a_buffer_drops_the_execs_kept_for_it() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    let [p, _, _] = three(&mut b, 4);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    let t = ReplayTarget::Graph(h);
    // Away (in place), back (a fresh exec), away (a fresh exec for p),
    // back (a switch): the exec kept for p is the last one made.
    for buffer in [p, x, p] {
        b.update_launches(t, &[(0, add(buffer, y, z, 4))]).unwrap();
    }
    let kept_p = d.last_exec();
    b.update_launches(t, &[(0, add(x, y, z, 4))]).unwrap();
    b.replay(t).unwrap();
    assert_ne!(d.log().last(), Some(&Call::Launch(kept_p)));
    d.clear_log();
    b.free(p).unwrap();
    let log = without_selects(d.log());
    let destroyed = log.iter().position(|c| *c == Call::DestroyExec(kept_p));
    let synced = log.iter().position(|c| *c == Call::Sync);
    assert!(destroyed.is_some() && synced < destroyed, "{log:?}");
    d.clear_log();
    let [q, _, _] = three(&mut b, 4);
    let q_id = allocated(&d)[0];
    d.clear_log();
    b.update_launches(t, &[(0, add(q, y, z, 4))]).unwrap();
    assert_eq!(patched(&d).len(), 1, "{:?}", d.log());
    b.replay(t).unwrap();
    assert_eq!(d.runs().last().unwrap().1[0].buffers[0], q_id);
    assert_clean(&d);
}

/// One update of launch 0 and a replay; what it did: the execs
/// instantiated, the nodes patched, the log.
fn step(
    b: &mut Fake,
    d: &FakeDriver,
    t: ReplayTarget,
    call: RawCall,
) -> (Vec<u32>, usize, Vec<Call>) {
    d.clear_log();
    b.update_launches(t, &[(0, call)]).unwrap();
    b.replay(t).unwrap();
    (instantiated(d), patched(d).len(), d.log())
}

/// Which launch sets a graph remembers and which execs it keeps, over
/// four sets of launch 0's first buffer (x as captured, then p, q, r):
/// a set left by an in-place patch is remembered until the graph comes
/// back to it (then it gets a fresh exec), an exec patched in place is
/// never kept (its set is remembered instead, and needs no room among the
/// spares), the free of a buffer no kept set binds forgets nothing, and a
/// fresh exec beyond the spares' room pushes out the least recently used
/// one, after the stream is idle. Mutations: the remembered sets filtered
/// the wrong way when one is added (in `patched`, `keep` or `remember`),
/// `forget`'s binding test inverted, `make_room` taking nothing or taking
/// one for a patched exec, `keep` keeping a patched exec → red.
#[test]
fn kept_sets_and_execs_follow_use_within_their_bounds() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    let [p, q, r] = three(&mut b, 4);
    let [u, _, _] = three(&mut b, 4);
    let t = one_add(&mut b, [x, y, z]);
    let exec1 = d.last_exec();
    let to = |b: &mut Fake, buffer| step(b, &d, t, add(buffer, y, z, 4));
    assert_eq!(to(&mut b, p).0.len(), 0, "x → p: in place");
    assert_eq!(to(&mut b, q).1, 1, "p → q: in place");
    // A buffer no set binds: nothing forgotten.
    b.free(u).unwrap();
    let mut to = |buffer| to(&mut b, buffer);
    let (fresh, _, log) = to(x);
    assert_eq!(fresh.len(), 1, "q → x: x was left, so a fresh exec");
    assert!(
        log.contains(&Call::DestroyExec(exec1)),
        "exec1 was patched: {log:?}"
    );
    let exec2 = fresh[0];
    let (fresh, _, _) = to(p);
    assert_eq!(fresh.len(), 1, "x → p: p was left too, a fresh exec");
    let exec3 = fresh[0];
    let (fresh, _, _) = to(q);
    assert_eq!(fresh.len(), 1, "p → q: q was left by exec1, a fresh exec");
    let exec4 = fresh[0];
    // Kept: exec2 (x), exec3 (p); current exec4 (q). Switches only.
    for (buffer, exec) in [(x, exec2), (p, exec3), (x, exec2)] {
        let (fresh, patches, log) = to(buffer);
        assert_eq!((fresh.len(), patches), (0, 0), "{log:?}");
        assert_eq!(log.last(), Some(&Call::Launch(exec)), "{log:?}");
    }
    // Now kept: exec4 (q), exec3 (p), least recent first; current exec2 (x).
    let (fresh, patches, _) = to(r);
    assert_eq!((fresh.len(), patches), (0, 1), "x → r: in place, in exec2");
    let (fresh, _, log) = to(x);
    assert_eq!(fresh.len(), 1, "r → x: a fresh exec");
    let exec5 = fresh[0];
    assert!(
        log.contains(&Call::DestroyExec(exec2)),
        "exec2 was patched: {log:?}"
    );
    for kept in [exec3, exec4] {
        assert!(!log.contains(&Call::DestroyExec(kept)), "{log:?}");
    }
    // Kept: exec4 (q), exec3 (p); current exec5 (x), clean. Back to r (a
    // set left): a fresh exec, and exec4, least recently used, pushed out
    // first.
    let (fresh, _, log) = to(r);
    assert_eq!(fresh.len(), 1, "x → r: a fresh exec");
    let log = without_selects(log);
    let gone = log.iter().position(|c| *c == Call::DestroyExec(exec4));
    let synced = log.iter().position(|c| *c == Call::Sync);
    let made = log
        .iter()
        .position(|c| matches!(c, Call::Instantiate { .. }));
    assert!(
        synced < gone && gone < made,
        "exec4 (q) pushed out first: {log:?}"
    );
    for kept in [exec3, exec5] {
        assert!(!log.contains(&Call::DestroyExec(kept)), "{log:?}");
    }
    // Kept: exec3 (p), exec5 (x): switches.
    for (buffer, exec) in [(p, exec3), (x, exec5)] {
        let (fresh, patches, log) = to(buffer);
        assert_eq!((fresh.len(), patches), (0, 0), "{log:?}");
        assert_eq!(log.last(), Some(&Call::Launch(exec)), "{log:?}");
    }
    assert_clean(&d);
}

/// Whether an exec was patched in place travels with it: a patched exec
/// swapped out as a spare and a clean one swapped in, a fresh exec after
/// that keeps the clean one; the patched one, swapped back in, is dropped
/// by the next fresh exec. Mutations: `swap` leaving the flag with the
/// graph, `keep` marking its spare patched → red.
#[test]
fn whether_an_exec_was_patched_travels_with_it() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    let [p, q, r] = three(&mut b, 4);
    let t = one_add(&mut b, [x, y, z]);
    let mut to = |buffer| step(&mut b, &d, t, add(buffer, y, z, 4));
    // x → p in place, back to x (fresh e2), p again (fresh e3, e2 kept).
    to(p);
    let e2 = to(x).0[0];
    let e3 = to(p).0[0];
    // p → q in place: e3 is patched; x: a switch to the clean e2.
    assert_eq!(to(q).1, 1);
    let (_, _, log) = to(x);
    assert_eq!(log.last(), Some(&Call::Launch(e2)), "{log:?}");
    // p was left by the patch: a fresh exec, and e2, clean, is kept.
    let (fresh, _, log) = to(p);
    assert_eq!(fresh.len(), 1, "{log:?}");
    assert!(!log.contains(&Call::DestroyExec(e2)), "{log:?}");
    let (fresh, _, log) = to(x);
    assert_eq!(fresh.len(), 0, "{log:?}");
    assert_eq!(log.last(), Some(&Call::Launch(e2)), "{log:?}");
    // q: a switch to e3, patched; r in place in it, and back to q: a
    // fresh exec, and e3 is dropped.
    let (_, _, log) = to(q);
    assert_eq!(log.last(), Some(&Call::Launch(e3)), "{log:?}");
    assert_eq!(to(r).1, 1);
    let (fresh, _, log) = to(q);
    assert_eq!(fresh.len(), 1, "{log:?}");
    assert!(log.contains(&Call::DestroyExec(e3)), "{log:?}");
    assert_clean(&d);
}

/// A driver that keeps no execs (CUDA and HIP unless their switch asks)
/// patches every update in place, back and forth alike, never makes a
/// second exec, and remembers no set it left: a driver that starts keeping
/// later patches the way back too. Mutations: the backend planning
/// whatever the driver says, or noting left sets while keeping none →
/// red.
#[test]
fn a_driver_that_keeps_no_execs_patches_every_update() {
    let (mut b, d) = backend(false);
    d.set_keeps_execs(false);
    let [x, y, z] = three(&mut b, 4);
    let [p, _, _] = three(&mut b, 4);
    let t = one_add(&mut b, [x, y, z]);
    let exec = d.last_exec();
    for buffer in [p, x, p, x] {
        let (fresh, patches, log) = step(&mut b, &d, t, add(buffer, y, z, 4));
        assert_eq!((fresh.len(), patches), (0, 1), "{log:?}");
        assert_eq!(log.last(), Some(&Call::Launch(exec)), "{log:?}");
    }
    d.set_keeps_execs(true);
    let (fresh, patches, log) = step(&mut b, &d, t, add(p, y, z, 4));
    assert_eq!((fresh.len(), patches), (0, 1), "no set was noted: {log:?}");
    assert_clean(&d);
}

/// Through core's `Device`, which tells the backend what the graph runs
/// (its record, `now`): rebinds back and forth switch execs after the
/// first return, a parameter change and its undoing are switches too, and
/// every replay runs what core recorded. Mutation: core passing an empty
/// record (every switch patched) → red.
#[test]
fn core_tells_the_backend_what_the_graph_runs() {
    use seam::{ops, Change, Device, Params};
    let (b, d) = crate::fake::backend(false);
    let dev = Device::new(Box::new(b));
    let x = dev.buffer_from(&[1.0f32; 4]).unwrap();
    let p = dev.buffer_from(&[5.0f32; 4]).unwrap();
    let y = dev.buffer_from(&[2.0f32; 4]).unwrap();
    let z = dev.buffer_from(&[0.0f32; 4]).unwrap();
    let ids = allocated(&d);
    let s = dev.capture().unwrap();
    dev.launch(&ops::add(x.id(), y.id(), z.id(), 4)).unwrap();
    dev.launch(&ops::add(z.id(), y.id(), z.id(), 4)).unwrap();
    let g = s.end_graph().unwrap();
    let switch = |changes: &[Change]| {
        d.clear_log();
        dev.update(&g, changes).unwrap();
        let did = (patched(&d).len(), instantiated(&d).len());
        g.replay().unwrap();
        dev.synchronize().unwrap();
        let run = d.runs().last().cloned().unwrap();
        let n = run.1[0].params.map(|p| p.d0);
        (did, run.1[0].buffers.clone(), n)
    };
    let to_p = [Change::Rebind {
        old: x.id(),
        new: p.id(),
    }];
    let to_x = [Change::Rebind {
        old: p.id(),
        new: x.id(),
    }];
    // Away (patched), back (a fresh exec), away (a clean exec for the set
    // the patched one ran), then switches alone.
    assert_eq!(switch(&to_p).0, (1, 0));
    assert_eq!(switch(&to_x).0, (0, 1));
    assert_eq!(switch(&to_p).0, (0, 1));
    for (changes, input) in [(&to_x, ids[0]), (&to_p, ids[1]), (&to_x, ids[0])] {
        let (did, buffers, _) = switch(changes);
        assert_eq!(did, (0, 0), "{:?}", d.log());
        assert_eq!(buffers, [input, ids[2], ids[3]]);
    }
    // A parameter change away and back: fresh execs once, then switches.
    let params = |n: u32| {
        [Change::Params {
            index: 0,
            params: Params::dims(n, 0, 0),
        }]
    };
    let (did, _, n) = switch(&params(2));
    assert_eq!((did, n), ((1, 0), Some(2)));
    assert_eq!(switch(&params(4)).0, (0, 1));
    assert_eq!(switch(&params(2)).0, (0, 1));
    assert_eq!(switch(&params(4)).0, (0, 0));
    let (did, buffers, n) = switch(&params(2));
    assert_eq!((did, n), ((0, 0), Some(2)), "{:?}", d.log());
    assert_eq!(buffers, [ids[0], ids[2], ids[3]]);
    drop(g);
    drop([x, p, y, z]);
    drop(dev);
    assert_clean(&d);
}

/// A graph whose in-place patch failed is patched in place from then on,
/// even by a caller that does not record it again (this harness, unlike
/// core): what its exec runs is unknown, so no set is remembered, no exec
/// is kept, and every replay runs what the last update asked. Mutation:
/// `Runs::lose` doing nothing → the way back gets a fresh exec → red.
#[test]
fn a_failed_patch_keeps_the_graph_patching_in_place() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    let [p, _, _] = three(&mut b, 4);
    let t = one_add(&mut b, [x, y, z]);
    let exec = d.last_exec();
    let ids = allocated(&d);
    d.fail_next("set_kernel_node");
    assert!(b.update_launches(t, &[(0, add(p, y, z, 4))]).is_err());
    for (buffer, id) in [(p, ids[3]), (x, ids[0]), (p, ids[3]), (x, ids[0])] {
        let (fresh, patches, log) = step(&mut b, &d, t, add(buffer, y, z, 4));
        assert_eq!((fresh.len(), patches), (0, 1), "{log:?}");
        assert_eq!(log.last(), Some(&Call::Launch(exec)), "{log:?}");
        assert_eq!(d.runs().last().unwrap().1[0].buffers[0], id);
    }
    assert_clean(&d);
}
