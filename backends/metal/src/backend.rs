//! `MetalBackend`: the seam over the `sys` layer. Safe Rust only; the
//! decisions it implements are listed in the crate documentation.

use crate::bodies::{Capture, Step};
use crate::dispatch;
use crate::kernels::{Compiled, Kernels};
use crate::msl;
use crate::sys::{self, Buffer, CommandBuffer, Device, Dispatch, Encoder, Icb, Queue};
use crate::update::{self, CommandMap};
use seam::table::{Buffers, Graphs};
use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, ErrorKind, Launch, OpKind, RawBuffer, RawGraph,
    ReplayTarget, ResourceCounts, UpdateSupport,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// Eager launches encoded before the batch is committed on its own.
const EAGER_BATCH: usize = 256;
/// Committed command buffers before the oldest is waited for, so a replay
/// loop without synchronize cannot queue without bound.
const MAX_IN_FLIGHT: usize = 64;
/// `SEAM_METAL_CAPTURE=emulated` forces Emulated capture on a device that
/// supports indirect command buffers (to run that path on any Mac).
const CAPTURE_ENV: &str = "SEAM_METAL_CAPTURE";

/// One launch, resolved: what the eager path encodes at once and capture records.
#[derive(Clone)]
pub(crate) struct Recorded {
    pub(crate) kernel: Arc<Compiled>,
    pub(crate) buffers: Vec<Arc<Buffer>>,
    pub(crate) params: [u8; seam::ops::IMMEDIATE_BYTES],
    pub(crate) sizes: Vec<u32>,
    pub(crate) groups: [u32; 3],
}

impl Recorded {
    fn dispatch(&self) -> Dispatch<'_> {
        Dispatch {
            pipeline: &self.kernel.pipeline,
            buffers: self.buffers.iter().map(|b| &**b).collect(),
            params: self.params,
            sizes: self.sizes.clone(),
            threadgroup_memory: &self.kernel.threadgroup_memory,
            groups: self.groups,
            threads: self.kernel.threads,
        }
    }
}

/// A captured graph: the current exec or a handle (C3: never shared).
enum Graph {
    /// Nothing was launched between begin and end.
    Empty,
    /// An indirect command buffer (it holds every pipeline and buffer its
    /// commands reference) and, per captured launch, the command it was
    /// encoded at (C13 re-encodes that command).
    Native { icb: Icb, commands: CommandMap },
    /// Re-encoded on every replay.
    Emulated { launches: Vec<Recorded> },
    /// With conditional bodies: unrolled, re-encoded on every replay over
    /// its control buffer (`bodies.rs`).
    Bodies {
        steps: Vec<Step>,
        control: Arc<Buffer>,
    },
}

/// The command buffer eager launches and replays are encoded into.
struct Batch {
    cb: CommandBuffer,
    encoder: Option<Encoder>,
    launches: usize,
    /// Graphs replayed in this batch, held until it completes (C8).
    keep: Vec<Arc<Graph>>,
}

impl Batch {
    fn encoder(&mut self) -> Result<&Encoder, ErrorKind> {
        if self.encoder.is_none() {
            self.encoder = Some(self.cb.encoder()?);
        }
        self.encoder
            .as_ref()
            .ok_or_else(|| ErrorKind::driver("computeCommandEncoder", "no encoder"))
    }

    fn end_encoder(&mut self) {
        if let Some(enc) = self.encoder.take() {
            enc.end();
        }
    }
}

/// A committed command buffer and what must outlive it.
struct Submitted {
    cb: CommandBuffer,
    /// The graphs it replays (an update waits for it: `wait_for_graph`).
    keep: Vec<Arc<Graph>>,
}

/// One Metal device behind the seam.
pub struct MetalBackend {
    info: DeviceInfo,
    /// Capture through indirect command buffers (else Emulated).
    pub(crate) native: bool,
    /// Compiled libraries and pipelines, catalogue and user kernels.
    pub(crate) kernels: Kernels,
    buffers: Buffers<Arc<Buffer>>,
    batch: Option<Batch>,
    in_flight: VecDeque<Submitted>,
    pub(crate) capture: Option<Capture>,
    /// The current graph and each handle's.
    graphs: Graphs<Arc<Graph>>,
    queue: Queue,
    pub(crate) device: Device,
}

/// A command buffer that ended in `MTLCommandBufferStatusError`.
fn failed(message: String) -> ErrorKind {
    ErrorKind::driver("MTLCommandBuffer.status (Error)", message)
}

