//! C14 with C10: the node spans of a traced replay of a graph with a
//! conditional body name the launches the device ran, copy by copy, in
//! the order it ran them.

use super::conditional::{host_loop, record, Bufs, Node, COUNTER};
use crate::{check, check_eq, Case, CaseResult, Ctx, Rule, Tag, ONCE};
use seam::{DeclaredNodeTiming, DeviceSpan, EventKind, NodeTiming};

/// The WHILE's bound, and the iterations its counter allows.
const MAX: u32 = 4;
const RUNS: u32 = 2;

/// A graph captured with node timing on: launch 0, a WHILE of at most 4
/// over a counter set to 2 holding launches 1 and 2 (the second
/// decrements the counter), launch 3; each reads what the one before
/// wrote. One traced replay's node spans, on a device declaring native
/// node timing, in the order they start: launch 0, then launches 1 and 2
/// alternating for as many copies as the device ran or skipped (from the
/// 2 iterations the condition allows, as a native loop runs them, up to
/// the bound's 4, as an unrolled emulation dispatches its skipped copies),
/// then launch 3; each inside the replay's span, starting no earlier than
/// the one before ended. Where it declares coarse node timing, every span
/// names launches of the graph and lies inside the replay's span. Where
/// node timing is unavailable, turning it on is refused; where only a
/// graph with bodies is declared untimed (`body_node_timing`: CUDA), its
/// replay has no node span. The replay's buffers equal the host loop's on
/// the CPU reference.
///
/// Mutations: wgpu's and Vulkan's unrolled spans attributed to their step
/// instead of their launch (a gate's window kept, `launch_of` ignored) →
/// red on lavapipe ("launch 4" named, or the order broken); the CPU
/// backend stamping a body's launches once whatever the iterations → red
/// (launch 1 once, fewer than 2 copies).
pub const C14_NODE_SPANS_FOLLOW_ITERATIONS: Case = Case {
    name: "c14_node_spans_follow_iterations",
    rule: Rule::C14,
    tags: &[Tag::NeedsConditional],
    modes: ONCE,
    body: spans_follow_iterations,
};

fn program(b: &Bufs) -> Vec<Node> {
    vec![
        b.double(1.0),
        Node::While(b.ctl.id(), COUNTER, MAX, vec![b.double(0.5), b.decrement()]),
        b.double(-1.0),
    ]
}

fn spans_follow_iterations(cx: &Ctx) -> CaseResult {
    let d = &cx.dev;
    if let NodeTiming::Unavailable(_) = d.node_timing() {
        check!(
            d.set_node_timing(true).is_err(),
            "set_node_timing(true) succeeded on a device whose node timing is unavailable"
        );
        return Ok(());
    }
    let unavailable = matches!(
        cx.registration.body_node_timing,
        DeclaredNodeTiming::Unavailable(_)
    );
    let mine = Bufs::new(d)?;
    d.set_node_timing(true)?;
    let scope = d.capture()?;
    record(&scope, d, &program(&mine))?;
    let g = scope.end_graph()?;
    d.set_node_timing(false)?;
    mine.reset(RUNS)?;
    d.set_tracing(true);
    g.replay()?;
    d.set_tracing(false);
    let log = d.take_trace_log("c14 node spans")?;
    let r = (cx.reference)();
    let theirs = Bufs::new(&r)?;
    theirs.reset(RUNS)?;
    host_loop(&r, &program(&theirs))?;
    check_eq!(
        mine.contents(d)?,
        theirs.contents(&r)?,
        "the traced replay (left) against the host loop on the CPU reference (right)"
    );
    let tag = log
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Replay { .. }))
        .map(|e| e.seq)
        .ok_or_else(|| crate::Failure("the traced replay has no Replay event".into()))?;
    let whole = log
        .device_spans
        .iter()
        .find(|s| s.tag == tag)
        .ok_or_else(|| crate::Failure("the traced replay has no device span".into()))?;
    let mut spans: Vec<&DeviceSpan> = log.node_spans.iter().filter(|s| s.tag == tag).collect();
    spans.sort_by_key(|s| (s.start_ns, s.end_ns));
    if unavailable {
        check!(
            spans.is_empty(),
            "{} node spans of a graph with a body, where the registration declares none",
            spans.len()
        );
        return Ok(());
    }
    check!(!spans.is_empty(), "a node-timed replay has no node span");
    for s in &spans {
        let nodes = s
            .nodes
            .ok_or_else(|| crate::Failure("a node span without nodes".into()))?;
        check!(
            nodes.count >= 1 && nodes.first + nodes.count <= 4,
            "a node span names launches {}..{} of a graph of 4",
            nodes.first,
            nodes.first + nodes.count
        );
        check!(
            s.start_ns >= whole.start_ns && s.end_ns <= whole.end_ns && s.end_ns >= s.start_ns,
            "launch {}'s span {}..{} ns is not inside the replay's {}..{} ns",
            nodes.first,
            s.start_ns,
            s.end_ns,
            whole.start_ns,
            whole.end_ns
        );
    }
    if cx.registration.node_timing != DeclaredNodeTiming::Native {
        return Ok(());
    }
    let order: Vec<u32> = spans
        .iter()
        .map(|s| s.nodes.map_or(u32::MAX, |n| n.first))
        .collect();
    let copies = (order.len().saturating_sub(2) / 2) as u32;
    let mut want = vec![0u32];
    for _ in 0..copies {
        want.extend([1, 2]);
    }
    want.push(3);
    check_eq!(
        order,
        want,
        "the launches of the node spans in the order they start"
    );
    check!(
        (RUNS..=MAX).contains(&copies),
        "{copies} copies of the body have spans; the condition allows {RUNS} iterations and the \
         bound {MAX}"
    );
    for w in spans.windows(2) {
        check!(
            w[1].start_ns >= w[0].end_ns,
            "a span starts at {} ns before the one it depends on ended at {} ns",
            w[1].start_ns,
            w[0].end_ns
        );
    }
    Ok(())
}
