//! A recording fake of the whole driver: every call is logged in order,
//! memory is host `Vec<u8>`s, kernels are recorded (not run), and the fake
//! models one stream (queued work stays pending until a wait) so it can
//! flag, as it happens, a release the real driver would punish.

use crate::driver::{GraphDriver, StreamDriver, Toolchain};
use crate::launch::{check_range, KernelLaunch, VendorLaunch};
use seam::{ErrorKind, OpKind};
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
}

#[derive(Default)]
struct State {
    log: Vec<Call>,
    next: u32,
    capturing: bool,
    /// Kernels recorded into the open capture.
    recorded: Vec<String>,
    /// Live graphs and the kernels each holds.
    graphs: BTreeMap<u32, Vec<String>>,
    /// Live execs and the graph each came from.
    execs: BTreeMap<u32, u32>,
    /// Execs with a launch queued and not yet waited for.
    pending: BTreeSet<u32>,
    /// Eager kernels queued and not yet waited for.
    busy: bool,
    events: BTreeSet<u32>,
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
        self.queue_kernel(name.to_string());
    }

    fn queue_kernel(&self, name: String) {
        let mut s = self.s();
        if s.capturing {
            s.recorded.push(name);
        } else {
            s.clock_ms += 1.0;
            s.busy = true;
        }
    }

    /// The kernels a live exec would run.
    pub fn kernels_of(&self, exec: u32) -> Vec<String> {
        let s = self.s();
        s.execs
            .get(&exec)
            .and_then(|g| s.graphs.get(g))
            .cloned()
            .unwrap_or_default()
    }

    pub fn fail_next(&self, call: &'static str) {
        self.s().fail = Some(call);
    }

    pub fn invalidate_capture(&self) {
        self.s().invalidate = true;
    }

    /// Let queued work finish (a wait the test makes, outside the logic).
    pub fn synchronize_for_test(&self) {
        let mut s = self.s();
        s.pending.clear();
        s.busy = false;
    }

    fn step(&self, call: Call, name: &'static str) -> Result<(), ErrorKind> {
        let mut s = self.s();
        s.log.push(call);
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

    fn flag_if_capturing(&self, what: String) {
        let mut s = self.s();
        if s.capturing {
            s.violations.push(format!("{what} inside a capture"));
        }
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
        let mut s = self.s();
        if s.capturing {
            s.violations.push("begin_capture while capturing".into());
        }
        s.capturing = true;
        s.recorded.clear();
        Ok(())
    }

    fn end_capture(&self) -> Result<u32, ErrorKind> {
        let g = self.id();
        let mut s = self.s();
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
        self.flag_if_capturing(format!("graph launch {exec}"));
        let mut s = self.s();
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
        self.s().events.insert(ev);
        Ok(ev)
    }

    fn record_event(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Record(*event), "record_event")?;
        self.flag_if_capturing(format!("event {event} recorded"));
        let mut s = self.s();
        let t = s.clock_ms;
        s.recorded_at.insert(*event, t);
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
        self.flag_if_capturing(format!("alloc of buffer {id}"));
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
        self.flag_if_capturing(format!("module {m} ({} bytes) loaded", image.len()));
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
        let name = l.function().name.clone();
        // The ids back from the packed arguments, as a kernel would see them.
        let args = l.args(self);
        let buffers = args.addresses().iter().map(|a| (a >> 32) as u32).collect();
        let call = Call::LaunchKernel {
            name: name.clone(),
            buffers,
        };
        self.step(call, "launch_kernel")?;
        self.queue_kernel(name);
        Ok(())
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
        d.flag_if_capturing("vendor handle created".into());
        self.vendor_ready = true;
        Ok(())
    }

    fn launch_vendor(
        &self,
        d: &FakeDriver,
        l: &VendorLaunch<'_, FakeDriver>,
    ) -> Result<(), ErrorKind> {
        d.step(Call::VendorLaunch(l.op()), "vendor_launch")?;
        d.queue_kernel(format!("vendor_{}", l.op().name()));
        Ok(())
    }
}