impl MetalBackend {
    /// Open `metal:<index>`: the index-th device of `MTLCopyAllDevices`.
    pub fn open(index: usize) -> Result<MetalBackend, ErrorKind> {
        sys::pool(|| {
            let device = Device::open(index).map_err(|reason| ErrorKind::Unavailable { reason })?;
            let forced = std::env::var(CAPTURE_ENV).is_ok_and(|v| v == "emulated");
            let native = device.supports_compute_icb() && !forced;
            let info = DeviceInfo {
                backend: "metal".into(),
                index,
                name: device.name(),
                driver: format!(
                    "Metal, {}; MSL {}.{} from naga",
                    sys::os_version(),
                    msl::MSL_VERSION.0,
                    msl::MSL_VERSION.1
                ),
            };
            Ok(MetalBackend {
                info,
                native,
                kernels: Kernels::default(),
                buffers: Buffers::new(),
                batch: None,
                in_flight: VecDeque::new(),
                capture: None,
                graphs: Graphs::new(),
                queue: device.new_queue()?,
                device,
            })
        })
    }

    pub(crate) fn buffer(&self, raw: RawBuffer) -> Result<Arc<Buffer>, ErrorKind> {
        self.buffers.get(raw).cloned()
    }

    /// Resolve a launch into a dispatch: kernel, pipeline, buffers, grid.
    fn resolve(&mut self, launch: &Launch) -> Result<Recorded, ErrorKind> {
        // Buffers are bound whole; each view's element offset reaches the
        // kernel in the immediate block (`p.o<k>`), which the kernels add.
        let buffers = launch
            .buffers
            .iter()
            .map(|v| self.buffer(v.buffer))
            .collect::<Result<Vec<_>, _>>()?;
        let kernel = self
            .kernels
            .get(&self.device, self.native, launch.op, launch.dtype)?;
        let lens: Vec<usize> = buffers.iter().map(|b| b.len()).collect();
        Ok(Recorded {
            sizes: dispatch::sizes(&kernel.sizes, &lens),
            groups: dispatch::groups(launch, kernel.threads)?,
            kernel,
            buffers,
            params: launch.immediates(),
        })
    }

    fn batch(&mut self) -> Result<&mut Batch, ErrorKind> {
        if self.batch.is_none() {
            self.batch = Some(Batch {
                cb: self.queue.command_buffer()?,
                encoder: None,
                launches: 0,
                keep: Vec::new(),
            });
        }
        self.batch
            .as_mut()
            .ok_or_else(|| ErrorKind::driver("commandBuffer", "no batch"))
    }

    /// Commit the batch, if any, then forget command buffers that completed.
    fn submit(&mut self) -> Result<(), ErrorKind> {
        if let Some(mut batch) = self.batch.take() {
            batch.end_encoder();
            batch.cb.commit()?;
            self.in_flight.push_back(Submitted {
                cb: batch.cb,
                keep: batch.keep,
            });
        }
        while self.in_flight.len() > MAX_IN_FLIGHT {
            self.wait_oldest()?;
        }
        self.reap()
    }

    /// Drop completed submissions from the front; a failed one is an error.
    fn reap(&mut self) -> Result<(), ErrorKind> {
        while let Some(s) = self.in_flight.front() {
            match s.cb.status() {
                sys::Status::Pending => break,
                sys::Status::Completed => {
                    self.in_flight.pop_front();
                }
                sys::Status::Failed(message) => {
                    self.in_flight.pop_front();
                    return Err(failed(message));
                }
            }
        }
        Ok(())
    }

    /// Wait for the oldest submission; a failed one is an error. One that
    /// is still running after the wait limit stays in flight.
    fn wait_oldest(&mut self) -> Result<(), ErrorKind> {
        let Some(s) = self.in_flight.front() else {
            return Ok(());
        };
        let status = s.cb.wait()?;
        self.in_flight.pop_front();
        match status {
            sys::Status::Failed(message) => Err(failed(message)),
            _ => Ok(()),
        }
    }

    /// Commit everything queued and wait for all of it (bounded).
    fn wait_idle(&mut self) -> Result<(), ErrorKind> {
        self.submit()?;
        while !self.in_flight.is_empty() {
            self.wait_oldest()?;
        }
        Ok(())
    }

    fn graph_mut(&mut self, target: ReplayTarget) -> Result<&mut Arc<Graph>, ErrorKind> {
        self.graphs.target_mut(target)
    }

