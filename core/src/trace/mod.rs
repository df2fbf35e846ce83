//! Every launch, capture and replay on the record (C10). Off by default; when
//! off, recording is one branch on a bool and allocates nothing. With node
//! timing on, each traced replay of a node-timed graph also has a device
//! span per launch, named by the graph's launches ([`EventKind::Nodes`]).

mod chrome;

pub use chrome::{chrome_trace, node_table};

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
    /// What each launch of a graph is, recorded before the first traced
    /// replay of a node-timed graph (and again after the graph changed):
    /// names its node spans. Launch `i` of every later replay of `graph`
    /// is `nodes[i]`, until the next `Nodes` of the same graph.
    Nodes {
        /// The graph (`None`: the current graph).
        graph: Option<u64>,
        /// Its launches, in capture order.
        nodes: Vec<NodeDesc>,
    },
}

/// One launch of a graph, as a node span's name and arguments show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDesc {
    /// The op's name (`add`, or a user kernel's name).
    pub op: Cow<'static, str>,
    /// Its views, in binding order: `b<buffer>` for a whole buffer, else
    /// `b<buffer>[first..end]` in elements (`..` to the buffer's end).
    pub bindings: Vec<String>,
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
    /// Graphs whose `Nodes` event is among `events` and still true.
    described: Vec<Option<u64>>,
}

impl Trace {
    pub(crate) fn new() -> Self {
        Trace {
            enabled: false,
            epoch: Instant::now(),
            seq: 0,
            events: Vec::new(),
            described: Vec::new(),
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
        self.described.clear();
        std::mem::take(&mut self.events)
    }

    /// Record `graph`'s `Nodes` event unless one since the last take still
    /// describes it (nothing when tracing is off).
    pub(crate) fn describe(&mut self, graph: Option<u64>, nodes: impl FnOnce() -> Vec<NodeDesc>) {
        if !self.enabled || self.described.contains(&graph) {
            return;
        }
        self.described.push(graph);
        self.record(|| EventKind::Nodes {
            graph,
            nodes: nodes(),
        });
    }

    /// `graph` changed (updated, captured anew, destroyed): its next node-timed
    /// replay describes it again.
    pub(crate) fn forget(&mut self, graph: Option<u64>) {
        self.described.retain(|g| *g != graph);
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
    /// Device spans of timed work (replays and eager launches), on the
    /// device's clock.
    pub device_spans: Vec<DeviceSpan>,
    /// `None` where the device is timed; otherwise why it is not.
    pub device_timing_unavailable: Option<String>,
    /// Node spans (`nodes` is `Some`) of traced replays of node-timed
    /// graphs, on the same clock, each tagged with its replay's event.
    #[serde(default)]
    pub node_spans: Vec<DeviceSpan>,
    /// `None` where the device times nodes (graphs captured with node
    /// timing on have node spans); otherwise why it cannot.
    #[serde(default)]
    pub node_timing_unavailable: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes_events(trace: &mut Trace) -> Vec<Option<u64>> {
        trace
            .take()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::Nodes { graph, .. } => Some(graph),
                _ => None,
            })
            .collect()
    }

    fn one_node() -> Vec<NodeDesc> {
        vec![NodeDesc {
            op: "add".into(),
            bindings: vec!["b0".into()],
        }]
    }

    #[test]
    fn a_graph_is_described_once_until_the_log_is_taken_or_it_changes() {
        let mut trace = Trace::new();
        // Off: nothing recorded, and nothing remembered that would keep the
        // first traced replay from describing its graph.
        trace.describe(Some(1), one_node);
        assert!(trace.take().is_empty());
        trace.set_enabled(true);
        trace.describe(Some(1), one_node);
        trace.describe(Some(1), one_node);
        trace.describe(None, one_node);
        trace.describe(Some(1), one_node);
        trace.describe(None, one_node);
        assert_eq!(nodes_events(&mut trace), vec![Some(1), None]);
        // A taken log no longer holds the description: the next replay
        // describes again.
        trace.describe(Some(1), one_node);
        trace.describe(Some(1), one_node);
        assert_eq!(nodes_events(&mut trace), vec![Some(1)]);
        // A changed graph is described again; the others are not.
        trace.describe(Some(1), one_node);
        trace.describe(Some(2), one_node);
        trace.forget(Some(1));
        trace.describe(Some(1), one_node);
        trace.describe(Some(2), one_node);
        assert_eq!(nodes_events(&mut trace), vec![Some(1), Some(2), Some(1)]);
    }
}
