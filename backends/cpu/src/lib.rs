//! The CPU reference backend.
//!
//! Every op runs on a dedicated queue thread, in submission order, so
//! launches and replays are asynchronous like a GPU stream and `synchronize`
//! really waits: destroy-while-in-flight (C8) and cross-thread cases are
//! exercised on every machine, not only on GPUs.
//!
//! Capture is Native: the recorded launch list is the graph, and a replay
//! re-runs it over the buffers' current contents (C1). Conditional bodies
//! (C14) are the queue thread's own loops over parts of the list, deciding
//! on the condition as the queue reaches them. A graph is shared with
//! the queue by reference count, so destroying it while a replay is queued
//! or running only drops the handle; the replay finishes (C8).
//!
//! Each buffer's memory is shared the same way: a launch, a recorded launch
//! and a queued host access hold the memory they use ([`Bound`]), so a
//! free drops only the table's hold and the memory goes once the work
//! queued before it is done. The buffers and graphs are in core's slot
//! tables (`seam::table`); the queue thread holds no table of its own.

mod program;
pub mod reference;

use program::{execute, Program, Recording, Region};
use seam::table::{Buffers, Graphs};
use seam::{
    Backend, CaptureSupport, Conditional, ConditionalSupport, DType, DeviceInfo, DeviceSpan,
    ErrorKind, Launch, NodeTiming, OpKind, RawBuffer, RawGraph, ReplayTarget, ResourceCounts,
};
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

/// One buffer's bytes, shared by the table and the work that uses them.
type Memory = Arc<Mutex<Vec<u8>>>;

/// A launch with the memory of each of its views, in binding order.
#[derive(Clone)]
struct Bound {
    launch: Launch,
    memory: Vec<Memory>,
}

/// A captured launch list with its conditional bodies, and whether its
/// replays time each launch.
#[derive(Clone)]
struct CpuGraph {
    program: Program,
    node_timed: bool,
}

enum Command {
    Run(Box<Bound>),
    /// A replay; with a tag, each launch is stamped as a node span of it.
    RunGraph(Program, Option<u64>),
    Write {
        memory: Memory,
        offset: usize,
        data: Vec<u8>,
    },
    Read {
        memory: Memory,
        offset: usize,
        len: usize,
        reply: Sender<Vec<u8>>,
    },
    Sync {
        reply: Sender<Option<String>>,
    },
    /// A timing marker, stamped when the queue reaches it (like a GPU event).
    Mark {
        tag: u64,
        begin: bool,
    },
}

/// What the queue has stamped, in nanoseconds since the device opened.
enum Stamp {
    /// A marker: (tag, begin?, ns).
    Mark(u64, bool, u64),
    /// One launch of a node-timed replay.
    Node(DeviceSpan),
}

/// Stamps the queue has made and the spans have not yet taken.
type Marks = Arc<Mutex<Vec<Stamp>>>;

/// Lock each distinct memory of a launch once (two views may share a
/// buffer): the guards, and for each binding the guard it reads or writes.
fn lock_all(memory: &[Memory]) -> (Vec<MutexGuard<'_, Vec<u8>>>, Vec<usize>) {
    let mut distinct: Vec<&Memory> = Vec::with_capacity(memory.len());
    let mut at = Vec::with_capacity(memory.len());
    for m in memory {
        match distinct.iter().position(|d| Arc::ptr_eq(d, m)) {
            Some(i) => at.push(i),
            None => {
                at.push(distinct.len());
                distinct.push(m);
            }
        }
    }
    let guards = distinct
        .into_iter()
        .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
        .collect();
    (guards, at)
}

/// Run one bound launch over its buffers' current contents.
fn run(bound: &Bound, sticky: &mut Option<String>) {
    let launch = &bound.launch;
    let (mut mem, at) = lock_all(&bound.memory);
    if let OpKind::User(k) = launch.op {
        if let Err(e) = reference::execute_user(k.def(), launch, &mut mem, &at) {
            sticky.get_or_insert(e);
        }
        return;
    }
    // Each binding from its view's first byte.
    let (out, bytes) = {
        let inputs: Vec<&[u8]> = launch
            .buffers
            .iter()
            .zip(&at)
            .map(|(v, &i)| &mem[i][v.byte_offset as usize..])
            .collect();
        reference::execute(launch, &inputs)
    };
    let view = launch.buffers[out];
    mem[at[out]][view.byte_offset as usize..][..bytes.len()].copy_from_slice(&bytes);
}

