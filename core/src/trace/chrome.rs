//! The trace as Chrome trace-event JSON, and the table of the nodes that
//! took the most device time.

use super::{EventKind, NodeDesc, TraceEvent, TraceLog};
use crate::backend::DeviceSpan;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing):
/// one process per device, and per log a host track (launches, capture
/// begin/end, replay submissions, destroys) and a device track (device-timed
/// replays and eager launches as slices, named with graph and replay index;
/// inside each replay's slice, one `"cat": "node"` slice per launch where
/// node timing was on, named by the launch's op).
///
/// Device clocks differ from the host's: each log's device track is shifted
/// so that its first span starts at the host time of the event it belongs to.
pub fn chrome_trace(logs: &[TraceLog]) -> Value {
    let mut out = Vec::new();
    let mut pids: Vec<&str> = Vec::new();
    for (k, log) in logs.iter().enumerate() {
        let pid = match pids.iter().position(|d| *d == log.device) {
            Some(i) => i,
            None => {
                pids.push(&log.device);
                out.push(
                    json!({"ph": "M", "name": "process_name", "pid": pids.len() - 1,
                    "args": {"name": format!("{} ({})", log.device, log.device_name)}}),
                );
                pids.len() - 1
            }
        };
        let (host_tid, dev_tid) = (2 * k, 2 * k + 1);
        out.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": host_tid,
            "args": {"name": format!("{} host", log.label)}}),
        );
        let dev_name = match &log.device_timing_unavailable {
            None => format!("{} device", log.label),
            Some(why) => format!("{} device (not timed: {why})", log.label),
        };
        out.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": dev_tid,
            "args": {"name": dev_name}}),
        );
        let us = |ns: u64| ns as f64 / 1e3;
        let by_seq: HashMap<u64, &TraceEvent> = log.events.iter().map(|e| (e.seq, e)).collect();
        for e in &log.events {
            let (name, args) = event_name(&e.kind);
            out.push(
                json!({"ph": "i", "s": "t", "name": name, "pid": pid, "tid": host_tid,
                "ts": us(e.host_ns), "args": args}),
            );
        }
        let offset = log.device_spans.first().and_then(|s| {
            by_seq
                .get(&s.tag)
                .map(|e| e.host_ns as i128 - s.start_ns as i128)
        });
        let place = |s: &DeviceSpan| (s.start_ns as i128 + offset.unwrap_or(0)).max(0) as u64;
        for s in &log.device_spans {
            let (name, args) = by_seq
                .get(&s.tag)
                .map(|e| event_name(&e.kind))
                .unwrap_or_else(|| ("unmatched span".into(), json!({})));
            out.push(json!({"ph": "X", "name": name, "pid": pid, "tid": dev_tid,
                "ts": us(place(s)), "dur": us(s.end_ns.saturating_sub(s.start_ns)), "args": args}));
        }
        let replays = replays_with_nodes(&log.events);
        for s in &log.node_spans {
            let (name, args) = node_name(s, replays.get(&s.tag));
            out.push(
                json!({"ph": "X", "cat": "node", "name": name, "pid": pid, "tid": dev_tid,
                "ts": us(place(s)), "dur": us(s.end_ns.saturating_sub(s.start_ns)), "args": args}),
            );
        }
    }
    json!({"traceEvents": out, "displayTimeUnit": "ns"})
}

/// One replay as its node spans need it: the graph, which replay, and the
/// graph's launches as the last `Nodes` event before it describes them.
struct ReplayNodes<'a> {
    graph: Option<u64>,
    /// Which current graph (`graph: None`) it replayed: the number of
    /// captures into the current graph the log saw before it (each replaces
    /// the one before). 0 for a handle.
    current: u64,
    index: u64,
    nodes: Option<&'a [NodeDesc]>,
}

