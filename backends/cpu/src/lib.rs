//! The CPU reference backend.
//!
//! Every op runs on a dedicated queue thread, in submission order, so
//! launches and replays are asynchronous like a GPU stream and `synchronize`
//! really waits: destroy-while-in-flight (C8) and cross-thread cases are
//! exercised on every machine, not only on GPUs.
//!
//! Capture is Native: the recorded launch list is the graph, and a replay
//! re-runs it over the buffers' current contents (C1). A graph is shared with
//! the queue by reference count, so destroying it while a replay is queued
//! or running only drops the handle; the replay finishes (C8).

pub mod reference;

use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, DeviceSpan, ErrorKind, Launch, OpKind, RawBuffer,
    RawGraph, ReplayTarget, ResourceCounts,
};
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

type Memory = Arc<Mutex<HashMap<u64, Vec<u8>>>>;

enum Command {
    Run(Box<Launch>),
    RunGraph(Arc<Vec<Launch>>),
    Write {
        buffer: u64,
        offset: usize,
        data: Vec<u8>,
    },
    Read {
        buffer: u64,
        offset: usize,
        len: usize,
        reply: Sender<Result<Vec<u8>, String>>,
    },
    Free {
        buffer: u64,
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

/// Markers the queue has stamped: (tag, begin?, ns since the device opened).
type Marks = Arc<Mutex<Vec<(u64, bool, u64)>>>;

/// The queue thread: runs commands in order; the first failure sticks and is
/// reported by the next synchronize, like a GPU stream's sticky error.
fn worker(mem: Memory, rx: Receiver<Command>, marks: Marks, epoch: Instant) {
    let mut sticky: Option<String> = None;
    let run = |launch: &Launch, sticky: &mut Option<String>| {
        let mut mem = mem.lock().unwrap_or_else(|p| p.into_inner());
        if let OpKind::User(k) = launch.op {
            if let Err(e) = reference::execute_user(k.def(), launch, &mut mem) {
                sticky.get_or_insert(e);
            }
            return;
        }
        // Each binding from its view's first byte.
        let inputs: Option<Vec<&[u8]>> = launch
            .buffers
            .iter()
            .map(|v| mem.get(&v.buffer.0).map(|b| &b[v.byte_offset as usize..]))
            .collect();
        let Some(inputs) = inputs else {
            sticky.get_or_insert_with(|| format!("{}: a bound buffer is not allocated", launch.op));
            return;
        };
        let (out, bytes) = reference::execute(launch, &inputs);
        let view = launch.buffers[out];
        let dst = mem.get_mut(&view.buffer.0).expect("checked above");
        dst[view.byte_offset as usize..][..bytes.len()].copy_from_slice(&bytes);
    };
    for cmd in rx {
        match cmd {
            Command::Run(l) => run_caught(&run, &l, &mut sticky),
            Command::RunGraph(g) => g.iter().for_each(|l| run_caught(&run, l, &mut sticky)),
            Command::Write {
                buffer,
                offset,
                data,
            } => {
                let mut mem = mem.lock().unwrap_or_else(|p| p.into_inner());
                match mem.get_mut(&buffer) {
                    Some(b) => b[offset..offset + data.len()].copy_from_slice(&data),
                    None => {
                        sticky
                            .get_or_insert_with(|| format!("write to unallocated buffer {buffer}"));
                    }
                }
            }
            Command::Read {
                buffer,
                offset,
                len,
                reply,
            } => {
                let mem = mem.lock().unwrap_or_else(|p| p.into_inner());
                let r = mem
                    .get(&buffer)
                    .map(|b| b[offset..offset + len].to_vec())
                    .ok_or_else(|| format!("read of unallocated buffer {buffer}"));
                let _ = reply.send(r);
            }
            Command::Free { buffer } => {
                mem.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&buffer);
            }
            Command::Sync { reply } => {
                let _ = reply.send(sticky.take());
            }
            Command::Mark { tag, begin } => {
                let ns = epoch.elapsed().as_nanos() as u64;
                marks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((tag, begin, ns));
            }
        }
    }
}

/// Run one launch on the queue thread; a panic in it (a user kernel's CPU
/// implementation, or the reference itself) becomes the sticky error,
/// naming the op, instead of ending the thread, so the device stays
/// usable. A user kernel runs over copies of its views, so nothing it
/// wrote before panicking is kept.
fn run_caught(
    run: &impl Fn(&Launch, &mut Option<String>),
    launch: &Launch,
    sticky: &mut Option<String>,
) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(launch, sticky)));
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
    mem: Memory,
    queue: Option<Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    recording: Option<Vec<Launch>>,
    current: Option<Arc<Vec<Launch>>>,
    graphs: HashMap<u64, Arc<Vec<Launch>>>,
    next: u64,
    /// Each buffer allocated and not yet freed, with its size (frees are
    /// queued, so they are counted here), kept on this side of the queue so `free`
    /// never waits for the memory lock the worker holds while it runs a
    /// launch (a host call must not wait behind queued work: C8's free case
    /// could not tell a free that jumps the queue from one that does not).
    sizes: HashMap<u64, u64>,
    /// Bytes of those buffers.
    live_bytes: u64,
    timing: bool,
    marks: Marks,
}