/// The queue thread: runs commands in order; the first failure sticks and is
/// reported by the next synchronize, like a GPU stream's sticky error.
fn worker(rx: Receiver<Command>, marks: Marks, epoch: Instant) {
    let mut sticky: Option<String> = None;
    for cmd in rx {
        match cmd {
            Command::Run(l) => run_caught(&l, &mut sticky),
            Command::RunGraph(g, None) => g.each(|l| run_caught(l, &mut sticky)),
            Command::RunGraph(g, Some(tag)) => {
                let mut spans = Vec::with_capacity(g.launches.len());
                execute(0, g.launches.len(), &g.regions, &mut |i| {
                    let start = epoch.elapsed().as_nanos() as u64;
                    run_caught(&g.launches[i], &mut sticky);
                    let end = epoch.elapsed().as_nanos() as u64;
                    spans.push(Stamp::Node(DeviceSpan::node(tag, i as u32, start, end)));
                });
                marks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(spans);
            }
            Command::Write {
                memory,
                offset,
                data,
            } => {
                let mut b = memory.lock().unwrap_or_else(|p| p.into_inner());
                b[offset..offset + data.len()].copy_from_slice(&data);
            }
            Command::Read {
                memory,
                offset,
                len,
                reply,
            } => {
                let b = memory.lock().unwrap_or_else(|p| p.into_inner());
                let _ = reply.send(b[offset..offset + len].to_vec());
            }
            Command::Sync { reply } => {
                let _ = reply.send(sticky.take());
            }
            Command::Mark { tag, begin } => {
                let ns = epoch.elapsed().as_nanos() as u64;
                marks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(Stamp::Mark(tag, begin, ns));
            }
        }
    }
}

/// Run one launch on the queue thread; a panic in it (a user kernel's CPU
/// implementation, or the reference itself) becomes the sticky error,
/// naming the op, instead of ending the thread, so the device stays
/// usable. A user kernel runs over copies of its views, so nothing it
/// wrote before panicking is kept.
fn run_caught(bound: &Bound, sticky: &mut Option<String>) {
    let launch = &bound.launch;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(bound, sticky)));
    if let Err(payload) = r {
        sticky.get_or_insert_with(|| {
            let what = match launch.op {
                OpKind::User(k) => format!("kernel {}: its CPU implementation", k.name()),
                op => format!("{op}: the CPU reference"),
            };
            format!(
                "{what} panicked ({}); nothing it wrote was kept",
                reference::panic_message(payload.as_ref())
            )
        });
    }
}

/// The CPU reference device.
pub struct CpuBackend {
    info: DeviceInfo,
    queue: Option<Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    /// The open capture.
    recording: Option<Recording>,
    /// Each recorded launch list, shared with the replays queued of it.
    graphs: Graphs<CpuGraph>,
    /// Each buffer allocated and not yet freed. A free only drops the
    /// table's hold, so it never waits for the queue (a host call must not
    /// wait behind queued work: C8's free case could not tell a free that
    /// jumps the queue from one that does not).
    buffers: Buffers<Memory>,
    timing: bool,
    /// Graphs captured from now on time each launch.
    node_timing: bool,
    /// The tag of the open timed bracket (`begin_timed` .. `end_timed`).
    bracket: Option<u64>,
    marks: Marks,
}

impl CpuBackend {
    pub fn new(index: usize) -> Self {
        let (tx, rx) = channel();
        let marks: Marks = Arc::default();
        let worker_marks = marks.clone();
        let epoch = Instant::now();
        let thread = std::thread::Builder::new()
            .name(format!("seam-cpu:{index}-queue"))
            .spawn(move || worker(rx, worker_marks, epoch))
            .expect("spawning the CPU queue thread");
        CpuBackend {
            info: DeviceInfo {
                backend: "cpu".into(),
                index,
                name: "seam CPU reference".into(),
                driver: format!("seam-cpu {}", env!("CARGO_PKG_VERSION")),
            },
            queue: Some(tx),
            thread: Some(thread),
            recording: None,
            graphs: Graphs::new(),
            buffers: Buffers::new(),
            timing: false,
            node_timing: false,
            bracket: None,
            marks,
        }
    }

