//! C10 inside every replay: a device span for each launch of a traced
//! replay of a graph captured with node timing on.

use crate::{check, check_eq, Case, CaseResult, Ctx, Rule, Tag, ONCE};
use seam::{
    ops, Change, DeclaredNodeTiming, DeviceSpan, EventKind, NodeDesc, NodeTiming, TraceLog,
};
use std::collections::HashMap;

/// The graph's launches: a chain in which each reads what the one before
/// wrote, so their spans must follow capture order.
const CHAIN: &[&str] = &["add", "mul", "copy", "add", "silu"];
const N: usize = 64;
const REPLAYS: usize = 3;

/// With node timing on, each traced replay of a graph of 5 dependent
/// launches has, on a device declaring native node timing, exactly 5 node
/// spans tagged with that replay's event, launch indices 0..5 once each,
/// inside the replay's own span, each ending no earlier than it starts and
/// starting no earlier than the launch before it ended; where it declares
/// coarse node timing, spans covering 0..5 in contiguous pieces. A `Nodes`
/// event names each launch by its op and bindings, the same on every
/// backend. A graph captured with node timing off, and eager launches, get
/// none. After a rebind (C13) the same launch indices name the same nodes,
/// with the new binding. The Chrome export has one `node` slice per node
/// span, named by its op. A device declaring node timing unavailable
/// refuses `set_node_timing(true)` with the reason and records no node
/// spans. What the device reports must be what its registration declares.
/// A traced replay's node spans reach the trace even when its graph is
/// destroyed, or replayed again untraced, before the trace is taken. Where
/// node timing is native, each span measures its own launch: of three
/// dependent launches, the one over 4 Mi elements has a longer span than
/// the two over 64 around it.
///
/// Mutations: make the CPU backend stamp every launch but the last of a
/// node-timed replay → red; make it time graphs captured with node timing
/// off → red; make core keep a graph's `Nodes` event after an update
/// (skip `trace.forget`) → red (stale bindings). On Vulkan (lavapipe): a
/// destroyed graph's unread stamps dropped (`retire` → `()`) → red; the
/// check for unread stamps requiring both read and retired ones (`||` →
/// `&&`) → red. Also red: node spans of zero length, or all at their
/// replay's start (planted in a copy of the outside backend's wrapper).
pub const C10_NODE_SPANS_INSIDE_REPLAYS: Case = Case {
    name: "c10_node_spans_inside_replays",
    rule: Rule::C10,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: node_spans,
};

