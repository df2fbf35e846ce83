//! A recording fake of the driver: every call is logged in order, and the
//! fake models one stream (queued replays stay pending until a wait) so it
//! can flag, as it happens, a destroy the real driver would punish.

use crate::GraphDriver;
use seam::ErrorKind;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    BeginCapture,
    /// A kernel queued (or recorded, while capturing) by the backend itself.
    Kernel(&'static str),
    EndCapture(u32),
    IsCapturing,
    Instantiate {
        graph: u32,
        exec: u32,
    },
    Upload(u32),
    Launch(u32),
    Sync,
    DestroyExec(u32),
    DestroyGraph(u32),
    CreateEvent(u32),
    Record(u32),
    Wait(u32),
    Elapsed(u32, u32),
    DestroyEvent(u32),
}

#[derive(Default)]
struct State {
    log: Vec<Call>,
    next: u32,
    capturing: bool,
    /// Kernels recorded into the open capture.
    recorded: Vec<&'static str>,
    /// Live graphs and the kernels each holds.
    graphs: BTreeMap<u32, Vec<&'static str>>,
    /// Live execs and the graph each came from.
    execs: BTreeMap<u32, u32>,
    /// Execs with a launch queued and not yet waited for.
    pending: BTreeSet<u32>,
    events: BTreeSet<u32>,
    /// Device time (ms) at which each event was recorded.
    recorded_at: BTreeMap<u32, f32>,
    clock_ms: f32,
    /// A call (by name) that fails the next time it is made.
    fail: Option<&'static str>,
    /// A capture that fails to end (invalidated, as after an illegal call).
    invalidate: bool,
    /// Things a real driver would punish, as they happened.
    violations: Vec<String>,
}

#[derive(Default)]
pub struct FakeDriver(RefCell<State>);

impl FakeDriver {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn log(&self) -> Vec<Call> {
        self.0.borrow().log.clone()
    }

    pub fn clear_log(&self) {
        self.0.borrow_mut().log.clear();
    }

    pub fn violations(&self) -> Vec<String> {
        self.0.borrow().violations.clone()
    }

    /// Live (graphs, execs, events).
    pub fn live(&self) -> (usize, usize, usize) {
        let s = self.0.borrow();
        (s.graphs.len(), s.execs.len(), s.events.len())
    }

    /// The backend queues (or, capturing, records) a kernel taking `ms`.
    pub fn kernel(&self, name: &'static str) {
        let mut s = self.0.borrow_mut();
        s.log.push(Call::Kernel(name));
        if s.capturing {
            s.recorded.push(name);
        } else {
            s.clock_ms += 1.0;
        }
    }

    /// The kernels a live exec would run.
    pub fn kernels_of(&self, exec: u32) -> Vec<&'static str> {
        let s = self.0.borrow();
        s.execs
            .get(&exec)
            .and_then(|g| s.graphs.get(g))
            .cloned()
            .unwrap_or_default()
    }

    pub fn fail_next(&self, call: &'static str) {
        self.0.borrow_mut().fail = Some(call);
    }

    pub fn invalidate_capture(&self) {
        self.0.borrow_mut().invalidate = true;
    }

    fn step(&self, call: Call, name: &'static str) -> Result<(), ErrorKind> {
        let mut s = self.0.borrow_mut();
        s.log.push(call);
        if s.fail == Some(name) {
            s.fail = None;
            return Err(ErrorKind::driver(name, "injected by the fake driver"));
        }
        Ok(())
    }

    fn id(&self) -> u32 {
        let mut s = self.0.borrow_mut();
        s.next += 1;
        s.next
    }
}

impl GraphDriver for FakeDriver {
    type Graph = u32;
    type Exec = u32;
    type Event = u32;