impl CpuBackend {
    pub fn new(index: usize) -> Self {
        let mem: Memory = Arc::default();
        let (tx, rx) = channel();
        let worker_mem = mem.clone();
        let marks: Marks = Arc::default();
        let worker_marks = marks.clone();
        let epoch = Instant::now();
        let thread = std::thread::Builder::new()
            .name(format!("seam-cpu:{index}-queue"))
            .spawn(move || worker(worker_mem, rx, worker_marks, epoch))
            .expect("spawning the CPU queue thread");
        CpuBackend {
            info: DeviceInfo {
                backend: "cpu".into(),
                index,
                name: "seam CPU reference".into(),
                driver: format!("seam-cpu {}", env!("CARGO_PKG_VERSION")),
            },
            mem,
            queue: Some(tx),
            thread: Some(thread),
            recording: None,
            current: None,
            graphs: HashMap::new(),
            next: 1,
            sizes: HashMap::new(),
            live_bytes: 0,
            timing: false,
            marks,
        }
    }

    fn send(&self, cmd: Command) -> Result<(), ErrorKind> {
        self.queue
            .as_ref()
            .and_then(|q| q.send(cmd).ok())
            .ok_or_else(|| ErrorKind::driver("cpu queue send", "the queue thread has exited"))
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
        let id = self.next;
        self.next += 1;
        // Contents are unspecified by the seam; a recognisable poison pattern
        // makes a test that forgets to initialise a buffer fail loudly.
        self.mem
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, vec![0xA5; bytes]);
        self.sizes.insert(id, bytes as u64);
        self.live_bytes += bytes as u64;
        Ok(RawBuffer(id))
    }

    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        // The queue frees the memory behind the work queued before this.
        let bytes = self.sizes.remove(&buffer.0).unwrap_or(0);
        self.send(Command::Free { buffer: buffer.0 })?;
        self.live_bytes -= bytes;
        Ok(())
    }

    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        self.send(Command::Write {
            buffer: buffer.0,
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
            buffer: buffer.0,
            offset,
            len: out.len(),
            reply: tx,
        })?;
        let bytes = rx
            .recv()
            .map_err(|_| ErrorKind::driver("cpu queue read", "the queue thread has exited"))?
            .map_err(|m| ErrorKind::driver("cpu queue read", m))?;
        out.copy_from_slice(&bytes);
        Ok(())
    }

    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        match &mut self.recording {
            Some(list) => {
                list.push(launch.clone());
                Ok(())
            }
            None => self.send(Command::Run(Box::new(launch.clone()))),
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
        self.recording = Some(Vec::new());
        Ok(())
    }

    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        let list = self.recording.take().ok_or(ErrorKind::NotCapturing)?;
        self.current = Some(Arc::new(list));
        Ok(())
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        let list = self.recording.take().ok_or(ErrorKind::NotCapturing)?;
        let id = self.next;
        self.next += 1;
        self.graphs.insert(id, Arc::new(list));
        Ok(RawGraph(id))
    }

    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        let graph = match target {
            ReplayTarget::Current => self.current.clone().ok_or(ErrorKind::NoCurrentGraph)?,
            ReplayTarget::Graph(g) => self
                .graphs
                .get(&g.0)
                .cloned()
                .ok_or(ErrorKind::UnknownGraph { id: g.0 })?,
        };
        self.send(Command::RunGraph(graph))
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
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        let slot = match target {
            ReplayTarget::Current => self.current.as_mut().ok_or(ErrorKind::NoCurrentGraph)?,
            ReplayTarget::Graph(g) => self
                .graphs
                .get_mut(&g.0)
                .ok_or(ErrorKind::UnknownGraph { id: g.0 })?,
        };
        let mut list = Vec::clone(slot);
        for (index, launch) in changes {
            let entry = list.get_mut(*index).ok_or(ErrorKind::NoSuchLaunch {
                index: *index,
                launches: slot.len(),
            })?;
            *entry = launch.clone();
        }
        *slot = Arc::new(list);
        Ok(())
    }

    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        // A queued replay holds its own reference: it completes (C8).
        self.graphs
            .remove(&graph.0)
            .map(drop)
            .ok_or(ErrorKind::UnknownGraph { id: graph.0 })
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.recording
            .take()
            .map(drop)
            .ok_or(ErrorKind::NotCapturing)
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.sizes.len(),
            graphs: self.graphs.len() + usize::from(self.current.is_some()),
            bytes: self.live_bytes,
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
        }
        Ok(())
    }

    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
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
        for (tag, begin, ns) in marks {
            if begin {
                open.insert(tag, ns);
            } else if let Some(start_ns) = open.remove(&tag) {
                spans.push(DeviceSpan {
                    tag,
                    start_ns,
                    end_ns: ns,
                });
            }
        }
        Ok(spans)
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
