//! A recording fake of the whole driver: every call is logged in order,
//! memory is host `Vec<u8>`s, kernels are recorded (not run), and the fake
//! models one stream (queued work stays pending until a wait) so it can
//! flag, as it happens, a release the real driver would punish. Each exec
//! holds its own copy of its graph's nodes, which `set_kernel_node` patches
//! (as `cuGraphExecKernelNodeSetParams` patches the exec, not the graph),
//! and each graph launch records what it runs at the moment it is queued.
//!
//! Quiet ([`FakeDriver::set_quiet`]): the log and the record of graph runs
//! (the parts that allocate: entry-point names, buffer lists, node copies)
//! are left out and only counted; everything else is kept: the stream
//! model, injected failures, violations. Then a kernel launch and a graph
//! launch outside a capture allocate nothing in the fake, so that
//! tests/no_alloc.rs counts the backend's allocations, not the fake's.
//!
//! Public for the integration tests (tests/no_alloc.rs); no backend uses it.

use crate::driver::{GraphDriver, StreamDriver, Toolchain};
use crate::launch::{check_range, Dims, KernelLaunch, VendorLaunch};
use seam::{ErrorKind, OpKind, Params};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Select,
    BeginCapture,
    /// A kernel queued (or recorded, while capturing) by a test directly.
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
    /// An event recorded into the open capture (an event record node).
    RecordInCapture(u32),
    Wait(u32),
    Elapsed(u32, u32),
    DestroyEvent(u32),
    // --- memory, modules, kernels ---
    Alloc {
        buffer: u32,
        bytes: usize,
    },
    Free(u32),
    Write {
        buffer: u32,
        offset: usize,
        len: usize,
    },
    Read {
        buffer: u32,
        offset: usize,
        len: usize,
    },
    /// The toolchain compiled (or handed out its cached image of) an op.
    Image(OpKind),
    LoadModule(u32),
    Function {
        module: u32,
        name: String,
    },
    /// A kernel launched through the backend: entry point and buffer ids.
    LaunchKernel {
        name: String,
        buffers: Vec<u32>,
    },
    VendorPrepare,
    VendorLaunch(OpKind),
    DestroyStream,
    /// The node the last captured launch added was asked for.
    CapturedNode {
        index: usize,
    },
    /// An exec's kernel node was given new parameters.
    SetKernelNode {
        exec: u32,
        node: usize,
    },
}

/// One node of a fake graph.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeKernel {
    /// The entry point (a test's kernel name; `vendor_<op>` for a vendor call).
    pub name: String,
    /// Buffer ids back from the packed arguments (empty for a test's kernel
    /// or a vendor call).
    pub buffers: Vec<u32>,
    /// The scalar block packed after the buffers (launches through the backend).
    pub params: Option<Params>,
    /// Each view's byte offset back from the packed arguments (a buffer's
    /// fake address is its id in the high half, so the low half is the
    /// offset the argument was advanced by).
    pub offsets: Vec<u32>,
    /// The grid and block it was launched with (launches through the backend).
    pub shape: Option<(Dims, Dims)>,
    /// A kernel node (a vendor call's node is the library's).
    pub kernel: bool,
}

impl FakeKernel {
    fn named(name: String, kernel: bool) -> Self {
        FakeKernel {
            name,
            buffers: Vec::new(),
            params: None,
            offsets: Vec::new(),
            shape: None,
            kernel,
        }
    }
}

/// A node handle: the capture that made it and its position in the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FakeNode {
    capture: u32,
    index: usize,
}

struct FakeGraph {
    capture: u32,
    nodes: Vec<FakeKernel>,
    /// Event record nodes: (kernel nodes before it, event).
    events: Vec<(usize, u32)>,
}

struct FakeExec {
    graph: u32,
    /// The exec's own copy of the graph's nodes, patched in place.
    nodes: Vec<FakeKernel>,
}

