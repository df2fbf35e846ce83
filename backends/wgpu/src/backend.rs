//! `WgpuBackend`: the seam over wgpu. The decisions it implements are listed
//! in the crate documentation; docs/wgpu.md explains the emulated graph.

use crate::dispatch;
use crate::gpu::{Gpu, WAIT_LIMIT};
use crate::kernels::Kernels;
use seam::table::{Buffers, Graphs};
use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, ErrorKind, Launch, OpKind, RawBuffer, RawGraph,
    ReplayTarget, ResourceCounts,
};
use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Instant;

/// Eager launches batched before the batch is submitted on its own.
const EAGER_BATCH: usize = 256;

/// Most graph steps per command buffer of a replay. A replay is submitted
/// in pieces, so the GPU runs one piece while the host encodes the next:
/// one command buffer of the whole graph made the GPU wait for all of it
/// to be encoded, which left a 1000-dispatch replay slower than the same
/// launches eager (4672 vs 3503 µs on the H200).
const REPLAY_CHUNK: usize = EAGER_BATCH;
/// The first piece of a replay: small, so the GPU starts after 16
/// dispatches are encoded, not 256 (a decode step of 128 long kernels
/// waited for all 128: ~3 µs of encoding each, 0.4 ms a step on the H200);
/// each later piece is twice the one before, up to [`REPLAY_CHUNK`], so a
/// long graph of short kernels still pays few submissions.
const REPLAY_FIRST: usize = 16;

/// The pieces a replay of `len` steps is submitted in, as ranges in order:
/// [`REPLAY_FIRST`], then doubling to [`REPLAY_CHUNK`], covering `0..len`.
fn replay_pieces(len: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut start = 0;
    let mut size = REPLAY_FIRST;
    std::iter::from_fn(move || {
        if start >= len {
            return None;
        }
        let end = (start + size).min(len);
        let piece = start..end;
        start = end;
        size = (size * 2).min(REPLAY_CHUNK);
        Some(piece)
    })
}
/// Largest staging buffer for reads; bigger reads go in chunks.
const STAGING_MAX: u64 = 64 << 20;
/// Bind groups kept for eager launches before the cache is cleared.
const BIND_GROUP_CACHE_MAX: usize = 4096;
/// wgpu's alignment for buffer copies and `write_buffer` (`COPY_BUFFER_ALIGNMENT`).
const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

struct Buf {
    buffer: wgpu::Buffer,
    /// Bytes, a whole number of words.
    size: u64,
}

/// The immediate block a kernel receives (`Launch::immediates`).
type Immediates = [u8; seam::ops::IMMEDIATE_BYTES];

/// One fully resolved dispatch: everything a replay needs, nothing to look up.
#[derive(Clone)]
struct Dispatch {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    /// `Params` and the views' element offsets, as the kernel receives them.
    immediates: Immediates,
    groups: (u32, u32, u32),
}

/// One dispatch of a captured graph with the pass state it must set, worked
/// out once at capture time (`Graph::new`): what the dispatch before it left
/// bound is not set again, so a replay records less per dispatch than an
/// eager batch does (which sets all three every time).
struct Step {
    dispatch: Dispatch,
    sets: Sets,
}

/// Which pass state a step sets before its dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sets {
    pipeline: bool,
    bind_group: bool,
    immediates: bool,
}

impl Sets {
    const ALL: Sets = Sets {
        pipeline: true,
        bind_group: true,
        immediates: true,
    };

    /// What a dispatch over (`pipeline`, `bind_group`, `immediates`) must set
    /// after one over `prev` in the same pass (`None`: the first of the
    /// graph, after whatever an eager batch left bound). A pipeline change
    /// sets everything again: wgpu resets the immediates when the pipeline
    /// layout changes, and rebinding is what a fresh pipeline expects.
    fn after<P: PartialEq, G: PartialEq, I: PartialEq>(
        prev: Option<(&P, &G, &I)>,
        (pipeline, bind_group, immediates): (&P, &G, &I),
    ) -> Sets {
        match prev {
            Some((p, _, _)) if p != pipeline => Sets::ALL,
            Some((_, g, i)) => Sets {
                pipeline: false,
                bind_group: g != bind_group,
                immediates: i != immediates,
            },
            None => Sets::ALL,
        }
    }
}

