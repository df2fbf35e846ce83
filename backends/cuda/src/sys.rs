//! The only `unsafe` in the CUDA backend: thin, checked wrappers over
//! cudarc's raw bindings (driver API, NVRTC, cuBLAS). Every call returns a
//! `Result` whose error names the driver call; every handle is an owning type
//! whose `Drop` releases it. Everything above this module is safe Rust.
//!
//! cudarc (`dynamic-loading`) opens libcuda / libnvrtc / libcublas on first
//! use and *panics* when a library or symbol is missing, so nothing here
//! calls into a library before [`driver`], [`nvrtc`] or [`cublas`] has
//! checked that it and every symbol this backend uses are present.
//!
//! Handles are only valid with their context current on the calling thread;
//! the backend makes its context current at the top of every seam call and
//! before dropping handles.

use cudarc::cublas::sys as blas;
use cudarc::driver::sys as cu;
use cudarc::nvrtc::sys as rtc;
use seam::{ErrorKind, Params};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::{Arc, OnceLock};

/// Driver entry points this backend calls (cudarc's symbol names).
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuLaunchKernel",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuStreamIsCapturing",
    "cuGraphInstantiateWithFlags",
    "cuGraphUpload",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
    "cuGetErrorString",
];

/// Event entry points device timing uses (issue 8). Probed apart from
/// [`DRIVER_SYMBOLS`]: `cuEventElapsedTime_v2` needs a CUDA 12.8 driver,
/// and a driver without it should still run everything but timing.
const EVENT_SYMBOLS: &[&str] = &[
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventElapsedTime_v2",
    "cuEventDestroy_v2",
];

const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcGetNumSupportedArchs",
    "nvrtcGetSupportedArchs",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcDestroyProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
];

const CUBLAS_SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSetWorkspace_v2",
    "cublasSetMathMode",
    "cublasGemmEx",
];

/// Whether a cudarc-loaded library is present and has every symbol we use.
/// `Err(None)`: the library is absent; `Err(Some(names))`: symbols missing.
macro_rules! probe_library {
    ($sys:ident, $symbols:expr) => {{
        // SAFETY: opening the library runs its initialisers, which is exactly
        // what using it later does; nothing else is called.
        if !unsafe { $sys::is_culib_present() } {
            Err(None)
        } else {
            // SAFETY: is_culib_present just opened one of the same candidate
            // names, so culib() finds a library instead of panicking.
            let lib = unsafe { $sys::culib() };
            let missing: Vec<&str> = $symbols
                .iter()
                .copied()
                // SAFETY: only looks the symbol up; the function type is a
                // placeholder and the pointer is never called through it.
                .filter(|name| {
                    unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err()
                })
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(Some(missing.join(", ")))
            }
        }
    }};
}

/// The CUDA driver is loaded, complete, and `cuInit` succeeded. The error is
/// the text discovery shows: what failed and what to install.
pub fn driver() -> Result<(), String> {
    static DRIVER: OnceLock<Result<(), String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            match probe_library!(cu, DRIVER_SYMBOLS) {
                Ok(()) => {}
                Err(None) => {
                    return Err("no CUDA driver: libcuda.so could not be loaded; install the NVIDIA driver \
                         (and make libcuda.so.1 visible to the dynamic loader)"
                        .into())
                }
                Err(Some(missing)) => {
                    return Err(format!(
                        "CUDA driver too old: libcuda lacks {missing}; install an NVIDIA driver for CUDA 12.4 or newer"
                    ))
                }
            }
            // SAFETY: the library and the symbol are present (checked above); cuInit takes no pointers.
            let r = unsafe { cu::cuInit(0) };
            check("cuInit", r).map_err(|e| {
                format!("CUDA driver found but cuInit failed ({e}); check the NVIDIA driver installation")
            })
        })
        .clone()
}

