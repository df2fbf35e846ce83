//! `HipBackend`: the seam over one HIP device. One non-blocking stream per
//! backend, kernels from hipRTC, GEMM by the gemm.cu kernel (Debian's ROCm
//! has no hipBLAS). Capture, replay, destroy and device timing go through
//! seam-streamgraph, the code the CUDA backend runs. Safe Rust only.

use crate::compile;
use crate::profile;
use crate::sys::{self, DeviceMemory, Event, Function, Graph, GraphExec, Stream};
use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, DeviceSpan, ErrorKind, Launch, OpKind, RawBuffer,
    RawGraph, ReplayTarget, ResourceCounts,
};
use seam_streamgraph::{EventTimer, GraphDriver, StreamGraphs};
use std::collections::HashMap;

/// Threads per block for elementwise and row kernels (a power of two, as
/// the row kernels' tree reductions need); the same as the CUDA backend.
const BLOCK: u32 = 256;
/// Grid cap; kernels grid-stride beyond it.
const MAX_BLOCKS: u64 = 1 << 16;
/// The gemm.cu kernel's tile edge.
const GEMM_TILE: u32 = 16;

/// One HIP device behind the seam.
///
/// Fields drop in declaration order: graphs and events (released explicitly
/// in `Drop`) and memory before the stream.
pub struct HipBackend {
    info: DeviceInfo,
    arch: String,
    next_id: u64,
    graphs: StreamGraphs<Stream>,
    timer: EventTimer<Stream>,
    kernels: HashMap<(OpKind, DType), Function>,
    buffers: HashMap<u64, DeviceMemory>,
    stream: Stream,
}

impl HipBackend {
    pub fn open(index: usize) -> Result<HipBackend, ErrorKind> {
        let count = crate::device_count().map_err(|reason| ErrorKind::Unavailable { reason })?;
        if index >= count {
            return Err(ErrorKind::Unavailable {
                reason: format!("no HIP device {index}: {count} found"),
            });
        }
        sys::set_device(index)?;
        let (name, props_arch) = sys::device_name_and_arch(index)?;
        let arch = std::env::var("SEAM_HIP_ARCH").unwrap_or(props_arch);
        if !arch.starts_with("gfx") {
            return Err(ErrorKind::Unavailable {
                reason: format!(
                    "hip:{index}: the runtime reported architecture {arch:?}; set SEAM_HIP_ARCH=gfx…"
                ),
            });
        }
        let stream = Stream::new()?;
        let info = DeviceInfo {
            backend: "hip".into(),
            index,
            name,
            driver: driver_string(&arch)?,
        };
        Ok(HipBackend {
            info,
            arch,
            next_id: 1,
            graphs: StreamGraphs::new(),
            timer: EventTimer::new(),
            kernels: HashMap::new(),
            buffers: HashMap::new(),
            stream,
        })
    }

    fn select(&self) -> Result<(), ErrorKind> {
        sys::set_device(self.info.index)
    }

    fn load_kernels(&mut self, op: OpKind) -> Result<(), ErrorKind> {
        if op
            .dtypes()
            .iter()
            .all(|d| self.kernels.contains_key(&(op, *d)))
        {
            return Ok(());
        }
        for (dtype, f) in compile::kernels(self.info.index, &self.arch, op)? {
            self.kernels.insert((op, dtype), f);
        }
        Ok(())
    }

    fn buffer(&self, raw: RawBuffer) -> Result<&DeviceMemory, ErrorKind> {
        self.buffers
            .get(&raw.0)
            .ok_or(ErrorKind::UnknownBuffer { id: raw.0 })
    }

    fn quiesce(&self) -> Result<(), ErrorKind> {
        self.select()?;
        self.stream.synchronize()
    }
}

/// A grid or block shape (x, y, z).
type Dims = (u32, u32, u32);

/// Grid and block for a kernel launch (as the CUDA backend's kernel path).
fn launch_config(l: &Launch) -> Result<(Dims, Dims), ErrorKind> {
    let p = &l.params;
    let blocks = |items: u64| items.div_ceil(BLOCK as u64).clamp(1, MAX_BLOCKS) as u32;
    Ok(match l.op {
        OpKind::RmsNorm | OpKind::Softmax => (
            (u64::from(p.d0).clamp(1, MAX_BLOCKS) as u32, 1, 1),
            (BLOCK, 1, 1),
        ),
        OpKind::Gemm => {
            let gx = p.d1.div_ceil(GEMM_TILE);
            let gy = p.d0.div_ceil(GEMM_TILE);
            if gy > 65_535 {
                return Err(ErrorKind::TooLarge {
                    what: "gemm m on the hipRTC kernel path",
                    detail: format!("m = {} needs {gy} row tiles, the grid allows 65535", p.d0),
                });
            }
            ((gx.max(1), gy.max(1), 1), (GEMM_TILE, GEMM_TILE, 1))
        }
        _ => ((blocks(u64::from(p.d0)), 1, 1), (BLOCK, 1, 1)),
    })
}

/// `ROCm runtime 5.2.21153 (driver 50221153), hipRTC 5.2, gfx90a`.
fn driver_string(arch: &str) -> Result<String, ErrorKind> {
    let raw = sys::runtime_version()?;
    let (version, build) = profile::decode_runtime_version(raw);
    let driver = sys::driver_version()?;
    let (rm, rn) = sys::hiprtc_version()?;
    let mut s =
        format!("ROCm runtime {version}.{build} (driver {driver}), hipRTC {rm}.{rn}, {arch}");
    if profile::requested() {
        s.push_str(", ");
        s.push_str(&profile::describe(crate::rocm_release(version)));
    }
    Ok(s)
}

