//! `CudaBackend`: the seam over one CUDA device. One non-blocking stream per
//! backend, the device's primary context, kernels from NVRTC, GEMM through
//! cuBLAS. Capture, replay, destroy and device timing go through
//! seam-streamgraph, the code the HIP backend runs. Safe Rust only: every
//! driver call goes through `sys`.

use crate::compile::{self, Target};
use crate::sys::{
    self, Blas, Context, DeviceMemory, Event, Function, GemmInput, Graph, GraphExec, Stream,
};
use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, DeviceSpan, ErrorKind, Launch, OpKind, RawBuffer,
    RawGraph, ReplayTarget, ResourceCounts,
};
use seam_streamgraph::{EventTimer, GraphDriver, StreamGraphs};
use std::collections::HashMap;
use std::sync::Arc;

/// cuBLAS workspace: NVIDIA's recommended size for Hopper. Set once at
/// prepare so a captured GEMM never allocates (C7).
const CUBLAS_WORKSPACE_BYTES: usize = 32 << 20;

/// Threads per block for elementwise and row kernels (a power of two, as
/// the row kernels' tree reductions need).
const BLOCK: u32 = 256;
/// Grid cap; kernels grid-stride beyond it.
const MAX_BLOCKS: u64 = 1 << 16;
/// The gemm.cu kernel's tile edge.
const GEMM_TILE: u32 = 16;

/// How a GEMM runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmRoute {
    /// cuBLAS `cublasGemmEx`, f32 compute (the default).
    Cublas,
    /// The NVRTC kernel in kernels/cuda/gemm.cu (`SEAM_CUDA_GEMM=kernel`),
    /// the one the HIP backend shares; kept runnable to cross-check it.
    Kernel,
}

impl GemmRoute {
    fn from_env() -> GemmRoute {
        match std::env::var("SEAM_CUDA_GEMM").as_deref() {
            Ok("kernel") => GemmRoute::Kernel,
            _ => GemmRoute::Cublas,
        }
    }
}

/// One CUDA device behind the seam.
///
/// Fields drop in declaration order: graphs and library handles before the
/// memory they use, everything before the stream, the stream before the context.
pub struct CudaBackend {
    info: DeviceInfo,
    target: Target,
    gemm_route: GemmRoute,
    next_id: u64,
    /// Capture state, the current exec and the handles (seam-streamgraph).
    graphs: StreamGraphs<Stream>,
    /// Events around traced work (device timing).
    timer: EventTimer<Stream>,
    blas: Option<Blas>,
    kernels: HashMap<(OpKind, DType), Function>,
    buffers: HashMap<u64, DeviceMemory>,
    stream: Stream,
    /// Shared with every backend on this device; retained for the process.
    context: Arc<Context>,
}

impl CudaBackend {
    pub fn open(index: usize) -> Result<CudaBackend, ErrorKind> {
        let count = sys::device_count()?;
        if index >= count {
            return Err(ErrorKind::Unavailable {
                reason: format!("no CUDA device {index}: {count} found"),
            });
        }
        let context = compile::context(index)?;
        context.make_current()?;
        let stream = Stream::new()?;
        let name = sys::device_name(index)?;
        let cc = sys::compute_capability(index)?;
        let target = Target::for_device(cc)?;
        let info = DeviceInfo {
            backend: "cuda".into(),
            index,
            name,
            driver: driver_string(cc, &target)?,
        };
        Ok(CudaBackend {
            info,
            target,
            gemm_route: GemmRoute::from_env(),
            next_id: 1,
            graphs: StreamGraphs::new(),
            timer: EventTimer::new(),
            blas: None,
            kernels: HashMap::new(),
            buffers: HashMap::new(),
            stream,
            context,
        })
    }

    /// Where this backend's GEMMs go.
    pub fn gemm_route(&self) -> GemmRoute {
        self.gemm_route
    }

    fn uses_cublas(&self, op: OpKind) -> bool {
        op == OpKind::Gemm && self.gemm_route == GemmRoute::Cublas
    }

    /// Load `op`'s module (compiling it once per process) and look up every
    /// entry point it has, one per dtype the op accepts.
    fn load_kernels(&mut self, op: OpKind) -> Result<(), ErrorKind> {
        if op
            .dtypes()
            .iter()
            .all(|d| self.kernels.contains_key(&(op, *d)))
        {
            return Ok(());
        }
        for (dtype, f) in compile::kernels(self.info.index, &self.target, op)? {
            self.kernels.insert((op, dtype), f);
        }
        Ok(())
    }

    fn ensure_blas(&mut self) -> Result<&Blas, ErrorKind> {
        if self.blas.is_none() {
            self.blas = Some(Blas::new(&self.stream, CUBLAS_WORKSPACE_BYTES)?);
        }
        self.blas
            .as_ref()
            .ok_or_else(|| ErrorKind::driver("cublasCreate", "handle missing after creation"))
    }

    fn buffer(&self, raw: RawBuffer) -> Result<&DeviceMemory, ErrorKind> {
        self.buffers
            .get(&raw.0)
            .ok_or(ErrorKind::UnknownBuffer { id: raw.0 })
    }