#[derive(Default)]
struct State {
    log: Vec<Call>,
    next: u32,
    capturing: bool,
    /// The open (or last) capture's number (its own count, so the ids of
    /// graphs, execs and buffers are what they were before nodes existed).
    capture: u32,
    /// Kernels recorded into the open capture.
    recorded: Vec<FakeKernel>,
    /// Live graphs and the kernels each holds.
    graphs: BTreeMap<u32, FakeGraph>,
    /// Live execs, the graph each came from and their own nodes.
    execs: BTreeMap<u32, FakeExec>,
    /// Every graph launch queued: the exec and the nodes it runs, as they
    /// were when it was queued.
    runs: Vec<(u32, Vec<FakeKernel>)>,
    /// Whether the driver asks for an idle stream before a patch.
    update_needs_idle: bool,
    /// `events_available` says no.
    no_events: bool,
    /// Execs with a launch queued and not yet waited for (a `Vec`, cleared
    /// by a wait keeping its capacity: queueing again allocates nothing).
    pending: Vec<u32>,
    /// Log nothing and record no runs (see the module doc).
    quiet: bool,
    /// Kernels launched through the backend and graph launches queued,
    /// counted quiet or not.
    kernel_launches: u64,
    graph_launches: u64,
    /// Eager kernels queued and not yet waited for.
    busy: bool,
    events: BTreeSet<u32>,
    /// The open capture's event record nodes: (kernels before it, event).
    recorded_events: Vec<(usize, u32)>,
    /// Device time (ms) at which each event was recorded.
    recorded_at: BTreeMap<u32, f32>,
    clock_ms: f32,
    /// Live allocations.
    memory: BTreeMap<u32, Vec<u8>>,
    modules: BTreeSet<u32>,
    /// A call (by name) that fails the next time it is made.
    fail: Option<&'static str>,
    /// A capture that fails to end (invalidated, as after an illegal call).
    invalidate: bool,
    /// The next `captured_node` answers with the previous capture's node at
    /// the same index: a node of another graph.
    misreport_node: bool,
    /// Things a real driver would punish, as they happened.
    violations: Vec<String>,
}

/// The fake stream. An [`observer`](FakeDriver::observer) shares its state,
/// so a test can read the log after the backend (and its driver) are gone.
#[derive(Default)]
pub struct FakeDriver {
    state: Arc<Mutex<State>>,
    /// Observers do not destroy the stream when dropped.
    observer: bool,
}

/// One fake allocation (contents live in the driver's state).
pub struct FakeBuffer {
    id: u32,
    bytes: usize,
}

#[derive(Clone, Debug)]
pub struct FakeFunction {
    name: String,
}

impl FakeFunction {
    /// An entry point named `name`, as `function` would return it.
    pub fn named(name: &str) -> FakeFunction {
        FakeFunction { name: name.into() }
    }
}

/// A `StreamBackend` over a fresh fake (cuBLAS-like vendor GEMM where
/// `vendor_gemm`), and an observer of the fake's state: the one setup the
/// backend's unit tests, the allocation test and the host profile share.
pub fn backend(vendor_gemm: bool) -> (crate::StreamBackend<FakeDriver, FakeToolchain>, FakeDriver) {
    let d = FakeDriver::new();
    let observer = d.observer();
    let t = FakeToolchain::new(&d, vendor_gemm);
    let info = seam::DeviceInfo {
        backend: "fake".into(),
        index: 0,
        name: "recording fake".into(),
        driver: "none".into(),
    };
    (crate::StreamBackend::new(info, d, t), observer)
}

impl FakeDriver {
    pub fn new() -> Self {
        Self::default()
    }

    /// A handle on the same state that outlives the driver.
    pub fn observer(&self) -> FakeDriver {
        FakeDriver {
            state: self.state.clone(),
            observer: true,
        }
    }