impl Backend for HipBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn capture_support(&self) -> CaptureSupport {
        CaptureSupport::Native
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.select()?;
        let mem = DeviceMemory::alloc(bytes)?;
        let id = self.next_id;
        self.next_id += 1;
        self.buffers.insert(id, mem);
        Ok(RawBuffer(id))
    }

    fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        self.buffer(buffer)?;
        // Queued eager work may still read or write it.
        self.quiesce()?;
        self.buffers.remove(&buffer.0);
        Ok(())
    }

    fn write(&mut self, buffer: RawBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        self.select()?;
        self.buffer(buffer)?.write(&self.stream, offset, data)
    }

    fn read(&mut self, buffer: RawBuffer, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.select()?;
        self.buffer(buffer)?.read(&self.stream, offset, out)
    }

    fn launch(&mut self, l: &Launch) -> Result<(), ErrorKind> {
        self.select()?;
        if !self.kernels.contains_key(&(l.op, l.dtype)) {
            // begin_capture loads every module, so this is eager-only in practice.
            self.load_kernels(l.op)?;
        }
        let f = self
            .kernels
            .get(&(l.op, l.dtype))
            .ok_or(ErrorKind::OpUnsupported {
                op: l.op,
                dtype: l.dtype,
            })?;
        let buffers: Vec<&DeviceMemory> = l
            .buffers
            .iter()
            .map(|b| self.buffer(*b))
            .collect::<Result<_, _>>()?;
        let (grid, block) = launch_config(l)?;
        sys::launch(f, grid, block, &self.stream, &buffers, &l.params)
    }

    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.quiesce()
    }

    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        self.select()?;
        // Every op, GEMM included, is a hipRTC kernel: preparing is loading
        // its module (no vendor handle or workspace to create, C7).
        for &(op, _) in ops {
            self.load_kernels(op)?;
        }
        Ok(())
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.select()?;
        // Modules are compiled and loaded outside the capture: hipModuleLoad
        // allocates, which a capturing stream must not see.
        for op in OpKind::ALL {
            self.load_kernels(op)?;
        }
        self.graphs.begin_capture(&self.stream)
    }

    fn end_capture(&mut self) -> Result<(), ErrorKind> {
        self.select()?;
        self.graphs.end_capture(&self.stream)
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.select()?;
        let g = self.graphs.end_capture_graph(&self.stream, self.next_id)?;
        self.next_id += 1;
        Ok(g)
    }

    fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.select()?;
        self.graphs.replay(&self.stream, target)
    }

    fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.select()?;
        self.graphs.destroy_graph(&self.stream, graph)
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.select()?;
        self.graphs.abort_capture(&self.stream)
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.live(),
        }
    }

    fn device_timing(&self) -> Result<(), String> {
        Ok(())
    }

    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.timer.set(on);
        Ok(())
    }

    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.select()?;
        self.timer.begin(&self.stream, tag)
    }

    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.select()?;
        self.timer.end(&self.stream, tag)
    }

    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.select()?;
        self.timer.take(&self.stream)
    }
}

/// The HIP calls the shared capture logic makes: the CUDA backend's list,
/// call for call, with HIP's names.
impl GraphDriver for Stream {
    type Graph = Graph;
    type Exec = GraphExec;
    type Event = Event;

    fn api(&self) -> &'static str {
        "hip"
    }
    fn begin_capture(&self) -> Result<(), ErrorKind> {
        Stream::begin_capture(self)
    }
    fn end_capture(&self) -> Result<Graph, ErrorKind> {
        Stream::end_capture(self)
    }
    fn is_capturing(&self) -> Result<bool, ErrorKind> {
        Stream::is_capturing(self)
    }
    fn instantiate(&self, graph: &Graph) -> Result<GraphExec, ErrorKind> {
        graph.instantiate()
    }
    fn upload(&self, exec: &GraphExec) -> Result<(), ErrorKind> {
        exec.upload(self)
    }
    fn launch(&self, exec: &GraphExec) -> Result<(), ErrorKind> {
        exec.launch(self)
    }
    fn synchronize(&self) -> Result<(), ErrorKind> {
        Stream::synchronize(self)
    }
    fn destroy_exec(&self, exec: GraphExec) {
        drop(exec);
    }
    fn destroy_graph(&self, graph: Graph) {
        drop(graph);
    }
    fn create_event(&self) -> Result<Event, ErrorKind> {
        Event::new()
    }
    fn record_event(&self, event: &Event) -> Result<(), ErrorKind> {
        event.record(self)
    }
    fn wait_event(&self, event: &Event) -> Result<(), ErrorKind> {
        event.synchronize()
    }
    fn elapsed_ms(&self, start: &Event, end: &Event) -> Result<f32, ErrorKind> {
        start.elapsed_ms(end)
    }
    fn destroy_event(&self, event: Event) {
        drop(event);
    }
}

impl Drop for HipBackend {
    fn drop(&mut self) {
        // Release with the device selected and the stream idle: an open
        // capture is aborted, every exec goes before its graph, then events;
        // the remaining fields drop in declaration order.
        let _ = self.select();
        self.graphs.release_all(&self.stream);
        self.timer.release_all(&self.stream);
        let _ = self.stream.synchronize();
    }
}