/// The driver has every event entry point device timing uses.
pub fn events() -> Result<(), String> {
    static EVENTS: OnceLock<Result<(), String>> = OnceLock::new();
    EVENTS
        .get_or_init(|| {
            driver()?;
            match probe_library!(cu, EVENT_SYMBOLS) {
                Ok(()) => Ok(()),
                Err(None) => Err("no CUDA driver: libcuda.so could not be loaded".into()),
                Err(Some(missing)) => Err(format!(
                    "no device timing: libcuda lacks {missing}; install an NVIDIA driver for CUDA 12.8 or newer"
                )),
            }
        })
        .clone()
}

/// NVRTC is loaded and complete.
pub fn nvrtc() -> Result<(), String> {
    static NVRTC: OnceLock<Result<(), String>> = OnceLock::new();
    NVRTC
        .get_or_init(|| match probe_library!(rtc, NVRTC_SYMBOLS) {
            Ok(()) => Ok(()),
            Err(None) => Err("no NVRTC: libnvrtc.so could not be loaded; install the CUDA toolkit's NVRTC \
                 (cuda-nvrtc) and put its lib directory (e.g. /usr/local/cuda/lib64) on the loader path"
                .into()),
            Err(Some(missing)) => Err(format!("NVRTC too old: libnvrtc lacks {missing}")),
        })
        .clone()
}

/// cuBLAS is loaded and complete.
pub fn cublas() -> Result<(), String> {
    static CUBLAS: OnceLock<Result<(), String>> = OnceLock::new();
    CUBLAS
        .get_or_init(|| match probe_library!(blas, CUBLAS_SYMBOLS) {
            Ok(()) => Ok(()),
            Err(None) => Err("no cuBLAS: libcublas.so could not be loaded; install the CUDA toolkit's cuBLAS \
                 (libcublas) and put its lib directory (e.g. /usr/local/cuda/lib64) on the loader path"
                .into()),
            Err(Some(missing)) => Err(format!("cuBLAS too old: libcublas lacks {missing}")),
        })
        .clone()
}

fn describe(r: cu::CUresult) -> String {
    let mut text: *const c_char = ptr::null();
    // SAFETY: cuGetErrorString only writes a pointer to a static string (or
    // fails for an unknown code, leaving `text` null).
    let ok = unsafe { cu::cuGetErrorString(r, &mut text) } == cu::CUresult::CUDA_SUCCESS;
    if ok && !text.is_null() {
        // SAFETY: the driver returned a NUL-terminated static string.
        let s = unsafe { CStr::from_ptr(text) };
        format!("{r:?}: {}", s.to_string_lossy())
    } else {
        format!("{r:?}")
    }
}

fn check(call: &'static str, r: cu::CUresult) -> Result<(), ErrorKind> {
    if r == cu::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(ErrorKind::driver(call, describe(r)))
    }
}

fn check_blas(call: &'static str, s: blas::cublasStatus_t) -> Result<(), ErrorKind> {
    if s == blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(ErrorKind::driver(call, format!("{s:?}")))
    }
}

fn check_rtc(call: &'static str, r: rtc::nvrtcResult) -> Result<(), ErrorKind> {
    if r == rtc::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(ErrorKind::driver(call, format!("{r:?}")))
    }
}

fn ready() -> Result<(), ErrorKind> {
    driver().map_err(|reason| ErrorKind::Unavailable { reason })
}

// ----- devices -----