    fn s(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn log(&self) -> Vec<Call> {
        self.s().log.clone()
    }

    pub fn clear_log(&self) {
        self.s().log.clear();
    }

    /// Quiet on: log nothing, record no graph runs (module doc).
    pub fn set_quiet(&self, on: bool) {
        self.s().quiet = on;
    }

    /// (kernels launched through the backend, graph launches queued) so far.
    pub fn launch_counts(&self) -> (u64, u64) {
        let s = self.s();
        (s.kernel_launches, s.graph_launches)
    }

    pub fn violations(&self) -> Vec<String> {
        self.s().violations.clone()
    }

    /// Live (graphs, execs, events).
    pub fn live(&self) -> (usize, usize, usize) {
        let s = self.s();
        (s.graphs.len(), s.execs.len(), s.events.len())
    }

    /// Live allocations.
    pub fn live_memory(&self) -> usize {
        self.s().memory.len()
    }

    /// A test queues (or, capturing, records) a kernel taking 1 ms.
    pub fn kernel(&self, name: &'static str) {
        self.s().log.push(Call::Kernel(name));
        self.queue_kernel(|| FakeKernel::named(name.to_string(), true));
    }

    /// Record `k` into the open capture, or queue it (then `k` is not
    /// made: an eager kernel allocates nothing here).
    fn queue_kernel(&self, k: impl FnOnce() -> FakeKernel) {
        let mut s = self.s();
        if s.capturing {
            s.recorded.push(k());
        } else {
            s.clock_ms += 1.0;
            s.busy = true;
        }
    }

    /// The kernels a live exec would run.
    pub fn kernels_of(&self, exec: u32) -> Vec<String> {
        self.nodes_of(exec).into_iter().map(|k| k.name).collect()
    }

    /// The nodes a live exec would run if launched now.
    pub fn nodes_of(&self, exec: u32) -> Vec<FakeKernel> {
        let s = self.s();
        s.execs
            .get(&exec)
            .map(|e| e.nodes.clone())
            .unwrap_or_default()
    }

    /// The nodes of a live graph (a patch of an exec leaves them alone).
    pub fn graph_nodes(&self, graph: u32) -> Vec<FakeKernel> {
        let s = self.s();
        s.graphs
            .get(&graph)
            .map(|g| g.nodes.clone())
            .unwrap_or_default()
    }

    /// Every graph launch queued so far: the exec and what it runs.
    pub fn runs(&self) -> Vec<(u32, Vec<FakeKernel>)> {
        self.s().runs.clone()
    }

    /// Make the driver ask for an idle stream before a patch (as HIP's does).
    pub fn set_update_needs_idle(&self, on: bool) {
        self.s().update_needs_idle = on;
    }

    /// Whether the event calls are there (a driver without them: device
    /// timing unavailable, with the reason).
    pub fn set_events_available(&self, on: bool) {
        self.s().no_events = !on;
    }

    /// The exec the last capture made (the last instantiate in the log).
    pub fn last_exec(&self) -> u32 {
        self.log()
            .iter()
            .rev()
            .find_map(|c| match c {
                Call::Instantiate { exec, .. } => Some(*exec),
                _ => None,
            })
            .expect("an instantiate")
    }

    pub fn fail_next(&self, call: &'static str) {
        self.s().fail = Some(call);
    }

    pub fn invalidate_capture(&self) {
        self.s().invalidate = true;
    }

    /// Make the next `captured_node` name a node of the previous capture's
    /// graph (same index), as a driver that misreported its node would.
    pub fn misreport_next_node(&self) {
        self.s().misreport_node = true;
    }

    /// Let queued work finish (a wait the test makes, outside the logic).
    pub fn synchronize_for_test(&self) {
        let mut s = self.s();
        s.pending.clear();
        s.busy = false;
    }

    fn step(&self, call: Call, name: &'static str) -> Result<(), ErrorKind> {
        self.step_with(|| call, name)
    }

    /// As `step`, the call made only if it is logged (not when quiet).
    fn step_with(&self, call: impl FnOnce() -> Call, name: &'static str) -> Result<(), ErrorKind> {
        let mut s = self.s();
        if !s.quiet {
            s.log.push(call());
        }
        if s.fail == Some(name) {
            s.fail = None;
            return Err(ErrorKind::driver(name, "injected by the fake driver"));
        }
        Ok(())
    }

    fn id(&self) -> u32 {
        let mut s = self.s();
        s.next += 1;
        s.next
    }

    fn flag_if_capturing(&self, what: impl FnOnce() -> String) {
        let mut s = self.s();
        if s.capturing {
            s.violations.push(format!("{} inside a capture", what()));
        }
    }
}

impl GraphDriver for FakeDriver {
    fn events_available(&self) -> Result<(), String> {
        match self.s().no_events {
            true => Err("the fake driver was told it has no events".into()),
            false => Ok(()),
        }
    }

    type Graph = u32;
    type Exec = u32;
    type Event = u32;
    type Node = FakeNode;

    fn api(&self) -> &'static str {
        "fake"
    }