    fn send(&self, cmd: Command) -> Result<(), ErrorKind> {
        self.queue
            .as_ref()
            .and_then(|q| q.send(cmd).ok())
            .ok_or_else(|| ErrorKind::driver("cpu queue send", "the queue thread has exited"))
    }

    /// `launch` with the memory of each of its views.
    fn bind(&self, launch: &Launch) -> Result<Bound, ErrorKind> {
        let memory = launch
            .buffers
            .iter()
            .map(|v| self.buffers.get(v.buffer).cloned())
            .collect::<Result<_, _>>()?;
        Ok(Bound {
            launch: launch.clone(),
            memory,
        })
    }
}

#[allow(unsafe_code)] // the trait's `unsafe fn`s (the trust boundary, seam::Backend)
impl Backend for CpuBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn capture_support(&self) -> CaptureSupport {
        CaptureSupport::Native
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        // Contents are unspecified by the seam; a recognisable poison pattern
        // makes a test that forgets to initialise a buffer fail loudly. Host
        // memory that cannot be had is an error, not an abort.
        let mut poison = Vec::new();
        poison.try_reserve_exact(bytes).map_err(|e| {
            ErrorKind::driver("alloc", format!("{bytes} bytes of host memory: {e}"))
        })?;
        poison.resize(bytes, 0xA5);
        let memory = Arc::new(Mutex::new(poison));
        Ok(self.buffers.insert(memory, bytes as u64))
    }

    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        // The work queued before this holds the memory it uses: it goes
        // when the last of them is done.
        self.buffers.remove(buffer).map(drop)
    }

    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        self.send(Command::Write {
            memory: self.buffers.get(buffer)?.clone(),
            offset,
            data: data.to_vec(),
        })
    }

    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        let (tx, rx) = channel();
        self.send(Command::Read {
            memory: self.buffers.get(buffer)?.clone(),
            offset,
            len: out.len(),
            reply: tx,
        })?;
        let bytes = rx
            .recv()
            .map_err(|_| ErrorKind::driver("cpu queue read", "the queue thread has exited"))?;
        out.copy_from_slice(&bytes);
        Ok(())
    }

    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        let bound = self.bind(launch)?;
        match &mut self.recording {
            Some(rec) => {
                rec.launches.push(bound);
                Ok(())
            }
            None => self.send(Command::Run(Box::new(bound))),
        }
    }

    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        let (tx, rx) = channel();
        self.send(Command::Sync { reply: tx })?;
        match rx.recv() {
            Ok(None) => Ok(()),
            Ok(Some(msg)) => Err(ErrorKind::driver("cpu queue", msg)),
            Err(_) => Err(ErrorKind::driver(
                "cpu queue sync",
                "the queue thread has exited",
            )),
        }
    }

    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        // Nothing is lazy on the CPU: every op is plain code. A user kernel
        // runs its Rust implementation, which it must have.
        for (op, _) in ops {
            if let OpKind::User(k) = op {
                if k.def().cpu.is_none() {
                    return Err(ErrorKind::KernelSourceMissing {
                        kernel: k.name(),
                        source_kind: "CPU implementation (KernelDef::cpu)",
                    });
                }
            }
        }
        Ok(())
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.recording = Some(Recording {
            launches: Vec::new(),
            regions: Vec::new(),
            open: Vec::new(),
            node_timed: self.node_timing,
        });
        Ok(())
    }

    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        let graph = self.end_recording()?;
        self.graphs.set_current(graph);
        Ok(())
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        let graph = self.end_recording()?;
        Ok(self.graphs.insert(graph))
    }

    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        let graph = self.graphs.target(target)?;
        let nodes = if graph.node_timed && self.timing {
            self.bracket
        } else {
            None
        };
        self.send(Command::RunGraph(graph.program.clone(), nodes))
    }

    fn update_support(&self) -> seam::UpdateSupport {
        seam::UpdateSupport::Native
    }

    /// Host f32 arithmetic (Rust's IEEE operations; nothing here sets the
    /// FPU's flush-to-zero or denormals-are-zero modes) keeps subnormals.
    fn subnormals(&self) -> seam::Subnormals {
        seam::Subnormals::Preserved
    }

    /// C13 in place: the graph's launch list is swapped for a patched copy.
    /// A queued replay holds the old list, so it runs the old launches.
    unsafe fn update_launches(
        &mut self,
        target: ReplayTarget,
        _now: &mut Vec<Launch>,
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        let bound: Vec<(usize, Bound)> = changes
            .iter()
            .map(|(index, launch)| Ok((*index, self.bind(launch)?)))
            .collect::<Result<_, ErrorKind>>()?;
        let slot = self.graphs.target_mut(target)?;
        let mut list = Vec::clone(&slot.program.launches);
        for (index, b) in bound {
            // Core gave an index the graph holds (the trait's guarantees).
            list[index] = b;
        }
        slot.program.launches = Arc::new(list);
        Ok(())
    }

    /// C14 as the queue thread's own loop: the condition is read when the
    /// queue reaches the body.
    fn conditional_support(&self) -> ConditionalSupport {
        ConditionalSupport::Native
    }

    unsafe fn begin_conditional(&mut self, c: &Conditional) -> Result<(), ErrorKind> {
        let cond = self.buffers.get(c.cond).cloned()?;
        let rec = self.recording.as_mut().ok_or(ErrorKind::NotCapturing)?;
        rec.open.push(rec.regions.len());
        rec.regions.push(Region {
            kind: c.kind,
            cond,
            offset: c.byte_offset as usize,
            first: rec.launches.len(),
            end: usize::MAX,
            inner: 0,
        });
        Ok(())
    }

    fn end_conditional(&mut self) -> Result<(), ErrorKind> {
        let rec = self.recording.as_mut().ok_or(ErrorKind::NotCapturing)?;
        let at = rec.open.pop().ok_or(ErrorKind::NoOpenConditional)?;
        let inner = rec.regions.len() - at - 1;
        let r = &mut rec.regions[at];
        r.end = rec.launches.len();
        r.inner = inner;
        Ok(())
    }

    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        // A queued replay holds its own reference: it completes (C8).
        self.graphs.remove(graph).map(drop)
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.recording
            .take()
            .map(drop)
            .ok_or(ErrorKind::NotCapturing)
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.len(),
            bytes: self.buffers.bytes(),
        }
    }

    fn device_timing(&self) -> Result<(), String> {
        // The queue thread stamps markers as it reaches them: the "device" clock.
        Ok(())
    }

    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.timing = on;
        Ok(())
    }

    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        if self.timing {
            self.send(Command::Mark { tag, begin: true })?;
            self.bracket = Some(tag);
        }
        Ok(())
    }

    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.bracket = None;
        if self.timing {
            self.send(Command::Mark { tag, begin: false })?;
        }
        Ok(())
    }

    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.synchronize()?;
        let marks = std::mem::take(&mut *self.marks.lock().unwrap_or_else(|p| p.into_inner()));
        let mut open = HashMap::new();
        let mut spans = Vec::new();
        for stamp in marks {
            match stamp {
                Stamp::Mark(tag, true, ns) => {
                    open.insert(tag, ns);
                }
                Stamp::Mark(tag, false, ns) => {
                    if let Some(start_ns) = open.remove(&tag) {
                        spans.push(DeviceSpan::whole(tag, start_ns, ns));
                    }
                }
                Stamp::Node(span) => spans.push(span),
            }
        }
        Ok(spans)
    }

    /// Each launch of a replay is timed on the queue thread.
    fn node_timing(&self) -> NodeTiming {
        NodeTiming::Native
    }

    fn set_node_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.node_timing = on;
        Ok(())
    }
}

impl CpuBackend {
    /// Close the open capture into a graph.
    fn end_recording(&mut self) -> Result<CpuGraph, ErrorKind> {
        // Core ends a capture only with every body closed (the trait's
        // order guarantee).
        let rec = self.recording.take().ok_or(ErrorKind::NotCapturing)?;
        Ok(CpuGraph {
            program: Program {
                launches: Arc::new(rec.launches),
                regions: Arc::new(rec.regions),
            },
            node_timed: rec.node_timed,
        })
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        // Closing the channel ends the worker after it drains the queue.
        self.queue.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The CPU reference's description of itself (`seam::registration`).
pub const REGISTRATION: seam::Registration = seam::Registration::new(
    "cpu",
    None,
    || Ok(1),
    |index| Ok(Box::new(CpuBackend::new(index))),
);
