//! `WgpuBackend`: the seam over wgpu. The decisions it implements are listed
//! in the crate documentation; docs/wgpu.md explains the emulated graph.

use crate::dispatch;
use crate::gpu::Gpu;
use crate::kernels::Kernels;
use crate::replay::{encode, replay_pieces, Dispatch, Graph, Stamps};
use seam::table::{Buffers, Graphs};
use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, DeviceSpan, ErrorKind, Launch, NodeTiming, OpKind,
    RawBuffer, RawGraph, ReplayTarget, ResourceCounts,
};
use std::collections::HashMap;

pub(crate) mod bodies;
mod host;
pub(crate) mod timing;

/// Eager launches batched before the batch is submitted on its own.
pub(crate) const EAGER_BATCH: usize = 256;

/// Largest staging buffer for reads; bigger reads go in chunks.
const STAGING_MAX: u64 = 64 << 20;
/// Bind groups kept for eager launches before the cache is cleared.
const BIND_GROUP_CACHE_MAX: usize = 4096;
/// wgpu's alignment for buffer copies and `write_buffer` (`COPY_BUFFER_ALIGNMENT`).
const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

struct Buf {
    buffer: wgpu::Buffer,
}

/// The wgpu device behind the seam.
pub struct WgpuBackend {
    info: DeviceInfo,
    pub(crate) gpu: Gpu,
    pub(crate) kernels: Kernels,
    buffers: Buffers<Buf>,
    /// Bind groups per (op, buffers); buffer ids are never reused (a slot
    /// is reused under a new generation).
    bind_groups: HashMap<(OpKind, Vec<u64>), wgpu::BindGroup>,
    /// Eager launches not yet submitted, in launch order.
    pending: Vec<Dispatch>,
    /// Dispatches (and conditional bodies) recorded since begin_capture.
    recording: Option<bodies::Recording>,
    /// The capture under way is node-timed (node timing was on at its start).
    recording_nodes: bool,
    /// The current graph's dispatches and each handle's.
    graphs: Graphs<Graph>,
    staging: Option<wgpu::Buffer>,
    /// Device and node timing (`timing.rs`).
    timing: timing::Timing,
    /// Last: drops after every wgpu object of the device (`gpu.rs`).
    _teardown: crate::gpu::Teardown,
}

impl WgpuBackend {
    /// Open `wgpu:<index>` on `adapter`.
    pub fn open(index: usize, adapter: &wgpu::Adapter) -> Result<WgpuBackend, ErrorKind> {
        WgpuBackend::open_with(index, adapter, Gpu::request(adapter)?)
    }

    /// Open `wgpu:<index>` on `adapter`, whose device is `gpu`.
    pub(crate) fn open_with(
        index: usize,
        adapter: &wgpu::Adapter,
        gpu: Gpu,
    ) -> Result<WgpuBackend, ErrorKind> {
        crate::SPIN
            .get()
            .map_err(|e| ErrorKind::driver("open", e))?;
        let a = adapter.get_info();
        let driver = match (a.driver.is_empty(), a.driver_info.is_empty()) {
            (false, false) => format!("{} {}", a.driver, a.driver_info),
            (false, true) => a.driver.clone(),
            (true, false) => a.driver_info.clone(),
            (true, true) => format!("wgpu {:?} driver (unnamed)", a.backend),
        };
        let name = format!("{} ({:?})", a.name, a.backend);
        let teardown = gpu.teardown(&format!("wgpu:{index}, {name}"));
        Ok(WgpuBackend {
            info: DeviceInfo {
                backend: "wgpu".into(),
                index,
                name,
                driver,
            },
            gpu,
            kernels: Kernels::default(),
            buffers: Buffers::new(),
            bind_groups: HashMap::new(),
            pending: Vec::new(),
            recording: None,
            recording_nodes: false,
            graphs: Graphs::new(),
            staging: None,
            timing: timing::Timing::default(),
            _teardown: teardown,
        })
    }

    #[cfg(test)]
    pub(crate) fn bind_group_count(&self) -> usize {
        self.bind_groups.len()
    }