    fn captured_node(&self) -> Result<FakeNode, ErrorKind> {
        let index = self.s().recorded.len().saturating_sub(1);
        self.step(Call::CapturedNode { index }, "captured_node")?;
        let mut s = self.s();
        if !s.capturing {
            return Err(ErrorKind::driver(
                "captured_node",
                "the stream is not capturing",
            ));
        }
        let capture = if std::mem::take(&mut s.misreport_node) {
            s.capture - 1
        } else {
            s.capture
        };
        match s.recorded.last() {
            Some(k) if k.kernel => Ok(FakeNode { capture, index }),
            Some(k) => Err(ErrorKind::driver(
                "captured_node",
                format!("the last node ({}) is not a kernel node", k.name),
            )),
            None => Err(ErrorKind::driver("captured_node", "nothing captured yet")),
        }
    }

    fn begin_capture(&self) -> Result<(), ErrorKind> {
        self.step(Call::BeginCapture, "begin_capture")?;
        let mut s = self.s();
        if s.capturing {
            s.violations.push("begin_capture while capturing".into());
        }
        s.capturing = true;
        s.recorded.clear();
        s.recorded_events.clear();
        s.capture += 1;
        Ok(())
    }

    fn end_capture(&self) -> Result<u32, ErrorKind> {
        let g = self.id();
        let mut s = self.s();
        let was = std::mem::replace(&mut s.capturing, false);
        let kernels = std::mem::take(&mut s.recorded);
        let events = std::mem::take(&mut s.recorded_events);
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
        let capture = s.capture;
        s.graphs.insert(
            g,
            FakeGraph {
                capture,
                nodes: kernels,
                events,
            },
        );
        Ok(g)
    }

    fn is_capturing(&self) -> Result<bool, ErrorKind> {
        self.step(Call::IsCapturing, "is_capturing")?;
        Ok(self.s().capturing)
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
        let mut s = self.s();
        let nodes = match s.graphs.get(graph) {
            Some(g) => g.nodes.clone(),
            None => {
                s.violations
                    .push(format!("instantiate of dead graph {graph}"));
                Vec::new()
            }
        };
        s.execs.insert(
            exec,
            FakeExec {
                graph: *graph,
                nodes,
            },
        );
        Ok(exec)
    }

    fn upload(&self, exec: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Upload(*exec), "upload")
    }

    fn launch(&self, exec: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Launch(*exec), "launch")?;
        self.flag_if_capturing(|| format!("graph launch {exec}"));
        let mut s = self.s();
        s.graph_launches += 1;
        match s.execs.get(exec).map(|e| e.graph) {
            Some(g) if s.graphs.contains_key(&g) => {
                if !s.pending.contains(exec) {
                    s.pending.push(*exec);
                }
                let nodes = &s.execs[exec].nodes;
                let ran = nodes.len() as f32;
                // What it runs, as queued: a copy (allocates), left out when quiet.
                let run = (!s.quiet).then(|| nodes.clone());
                // Each kernel takes 1 ms; an event node records the time
                // after the kernels before it.
                let t0 = s.clock_ms;
                for i in 0..s.graphs[&g].events.len() {
                    let (before, ev) = s.graphs[&g].events[i];
                    s.recorded_at.insert(ev, t0 + before as f32);
                }
                s.clock_ms += ran;
                s.runs.extend(run.map(|nodes| (*exec, nodes)));
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
        self.synchronize_for_test();
        Ok(())
    }

    fn destroy_exec(&self, exec: u32) {
        let _ = self.step(Call::DestroyExec(exec), "destroy_exec");
        let mut s = self.s();
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
        let mut s = self.s();
        if s.execs.values().any(|e| e.graph == graph) {
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
        self.s().events.insert(ev);
        Ok(ev)
    }

    fn record_event(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Record(*event), "record_event")?;
        self.flag_if_capturing(|| format!("event {event} recorded"));
        let mut s = self.s();
        let t = s.clock_ms;
        s.recorded_at.insert(*event, t);
        Ok(())
    }

    fn node_events_available(&self) -> Result<(), String> {
        self.events_available()
    }

    fn record_event_in_capture(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::RecordInCapture(*event), "record_event_in_capture")?;
        let mut s = self.s();
        if !s.capturing {
            s.violations
                .push(format!("event {event} recorded into no capture"));
        }
        let before = s.recorded.len();
        s.recorded_events.push((before, *event));
        Ok(())
    }

    fn wait_event(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Wait(*event), "wait_event")?;
        self.synchronize_for_test();
        Ok(())
    }

    fn elapsed_ms(&self, start: &u32, end: &u32) -> Result<f32, ErrorKind> {
        self.step(Call::Elapsed(*start, *end), "elapsed")?;
        let s = self.s();
        match (s.recorded_at.get(start), s.recorded_at.get(end)) {
            (Some(a), Some(b)) => Ok(b - a),
            _ => Err(ErrorKind::driver("elapsed", "event not recorded")),
        }
    }

    fn destroy_event(&self, event: u32) {
        let _ = self.step(Call::DestroyEvent(event), "destroy_event");
        let mut s = self.s();
        if !s.events.remove(&event) {
            s.violations.push(format!("event {event} destroyed twice"));
        }
        s.recorded_at.remove(&event);
    }
}