/// Number of CUDA devices.
pub fn device_count() -> Result<usize, ErrorKind> {
    ready()?;
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    check("cuDeviceGetCount", unsafe { cu::cuDeviceGetCount(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// The driver's CUDA version, e.g. 13000 for 13.0.
pub fn driver_version() -> Result<i32, ErrorKind> {
    ready()?;
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check("cuDriverGetVersion", unsafe {
        cu::cuDriverGetVersion(&mut v)
    })?;
    Ok(v)
}

fn device_handle(ordinal: usize) -> Result<cu::CUdevice, ErrorKind> {
    ready()?;
    let ordinal = c_int::try_from(ordinal)
        .map_err(|_| ErrorKind::driver("cuDeviceGet", format!("ordinal {ordinal} out of range")))?;
    let mut dev: cu::CUdevice = 0;
    // SAFETY: writes one device handle; an invalid ordinal is reported as an error.
    check("cuDeviceGet", unsafe { cu::cuDeviceGet(&mut dev, ordinal) })?;
    Ok(dev)
}

/// The device's name as the driver reports it.
pub fn device_name(ordinal: usize) -> Result<String, ErrorKind> {
    let dev = device_handle(ordinal)?;
    let mut buf = [0 as c_char; 257];
    // SAFETY: the driver writes at most 256 bytes, so the last byte stays NUL.
    check("cuDeviceGetName", unsafe {
        cu::cuDeviceGetName(buf.as_mut_ptr(), 256, dev)
    })?;
    // SAFETY: buf is NUL-terminated (its last byte is never written).
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// Compute capability (major, minor).
pub fn compute_capability(ordinal: usize) -> Result<(i32, i32), ErrorKind> {
    let dev = device_handle(ordinal)?;
    let attr = |a: cu::CUdevice_attribute| -> Result<i32, ErrorKind> {
        let mut v: c_int = 0;
        // SAFETY: writes one int for a valid device and attribute.
        check("cuDeviceGetAttribute", unsafe {
            cu::cuDeviceGetAttribute(&mut v, a, dev)
        })?;
        Ok(v)
    };
    Ok((
        attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    ))
}

// ----- context -----

/// A retained primary context (shared with every other user of the device in
/// the process, the CUDA runtime and cuBLAS included).
pub struct Context {
    dev: cu::CUdevice,
    ctx: cu::CUcontext,
}

// SAFETY: a CUcontext is a process-wide handle that may be made current on
// any thread, by several threads at once.
unsafe impl Send for Context {}
// SAFETY: as above; `make_current` only reads the handle.
unsafe impl Sync for Context {}

impl Context {
    pub fn retain_primary(ordinal: usize) -> Result<Self, ErrorKind> {
        let dev = device_handle(ordinal)?;
        let mut ctx: cu::CUcontext = ptr::null_mut();
        // SAFETY: writes one context handle for a valid device.
        check("cuDevicePrimaryCtxRetain", unsafe {
            cu::cuDevicePrimaryCtxRetain(&mut ctx, dev)
        })?;
        Ok(Context { dev, ctx })
    }

    /// Bind the context to the calling thread.
    pub fn make_current(&self) -> Result<(), ErrorKind> {
        // SAFETY: the context is retained for as long as self lives.
        check("cuCtxSetCurrent", unsafe { cu::cuCtxSetCurrent(self.ctx) })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: releases the reference retained in retain_primary, once.
        let _ = unsafe { cu::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

// ----- stream -----

/// A non-blocking stream: no implicit synchronisation with the legacy
/// default stream, so other threads' work cannot join our captures.
pub struct Stream(cu::CUstream);

// SAFETY: stream handles are usable from any thread with the context current.
unsafe impl Send for Stream {}

impl Stream {
    pub fn new() -> Result<Self, ErrorKind> {
        let mut s: cu::CUstream = ptr::null_mut();
        // SAFETY: writes one stream handle in the current context.
        check("cuStreamCreate", unsafe {
            cu::cuStreamCreate(&mut s, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Stream(s))
    }

    pub fn synchronize(&self) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live.
        check("cuStreamSynchronize", unsafe {
            cu::cuStreamSynchronize(self.0)
        })
    }

    /// Start stream capture in thread-local mode: only the capturing thread
    /// is barred from unsafe calls, so other devices' threads keep working.
    pub fn begin_capture(&self) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live and not capturing (core's state machine).
        check("cuStreamBeginCapture", unsafe {
            cu::cuStreamBeginCapture_v2(
                self.0,
                cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        })
    }

    /// End capture. The stream leaves capture mode whatever the result; an
    /// invalidated capture is an error and yields no graph.
    pub fn end_capture(&self) -> Result<Graph, ErrorKind> {
        let mut g: cu::CUgraph = ptr::null_mut();
        // SAFETY: writes one graph handle (null if the capture was invalidated).
        let r = unsafe { cu::cuStreamEndCapture(self.0, &mut g) };
        let graph = (!g.is_null()).then_some(Graph(g));
        check("cuStreamEndCapture", r)?;
        graph.ok_or_else(|| ErrorKind::driver("cuStreamEndCapture", "no graph was returned"))
    }

    pub fn is_capturing(&self) -> Result<bool, ErrorKind> {
        let mut status = cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: writes one status value for a live stream.
        check("cuStreamIsCapturing", unsafe {
            cu::cuStreamIsCapturing(self.0, &mut status)
        })?;
        Ok(status != cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: destroys the stream created in new, once; queued work still completes.
        let _ = unsafe { cu::cuStreamDestroy_v2(self.0) };
    }
}

// ----- memory -----

/// One `cuMemAlloc` allocation (not stream-ordered: C5 is core's to enforce).
pub struct DeviceMemory {
    ptr: cu::CUdeviceptr,
    bytes: usize,
}

// SAFETY: a device pointer is a plain address valid in its context from any thread.
unsafe impl Send for DeviceMemory {}

impl DeviceMemory {
    pub fn alloc(bytes: usize) -> Result<Self, ErrorKind> {
        let mut ptr: cu::CUdeviceptr = 0;
        // SAFETY: writes one device pointer in the current context.
        check("cuMemAlloc", unsafe { cu::cuMemAlloc_v2(&mut ptr, bytes) })?;
        Ok(DeviceMemory { ptr, bytes })
    }

    fn range(&self, call: &'static str, offset: usize, len: usize) -> Result<(), ErrorKind> {
        match offset.checked_add(len) {
            Some(end) if end <= self.bytes => Ok(()),
            _ => Err(ErrorKind::driver(
                call,
                format!(
                    "{len} bytes at offset {offset} exceed the allocation's {}",
                    self.bytes
                ),
            )),
        }
    }

    /// Copy `data` in after all work queued on `stream`, and wait, so the
    /// host slice may be reused when this returns.
    pub fn write(&self, stream: &Stream, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        self.range("cuMemcpyHtoDAsync", offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: destination range checked against this live allocation; the
        // source slice outlives the copy because we synchronise before returning.
        check("cuMemcpyHtoDAsync", unsafe {
            cu::cuMemcpyHtoDAsync_v2(
                self.ptr + offset as u64,
                data.as_ptr() as *const c_void,
                data.len(),
                stream.0,
            )
        })?;
        stream.synchronize()
    }

    /// Copy out after all work queued on `stream`, and wait.
    pub fn read(&self, stream: &Stream, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.range("cuMemcpyDtoHAsync", offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: source range checked against this live allocation; the
        // destination slice is borrowed mutably until we synchronise below.
        check("cuMemcpyDtoHAsync", unsafe {
            cu::cuMemcpyDtoHAsync_v2(
                out.as_mut_ptr() as *mut c_void,
                self.ptr + offset as u64,
                out.len(),
                stream.0,
            )
        })?;
        stream.synchronize()
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: frees the allocation made in alloc, once. The backend
        // synchronises its stream before dropping memory work may still use.
        let _ = unsafe { cu::cuMemFree_v2(self.ptr) };
    }
}

// ----- modules and launches -----

struct ModuleHandle(cu::CUmodule);

// SAFETY: a module handle is never mutated after loading (only unloaded on
// drop, when no other reference exists) and is valid from any thread with
// the context current.
unsafe impl Send for ModuleHandle {}
// SAFETY: as above: shared references only read the handle.
unsafe impl Sync for ModuleHandle {}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        // SAFETY: unloads the module loaded in Module::load, once, after every
        // Function (which holds an Arc to it) is gone.
        let _ = unsafe { cu::cuModuleUnload(self.0) };
    }
}

/// A loaded module (cubin or PTX image).
pub struct Module(Arc<ModuleHandle>);

impl Module {
    /// `image` is a cubin, or PTX text ending in NUL (as NVRTC returns it).
    pub fn load(image: &[u8]) -> Result<Self, ErrorKind> {
        if image.is_empty() {
            return Err(ErrorKind::driver("cuModuleLoadData", "empty image"));
        }
        let mut m: cu::CUmodule = ptr::null_mut();
        // SAFETY: the image is a complete cubin or NUL-terminated PTX from
        // NVRTC; the driver copies what it needs before returning.
        check("cuModuleLoadData", unsafe {
            cu::cuModuleLoadData(&mut m, image.as_ptr() as *const c_void)
        })?;
        Ok(Module(Arc::new(ModuleHandle(m))))
    }

    pub fn function(&self, name: &str) -> Result<Function, ErrorKind> {
        let cname = CString::new(name)
            .map_err(|_| ErrorKind::driver("cuModuleGetFunction", "name contains NUL"))?;
        let mut f: cu::CUfunction = ptr::null_mut();
        // SAFETY: the module is live; writes one function handle.
        check("cuModuleGetFunction", unsafe {
            cu::cuModuleGetFunction(&mut f, self.0 .0, cname.as_ptr())
        })
        .map_err(|e| match e {
            ErrorKind::Driver { message, .. } => {
                ErrorKind::driver("cuModuleGetFunction", format!("{name}: {message}"))
            }
            other => other,
        })?;
        Ok(Function {
            _module: self.0.clone(),
            f,
        })
    }
}

/// A kernel; keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    _module: Arc<ModuleHandle>,
    f: cu::CUfunction,
}

// SAFETY: function handles are usable from any thread with the context current.
unsafe impl Send for Function {}

/// Queue `f(buffers..., params)` on `stream` (or record it, while capturing).
///
/// Every seam kernel takes its buffers as pointers in signature order and
/// then `seam::Params` by value (kernels/cuda/README.md); core has checked
/// every buffer holds what the op indexes (C12).
pub fn launch(
    f: &Function,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    stream: &Stream,
    buffers: &[&DeviceMemory],
    params: &Params,
) -> Result<(), ErrorKind> {
    let mut ptrs: Vec<cu::CUdeviceptr> = buffers.iter().map(|b| b.ptr).collect();
    let mut args: Vec<*mut c_void> = ptrs
        .iter_mut()
        .map(|p| p as *mut cu::CUdeviceptr as *mut c_void)
        .collect();
    let mut params = *params;
    args.push(&mut params as *mut Params as *mut c_void);
    // SAFETY: `args` holds one pointer per kernel parameter, each to a live
    // local of the parameter's exact type and layout (device pointers, then the
    // 32-byte repr(C) Params); the driver copies them before returning. The
    // buffers are live allocations of this context, large enough per core's
    // validation.
    check("cuLaunchKernel", unsafe {
        cu::cuLaunchKernel(
            f.f,
            grid.0,
            grid.1,
            grid.2,
            block.0,
            block.1,
            block.2,
            0,
            stream.0,
            args.as_mut_ptr(),
            ptr::null_mut(),
        )
    })
}

// ----- graphs -----

/// A captured graph (topology only; replay needs an instantiated [`GraphExec`]).
pub struct Graph(cu::CUgraph);

// SAFETY: graph handles are usable from any thread with the context current.
unsafe impl Send for Graph {}

impl Graph {
    pub fn instantiate(&self) -> Result<GraphExec, ErrorKind> {
        let mut e: cu::CUgraphExec = ptr::null_mut();
        // SAFETY: the graph is live; writes one exec handle.
        check("cuGraphInstantiate", unsafe {
            cu::cuGraphInstantiateWithFlags(&mut e, self.0, 0)
        })?;
        Ok(GraphExec(e))
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: destroys the graph returned by end_capture, once; an exec
        // instantiated from it is independent of it (the shared logic still
        // destroys the exec first, as HIP wants).
        let _ = unsafe { cu::cuGraphDestroy(self.0) };
    }
}

/// An executable graph.
pub struct GraphExec(cu::CUgraphExec);

// SAFETY: exec handles are usable from any thread with the context current.
unsafe impl Send for GraphExec {}

impl GraphExec {
    /// Upload the exec's work to the device ahead of its first launch.
    pub fn upload(&self, stream: &Stream) -> Result<(), ErrorKind> {
        // SAFETY: exec and stream are live.
        check("cuGraphUpload", unsafe {
            cu::cuGraphUpload(self.0, stream.0)
        })
    }

    pub fn launch(&self, stream: &Stream) -> Result<(), ErrorKind> {
        // SAFETY: exec and stream are live; the buffers the graph reads are
        // kept alive by core while the graph lives.
        check("cuGraphLaunch", unsafe {
            cu::cuGraphLaunch(self.0, stream.0)
        })
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // SAFETY: destroys the exec once. The backend synchronises before
        // dropping an exec that may be in flight (C8); the driver would also
        // defer the free of an in-flight exec.
        let _ = unsafe { cu::cuGraphExecDestroy(self.0) };
    }
}

// ----- events -----

/// A timing event (default flags: timing enabled). Only created after
/// [`events`] has checked the entry points.
pub struct Event(cu::CUevent);

// SAFETY: event handles are usable from any thread with the context current.
unsafe impl Send for Event {}

impl Event {
    pub fn new() -> Result<Self, ErrorKind> {
        events().map_err(|reason| ErrorKind::Unavailable { reason })?;
        let mut e: cu::CUevent = ptr::null_mut();
        // SAFETY: the symbol is present (checked above); writes one event
        // handle in the current context.
        check("cuEventCreate", unsafe {
            cu::cuEventCreate(&mut e, cu::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
        Ok(Event(e))
    }

    /// Record on `stream`, after all work queued on it so far.
    pub fn record(&self, stream: &Stream) -> Result<(), ErrorKind> {
        // SAFETY: event and stream are live.
        check("cuEventRecord", unsafe {
            cu::cuEventRecord(self.0, stream.0)
        })
    }

    pub fn synchronize(&self) -> Result<(), ErrorKind> {
        // SAFETY: the event is live.
        check("cuEventSynchronize", unsafe {
            cu::cuEventSynchronize(self.0)
        })
    }

    /// Milliseconds from `self` to `end`, both completed.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, ErrorKind> {
        let mut ms = 0f32;
        // SAFETY: both events are live; writes one float.
        check("cuEventElapsedTime", unsafe {
            cu::cuEventElapsedTime_v2(&mut ms, self.0, end.0)
        })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroys the event created in new, once.
        let _ = unsafe { cu::cuEventDestroy_v2(self.0) };
    }
}

// ----- NVRTC -----

fn rtc_ready() -> Result<(), ErrorKind> {
    nvrtc().map_err(|reason| ErrorKind::Unavailable { reason })
}

/// NVRTC's version (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32), ErrorKind> {
    rtc_ready()?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: writes two ints.
    check_rtc("nvrtcVersion", unsafe {
        rtc::nvrtcVersion(&mut major, &mut minor)
    })?;
    Ok((major, minor))
}

/// The `sm_XY` architectures this NVRTC can emit cubins for, as XY.
pub fn nvrtc_supported_archs() -> Result<Vec<i32>, ErrorKind> {
    rtc_ready()?;
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    check_rtc("nvrtcGetNumSupportedArchs", unsafe {
        rtc::nvrtcGetNumSupportedArchs(&mut n)
    })?;
    let mut archs = vec![0 as c_int; n.max(0) as usize];
    if !archs.is_empty() {
        // SAFETY: the buffer holds exactly the count NVRTC reported.
        check_rtc("nvrtcGetSupportedArchs", unsafe {
            rtc::nvrtcGetSupportedArchs(archs.as_mut_ptr())
        })?;
    }
    Ok(archs)
}

/// What NVRTC should hand back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Machine code for one `sm_XY` (needs `--gpu-architecture=sm_XY`).
    Cubin,
    /// PTX text, NUL-terminated (for `compute_XY`; the driver JITs it).
    Ptx,
}

struct Program(rtc::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: destroys the program created in compile, once.
        let _ = unsafe { rtc::nvrtcDestroyProgram(&mut self.0) };
    }
}

/// Compile CUDA C with NVRTC. A compile error carries NVRTC's log.
pub fn nvrtc_compile(
    source: &str,
    name: &str,
    options: &[String],
    kind: ImageKind,
) -> Result<Vec<u8>, ErrorKind> {
    rtc_ready()?;
    let src = CString::new(source)
        .map_err(|_| ErrorKind::driver("nvrtcCreateProgram", "source contains NUL"))?;
    let cname = CString::new(name)
        .map_err(|_| ErrorKind::driver("nvrtcCreateProgram", "name contains NUL"))?;
    let opts: Vec<CString> = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| ErrorKind::driver("nvrtcCompileProgram", "option contains NUL"))?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();

    let mut prog: rtc::nvrtcProgram = ptr::null_mut();
    // SAFETY: source and name are NUL-terminated and outlive the program
    // (dropped at the end of this function); no headers are passed.
    check_rtc("nvrtcCreateProgram", unsafe {
        rtc::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            cname.as_ptr(),
            0,
            ptr::null(),
            ptr::null(),
        )
    })?;
    let prog = Program(prog);

    // SAFETY: opt_ptrs points at NUL-terminated strings that outlive the call.
    let compiled =
        unsafe { rtc::nvrtcCompileProgram(prog.0, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    if compiled != rtc::nvrtcResult::NVRTC_SUCCESS {
        let log = program_log(&prog).unwrap_or_else(|e| format!("(no log: {e})"));
        return Err(ErrorKind::driver(
            "nvrtcCompileProgram",
            format!("{name}: {compiled:?}\n{log}"),
        ));
    }

    let mut size: usize = 0;
    match kind {
        ImageKind::Cubin => {
            // SAFETY: the program compiled; writes one size.
            check_rtc("nvrtcGetCUBINSize", unsafe {
                rtc::nvrtcGetCUBINSize(prog.0, &mut size)
            })?;
            let mut image = vec![0u8; size];
            // SAFETY: the buffer holds exactly the size NVRTC reported.
            check_rtc("nvrtcGetCUBIN", unsafe {
                rtc::nvrtcGetCUBIN(prog.0, image.as_mut_ptr() as *mut c_char)
            })?;
            Ok(image)
        }
        ImageKind::Ptx => {
            // SAFETY: the program compiled; writes one size (NUL included).
            check_rtc("nvrtcGetPTXSize", unsafe {
                rtc::nvrtcGetPTXSize(prog.0, &mut size)
            })?;
            let mut image = vec![0u8; size];
            // SAFETY: the buffer holds exactly the size NVRTC reported.
            check_rtc("nvrtcGetPTX", unsafe {
                rtc::nvrtcGetPTX(prog.0, image.as_mut_ptr() as *mut c_char)
            })?;
            Ok(image)
        }
    }
}

fn program_log(prog: &Program) -> Result<String, ErrorKind> {
    let mut size: usize = 0;
    // SAFETY: the program is live; writes one size.
    check_rtc("nvrtcGetProgramLogSize", unsafe {
        rtc::nvrtcGetProgramLogSize(prog.0, &mut size)
    })?;
    let mut log = vec![0u8; size.max(1)];
    // SAFETY: the buffer holds at least the size NVRTC reported.
    check_rtc("nvrtcGetProgramLog", unsafe {
        rtc::nvrtcGetProgramLog(prog.0, log.as_mut_ptr() as *mut c_char)
    })?;
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Ok(String::from_utf8_lossy(&log[..end]).into_owned())
}

// ----- cuBLAS -----

struct BlasHandle(blas::cublasHandle_t);

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: destroys the handle created in Blas::new, once.
        let _ = unsafe { blas::cublasDestroy_v2(self.0) };
    }
}

/// A cuBLAS handle bound to one stream, with its own workspace set so that
/// no call made through it allocates (C7: capturable after prepare).
pub struct Blas {
    handle: BlasHandle,
    /// Declared after the handle: dropped after it.
    _workspace: DeviceMemory,
}

// SAFETY: cuBLAS handles may be used from any thread, one at a time (core
// serialises calls), with the context current.
unsafe impl Send for Blas {}

/// Input element type of a cuBLAS GEMM (output and compute are always f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmInput {
    F32,
    F16,
    Bf16,
}

impl Blas {
    pub fn new(stream: &Stream, workspace_bytes: usize) -> Result<Self, ErrorKind> {
        cublas().map_err(|reason| ErrorKind::Unavailable { reason })?;
        let workspace = DeviceMemory::alloc(workspace_bytes)?;
        let mut h: blas::cublasHandle_t = ptr::null_mut();
        // SAFETY: writes one handle, bound to the current context.
        check_blas("cublasCreate", unsafe { blas::cublasCreate_v2(&mut h) })?;
        let handle = BlasHandle(h);
        // SAFETY: handle and stream are live; the stream types are the same
        // driver object under two binding names.
        check_blas("cublasSetStream", unsafe {
            blas::cublasSetStream_v2(handle.0, stream.0 as blas::cudaStream_t)
        })?;
        // SAFETY: handle is live; the workspace outlives the handle (field order).
        check_blas("cublasSetWorkspace", unsafe {
            blas::cublasSetWorkspace_v2(handle.0, workspace.ptr as *mut c_void, workspace.bytes)
        })?;
        // Plain f32 math: no TF32 (gemm f32's bound is 1e-4 relative).
        // SAFETY: handle is live.
        check_blas("cublasSetMathMode", unsafe {
            blas::cublasSetMathMode(handle.0, blas::cublasMath_t::CUBLAS_DEFAULT_MATH)
        })?;
        Ok(Blas {
            handle,
            _workspace: workspace,
        })
    }

    /// Row-major `c[m×n] = a[m×k] · b[k×n]`, f32 accumulation and output.
    /// cuBLAS is column-major, so it computes `cᵀ = bᵀ · aᵀ`: a row-major
    /// matrix is its transpose in column-major with the same leading dimension.
    pub fn gemm_row_major(
        &self,
        input: GemmInput,
        (a, b, c): (&DeviceMemory, &DeviceMemory, &DeviceMemory),
        (m, n, k): (u32, u32, u32),
    ) -> Result<(), ErrorKind> {
        let dim = |v: u32, what: &str| {
            c_int::try_from(v).map_err(|_| {
                ErrorKind::driver(
                    "cublasGemmEx",
                    format!("{what} = {v} exceeds cuBLAS's int range"),
                )
            })
        };
        let (m, n, k) = (dim(m, "m")?, dim(n, "n")?, dim(k, "k")?);
        let dtype = match input {
            GemmInput::F32 => blas::cudaDataType::CUDA_R_32F,
            GemmInput::F16 => blas::cudaDataType::CUDA_R_16F,
            GemmInput::Bf16 => blas::cudaDataType::CUDA_R_16BF,
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: a, b, c are live allocations holding m·k, k·n and m·n
        // elements (core validated, C12); alpha and beta are host f32 values
        // read during the call (host pointer mode), which is also what makes
        // the call capturable: nothing is read from the host at replay.
        check_blas("cublasGemmEx", unsafe {
            blas::cublasGemmEx(
                self.handle.0,
                blas::cublasOperation_t::CUBLAS_OP_N,
                blas::cublasOperation_t::CUBLAS_OP_N,
                n,
                m,
                k,
                &alpha as *const f32 as *const c_void,
                b.ptr as *const c_void,
                dtype,
                n,
                a.ptr as *const c_void,
                dtype,
                k,
                &beta as *const f32 as *const c_void,
                c.ptr as *mut c_void,
                blas::cudaDataType::CUDA_R_32F,
                n,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        })
    }
}