/// A captured graph: the current exec or a handle. Replays encode its steps
/// into one pass; nothing is resolved, created or compared at replay time.
struct Graph {
    steps: Vec<Step>,
}

impl Graph {
    fn new(dispatches: Vec<Dispatch>) -> Graph {
        let mut steps: Vec<Step> = Vec::with_capacity(dispatches.len());
        for dispatch in dispatches {
            let sets = Sets::after(
                steps.last().map(|s| {
                    let d = &s.dispatch;
                    (&d.pipeline, &d.bind_group, &d.immediates)
                }),
                (
                    &dispatch.pipeline,
                    &dispatch.bind_group,
                    &dispatch.immediates,
                ),
            );
            steps.push(Step { dispatch, sets });
        }
        Graph { steps }
    }
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
    /// Dispatches recorded since begin_capture.
    recording: Option<Vec<Dispatch>>,
    /// The current graph's dispatches and each handle's.
    graphs: Graphs<Graph>,
    staging: Option<wgpu::Buffer>,
    /// Last: drops after every wgpu object of the device (`gpu.rs`).
    _teardown: crate::gpu::Teardown,
}

impl WgpuBackend {
    /// Open `wgpu:<index>` on `adapter`.
    pub fn open(index: usize, adapter: &wgpu::Adapter) -> Result<WgpuBackend, ErrorKind> {
        let a = adapter.get_info();
        let gpu = Gpu::request(adapter)?;
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
            graphs: Graphs::new(),
            staging: None,
            _teardown: teardown,
        })
    }

    #[cfg(test)]
    pub(crate) fn bind_group_count(&self) -> usize {
        self.bind_groups.len()
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
        let max_binding = self.gpu.limits.max_storage_buffer_binding_size;
        let mut bound = Vec::with_capacity(buffers.len());
        for (i, b) in buffers.iter().enumerate() {
            let buf = self.buf(*b)?;
            if buf.size > max_binding {
                return Err(ErrorKind::TooLarge {
                    what: "storage binding",
                    detail: format!(
                        "{op}: binding {i} is {} bytes, the device binds at most {max_binding}",
                        buf.size
                    ),
                });
            }
            bound.push(buf.buffer.clone());
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
        })
    }

    /// Encode the pending eager batch, then `then` (a graph's dispatches),
    /// into one command buffer and submit it. Nothing to do: no submission.
    fn submit(&mut self, then: Option<ReplayTarget>) -> Result<(), ErrorKind> {
        let graph = match then {
            None => None,
            Some(target) => Some(self.graphs.target(target)?),
        };
        let steps = graph.map_or(&[][..], |g| &g.steps[..]);
        if self.pending.is_empty() && steps.is_empty() {
            return Ok(());
        }
        // The batch leaves `pending` even if encoding fails: its error is
        // reported once. Its allocation is kept for the next batch.
        let mut batch = std::mem::take(&mut self.pending);
        let mut pieces = replay_pieces(steps.len()).map(|r| &steps[r]);
        let first = pieces.next().unwrap_or(&[]);
        let commands = encode(&self.gpu, &batch, first);
        batch.clear();
        self.pending = batch;
        let commands = commands?;
        self.gpu
            .checked("wgpu::Queue::submit", || self.gpu.queue.submit([commands]))?;
        for piece in pieces {
            let commands = encode(&self.gpu, &[], piece)?;
            self.gpu
                .checked("wgpu::Queue::submit", || self.gpu.queue.submit([commands]))?;
        }
        Ok(())
    }

    /// Copy `len` bytes at `start` (both word-aligned) of `src` back to the host.
    fn read_words(&mut self, src: RawBuffer, start: u64, len: u64) -> Result<Vec<u8>, ErrorKind> {
        let source = self.buf(src)?.buffer.clone();
        let mut out = Vec::with_capacity(len as usize);
        let mut done = 0;
        while done < len {
            let chunk = (len - done).min(STAGING_MAX);
            let staging = self.staging_buffer(chunk)?;
            let read = self.read_chunk(&source, start + done, &staging, chunk);
            if read.is_err() {
                // The staging buffer may still be mapped or pending a map: never reuse it.
                self.staging = None;
            }
            out.extend_from_slice(&read?);
            done += chunk;
        }
        Ok(out)
    }

    /// One staged read: copy, submit, map with a bounded wait, copy out, unmap.
    fn read_chunk(
        &self,
        source: &wgpu::Buffer,
        at: u64,
        staging: &wgpu::Buffer,
        chunk: u64,
    ) -> Result<Vec<u8>, ErrorKind> {
        let mut encoder = self
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("seam read"),
            });
        encoder.copy_buffer_to_buffer(source, at, staging, 0, chunk);
        let commands = self
            .gpu
            .checked("wgpu::CommandEncoder::finish", || encoder.finish())?;
        let index = self
            .gpu
            .checked("wgpu::Queue::submit", || self.gpu.queue.submit([commands]))?;
        let (tx, rx) = mpsc::channel();
        let slice = staging.slice(0..chunk);
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.gpu.wait(Some(index))?;
        let deadline = Instant::now() + WAIT_LIMIT;
        let mapped = loop {
            match rx.try_recv() {
                Ok(r) => break r,
                Err(mpsc::TryRecvError::Disconnected) => {
                    return Err(ErrorKind::driver(
                        "wgpu::BufferSlice::map_async",
                        "the map callback was dropped without being called",
                    ))
                }
                Err(mpsc::TryRecvError::Empty) if Instant::now() > deadline => {
                    return Err(ErrorKind::driver(
                        "wgpu::BufferSlice::map_async",
                        format!(
                            "the buffer was not mapped within {} s",
                            WAIT_LIMIT.as_secs()
                        ),
                    ))
                }
                Err(mpsc::TryRecvError::Empty) => {
                    self.gpu
                        .device
                        .poll(wgpu::PollType::Poll)
                        .map_err(|e| ErrorKind::driver("wgpu::Device::poll", e))?;
                    std::thread::yield_now();
                }
            }
        };
        mapped.map_err(|e| ErrorKind::driver("wgpu::BufferSlice::map_async", e))?;
        let bytes = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| ErrorKind::driver("wgpu::BufferSlice::get_mapped_range", e))?;
            view.to_vec()
        };
        staging.unmap();
        Ok(bytes)
    }

    /// A `MAP_READ` staging buffer of at least `len` bytes, reused between reads.
    fn staging_buffer(&mut self, len: u64) -> Result<wgpu::Buffer, ErrorKind> {
        if let Some(s) = &self.staging {
            if s.size() >= len {
                return Ok(s.clone());
            }
        }
        let size = len.next_power_of_two().clamp(4096, STAGING_MAX).max(len);
        let staging = self.gpu.checked("wgpu::Device::create_buffer", || {
            self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("seam staging"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        self.staging = Some(staging.clone());
        Ok(staging)
    }
}

/// Encode the eager `batch`, then `steps` (a graph's, or a piece of them),
/// in order, into one compute pass of one command buffer. wgpu puts a
/// barrier between dependent dispatches. An eager dispatch sets all of its
/// state; a step sets what its `Sets` say, except the first, which sets all
/// (a new pass starts with nothing bound, and what the batch left bound
/// never leaks into the graph). Mutation: the first step of a piece setting
/// only its `Sets` → `c1_ten_thousand_launches_in_one_capture` red on
/// wgpu:0 ("CommandEncoder::finish failed: Validation Error", tried).
fn encode(gpu: &Gpu, batch: &[Dispatch], steps: &[Step]) -> Result<wgpu::CommandBuffer, ErrorKind> {
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("seam"),
        });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes: None,
        });
        for d in batch {
            pass.set_pipeline(&d.pipeline);
            pass.set_bind_group(0, &d.bind_group, &[]);
            pass.set_immediates(0, &d.immediates);
            pass.dispatch_workgroups(d.groups.0, d.groups.1, d.groups.2);
        }
        for (i, s) in steps.iter().enumerate() {
            let d = &s.dispatch;
            let sets = if i == 0 { Sets::ALL } else { s.sets };
            if sets.pipeline {
                pass.set_pipeline(&d.pipeline);
            }
            if sets.bind_group {
                pass.set_bind_group(0, &d.bind_group, &[]);
            }
            if sets.immediates {
                pass.set_immediates(0, &d.immediates);
            }
            pass.dispatch_workgroups(d.groups.0, d.groups.1, d.groups.2);
        }
    }
    gpu.checked("wgpu::CommandEncoder::finish", || encoder.finish())
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
        let max = self.gpu.limits.max_buffer_size;
        if size > max {
            return Err(ErrorKind::TooLarge {
                what: "allocation",
                detail: format!("{bytes} bytes, the device's largest buffer is {max}"),
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
        Ok(self.buffers.insert(Buf { buffer, size }, size))
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
            rec.push(d);
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
        self.recording = Some(Vec::new());
        Ok(())
    }

    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        let dispatches = self.recording.take().ok_or(ErrorKind::NotCapturing)?;
        // The old exec's handles drop here; replays of it in flight keep what they use (C8).
        self.graphs.set_current(Graph::new(dispatches));
        Ok(())
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        let dispatches = self.recording.take().ok_or(ErrorKind::NotCapturing)?;
        Ok(self.graphs.insert(Graph::new(dispatches)))
    }

    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.submit(Some(target))
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
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{replay_pieces, Sets, REPLAY_CHUNK, REPLAY_FIRST};

    /// A replay's pieces cover every step once, in order: 16, 32, 64, 128,
    /// then 256 at most. Mutations: the size not doubled (`size * 2` →
    /// `size`), a piece skipped (`start = end` → `start = end + 1`), the
    /// cap dropped → red.
    pub fn replay_pieces_cover_the_graph_in_order_and_grow() {
        let sizes = |len| -> Vec<usize> { replay_pieces(len).map(|r| r.len()).collect() };
        assert_eq!(sizes(0), Vec::<usize>::new());
        assert_eq!(sizes(10), vec![10]);
        assert_eq!(sizes(128), vec![16, 32, 64, 16]);
        assert_eq!(sizes(1000), vec![16, 32, 64, 128, 256, 256, 248]);
        for len in [1, 15, 16, 17, 255, 256, 257, 4097] {
            let mut next = 0;
            for r in replay_pieces(len) {
                assert_eq!(r.start, next, "len {len}: a gap or an overlap");
                assert!(!r.is_empty() && r.len() <= REPLAY_CHUNK, "len {len}: {r:?}");
                next = r.end;
            }
            assert_eq!(next, len, "len {len}: not covered");
        }
        assert_eq!(replay_pieces(100).next(), Some(0..REPLAY_FIRST));
    }

    /// The state a step sets: everything first and after a pipeline
    /// change, otherwise only the bind group or immediates that differ from
    /// the step before. Mutations: a pipeline change keeping the old bind
    /// group or immediates, `!=` → `==`, the first step setting less → red.
    pub fn replay_steps_set_only_what_changes() {
        let s = |pipeline, bind_group, immediates| Sets {
            pipeline,
            bind_group,
            immediates,
        };
        let after = |prev: Option<(u8, u8, u8)>, next: (u8, u8, u8)| {
            Sets::after(
                prev.as_ref().map(|(p, g, i)| (p, g, i)),
                (&next.0, &next.1, &next.2),
            )
        };
        assert_eq!(after(None, (1, 1, 1)), Sets::ALL);
        assert_eq!(after(Some((1, 1, 1)), (1, 1, 1)), s(false, false, false));
        assert_eq!(after(Some((1, 1, 1)), (1, 2, 1)), s(false, true, false));
        assert_eq!(after(Some((1, 1, 1)), (1, 1, 2)), s(false, false, true));
        assert_eq!(after(Some((1, 1, 1)), (1, 2, 2)), s(false, true, true));
        assert_eq!(after(Some((1, 1, 1)), (2, 1, 1)), Sets::ALL);
        assert_eq!(after(Some((1, 1, 1)), (2, 2, 2)), Sets::ALL);
    }
}