impl StreamDriver for FakeDriver {
    type Memory = FakeBuffer;
    type Module = u32;
    type Function = FakeFunction;

    fn select(&self) -> Result<(), ErrorKind> {
        self.step(Call::Select, "select")
    }

    fn alloc(&self, bytes: usize) -> Result<FakeBuffer, ErrorKind> {
        let id = self.id();
        self.step(Call::Alloc { buffer: id, bytes }, "alloc")?;
        self.flag_if_capturing(|| format!("alloc of buffer {id}"));
        self.s().memory.insert(id, vec![0; bytes]);
        Ok(FakeBuffer { id, bytes })
    }

    fn memory_bytes(&self, memory: &FakeBuffer) -> usize {
        memory.bytes
    }

    fn device_address(&self, memory: &FakeBuffer) -> u64 {
        u64::from(memory.id) << 32
    }

    fn free(&self, memory: FakeBuffer) {
        let _ = self.step(Call::Free(memory.id), "free");
        let mut s = self.s();
        if s.busy || !s.pending.is_empty() {
            s.violations
                .push(format!("buffer {} freed with work pending", memory.id));
        }
        if s.memory.remove(&memory.id).is_none() {
            s.violations
                .push(format!("buffer {} freed twice", memory.id));
        }
    }

    fn write(&self, memory: &FakeBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        let (buffer, len) = (memory.id, data.len());
        self.step(
            Call::Write {
                buffer,
                offset,
                len,
            },
            "write",
        )?;
        check_range("write", offset, len, memory.bytes)?;
        let mut s = self.s();
        if let Some(m) = s.memory.get_mut(&buffer) {
            m[offset..offset + len].copy_from_slice(data);
        }
        Ok(())
    }

    fn read(&self, memory: &FakeBuffer, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        let (buffer, len) = (memory.id, out.len());
        self.step(
            Call::Read {
                buffer,
                offset,
                len,
            },
            "read",
        )?;
        check_range("read", offset, len, memory.bytes)?;
        if let Some(m) = self.s().memory.get(&buffer) {
            out.copy_from_slice(&m[offset..offset + len]);
        }
        Ok(())
    }

    fn load_module(&self, image: &[u8]) -> Result<u32, ErrorKind> {
        let m = self.id();
        self.step(Call::LoadModule(m), "load_module")?;
        self.flag_if_capturing(|| format!("module {m} ({} bytes) loaded", image.len()));
        self.s().modules.insert(m);
        Ok(m)
    }

    fn function(&self, module: &u32, name: &str) -> Result<FakeFunction, ErrorKind> {
        let call = Call::Function {
            module: *module,
            name: name.into(),
        };
        self.step(call, "function")?;
        Ok(FakeFunction { name: name.into() })
    }

    fn launch_kernel(&self, l: &KernelLaunch<'_, Self>) -> Result<(), ErrorKind> {
        let mut args = l.args(self);
        // The array a real driver reads: one pointer per parameter.
        let params = args.pointers().len();
        if params != l.buffers().len() + 1 {
            let n = l.buffers().len();
            self.s().violations.push(format!(
                "{params} kernel parameter pointers for {n} buffers and the params block"
            ));
        }
        // The ids back from the packed arguments, as a kernel would see them.
        let call = || Call::LaunchKernel {
            name: l.function().name.clone(),
            buffers: args.addresses().iter().map(|a| (a >> 32) as u32).collect(),
        };
        self.step_with(call, "launch_kernel")?;
        self.s().kernel_launches += 1;
        self.queue_kernel(|| self.node_of(l));
        Ok(())
    }

