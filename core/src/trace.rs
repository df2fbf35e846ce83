//! Every launch, capture and replay on the record (C10). Off by default; when
//! off, recording is one branch on a bool and allocates nothing.

use crate::ops::OpKind;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum EventKind {
    Launch {
        op: OpKind,
        captured: bool,
    },
    BeginCapture,
    /// end_capture into the current exec.
    EndCapture {
        launches: usize,
    },
    /// end_capture_graph: a new handle.
    EndCaptureGraph {
        graph: u64,
        launches: usize,
    },
    AbortCapture,
    /// `graph` is `None` for the current exec. `index` counts from 0 per target.
    Replay {
        graph: Option<u64>,
        index: u64,
    },
    Destroy {
        graph: u64,
    },
}

/// One trace event, host-timestamped in nanoseconds since the device opened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    pub seq: u64,
    pub host_ns: u64,
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

    pub(crate) fn take(&mut self) -> Vec<TraceEvent> {
        std::mem::take(&mut self.events)
    }
}