fn node_spans(cx: &Ctx) -> CaseResult {
    let d = &cx.dev;
    let reg = cx.registration;
    let reported = d.node_timing();
    check!(
        reg.node_timing.matches(&reported),
        "{} declares node timing `{}` but the device reports {reported:?}: change the \
         registration (`Registration::with_node_timing`) or the backend's `node_timing`",
        reg.name,
        reg.node_timing.name()
    );
    let one = d.buffer_from(&[1.0f32; N])?;
    let two = d.buffer_from(&[2.0f32; N])?;
    let x = d.buffer_from(&[0.0f32; N])?;
    let y = d.buffer_from(&[0.0f32; N])?;
    let chain = |d: &seam::Device| -> seam::Result<()> {
        d.launch(&ops::add(one.id(), x.id(), y.id(), N as u32))?;
        d.launch(&ops::mul(y.id(), one.id(), x.id(), N as u32))?;
        d.launch(&ops::copy(x.id(), y.id(), N as u32))?;
        d.launch(&ops::add(y.id(), one.id(), x.id(), N as u32))?;
        d.launch(&ops::silu(x.id(), y.id(), N as u32))
    };
    if let NodeTiming::Unavailable(reason) = &reported {
        check!(!reason.is_empty(), "unavailable node timing must say why");
        check!(
            d.set_node_timing(true).is_err(),
            "set_node_timing(true) succeeded on a device whose node timing is unavailable"
        );
        let s = d.capture()?;
        chain(d)?;
        let g = s.end_graph()?;
        d.set_tracing(true);
        g.replay()?;
        d.set_tracing(false);
        let log = d.take_trace_log("c10 nodes")?;
        check!(
            log.node_spans.is_empty(),
            "a device without node timing recorded node spans"
        );
        check!(
            log.node_timing_unavailable.is_some(),
            "the trace does not say why it has no node spans"
        );
        return Ok(());
    }
    d.set_node_timing(true)?;
    let s = d.capture()?;
    chain(d)?;
    let timed = s.end_graph()?;
    d.set_node_timing(false)?;
    let s = d.capture()?;
    chain(d)?;
    let untimed = s.end_graph()?;

    d.set_tracing(true);
    for _ in 0..REPLAYS {
        timed.replay()?;
    }
    untimed.replay()?;
    d.launch(&ops::add(one.id(), x.id(), x.id(), N as u32))?;
    d.update(
        &timed,
        &[Change::Rebind {
            old: one.id(),
            new: two.id(),
        }],
    )?;
    timed.replay()?;
    d.set_tracing(false);
    let log = d.take_trace_log("c10 nodes")?;
    check!(
        log.node_timing_unavailable.is_none(),
        "the device reports node timing {reported:?}, but its trace says it has none: {:?}",
        log.node_timing_unavailable
    );

    let g = timed.id().number();
    let replays = replay_events(&log);
    let timed_replays: Vec<u64> = replays
        .iter()
        .filter(|(_, graph, _)| *graph == Some(g))
        .map(|(seq, _, _)| *seq)
        .collect();
    check_eq!(
        timed_replays.len(),
        REPLAYS + 1,
        "replays of the timed graph"
    );
    let name = |b: &seam::Buffer<f32>| format!("b{}", b.id().number());
    let ops_of = |nodes: &[NodeDesc]| nodes.iter().map(|n| n.op.to_string()).collect::<Vec<_>>();
    // Before the update: launch 0 reads `one`; after it, `two`.
    for (k, (&tag, reads)) in timed_replays
        .iter()
        .zip([&one, &one, &one, &two])
        .enumerate()
    {
        let nodes = described(&log, tag, g).ok_or_else(|| {
            crate::Failure(format!(
                "replay #{k} of the timed graph: no Nodes event names its launches"
            ))
        })?;
        check_eq!(
            ops_of(nodes),
            CHAIN,
            "replay #{k}: the launches the Nodes event names"
        );
        check_eq!(
            nodes[0].bindings,
            [name(reads), name(&x), name(&y)],
            "replay #{k}: launch 0's bindings"
        );
        let whole = replay_span(&log, tag)
            .map_err(|e| crate::Failure(format!("replay #{k} of the timed graph: {}", e.0)))?;
        let spans: Vec<&DeviceSpan> = log.node_spans.iter().filter(|s| s.tag == tag).collect();
        check_spans(&reg.node_timing, k, whole, &spans)?;
    }
    let known: Vec<u64> = timed_replays.clone();
    let stray: Vec<u64> = log
        .node_spans
        .iter()
        .filter(|s| !known.contains(&s.tag))
        .map(|s| s.tag)
        .collect();
    check!(
        stray.is_empty(),
        "node spans of work that was not a replay of a node-timed graph (the graph captured \
         with node timing off, or an eager launch): tags {stray:?}"
    );

    let trace = seam::chrome_trace(std::slice::from_ref(&log));
    let node_slices: Vec<String> = trace["traceEvents"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["ph"] == "X" && e["cat"] == "node")
                .filter_map(|e| e["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    check_eq!(
        node_slices.len(),
        log.node_spans.len(),
        "node slices in the exported trace"
    );
    if reg.node_timing == DeclaredNodeTiming::Native {
        let want: Vec<&str> = CHAIN
            .iter()
            .cycle()
            .take(CHAIN.len() * (REPLAYS + 1))
            .copied()
            .collect();
        let mut got = node_slices.clone();
        let mut want: Vec<String> = want.into_iter().map(String::from).collect();
        got.sort();
        want.sort();
        check_eq!(got, want, "node slice names in the exported trace");
    }
    if reg.node_timing == DeclaredNodeTiming::Native {
        spans_measure_their_node(cx)?;
    }
    for destroy in [true, false] {
        spans_outlive_their_graph(cx, &chain, destroy).map_err(|e| {
            let when = if destroy {
                "a traced replay's graph destroyed before the trace was taken"
            } else {
                "a traced replay followed by an untraced one before the trace was taken"
            };
            crate::Failure(format!("{when}: {}", e.0))
        })?;
    }
    Ok(())
}

/// Elements of the large launch of [`spans_measure_their_node`].
const LARGE: usize = 1 << 22;

/// Each node span measures its own launch: in a node-timed graph of a
/// launch over 64 elements, one over 4 Mi and one over 64 again (each
/// reading what the one before wrote), the large launch's span is longer
/// than either small one's, and every span is inside the replay's.
fn spans_measure_their_node(cx: &Ctx) -> CaseResult {
    let d = &cx.dev;
    let small = d.buffer_from(&[1u32; N])?;
    let big = d.buffer_from(&vec![1u32; LARGE])?;
    let three = |d: &seam::Device| -> seam::Result<()> {
        d.launch(&ops::add(small.id(), big.id(), big.id(), N as u32))?;
        d.launch(&ops::add(big.id(), big.id(), big.id(), LARGE as u32))?;
        d.launch(&ops::add(big.id(), small.id(), small.id(), N as u32))
    };
    // Warmed up by one untraced replay: on lavapipe the first run of a
    // command buffer can stretch its first dispatch past the large one.
    let (log, tag) = one_traced_replay(cx, &three, true, |_| Ok(()))?;
    let whole = replay_span(&log, tag)?;
    let mut took = [None; 3];
    for s in log.node_spans.iter().filter(|s| s.tag == tag) {
        let first = s.nodes.map_or(usize::MAX, |n| n.first as usize);
        check!(
            s.start_ns >= whole.start_ns && s.end_ns <= whole.end_ns,
            "launch {first}'s span is outside its replay's"
        );
        if let Some(t) = took.get_mut(first) {
            *t = Some(s.end_ns.saturating_sub(s.start_ns));
        }
    }
    let [Some(a), Some(b), Some(c)] = took else {
        return Err(crate::Failure(format!(
            "node spans of launches 0, 1, 2: {took:?}"
        )));
    };
    check!(
        b > a && b > c,
        "the launch over {LARGE} elements took {b} ns, the ones over {N} before and after it \
         {a} and {c} ns: a node span must measure its own launch"
    );
    Ok(())
}

/// A traced replay's node spans are in the trace whatever happens to its
/// graph before the trace is taken: the graph destroyed (`destroy`), or
/// replayed again untraced (which reads the traced replay's stamps first).
fn spans_outlive_their_graph(
    cx: &Ctx,
    chain: &dyn Fn(&seam::Device) -> seam::Result<()>,
    destroy: bool,
) -> CaseResult {
    let (log, tag) = one_traced_replay(cx, chain, false, |g| {
        if destroy {
            drop(g);
            Ok(())
        } else {
            g.replay()
        }
    })?;
    let whole = replay_span(&log, tag)?;
    let spans: Vec<&DeviceSpan> = log.node_spans.iter().filter(|s| s.tag == tag).collect();
    check_spans(&cx.registration.node_timing, 0, whole, &spans)
}

/// The launches `record` makes, captured with node timing on and replayed
/// once traced (after one untraced replay, waited for, where `warm`);
/// `then` gets the graph before the trace is taken. The log, and the tag
/// of its one traced replay.
fn one_traced_replay(
    cx: &Ctx,
    record: &dyn Fn(&seam::Device) -> seam::Result<()>,
    warm: bool,
    then: impl FnOnce(seam::Graph) -> seam::Result<()>,
) -> Result<(TraceLog, u64), crate::Failure> {
    let d = &cx.dev;
    d.set_node_timing(true)?;
    let s = d.capture()?;
    record(d)?;
    let g = s.end_graph()?;
    d.set_node_timing(false)?;
    if warm {
        g.replay()?;
        d.synchronize()?;
    }
    d.set_tracing(true);
    g.replay()?;
    d.set_tracing(false);
    then(g)?;
    let log = d.take_trace_log("c10 nodes")?;
    let replays = replay_events(&log);
    check_eq!(replays.len(), 1, "traced replays");
    Ok((log, replays[0].0))
}

/// The device span of the replay tagged `tag`.
fn replay_span(log: &TraceLog, tag: u64) -> Result<&DeviceSpan, crate::Failure> {
    log.device_spans
        .iter()
        .find(|s| s.tag == tag)
        .ok_or_else(|| crate::Failure("the replay has no device span".into()))
}

/// (seq, graph, replay index) of every replay event, in order.
fn replay_events(log: &TraceLog) -> Vec<(u64, Option<u64>, u64)> {
    log.events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Replay { graph, index } => Some((e.seq, graph, index)),
            _ => None,
        })
        .collect()
}