    fn api(&self) -> &'static str {
        "fake"
    }

    fn begin_capture(&self) -> Result<(), ErrorKind> {
        self.step(Call::BeginCapture, "begin_capture")?;
        let mut s = self.0.borrow_mut();
        if s.capturing {
            s.violations.push("begin_capture while capturing".into());
        }
        s.capturing = true;
        s.recorded.clear();
        Ok(())
    }

    fn end_capture(&self) -> Result<u32, ErrorKind> {
        let g = self.id();
        let mut s = self.0.borrow_mut();
        let was = std::mem::replace(&mut s.capturing, false);
        let kernels = std::mem::take(&mut s.recorded);
        if !was {
            s.violations.push("end_capture without a capture".into());
        }
        if std::mem::take(&mut s.invalidate) {
            s.log.push(Call::EndCapture(0));
            return Err(ErrorKind::driver("end_capture", "capture invalidated"));
        }
        s.log.push(Call::EndCapture(g));
        if s.fail == Some("end_capture") {
            s.fail = None;
            return Err(ErrorKind::driver(
                "end_capture",
                "injected by the fake driver",
            ));
        }
        s.graphs.insert(g, kernels);
        Ok(g)
    }

    fn is_capturing(&self) -> Result<bool, ErrorKind> {
        self.step(Call::IsCapturing, "is_capturing")?;
        Ok(self.0.borrow().capturing)
    }

    fn instantiate(&self, graph: &u32) -> Result<u32, ErrorKind> {
        let exec = self.id();
        self.step(
            Call::Instantiate {
                graph: *graph,
                exec,
            },
            "instantiate",
        )?;
        let mut s = self.0.borrow_mut();
        if !s.graphs.contains_key(graph) {
            s.violations
                .push(format!("instantiate of dead graph {graph}"));
        }
        s.execs.insert(exec, *graph);
        Ok(exec)
    }

    fn upload(&self, exec: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Upload(*exec), "upload")
    }

    fn launch(&self, exec: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Launch(*exec), "launch")?;
        let mut s = self.0.borrow_mut();
        if s.capturing {
            s.violations
                .push(format!("graph launch {exec} inside a capture"));
        }
        match s.execs.get(exec).copied() {
            Some(g) if s.graphs.contains_key(&g) => {
                s.pending.insert(*exec);
                let n = s.graphs[&g].len() as f32;
                s.clock_ms += n;
            }
            Some(g) => s
                .violations
                .push(format!("launch of exec {exec} whose graph {g} is gone")),
            None => s.violations.push(format!("launch of dead exec {exec}")),
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<(), ErrorKind> {
        self.step(Call::Sync, "synchronize")?;
        self.0.borrow_mut().pending.clear();
        Ok(())
    }

    fn destroy_exec(&self, exec: u32) {
        let _ = self.step(Call::DestroyExec(exec), "destroy_exec");
        let mut s = self.0.borrow_mut();
        if s.pending.contains(&exec) {
            s.violations
                .push(format!("exec {exec} destroyed while a replay is pending"));
        }
        if s.execs.remove(&exec).is_none() {
            s.violations.push(format!("exec {exec} destroyed twice"));
        }
    }

    fn destroy_graph(&self, graph: u32) {
        let _ = self.step(Call::DestroyGraph(graph), "destroy_graph");
        let mut s = self.0.borrow_mut();
        if s.execs.values().any(|g| *g == graph) {
            s.violations
                .push(format!("graph {graph} destroyed before its exec"));
        }
        if s.graphs.remove(&graph).is_none() {
            s.violations.push(format!("graph {graph} destroyed twice"));
        }
    }

    fn create_event(&self) -> Result<u32, ErrorKind> {
        let ev = self.id();
        self.step(Call::CreateEvent(ev), "create_event")?;
        self.0.borrow_mut().events.insert(ev);
        Ok(ev)
    }

    fn record_event(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Record(*event), "record_event")?;
        let mut s = self.0.borrow_mut();
        if s.capturing {
            s.violations
                .push(format!("event {event} recorded inside a capture"));
        }
        let t = s.clock_ms;
        s.recorded_at.insert(*event, t);
        Ok(())
    }

    fn wait_event(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Wait(*event), "wait_event")?;
        self.0.borrow_mut().pending.clear();
        Ok(())
    }

    fn elapsed_ms(&self, start: &u32, end: &u32) -> Result<f32, ErrorKind> {
        self.step(Call::Elapsed(*start, *end), "elapsed")?;
        let s = self.0.borrow();
        match (s.recorded_at.get(start), s.recorded_at.get(end)) {
            (Some(a), Some(b)) => Ok(b - a),
            _ => Err(ErrorKind::driver("elapsed", "event not recorded")),
        }
    }

    fn destroy_event(&self, event: u32) {
        let _ = self.step(Call::DestroyEvent(event), "destroy_event");
        let mut s = self.0.borrow_mut();
        if !s.events.remove(&event) {
            s.violations.push(format!("event {event} destroyed twice"));
        }
        s.recorded_at.remove(&event);
    }
}

impl FakeDriver {
    /// Let queued work finish (a wait the test makes, outside the logic).
    pub fn synchronize_for_test(&self) {
        self.0.borrow_mut().pending.clear();
    }
}