    fn launch_gemm_cublas(&mut self, l: &Launch) -> Result<(), ErrorKind> {
        if self.blas.is_none() {
            // Creating the handle and workspace allocates: not inside a
            // capture. Fail loudly before touching the stream (C7).
            if self.graphs.is_capturing() {
                return Err(ErrorKind::NotPrepared {
                    op: l.op,
                    dtype: l.dtype,
                });
            }
            self.ensure_blas()?;
        }
        let input = match l.dtype {
            DType::F32 => GemmInput::F32,
            DType::F16 => GemmInput::F16,
            DType::Bf16 => GemmInput::Bf16,
            dtype => return Err(ErrorKind::OpUnsupported { op: l.op, dtype }),
        };
        let [a, b, c] = self.bindings::<3>(l)?;
        let p = &l.params;
        let blas = self
            .blas
            .as_ref()
            .ok_or_else(|| ErrorKind::driver("cublasCreate", "handle missing after creation"))?;
        blas.gemm_row_major(input, (a, b, c), (p.d0, p.d1, p.d2))
    }

    fn bindings<const N: usize>(&self, l: &Launch) -> Result<[&DeviceMemory; N], ErrorKind> {
        let v: Vec<&DeviceMemory> = l
            .buffers
            .iter()
            .map(|b| self.buffer(*b))
            .collect::<Result<_, _>>()?;
        v.try_into().map_err(|v: Vec<_>| ErrorKind::ArityMismatch {
            op: l.op,
            expected: N,
            found: v.len(),
        })
    }

    /// Block the host until the stream is idle, then make every handle's
    /// context current (used before dropping anything work may still use).
    fn quiesce(&self) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        self.stream.synchronize()
    }
}

/// A grid or block shape (x, y, z).
type Dims = (u32, u32, u32);

/// Grid and block for a kernel launch.
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
                    what: "gemm m on the NVRTC kernel path",
                    detail: format!("m = {} needs {gy} row tiles, the grid allows 65535", p.d0),
                });
            }
            ((gx.max(1), gy.max(1), 1), (GEMM_TILE, GEMM_TILE, 1))
        }
        _ => ((blocks(u64::from(p.d0)), 1, 1), (BLOCK, 1, 1)),
    })
}

/// `CUDA 13.0 (NVIDIA 580.95.05), NVRTC 13.0, sm_90`.
fn driver_string(cc: (i32, i32), target: &Target) -> Result<String, ErrorKind> {
    let v = sys::driver_version()?;
    let (rm, rn) = sys::nvrtc_version()?;
    let kernel = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|s| nvidia_kernel_version(&s))
        .map(|k| format!(" (NVIDIA {k})"))
        .unwrap_or_default();
    Ok(format!(
        "CUDA {}.{}{kernel}, NVRTC {rm}.{rn}, compute {}.{} as {}",
        v / 1000,
        (v % 1000) / 10,
        cc.0,
        cc.1,
        target.arch
    ))
}

/// The kernel module's version from `/proc/driver/nvidia/version`
/// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu ...").
pub(crate) fn nvidia_kernel_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_owned)
}

impl Backend for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn capture_support(&self) -> CaptureSupport {
        CaptureSupport::Native
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.context.make_current()?;
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
        self.context.make_current()?;
        self.buffer(buffer)?.write(&self.stream, offset, data)
    }

    fn read(&mut self, buffer: RawBuffer, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        self.buffer(buffer)?.read(&self.stream, offset, out)
    }

    fn launch(&mut self, l: &Launch) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        if self.uses_cublas(l.op) {
            return self.launch_gemm_cublas(l);
        }
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
        self.context.make_current()?;
        for &(op, _) in ops {
            if self.uses_cublas(op) {
                self.ensure_blas()?;
            } else {
                self.load_kernels(op)?;
            }
        }
        Ok(())
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        // Modules are loaded (and compiled, once per process) outside the
        // capture, so recording a kernel never loads or allocates anything.
        for op in OpKind::ALL {
            if !self.uses_cublas(op) {
                self.load_kernels(op)?;
            }
        }
        self.graphs.begin_capture(&self.stream)
    }

    fn end_capture(&mut self) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        // The exec being replaced may still be running: waited for (C8).
        self.graphs.end_capture(&self.stream)
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.context.make_current()?;
        let graph = self.graphs.end_capture_graph(&self.stream, self.next_id)?;
        self.next_id += 1;
        Ok(graph)
    }

    fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        self.graphs.replay(&self.stream, target)
    }

    fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        // A replay of it may still be running: wait, then destroy (C8).
        self.graphs.destroy_graph(&self.stream, graph)
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        self.graphs.abort_capture(&self.stream)
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.live(),
        }
    }

    fn device_timing(&self) -> Result<(), String> {
        sys::events()
    }

    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.timer.set(on);
        Ok(())
    }

    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        self.timer.begin(&self.stream, tag)
    }

    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        self.timer.end(&self.stream, tag)
    }

    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.context.make_current()?;
        self.timer.take(&self.stream)
    }
}

/// The driver calls the shared capture logic makes; the HIP backend's list
/// is the same, call for call, with HIP's names.
impl GraphDriver for Stream {
    type Graph = Graph;
    type Exec = GraphExec;
    type Event = Event;

    fn api(&self) -> &'static str {
        "cu"
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

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Handles are released with the context current and the stream idle:
        // an open capture is aborted, every exec goes before its graph, then
        // the events; the fields then drop in declaration order.
        let _ = self.context.make_current();
        self.graphs.release_all(&self.stream);
        self.timer.release_all(&self.stream);
        let _ = self.quiesce();
    }
}