/// The launches of graph `g` as the last `Nodes` event before event `tag`
/// names them.
fn described(log: &TraceLog, tag: u64, g: u64) -> Option<&[NodeDesc]> {
    log.events
        .iter()
        .take_while(|e| e.seq < tag)
        .filter_map(|e| match &e.kind {
            EventKind::Nodes { graph, nodes } if *graph == Some(g) => Some(nodes.as_slice()),
            _ => None,
        })
        .last()
}

/// One replay's node spans against its own span and the declaration.
fn check_spans(
    declared: &DeclaredNodeTiming,
    k: usize,
    whole: &DeviceSpan,
    spans: &[&DeviceSpan],
) -> CaseResult {
    let mut by_first: HashMap<u32, &DeviceSpan> = HashMap::new();
    for s in spans {
        let nodes = s
            .nodes
            .ok_or_else(|| crate::Failure("a node span without nodes".into()))?;
        check!(
            by_first.insert(nodes.first, s).is_none(),
            "replay #{k}: two spans for launch {}",
            nodes.first
        );
    }
    if *declared == DeclaredNodeTiming::Native {
        check_eq!(
            spans.len(),
            CHAIN.len(),
            "replay #{k}: node spans (one per launch)"
        );
    }
    let mut next = 0u32;
    let mut last_end = whole.start_ns;
    while (next as usize) < CHAIN.len() {
        let s = by_first.get(&next).ok_or_else(|| {
            crate::Failure(format!("replay #{k}: no node span starts at launch {next}"))
        })?;
        let nodes = s.nodes.expect("checked above");
        check!(
            nodes.count >= 1,
            "replay #{k}: a span of 0 launches at {next}"
        );
        if *declared == DeclaredNodeTiming::Native {
            check_eq!(
                nodes.count,
                1,
                "replay #{k}: launches in launch {next}'s span"
            );
        }
        check!(
            s.end_ns >= s.start_ns,
            "replay #{k}: launch {next}'s span ends before it starts"
        );
        check!(
            s.start_ns >= last_end,
            "replay #{k}: launch {next} starts at {} ns, before the launch it depends on \
             ended (or before its replay began) at {last_end} ns",
            s.start_ns
        );
        last_end = s.end_ns;
        next += nodes.count;
    }
    check_eq!(
        next as usize,
        CHAIN.len(),
        "replay #{k}: launches the spans cover"
    );
    check!(
        last_end <= whole.end_ns,
        "replay #{k}: the last node ends at {last_end} ns, after its replay's span ends at {} ns",
        whole.end_ns
    );
    Ok(())
}