    /// Wait until no command buffer holds `graph`: commit the open batch if
    /// it replays it, then wait, oldest first, for the in-flight
    /// submissions up to the newest that replays it (a failed one is an
    /// error; a wait past the limit leaves it in flight, and the error).
    fn wait_for_graph(&mut self, graph: &Arc<Graph>) -> Result<(), ErrorKind> {
        let holds = |keep: &[Arc<Graph>]| keep.iter().any(|g| Arc::ptr_eq(g, graph));
        if self.batch.as_ref().is_some_and(|b| holds(&b.keep)) {
            self.submit()?;
        }
        let waits = update::waits_before_update(self.in_flight.iter().map(|s| holds(&s.keep)));
        for _ in 0..waits {
            self.wait_oldest()?;
        }
        Ok(())
    }

    fn graph(&self, target: ReplayTarget) -> Result<Arc<Graph>, ErrorKind> {
        self.graphs.target(target).cloned()
    }

    /// Turn the recorded launches into a graph: an indirect command buffer
    /// when capture is Native, the list itself when Emulated.
    fn finish_capture(&mut self) -> Result<Graph, ErrorKind> {
        let capture = self.capture.take().ok_or(ErrorKind::NotCapturing)?;
        if capture.has_bodies() {
            let (steps, control) = self.unrolled(capture)?;
            return Ok(Graph::Bodies { steps, control });
        }
        let launches = capture.launches;
        if launches.is_empty() {
            return Ok(Graph::Empty);
        }
        if !self.native {
            return Ok(Graph::Emulated { launches });
        }
        let icb = {
            let dispatches: Vec<Dispatch<'_>> = launches.iter().map(Recorded::dispatch).collect();
            sys::pool(|| self.device.new_icb(&dispatches))?
        };
        Ok(Graph::Native {
            icb,
            commands: CommandMap::sequential(launches.len()),
        })
    }
}

