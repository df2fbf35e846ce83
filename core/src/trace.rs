//! Every launch, capture and replay on the record (C10). Off by default; when
//! off, recording is one branch on a bool and allocates nothing.

use crate::backend::DeviceSpan;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::time::Instant;

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum EventKind {
    /// `op` is the op's name (`"add"`, or a user kernel's name): a trace is
    /// data that crosses processes (an isolated run's children send theirs
    /// to the parent), and a user kernel's definition does not.
    Launch {
        /// The op's name.
        op: Cow<'static, str>,
        /// Recorded into a capture (else run eagerly).
        captured: bool,
    },
    /// A capture began.
    BeginCapture,
    /// end_capture_into_current: the current graph.
    EndCapture {
        /// Launches the capture recorded.
        launches: usize,
    },
    /// end_capture_graph: a new handle.
    EndCaptureGraph {
        /// The new graph's id.
        graph: u64,
        /// Launches it recorded.
        launches: usize,
    },
    /// A capture was aborted.
    AbortCapture,
    /// `graph` is `None` for the current graph. `index` counts from 0 per target.
    Replay {
        /// The graph replayed (`None`: the current graph).
        graph: Option<u64>,
        /// Which replay of it, from 0.
        index: u64,
    },
    /// A graph handle was destroyed.
    Destroy {
        /// Its id.
        graph: u64,
    },
    /// C13: launches of a graph replaced (`rebind`, `update_params`);
    /// `graph` is `None` for the current graph. `native`: patched in place by
    /// the backend, else re-recorded by core.
    Update {
        /// The graph updated (`None`: the current graph).
        graph: Option<u64>,
        /// Launches the update changed.
        launches: usize,
        /// Patched in place by the backend (else recorded again by core).
        native: bool,
    },
}

/// One trace event, host-timestamped in nanoseconds since the device opened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// Order among the device's events (also the tag of its device span).
    pub seq: u64,
    /// When it happened, in nanoseconds since the device opened.
    pub host_ns: u64,
    /// What happened.
    pub kind: EventKind,
}

#[derive(Debug)]
pub(crate) struct Trace {
    enabled: bool,
    epoch: Instant,
    seq: u64,
    events: Vec<TraceEvent>,
}

impl Trace {
    pub(crate) fn new() -> Self {
        Trace {
            enabled: false,
            epoch: Instant::now(),
            seq: 0,
            events: Vec::new(),
        }
    }

    pub(crate) fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    #[inline]
    pub(crate) fn record(&mut self, kind: impl FnOnce() -> EventKind) {
        if !self.enabled {
            return;
        }
        let host_ns = self.epoch.elapsed().as_nanos() as u64;
        self.events.push(TraceEvent {
            seq: self.seq,
            host_ns,
            kind: kind(),
        });
        self.seq += 1;
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The `seq` the next recorded event will get.
    pub(crate) fn next_seq(&self) -> u64 {
        self.seq
    }

    pub(crate) fn take(&mut self) -> Vec<TraceEvent> {
        std::mem::take(&mut self.events)
    }
}

/// Everything one device recorded: host events, and device spans where the
/// backend can time the device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceLog {
    /// `<backend>:<index>`.
    pub device: String,
    /// The device's name, as its driver says.
    pub device_name: String,
    /// A label for the track group, e.g. the conformance trial.
    pub label: String,
    /// Host events, in order.
    pub events: Vec<TraceEvent>,
    /// Device spans of timed work, on the device's clock.
    pub device_spans: Vec<DeviceSpan>,
    /// `None` where the device is timed; otherwise why it is not.
    pub device_timing_unavailable: Option<String>,
}

/// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing):
/// one process per device, and per log a host track (launches, capture
/// begin/end, replay submissions, destroys) and a device track (device-timed
/// replays and eager launches as slices, named with graph and replay index).
///
/// Device clocks differ from the host's: each log's device track is shifted
/// so that its first span starts at the host time of the event it belongs to.
pub fn chrome_trace(logs: &[TraceLog]) -> serde_json::Value {
    use serde_json::json;
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
        let by_seq: std::collections::HashMap<u64, &TraceEvent> =
            log.events.iter().map(|e| (e.seq, e)).collect();
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
        for s in &log.device_spans {
            let (name, args) = by_seq
                .get(&s.tag)
                .map(|e| event_name(&e.kind))
                .unwrap_or_else(|| ("unmatched span".into(), json!({})));
            let start = (s.start_ns as i128 + offset.unwrap_or(0)).max(0) as u64;
            out.push(json!({"ph": "X", "name": name, "pid": pid, "tid": dev_tid,
                "ts": us(start), "dur": us(s.end_ns.saturating_sub(s.start_ns)), "args": args}));
        }
    }
    json!({"traceEvents": out, "displayTimeUnit": "ns"})
}

fn event_name(kind: &EventKind) -> (String, serde_json::Value) {
    use serde_json::json;
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn log(device: &str, label: &str, events: Vec<TraceEvent>, spans: Vec<DeviceSpan>) -> TraceLog {
        TraceLog {
            device: device.into(),
            device_name: "Dev".into(),
            label: label.into(),
            events,
            device_spans: spans,
            device_timing_unavailable: None,
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
                DeviceSpan {
                    tag: 1,
                    start_ns: 1_006_000,
                    end_ns: 1_008_500,
                },
                DeviceSpan {
                    tag: 2,
                    start_ns: 1_010_000,
                    end_ns: 1_010_250,
                },
                DeviceSpan {
                    tag: 9,
                    start_ns: 1_020_000,
                    end_ns: 1_021_000,
                },
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
}