/// Each replay event's seq → its graph and the launches it ran.
fn replays_with_nodes(events: &[TraceEvent]) -> HashMap<u64, ReplayNodes<'_>> {
    let mut described: HashMap<Option<u64>, &[NodeDesc]> = HashMap::new();
    let mut out = HashMap::new();
    let mut current = 0;
    for e in events {
        match &e.kind {
            EventKind::Nodes { graph, nodes } => {
                described.insert(*graph, nodes);
            }
            EventKind::EndCapture { .. } => {
                current += 1;
                described.remove(&None);
            }
            EventKind::Replay { graph, index } => {
                let nodes = described.get(graph).copied();
                out.insert(
                    e.seq,
                    ReplayNodes {
                        graph: *graph,
                        current: if graph.is_none() { current } else { 0 },
                        index: *index,
                        nodes,
                    },
                );
            }
            _ => {}
        }
    }
    out
}

/// A node span's slice name and arguments.
fn node_name(s: &DeviceSpan, replay: Option<&ReplayNodes<'_>>) -> (String, Value) {
    let nodes = s
        .nodes
        .unwrap_or(crate::backend::Nodes { first: 0, count: 0 });
    let desc = replay
        .and_then(|r| r.nodes)
        .and_then(|n| n.get(nodes.first as usize));
    let name = match (nodes.count, desc) {
        (1, Some(d)) => d.op.to_string(),
        (1, None) => format!("launch {}", nodes.first),
        (n, _) => format!(
            "launches {}..{}",
            nodes.first,
            nodes.first.saturating_add(n)
        ),
    };
    let args = json!({
        "graph": replay.map(|r| r.graph),
        "replay_index": replay.map(|r| r.index),
        "launch": nodes.first,
        "launches": nodes.count,
        "op": desc.map(|d| d.op.as_ref()),
        "bindings": desc.map(|d| d.bindings.as_slice()),
    });
    (name, args)
}

/// The nodes that took the most device time, per graph: for each of the
/// `graphs` graphs (per log) with the most node time, its `top` launches
/// by total time over its replays, one line each. Empty when no log has
/// node spans.
pub fn node_table(logs: &[TraceLog], graphs: usize, top: usize) -> String {
    struct Row {
        name: String,
        total_ns: u64,
        spans: u64,
    }
    struct Graph<'a> {
        device: &'a str,
        label: &'a str,
        graph: Option<u64>,
        current: u64,
        replays: std::collections::BTreeSet<u64>,
        rows: std::collections::BTreeMap<u32, Row>,
        total_ns: u64,
    }
    let mut all: Vec<Graph<'_>> = Vec::new();
    for log in logs {
        let replays = replays_with_nodes(&log.events);
        // A graph handle, or one of the current graphs one after another.
        let mut by_graph: HashMap<(Option<u64>, u64), usize> = HashMap::new();
        for s in &log.node_spans {
            let Some(r) = replays.get(&s.tag) else {
                continue;
            };
            let g = *by_graph.entry((r.graph, r.current)).or_insert_with(|| {
                all.push(Graph {
                    device: &log.device,
                    label: &log.label,
                    graph: r.graph,
                    current: r.current,
                    replays: Default::default(),
                    rows: Default::default(),
                    total_ns: 0,
                });
                all.len() - 1
            });
            let g = &mut all[g];
            let ns = s.end_ns.saturating_sub(s.start_ns);
            g.replays.insert(s.tag);
            g.total_ns += ns;
            let first = s.nodes.map_or(0, |n| n.first);
            let row = g.rows.entry(first).or_insert_with(|| Row {
                name: node_name(s, Some(r)).0,
                total_ns: 0,
                spans: 0,
            });
            row.total_ns += ns;
            row.spans += 1;
        }
    }
    all.sort_by_key(|g| std::cmp::Reverse(g.total_ns));
    let mut out = String::new();
    for g in all.iter().take(graphs) {
        let graph = match g.graph {
            Some(n) => format!("g{n}"),
            None if g.current > 0 => format!("current (capture {})", g.current),
            None => "current".to_string(),
        };
        out += &format!(
            "{} {} {graph}: {} replays, {} nodes, {:.1} µs of node time a replay\n",
            g.device,
            g.label,
            g.replays.len(),
            g.rows.len(),
            g.total_ns as f64 / 1e3 / g.replays.len().max(1) as f64
        );
        let mut rows: Vec<(&u32, &Row)> = g.rows.iter().collect();
        rows.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
        for (i, row) in rows.iter().take(top) {
            out += &format!(
                "  #{i:<4} {:<24} {:>10.1} µs total {:>9.2} µs mean\n",
                row.name,
                row.total_ns as f64 / 1e3,
                row.total_ns as f64 / 1e3 / row.spans.max(1) as f64
            );
        }
    }
    out
}

