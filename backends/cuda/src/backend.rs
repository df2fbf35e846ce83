//! `CudaBackend`: the seam over one CUDA device. One non-blocking stream per
//! backend, the device's primary context, kernels from NVRTC, GEMM through
//! cuBLAS. Safe Rust only: every driver call goes through `sys`.

use crate::compile::{self, Target};
use crate::sys::{self, Blas, Context, DeviceMemory, Function, GemmInput, GraphExec, Stream};
use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, ErrorKind, Launch, OpKind, RawBuffer, RawGraph,
    ReplayTarget, ResourceCounts,
};
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
    capturing: bool,
    next_id: u64,
    graphs: HashMap<u64, GraphExec>,
    /// The exec `end_capture` made; never one of `graphs` (C3).
    current: Option<GraphExec>,
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
            capturing: false,
            next_id: 1,
            graphs: HashMap::new(),
            current: None,
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
            if self.capturing {
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
        self.stream.begin_capture()?;
        self.capturing = true;
        Ok(())
    }

    fn end_capture(&mut self) -> Result<(), ErrorKind> {
        let exec = self.end_and_instantiate()?;
        if self.current.is_some() {
            // The exec being replaced may still be running (C8).
            self.stream.synchronize()?;
        }
        self.current = Some(exec);
        Ok(())
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        let exec = self.end_and_instantiate()?;
        let id = self.next_id;
        self.next_id += 1;
        self.graphs.insert(id, exec);
        Ok(RawGraph(id))
    }

    fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        let exec = match target {
            ReplayTarget::Current => self.current.as_ref().ok_or(ErrorKind::NoCurrentExec)?,
            ReplayTarget::Graph(g) => self
                .graphs
                .get(&g.0)
                .ok_or(ErrorKind::UnknownGraph { id: g.0 })?,
        };
        exec.launch(&self.stream)
    }

    fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        if !self.graphs.contains_key(&graph.0) {
            return Err(ErrorKind::UnknownGraph { id: graph.0 });
        }
        // A replay of it may still be running: wait, then destroy (C8).
        let waited = self.quiesce();
        self.graphs.remove(&graph.0);
        waited
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.context.make_current()?;
        self.capturing = false;
        // Ending the capture takes the stream out of capture mode whatever it
        // reports (an invalidated capture is an error here, and fine).
        drop(self.stream.end_capture());
        if self.stream.is_capturing()? {
            return Err(ErrorKind::driver(
                "cuStreamEndCapture",
                "the stream is still capturing after ending the capture",
            ));
        }
        Ok(())
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.len() + usize::from(self.current.is_some()),
        }
    }
}

impl CudaBackend {
    /// End the capture and make an uploaded exec of it. The stream is out of
    /// capture mode afterwards whatever happens.
    fn end_and_instantiate(&mut self) -> Result<GraphExec, ErrorKind> {
        self.context.make_current()?;
        self.capturing = false;
        let graph = self.stream.end_capture()?;
        let exec = graph.instantiate()?;
        drop(graph);
        exec.upload(&self.stream)?;
        Ok(exec)
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Handles are released with the context current and the stream idle;
        // the fields then drop in declaration order.
        if self.capturing {
            let _ = self.abort_capture();
        }
        let _ = self.quiesce();
    }
}