    fn set_kernel_node(
        &self,
        exec: &u32,
        graph: &u32,
        node: &FakeNode,
        l: &KernelLaunch<'_, Self>,
    ) -> Result<(), ErrorKind> {
        let call = Call::SetKernelNode {
            exec: *exec,
            node: node.index,
        };
        self.step(call, "set_kernel_node")?;
        let new = self.node_of(l);
        let mut s = self.s();
        let refuse = |why: String| Err(ErrorKind::driver("set_kernel_node", why));
        // Membership, as the real drivers check it against the node set
        // kept with the graph: O(1), from what the graph holds.
        match s.graphs.get(graph) {
            Some(g) if g.capture == node.capture && node.index < g.nodes.len() => {}
            Some(_) => return refuse(format!("{node:?} is not a node of graph {graph}")),
            None => return refuse(format!("graph {graph} is not live")),
        }
        if s.update_needs_idle && (s.pending.contains(exec) || s.busy) {
            s.violations
                .push(format!("exec {exec} patched with work pending"));
        }
        let Some(e) = s.execs.get_mut(exec) else {
            return refuse(format!("exec {exec} is not live"));
        };
        if e.graph != *graph {
            return refuse(format!(
                "exec {exec} was instantiated from graph {}, not {graph}",
                e.graph
            ));
        }
        match e.nodes.get_mut(node.index) {
            Some(k) if k.kernel => {
                *k = new;
                Ok(())
            }
            _ => refuse(format!("node {} is not a kernel node", node.index)),
        }
    }

    fn update_needs_idle_stream(&self) -> bool {
        self.s().update_needs_idle
    }
}

impl FakeDriver {
    /// The node a kernel launch records: entry point, buffer ids back from
    /// the packed arguments (as a kernel would see them), and its scalars.
    fn node_of(&self, l: &KernelLaunch<'_, Self>) -> FakeKernel {
        let args = l.args(self);
        FakeKernel {
            name: l.function().name.clone(),
            buffers: args.addresses().iter().map(|a| (a >> 32) as u32).collect(),
            params: Some(*l.params()),
            offsets: args.addresses().iter().map(|a| *a as u32).collect(),
            shape: Some((l.grid(), l.block())),
            kernel: true,
        }
    }
}

impl Drop for FakeDriver {
    fn drop(&mut self) {
        if self.observer {
            return;
        }
        let _ = self.step(Call::DestroyStream, "destroy_stream");
        let mut s = self.s();
        if s.busy || !s.pending.is_empty() {
            s.violations
                .push("stream destroyed with work pending".into());
        }
    }
}

/// The fake compiler and, with `vendor_gemm`, a fake vendor BLAS for GEMM.
pub struct FakeToolchain {
    driver: FakeDriver,
    vendor_gemm: bool,
    vendor_ready: bool,
}

impl FakeToolchain {
    /// Logs into `driver`'s log.
    pub fn new(driver: &FakeDriver, vendor_gemm: bool) -> Self {
        FakeToolchain {
            driver: driver.observer(),
            vendor_gemm,
            vendor_ready: false,
        }
    }
}

impl Toolchain<FakeDriver> for FakeToolchain {
    fn image(&self, op: OpKind) -> Result<Arc<Vec<u8>>, ErrorKind> {
        self.driver.step(Call::Image(op), "image")?;
        Ok(Arc::new(op.name().as_bytes().to_vec()))
    }

    fn vendor_routes(&self, op: OpKind) -> bool {
        self.vendor_gemm && op == OpKind::Gemm
    }

    fn vendor_ready(&self) -> bool {
        self.vendor_ready
    }

    fn prepare_vendor(&mut self, d: &FakeDriver) -> Result<(), ErrorKind> {
        d.step(Call::VendorPrepare, "vendor_prepare")?;
        d.flag_if_capturing(|| "vendor handle created".into());
        self.vendor_ready = true;
        Ok(())
    }

    fn launch_vendor(
        &self,
        d: &FakeDriver,
        l: &VendorLaunch<'_, FakeDriver>,
    ) -> Result<(), ErrorKind> {
        d.step(Call::VendorLaunch(l.op()), "vendor_launch")?;
        d.queue_kernel(|| FakeKernel::named(format!("vendor_{}", l.op().name()), false));
        Ok(())
    }
}