fn event_name(kind: &EventKind) -> (String, Value) {
    match kind {
        EventKind::Launch { op, captured } => (
            format!("{op}{}", if *captured { " (captured)" } else { "" }),
            json!({"op": op, "captured": captured}),
        ),
        EventKind::BeginCapture => ("begin_capture".into(), json!({})),
        EventKind::EndCapture { launches } => (
            "end_capture_into_current".into(),
            json!({"launches": launches}),
        ),
        EventKind::EndCaptureGraph { graph, launches } => (
            format!("end_capture_graph g{graph}"),
            json!({"graph": graph, "launches": launches}),
        ),
        EventKind::AbortCapture => ("abort_capture".into(), json!({})),
        EventKind::Replay { graph, index } => (
            match graph {
                Some(g) => format!("replay g{g} #{index}"),
                None => format!("replay current #{index}"),
            },
            json!({"graph": graph, "replay_index": index}),
        ),
        EventKind::Destroy { graph } => (format!("destroy g{graph}"), json!({"graph": graph})),
        EventKind::Update {
            graph,
            launches,
            native,
        } => (
            match graph {
                Some(g) => format!("update g{g}"),
                None => "update current".into(),
            },
            json!({"graph": graph, "launches": launches, "native": native}),
        ),
        EventKind::Nodes { graph, nodes } => (
            match graph {
                Some(g) => format!("nodes g{g}"),
                None => "nodes current".into(),
            },
            json!({"graph": graph, "launches": nodes.len()}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Nodes;
    use serde_json::json;

    fn log(device: &str, label: &str, events: Vec<TraceEvent>, spans: Vec<DeviceSpan>) -> TraceLog {
        TraceLog {
            device: device.into(),
            device_name: "Dev".into(),
            label: label.into(),
            events,
            device_spans: spans,
            device_timing_unavailable: None,
            node_spans: Vec::new(),
            node_timing_unavailable: None,
        }
    }

    fn ev(seq: u64, host_ns: u64, kind: EventKind) -> TraceEvent {
        TraceEvent { seq, host_ns, kind }
    }

    /// Process per device (reused by a second log of the same device), two
    /// tracks per log, host instants in µs, device slices shifted onto the
    /// host clock by the first span's event, unmatched spans kept.
    /// Mutations in `chrome_trace` (the pid lookup `==`, `pids.len() - 1`,
    /// the track ids `2k` / `2k + 1`, `/ 1e3`, the clock offset and its use)
    /// → red.
    #[test]
    fn chrome_trace_places_every_event_exactly() {
        let replay = |graph, index| EventKind::Replay { graph, index };
        let a = log(
            "cpu:0",
            "t1",
            vec![
                ev(
                    0,
                    1_000,
                    EventKind::Launch {
                        op: "add".into(),
                        captured: true,
                    },
                ),
                ev(1, 5_000, replay(Some(3), 0)),
                ev(2, 9_000, replay(None, 1)),
            ],
            // Device clock 1,000,000 ns ahead of the host's.
            vec![
                DeviceSpan::whole(1, 1_006_000, 1_008_500),
                DeviceSpan::whole(2, 1_010_000, 1_010_250),
                DeviceSpan::whole(9, 1_020_000, 1_021_000),
            ],
        );
        let mut b = log(
            "gpu:1",
            "t2",
            vec![ev(0, 2_000, EventKind::BeginCapture)],
            vec![],
        );
        b.device_timing_unavailable = Some("no clock".into());
        let c = log(
            "cpu:0",
            "t3",
            vec![ev(0, 3_000, EventKind::Destroy { graph: 3 })],
            vec![],
        );
        let v = chrome_trace(&[a, b, c]);
        assert_eq!(v["displayTimeUnit"], "ns");
        let all = v["traceEvents"].as_array().unwrap();
        let pick = |ph: &str| -> Vec<&Value> { all.iter().filter(|e| e["ph"] == ph).collect() };
        let meta: Vec<(String, u64, Option<u64>, String)> = pick("M")
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["pid"].as_u64().unwrap(),
                    e["tid"].as_u64(),
                    e["args"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let m = |n: &str, pid, tid, a: &str| (n.to_string(), pid, tid, a.to_string());
        assert_eq!(
            meta,
            [
                m("process_name", 0, None, "cpu:0 (Dev)"),
                m("thread_name", 0, Some(0), "t1 host"),
                m("thread_name", 0, Some(1), "t1 device"),
                m("process_name", 1, None, "gpu:1 (Dev)"),
                m("thread_name", 1, Some(2), "t2 host"),
                m("thread_name", 1, Some(3), "t2 device (not timed: no clock)"),
                m("thread_name", 0, Some(4), "t3 host"),
                m("thread_name", 0, Some(5), "t3 device"),
            ]
        );
        let instants: Vec<(u64, u64, f64, &str)> = pick("i")
            .iter()
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["tid"].as_u64().unwrap(),
                    e["ts"].as_f64().unwrap(),
                    e["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            instants,
            [
                (0, 0, 1.0, "add (captured)"),
                (0, 0, 5.0, "replay g3 #0"),
                (0, 0, 9.0, "replay current #1"),
                (1, 2, 2.0, "begin_capture"),
                (0, 4, 3.0, "destroy g3"),
            ]
        );
        let slices: Vec<Value> = pick("X")
            .iter()
            .map(|e| json!([e["tid"], e["ts"], e["dur"], e["name"], e["args"]]))
            .collect();
        assert_eq!(
            slices,
            [
                json!([1, 5.0, 2.5, "replay g3 #0", {"graph": 3, "replay_index": 0}]),
                json!([1, 9.0, 0.25, "replay current #1", {"graph": null, "replay_index": 1}]),
                json!([1, 19.0, 1.0, "unmatched span", {}]),
            ]
        );
    }

    /// Node spans become `node` slices on the device track, shifted like
    /// the replays, named by the op the last `Nodes` event before their
    /// replay gives (so an update renames them), with the replay's graph
    /// and index; a coarse span names its launch range; the table sums
    /// each launch over its replays and ranks them.
    /// Mutations: `replays_with_nodes` keeping the first `Nodes` event, a
    /// wrong `launch` index, the table's sort or sums → red.
    #[test]
    fn node_spans_become_named_slices_and_a_table() {
        let nodes = |ops: &[&'static str], b: &str| EventKind::Nodes {
            graph: Some(3),
            nodes: ops
                .iter()
                .map(|op| NodeDesc {
                    op: (*op).into(),
                    bindings: vec![b.to_string()],
                })
                .collect(),
        };
        let mut a = log(
            "cpu:0",
            "t",
            vec![
                ev(0, 1_000, nodes(&["add", "mul"], "b1")),
                ev(
                    1,
                    2_000,
                    EventKind::Replay {
                        graph: Some(3),
                        index: 0,
                    },
                ),
                ev(2, 3_000, nodes(&["add", "silu"], "b2")),
                ev(
                    3,
                    4_000,
                    EventKind::Replay {
                        graph: Some(3),
                        index: 1,
                    },
                ),
            ],
            vec![
                DeviceSpan::whole(1, 10_000, 20_000),
                DeviceSpan::whole(3, 30_000, 40_000),
            ],
        );
        a.node_spans = vec![
            DeviceSpan::node(1, 0, 10_000, 11_000),
            DeviceSpan::node(1, 1, 11_000, 19_000),
            DeviceSpan::node(3, 1, 31_000, 33_000),
            DeviceSpan {
                tag: 3,
                start_ns: 33_000,
                end_ns: 34_000,
                nodes: Some(Nodes { first: 0, count: 2 }),
            },
        ];
        let v = chrome_trace(std::slice::from_ref(&a));
        let nodes: Vec<Value> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "node")
            .map(|e| {
                json!([
                    e["tid"],
                    e["ts"],
                    e["dur"],
                    e["name"],
                    e["args"]["launch"],
                    e["args"]["replay_index"],
                    e["args"]["bindings"]
                ])
            })
            .collect();
        assert_eq!(
            nodes,
            [
                json!([1, 2.0, 1.0, "add", 0, 0, ["b1"]]),
                json!([1, 3.0, 8.0, "mul", 1, 0, ["b1"]]),
                json!([1, 23.0, 2.0, "silu", 1, 1, ["b2"]]),
                json!([1, 25.0, 1.0, "launches 0..2", 0, 1, ["b2"]]),
            ]
        );
        let table = node_table(&[a], 5, 2);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(
            lines[0].starts_with("cpu:0 t g3: 2 replays, 2 nodes, 6.0 µs"),
            "{table}"
        );
        assert!(
            lines[1].trim_start().starts_with("#1")
                && lines[1].contains("10.0 µs total")
                && lines[1].contains("5.00 µs mean"),
            "{table}"
        );
        assert!(
            lines[2].trim_start().starts_with("#0") && lines[2].contains("2.0 µs total"),
            "{table}"
        );
        assert_eq!(node_table(&[log("x", "y", vec![], vec![])], 5, 5), "");
    }

    /// Two graphs captured into the current graph one after the other are
    /// two graphs of the table, each named by its own nodes, whatever order
    /// the device returns their spans in; one captured before the log began
    /// is `current`. Mutations: the table keyed by graph id alone (both
    /// current graphs one row `#0`, named by whichever span came first), the
    /// capture count not advanced, `current > 0` taken as always true → red.
    #[test]
    fn current_graphs_one_after_another_are_apart_in_the_table() {
        let described = |op: &'static str| EventKind::Nodes {
            graph: None,
            nodes: vec![NodeDesc {
                op: op.into(),
                bindings: vec!["b1".into()],
            }],
        };
        let replay = |index| EventKind::Replay { graph: None, index };
        let mut a = log(
            "vulkan:0",
            "t",
            vec![
                ev(0, 0, EventKind::EndCapture { launches: 1 }),
                ev(1, 1_000, described("add")),
                ev(2, 2_000, replay(0)),
                ev(3, 3_000, EventKind::EndCapture { launches: 1 }),
                ev(4, 4_000, described("silu")),
                ev(5, 5_000, replay(0)),
                ev(6, 6_000, replay(1)),
            ],
            vec![],
        );
        // The replaced graph's span last, as a device may return it.
        a.node_spans = vec![
            DeviceSpan::node(5, 0, 10_000, 14_000),
            DeviceSpan::node(6, 0, 20_000, 24_000),
            DeviceSpan::node(2, 0, 1_000, 2_000),
        ];
        let table = node_table(&[a], 5, 5);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(
            lines[0].starts_with("vulkan:0 t current (capture 2): 2 replays, 1 nodes")
                && lines[1].contains("silu"),
            "{table}"
        );
        assert!(
            lines[2].starts_with("vulkan:0 t current (capture 1): 1 replays, 1 nodes")
                && lines[3].contains("add"),
            "{table}"
        );
        // A current graph captured before the log began is just `current`.
        let mut b = log("cpu:0", "u", vec![ev(0, 0, replay(0))], vec![]);
        b.node_spans = vec![DeviceSpan::node(0, 0, 1_000, 2_000)];
        let table = node_table(&[b], 5, 5);
        assert!(
            table.starts_with("cpu:0 u current: 1 replays, 1 nodes"),
            "{table}"
        );
    }
}
