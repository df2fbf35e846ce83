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

mod graph;
mod stream;

pub use stream::{FakeBlas, FakeCompiler};

use crate::driver::GraphDriver;
use crate::launch::Dims;
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
    /// The compiler compiled (or handed out its cached image of) an op.
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
    /// A graph's kernel node was given new parameters (for execs
    /// instantiated from it afterwards).
    SetGraphKernelNode {
        graph: u32,
        node: usize,
    },
    /// A conditional handle of the capture's graph (C14).
    ConditionalHandle(u64),
    /// A conditional node added (`while`: a WHILE), its body captured next.
    BeginBody {
        handle: u64,
        while_: bool,
    },
    EndBody,
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
    /// Recorded beside the work captured around it
    /// ([`StreamDriver::launch_beside`](crate::StreamDriver::launch_beside)):
    /// it takes none of the fake clock's time, and nothing waits for it.
    pub beside: bool,
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
            beside: false,
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
    /// `keeps_execs` says no.
    no_kept_execs: bool,
    /// `node_stamps` says yes.
    node_stamps: bool,
    /// `events_available` says no.
    no_events: bool,
    /// `conditional_available` says yes; bodies open, innermost last.
    conditional: bool,
    bodies: Vec<u64>,
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
    /// Calls of that name let through before the one that fails.
    fail_skip: usize,
    /// A capture that fails to end (invalidated, as after an illegal call).
    invalidate: bool,
    /// The next `captured_node` answers with the previous capture's node at
    /// the same index: a node of another graph.
    misreport_node: bool,
    /// Each node recorded beside the captured work: its index in its
    /// capture, and the node it joined (the index of one recorded beside
    /// before it), if any.
    beside_joins: Vec<(usize, Option<usize>)>,
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

/// The stream backend over the fake driver, compiler and BLAS.
pub type FakeBackend = crate::StreamBackend<FakeDriver, FakeCompiler, FakeBlas>;

/// A `StreamBackend` over a fresh fake (cuBLAS-like vendor GEMM where
/// `vendor_gemm`), and an observer of the fake's state: the one setup the
/// backend's unit tests, the allocation test and the host profile share.
pub fn backend(vendor_gemm: bool) -> (FakeBackend, FakeDriver) {
    let d = FakeDriver::new();
    let observer = d.observer();
    let c = FakeCompiler::new(&d);
    let info = seam::DeviceInfo {
        backend: "fake".into(),
        index: 0,
        name: "recording fake".into(),
        driver: "none".into(),
    };
    (
        crate::StreamBackend::new(info, d, c, FakeBlas::new(vendor_gemm)),
        observer,
    )
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

    /// Each node recorded beside the captured work, in order: its index in
    /// its capture and the index of the node it joined.
    pub fn beside_joins(&self) -> Vec<(usize, Option<usize>)> {
        self.s().beside_joins.clone()
    }

    /// Make the driver ask for an idle stream before a patch (as HIP's does).
    pub fn set_update_needs_idle(&self, on: bool) {
        self.s().update_needs_idle = on;
    }

    /// Whether `keeps_execs` says yes (it does unless turned off here).
    pub fn set_keeps_execs(&self, on: bool) {
        self.s().no_kept_execs = !on;
    }

    /// Whether node-timed graphs are marked with stamp kernels (as CUDA's
    /// are) rather than event nodes after the first (the default here).
    pub fn set_node_stamps(&self, on: bool) {
        self.s().node_stamps = on;
    }

    /// Whether the event calls are there (a driver without them: device
    /// timing unavailable, with the reason).
    pub fn set_events_available(&self, on: bool) {
        self.s().no_events = !on;
    }

    /// Whether the driver captures conditional nodes (C14; off unless set).
    pub fn set_conditional_available(&self, on: bool) {
        self.s().conditional = on;
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
        self.fail_next_after(call, 0);
    }

    /// Fail the call named `call` after letting `skip` of them through.
    pub fn fail_next_after(&self, call: &'static str, skip: usize) {
        let mut s = self.s();
        s.fail = Some(call);
        s.fail_skip = skip;
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
            if s.fail_skip > 0 {
                s.fail_skip -= 1;
                return Ok(());
            }
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