    /// Validate from now on, as `SEAM_WGPU_VALIDATION=1` would have: calls
    /// fail on a message, and so does the teardown.
    #[cfg(test)]
    pub(crate) fn validate_from_now(&mut self) {
        self.gpu.validating = true;
        self._teardown = self.gpu.teardown(&self.info.name);
    }

    fn buf(&self, buffer: RawBuffer) -> Result<&Buf, ErrorKind> {
        self.buffers.get(buffer)
    }

    /// The bind group of `op` over `buffers`, from the cache or made now.
    fn bind_group(
        &mut self,
        op: OpKind,
        buffers: &[RawBuffer],
    ) -> Result<wgpu::BindGroup, ErrorKind> {
        let key = (op, buffers.iter().map(|b| b.0).collect::<Vec<_>>());
        if let Some(g) = self.bind_groups.get(&key) {
            return Ok(g.clone());
        }
        // Every buffer fits one binding (`alloc`): bound whole.
        let mut bound = Vec::with_capacity(buffers.len());
        for b in buffers {
            bound.push(self.buf(*b)?.buffer.clone());
        }
        let entries: Vec<wgpu::BindGroupEntry> = bound
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let layout = self.kernels.op(&self.gpu, op)?.bind_layout.clone();
        let group = self.gpu.checked("wgpu::Device::create_bind_group", || {
            self.gpu
                .device
                .create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &layout,
                    entries: &entries,
                })
        })?;
        if self.bind_groups.len() >= BIND_GROUP_CACHE_MAX {
            self.bind_groups.clear();
        }
        self.bind_groups.insert(key, group.clone());
        Ok(group)
    }

    /// Resolve a launch into a dispatch: pipeline, bind group (whole
    /// buffers), immediates (the params and the views' offsets), workgroup
    /// counts.
    fn resolve(&mut self, launch: &Launch) -> Result<Dispatch, ErrorKind> {
        let groups =
            dispatch::groups(launch, self.gpu.limits.max_compute_workgroups_per_dimension)?;
        let pipeline = self.kernels.pipeline(&self.gpu, launch.op, launch.dtype)?;
        let raws: Vec<RawBuffer> = launch.buffers.iter().map(|v| v.buffer).collect();
        let bind_group = self.bind_group(launch.op, &raws)?;
        Ok(Dispatch {
            pipeline,
            bind_group,
            immediates: launch.immediates(),
            groups,
            indirect: None,
        })
    }

    /// Encode the pending eager batch, then `then` (a graph's dispatches),
    /// into one command buffer and submit it, with the stamps timing asks
    /// for. Nothing to do: no submission. The stamps of a submission that
    /// fails are lost (`timing.rs`).
    fn submit(&mut self, then: Option<ReplayTarget>) -> Result<(), ErrorKind> {
        let out = self.encode_and_submit(then);
        match out {
            Ok(()) => self.timing.sent(),
            Err(_) => self.timing.lost(),
        }
        out
    }

    fn encode_and_submit(&mut self, then: Option<ReplayTarget>) -> Result<(), ErrorKind> {
        let graph = match then {
            None => None,
            Some(target) => Some(self.graphs.target(target)?),
        };
        let steps = graph.map_or(&[][..], |g| &g.steps[..]);
        if self.pending.is_empty() && self.timing.in_batch.is_empty() && steps.is_empty() {
            return Ok(());
        }
        // A traced replay of a node-timed graph: a stamp before its first
        // launch and one after each.
        let nodes = match (graph, self.timing.bracket) {
            (Some(g), Some(tag)) if g.node_timed && self.timing.on && !steps.is_empty() => {
                Some((tag, self.timing.stamps(&self.gpu, steps.len() as u32 + 1)?))
            }
            _ => None,
        };
        let piece_stamps = |start: usize| nodes.map(|(_, q)| (q + start as u32, start == 0));
        // The batch leaves `pending` even if encoding fails: its error is
        // reported once. Its allocation is kept for the next batch.
        let mut batch = std::mem::take(&mut self.pending);
        let mut pieces = replay_pieces(steps.len()).map(|r| (r.start, &steps[r]));
        let (start, first) = pieces.next().unwrap_or((0, &[]));
        let stamps = Stamps {
            sets: &self.timing.sets,
            batch: &self.timing.in_batch,
            nodes: piece_stamps(start),
        };
        let commands = encode(&self.gpu, &batch, first, &stamps);
        batch.clear();
        self.pending = batch;
        let commands = commands?;
        self.gpu
            .checked("wgpu::Queue::submit", || self.gpu.queue.submit([commands]))?;
        for (start, piece) in pieces {
            let stamps = Stamps {
                sets: &self.timing.sets,
                batch: &[],
                nodes: piece_stamps(start),
            };
            let commands = encode(&self.gpu, &[], piece, &stamps)?;
            self.gpu
                .checked("wgpu::Queue::submit", || self.gpu.queue.submit([commands]))?;
        }
        if let Some((tag, first)) = nodes {
            let launch_of = graph.and_then(|g| g.launch_of.clone());
            self.timing
                .replayed(tag, first, steps.len() as u32, launch_of);
        }
        Ok(())
    }
}