#[allow(unsafe_code)] // the trait's `unsafe fn`s (the trust boundary, seam::Backend)
impl Backend for MetalBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// MayFlush: kernels are compiled with fast math off (`sys/device.rs`),
    /// but seam has not run them on Apple hardware and no compile option it
    /// sets is documented to preserve f32 subnormals, so it promises nothing.
    fn subnormals(&self) -> seam::Subnormals {
        seam::Subnormals::MayFlush(
            "MSL with fast math off, never run with subnormal inputs on an Apple GPU: not proven to preserve them".into(),
        )
    }

    fn capture_support(&self) -> CaptureSupport {
        if self.native {
            CaptureSupport::Native
        } else {
            CaptureSupport::Emulated
        }
    }

    /// Native where capture records indirect command buffers: an update
    /// re-encodes the changed commands in place (`update_launches`).
    /// Emulated otherwise: core re-records the graph.
    fn update_support(&self) -> UpdateSupport {
        if self.native {
            UpdateSupport::Native
        } else {
            UpdateSupport::Emulated
        }
    }

    /// Re-encode the ICB commands of the changed launches (C13). Every
    /// change is resolved (buffers, sizes, params, grid) before anything is
    /// touched; then the graph's pending replays are waited for, so replays
    /// queued before this call run the old commands, and the commands are
    /// re-encoded exactly as capture encoded them. Params are the kernel's
    /// bytes argument (in the graph's argument buffer), so a params update
    /// re-encodes its command too. Any error leaves core to re-record.
    unsafe fn update_launches(
        &mut self,
        target: ReplayTarget,
        _now: &mut Vec<Launch>,
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        if !self.native {
            return Err(ErrorKind::UpdateUnsupported);
        }
        sys::pool(|| {
            let graph = self.graph(target)?;
            let Graph::Native { icb, commands } = &*graph else {
                // An empty graph has no launch to change (core refuses it);
                // one with bodies is recorded anew by core.
                return Err(ErrorKind::UpdateUnsupported);
            };
            if commands.launches() != icb.commands() {
                return Err(ErrorKind::driver(
                    "update_launches",
                    format!(
                        "{} launches recorded for {} commands",
                        commands.launches(),
                        icb.commands()
                    ),
                ));
            }
            let indices: Vec<usize> = changes.iter().map(|(i, _)| *i).collect();
            let resolved = commands
                .plan(&indices)?
                .into_iter()
                .map(|(change, command)| Ok((command, self.resolve(&changes[change].1)?)))
                .collect::<Result<Vec<_>, ErrorKind>>()?;
            self.wait_for_graph(&graph)?;
            drop(graph);
            let Some(Graph::Native { icb, .. }) = Arc::get_mut(self.graph_mut(target)?) else {
                return Err(ErrorKind::driver(
                    "update_launches",
                    "the graph is still held by a command buffer",
                ));
            };
            let dispatches: Vec<(usize, Dispatch<'_>)> = resolved
                .iter()
                .map(|(command, rec)| (*command, rec.dispatch()))
                .collect();
            icb.reencode(&dispatches)
        })
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        // Kernels see every buffer as whole 32-bit words, and gemm reads b
        // in 16-byte quads (seam_kernels::BUFFER_ROUND).
        let rounded = bytes
            .checked_next_multiple_of(seam_kernels::BUFFER_ROUND as usize)
            .ok_or(ErrorKind::TooLarge {
                what: "allocation",
                detail: format!("{bytes} bytes"),
            })?;
        let buffer = sys::pool(|| self.device.new_buffer(rounded))?;
        let size = buffer.len() as u64;
        Ok(self.buffers.insert(Arc::new(buffer), size))
    }

    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        // Queued eager work retains the MTLBuffer in its command buffer, and a
        // graph holds its own reference, so this releases only ours.
        self.buffers.remove(buffer).map(drop)
    }

    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        let buf = self.buffer(buffer)?;
        sys::pool(|| self.wait_idle())?;
        buf.write(offset, data)
    }

    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        let buf = self.buffer(buffer)?;
        sys::pool(|| self.wait_idle())?;
        buf.read(offset, out)
    }

    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        sys::pool(|| {
            let rec = self.resolve(launch)?;
            if let Some(capture) = &mut self.capture {
                capture.push(rec);
                return Ok(());
            }
            let batch = self.batch()?;
            batch.encoder()?.dispatch(&rec.dispatch())?;
            batch.launches += 1;
            if batch.launches >= EAGER_BATCH {
                self.submit()?;
            }
            Ok(())
        })
    }

    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        sys::pool(|| self.wait_idle())
    }

    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        sys::pool(|| {
            for &(op, dtype) in ops {
                self.kernels.get(&self.device, self.native, op, dtype)?;
            }
            Ok(())
        })
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        if self.capture.is_some() {
            return Err(ErrorKind::NestedCapture);
        }
        self.capture = Some(Capture::default());
        Ok(())
    }

    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        let graph = self.finish_capture()?;
        // A replaced exec still in flight is held by its command buffer (C8).
        self.graphs.set_current(Arc::new(graph));
        Ok(())
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        let graph = self.finish_capture()?;
        Ok(self.graphs.insert(Arc::new(graph)))
    }

    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        let graph = self.graph(target)?;
        if matches!(*graph, Graph::Empty) {
            return Ok(());
        }
        sys::pool(|| {
            let batch = self.batch()?;
            match &*graph {
                Graph::Empty => {}
                Graph::Emulated { launches } => {
                    let enc = batch.encoder()?;
                    for l in launches {
                        enc.dispatch(&l.dispatch())?;
                    }
                    batch.launches += launches.len();
                }
                Graph::Bodies { steps, control } => {
                    let enc = batch.encoder()?;
                    for step in steps {
                        match step {
                            Step::Direct(l) => enc.dispatch(&l.dispatch())?,
                            Step::Indirect(l, at) => {
                                enc.dispatch_indirect(&l.dispatch(), control, *at as usize)?
                            }
                        }
                    }
                    batch.launches += steps.len();
                }
                Graph::Native { icb, .. } => {
                    // Its own encoder: useResource orders it after the eager
                    // dispatches before it and before the ones after it.
                    batch.end_encoder();
                    let enc = batch.cb.encoder()?;
                    enc.execute(icb)?;
                    enc.end();
                    batch.launches += 1;
                }
            }
            // Held until the command buffer completes: destroy_graph while
            // this replay runs only drops the backend's reference (C8).
            batch.keep.push(graph.clone());
            self.submit()
        })
    }

    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        // In-flight replays hold their own reference; release happens when
        // their command buffer completes (C8).
        self.graphs.remove(graph).map(drop)
    }

    /// Unrolled bodies of indirect dispatches, each copy gated on the
    /// device (`bodies.rs`, `seam_kernels::conditional`).
    fn conditional_support(&self) -> seam::ConditionalSupport {
        seam::ConditionalSupport::Emulated(seam_kernels::conditional::HOW.into())
    }

    unsafe fn begin_conditional(&mut self, c: &seam::Conditional) -> Result<(), ErrorKind> {
        self.begin_body(c)
    }

    fn end_conditional(&mut self) -> Result<(), ErrorKind> {
        self.end_body()
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.capture.take().map(drop).ok_or(ErrorKind::NotCapturing)
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.len(),
            bytes: self.buffers.bytes(),
        }
    }
}

impl Drop for MetalBackend {
    fn drop(&mut self) {
        // Nothing Metal still executes may be released under it; the wait is
        // bounded, so a hung GPU cannot hang the drop.
        let _ = sys::pool(|| self.wait_idle());
    }
}