#[allow(unsafe_code)] // the trait's `unsafe fn`s (the trust boundary, seam::Backend)
impl Backend for WgpuBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn capture_support(&self) -> CaptureSupport {
        CaptureSupport::Emulated
    }

    /// Never Preserved: WGSL lets an implementation flush subnormals, and
    /// wgpu 30 has no float-controls knob (naga 30's SPIR-V, MSL and HLSL
    /// writers emit no denorm mode and take no option for one), so nothing
    /// here can make the driver keep them (the NVIDIA Vulkan driver does
    /// not: `add` of two subnormals gave 0.0 on wgpu:0 on the H200,
    /// NVIDIA 580.159.04, 2026-12-01).
    fn subnormals(&self) -> seam::Subnormals {
        seam::Subnormals::MayFlush(
            "wgpu has no float-controls knob (naga emits no DenormPreserve) and WGSL allows flushing".into(),
        )
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        // Whole 16-byte quads: gemm reads b as `array<vec4<u32>>`.
        let round = seam_kernels::BUFFER_ROUND.max(ALIGN);
        let size = (bytes as u64).div_ceil(round) * round;
        // Kernels bind whole buffers, so a buffer past one storage binding
        // could never be used: refused here, as the Vulkan backend refuses
        // one past maxStorageBufferRange.
        let limits = &self.gpu.limits;
        let max = limits
            .max_buffer_size
            .min(limits.max_storage_buffer_binding_size);
        if size > max {
            return Err(ErrorKind::TooLarge {
                what: "allocation",
                detail: format!(
                    "{bytes} bytes, the device's largest buffer a kernel can bind is {max} \
                     (max_buffer_size {}, max_storage_buffer_binding_size {})",
                    limits.max_buffer_size, limits.max_storage_buffer_binding_size
                ),
            });
        }
        let buffer = self.gpu.checked("wgpu::Device::create_buffer", || {
            self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        Ok(self.buffers.insert(Buf { buffer }, size))
    }

    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        // Dropping the handle is enough: a pending launch's bind group and any
        // submission still using the buffer keep it alive inside wgpu.
        self.buffers.remove(buffer)?;
        self.bind_groups
            .retain(|(_, ids), _| !ids.contains(&buffer.0));
        Ok(())
    }

    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        if data.is_empty() {
            return Ok(());
        }
        // Submit pending launches first: write_buffer runs before the next submission.
        self.submit(None)?;
        let offset = offset as u64;
        let end = offset + data.len() as u64;
        let start = offset / ALIGN * ALIGN;
        let aligned_end = end.div_ceil(ALIGN) * ALIGN;
        let dst = self.buf(buffer)?.buffer.clone();
        if start == offset && aligned_end == end {
            return self.gpu.checked("wgpu::Queue::write_buffer", || {
                self.gpu.queue.write_buffer(&dst, offset, data)
            });
        }
        // Not word-aligned (16-bit elements): keep the neighbouring half-words.
        let mut words = vec![0u8; (aligned_end - start) as usize];
        let head = self.read_words(buffer, start, ALIGN)?;
        words[..ALIGN as usize].copy_from_slice(&head);
        if aligned_end - ALIGN > start {
            let tail = self.read_words(buffer, aligned_end - ALIGN, ALIGN)?;
            let n = words.len();
            words[n - ALIGN as usize..].copy_from_slice(&tail);
        }
        let at = (offset - start) as usize;
        words[at..at + data.len()].copy_from_slice(data);
        self.gpu.checked("wgpu::Queue::write_buffer", || {
            self.gpu.queue.write_buffer(&dst, start, &words)
        })
    }

    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        if out.is_empty() {
            return Ok(());
        }
        self.submit(None)?;
        let offset = offset as u64;
        let start = offset / ALIGN * ALIGN;
        let end = (offset + out.len() as u64).div_ceil(ALIGN) * ALIGN;
        let words = self.read_words(buffer, start, end - start)?;
        let at = (offset - start) as usize;
        out.copy_from_slice(&words[at..at + out.len()]);
        Ok(())
    }

    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        let d = self.resolve(launch)?;
        if let Some(rec) = &mut self.recording {
            rec.dispatch(d);
            return Ok(());
        }
        self.pending.push(d);
        if self.pending.len() >= EAGER_BATCH {
            self.submit(None)?;
        }
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.submit(None)?;
        self.gpu.wait(None)
    }

    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        for &(op, dtype) in ops {
            self.kernels.pipeline(&self.gpu, op, dtype)?;
        }
        Ok(())
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.recording = Some(bodies::Recording::default());
        self.recording_nodes = self.timing.nodes_on;
        Ok(())
    }

    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        let rec = self.recording.take().ok_or(ErrorKind::NotCapturing)?;
        let graph = self.graph(rec)?;
        // The old exec's handles drop here; replays of it in flight keep what they use (C8).
        self.graphs.set_current(graph);
        Ok(())
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        let rec = self.recording.take().ok_or(ErrorKind::NotCapturing)?;
        let graph = self.graph(rec)?;
        Ok(self.graphs.insert(graph))
    }

    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.submit(Some(target))
    }

    /// Unrolled bodies of indirect dispatches, each copy gated on the
    /// device (`seam_kernels::conditional`).
    fn conditional_support(&self) -> seam::ConditionalSupport {
        seam::ConditionalSupport::Emulated(seam_kernels::conditional::HOW.into())
    }

    unsafe fn begin_conditional(&mut self, c: &seam::Conditional) -> Result<(), ErrorKind> {
        self.begin_body(c)
    }

    fn end_conditional(&mut self) -> Result<(), ErrorKind> {
        self.end_body()
    }

    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        // wgpu-core holds every resource of a submission until it completes,
        // so a replay in flight finishes correctly (C8); nothing to wait for.
        self.graphs.remove(graph).map(drop)
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.recording = None;
        Ok(())
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.len(),
            bytes: self.buffers.bytes(),
        }
    }

    /// Timestamps inside compute passes (`timing.rs`).
    fn device_timing(&self) -> Result<(), String> {
        self.timing_support()
    }

    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        if on {
            self.timing_support()
                .map_err(|reason| ErrorKind::Unavailable { reason })?;
        }
        self.timing.on = on;
        Ok(())
    }

    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.timing.bracket = Some(tag);
        self.mark(tag, true)
    }

    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.timing.bracket = None;
        self.mark(tag, false)
    }

    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.take_spans()
    }

    /// A stamp before a node-timed graph's first dispatch and after each.
    fn node_timing(&self) -> NodeTiming {
        match self.timing_support() {
            Ok(()) => NodeTiming::Native,
            Err(why) => NodeTiming::Unavailable(why),
        }
    }

    fn set_node_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        if on {
            self.timing_support()
                .map_err(|reason| ErrorKind::Unavailable { reason })?;
        }
        self.timing.nodes_on = on;
        Ok(())
    }
}
