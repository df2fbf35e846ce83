//! Driver API: devices, the primary context, and the backend's stream,
//! which implements seam-streamgraph's driver traits directly (each method
//! body is the FFI call; there is no second forwarding layer).

use super::graph::{Graph, GraphExec, KernelNode};
use super::{check, ready};
use cudarc::driver::sys as cu;
use seam::ErrorKind;
use seam_streamgraph::{check_range, GraphDriver, KernelLaunch, NodeIn, StreamDriver};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::Arc;

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

    /// The raw handle (a conditional handle names its context).
    pub(super) fn raw(&self) -> cu::CUcontext {
        self.ctx
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
/// default stream, so other threads' work cannot join our captures. Holds
/// the context it was made in, which outlives it (field order).
pub struct Stream {
    pub(super) raw: cu::CUstream,
    pub(super) context: Arc<Context>,
    /// The streams capturing the open conditional bodies, innermost last,
    /// and spare ones made for earlier bodies (`conditional.rs`); every
    /// one is destroyed with this stream.
    pub(super) bodies: RefCell<Vec<cu::CUstream>>,
    pub(super) spare: RefCell<Vec<cu::CUstream>>,
    /// Whether a launch whose kernel may start early does (programmatic
    /// dependent launch; off until the backend allows it).
    early_starts: bool,
}

// SAFETY: a stream handle is usable from any thread with its context
// current, and every method makes no assumption about the calling thread;
// the backend serialises calls (core holds it behind a lock).
unsafe impl Send for Stream {}

impl Stream {
    /// A new stream in `context`, which this makes current.
    pub fn new(context: Arc<Context>) -> Result<Self, ErrorKind> {
        context.make_current()?;
        let mut raw: cu::CUstream = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer for one handle; the context
        // is current (above), so the stream is created in it.
        check("cuStreamCreate", unsafe {
            cu::cuStreamCreate(&mut raw, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Stream {
            raw,
            context,
            bodies: RefCell::new(Vec::new()),
            spare: RefCell::new(Vec::new()),
            early_starts: false,
        })
    }

    /// Let launches whose kernel may start early
    /// (`seam::kernel::CudaSource::starts_early`) start before the launch
    /// before them ends: only where the kernels are compiled for a target
    /// whose code holds the wait they call.
    pub fn allow_early_starts(&mut self, on: bool) {
        self.early_starts = on;
    }

    /// The stream work is captured on now: the innermost open body's, or
    /// this one.
    pub(super) fn capturing(&self) -> cu::CUstream {
        self.bodies.borrow().last().copied().unwrap_or(self.raw)
    }

    /// The raw handle, for binding a library handle to this stream.
    pub(super) fn raw(&self) -> cu::CUstream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let bodies = self.bodies.get_mut().drain(..);
        for s in bodies.chain(self.spare.get_mut().drain(..)) {
            // SAFETY: a body stream made by `conditional.rs`, owned here
            // alone, destroyed once; nothing is ever queued on it (it only
            // captures).
            let _ = unsafe { cu::cuStreamDestroy_v2(s) };
        }
        // SAFETY: destroys the stream created in new, once (the handle is
        // owned and never copied out except into a cuBLAS handle the
        // backend drops first); work still queued on it completes.
        let _ = unsafe { cu::cuStreamDestroy_v2(self.raw) };
    }
}

// ----- memory -----

/// One `cuMemAlloc` allocation (not stream-ordered: C5 is core's to
/// enforce): device-only memory (not managed, not host-mapped), so device
/// work on it never touches host memory.
pub struct DeviceMemory {
    ptr: cu::CUdeviceptr,
    bytes: usize,
}

// SAFETY: a device pointer is a plain address valid in its context from any thread.
unsafe impl Send for DeviceMemory {}

impl DeviceMemory {
    pub(super) fn alloc(bytes: usize) -> Result<Self, ErrorKind> {
        let mut ptr: cu::CUdeviceptr = 0;
        // SAFETY: `ptr` is a valid out-pointer for one device address.
        check("cuMemAlloc", unsafe { cu::cuMemAlloc_v2(&mut ptr, bytes) })?;
        Ok(DeviceMemory { ptr, bytes })
    }

    pub(super) fn ptr(&self) -> cu::CUdeviceptr {
        self.ptr
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: frees the allocation made in alloc, once (owned, never
        // copied). Device work still using it would fault or read freed
        // device memory, not host memory (cuMemAlloc is device-only); the
        // backend waits for its stream before every free anyway.
        let _ = unsafe { cu::cuMemFree_v2(self.ptr) };
    }
}

// ----- modules and kernels -----

struct ModuleHandle(cu::CUmodule);

// SAFETY: a module handle is never mutated after loading (only unloaded on
// drop, when no other reference exists) and is valid from any thread with
// the context current.
unsafe impl Send for ModuleHandle {}
// SAFETY: as above: shared references only read the handle.
unsafe impl Sync for ModuleHandle {}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        // SAFETY: unloads the module loaded in load_module, once, after every
        // Function (which holds an Arc to it) is gone.
        let _ = unsafe { cu::cuModuleUnload(self.0) };
    }
}

/// A loaded module (cubin or PTX image).
pub struct Module(Arc<ModuleHandle>);

/// A kernel; keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    _module: Arc<ModuleHandle>,
    f: cu::CUfunction,
}

// SAFETY: function handles are immutable and usable from any thread with
// the context current.
unsafe impl Send for Function {}

impl StreamDriver for Stream {
    type Memory = DeviceMemory;
    type Module = Module;
    type Function = Function;

    fn select(&self) -> Result<(), ErrorKind> {
        self.context.make_current()
    }

    fn alloc(&self, bytes: usize) -> Result<DeviceMemory, ErrorKind> {
        DeviceMemory::alloc(bytes)
    }

    fn memory_bytes(&self, memory: &DeviceMemory) -> usize {
        memory.bytes
    }

    fn device_address(&self, memory: &DeviceMemory) -> u64 {
        memory.ptr
    }

    fn write(&self, memory: &DeviceMemory, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        check_range("cuMemcpyHtoDAsync", offset, data.len(), memory.bytes)?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the destination range lies inside this live allocation
        // (checked above); the source slice stays borrowed until the stream
        // is synchronised below, after the copy has completed.
        check("cuMemcpyHtoDAsync", unsafe {
            cu::cuMemcpyHtoDAsync_v2(
                memory.ptr + offset as u64,
                data.as_ptr() as *const c_void,
                data.len(),
                self.raw,
            )
        })?;
        self.synchronize()
    }

    fn read(&self, memory: &DeviceMemory, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        check_range("cuMemcpyDtoHAsync", offset, out.len(), memory.bytes)?;
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: the source range lies inside this live allocation (checked
        // above); `out` is borrowed mutably, so nothing else touches it,
        // until the stream is synchronised below.
        check("cuMemcpyDtoHAsync", unsafe {
            cu::cuMemcpyDtoHAsync_v2(
                out.as_mut_ptr() as *mut c_void,
                memory.ptr + offset as u64,
                out.len(),
                self.raw,
            )
        })?;
        self.synchronize()
    }

    /// `image` is a cubin, or PTX text ending in NUL (as NVRTC returns it).
    fn load_module(&self, image: &[u8]) -> Result<Module, ErrorKind> {
        if image.is_empty() {
            return Err(ErrorKind::driver("cuModuleLoadData", "empty image"));
        }
        let mut m: cu::CUmodule = ptr::null_mut();
        // SAFETY: the driver reads the image only during the call and
        // validates its format (a bad image is an error, not a read past the
        // slice: a cubin carries its size, PTX ends in the NUL NVRTC wrote).
        check("cuModuleLoadData", unsafe {
            cu::cuModuleLoadData(&mut m, image.as_ptr() as *const c_void)
        })?;
        Ok(Module(Arc::new(ModuleHandle(m))))
    }

    fn function(&self, module: &Module, name: &str) -> Result<Function, ErrorKind> {
        let cname = CString::new(name)
            .map_err(|_| ErrorKind::driver("cuModuleGetFunction", "name contains NUL"))?;
        let mut f: cu::CUfunction = ptr::null_mut();
        // SAFETY: the module is live (held by `module`); the name is
        // NUL-terminated; `f` is a valid out-pointer.
        check("cuModuleGetFunction", unsafe {
            cu::cuModuleGetFunction(&mut f, module.0 .0, cname.as_ptr())
        })
        .map_err(|e| match e {
            ErrorKind::Driver { message, .. } => {
                ErrorKind::driver("cuModuleGetFunction", format!("{name}: {message}"))
            }
            other => other,
        })?;
        Ok(Function {
            _module: module.0.clone(),
            f,
        })
    }

    fn launch_kernel(&self, l: &KernelLaunch<'_, Self>) -> Result<(), ErrorKind> {
        let mut args = l.args(self);
        let mut ptrs = args.pointers();
        let ((gx, gy, gz), (bx, by, bz)) = (l.grid(), l.block());
        if self.early_starts && l.early_start() {
            // SAFETY: an all-zero launch attribute is a valid value of the
            // C struct (an id and a union of integers); both fields are set
            // below.
            let mut attr: cu::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            attr.id =
                cu::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.programmaticStreamSerializationAllowed = 1;
            let config = cu::CUlaunchConfig {
                gridDimX: gx,
                gridDimY: gy,
                gridDimZ: gz,
                blockDimX: bx,
                blockDimY: by,
                blockDimZ: bz,
                sharedMemBytes: 0,
                hStream: self.capturing(),
                attrs: &mut attr,
                numAttrs: 1,
            };
            // SAFETY: as for `cuLaunchKernel` below (the same entry point,
            // shape, stream and argument array); `config` and the one
            // attribute it points at live through the call. The kernel
            // waits for the launch before it where it touches memory that
            // launch may use (`CudaSource::starts_early`'s promise, made by
            // whoever trusted its source; `l.early_start()` is read from it).
            return check("cuLaunchKernelEx", unsafe {
                cu::cuLaunchKernelEx(&config, l.function().f, ptrs.as_mut_ptr(), ptr::null_mut())
            });
        }
        // SAFETY: a KernelLaunch (made only by seam-streamgraph, after
        // checking the launch against the op, C12) holds the op's entry point
        // and one live allocation per parameter, each large enough for what
        // the kernel indexes; `ptrs` (an inline array that borrows `args`)
        // starts with one pointer per parameter (the kernel reads no more;
        // the slots after them are null), each to a value of its exact size
        // and layout in `args` (64-bit device addresses, as CUdeviceptr is,
        // then the 32-byte repr(C) Params), which outlives the call; the
        // driver copies the values before returning.
        check("cuLaunchKernel", unsafe {
            cu::cuLaunchKernel(
                l.function().f,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                0,
                self.capturing(),
                ptrs.as_mut_ptr(),
                ptr::null_mut(),
            )
        })
    }

    fn launch_beside(
        &self,
        l: &KernelLaunch<'_, Self>,
        join: Option<&KernelNode>,
    ) -> Result<KernelNode, ErrorKind> {
        let at = self.capturing();
        let (_, deps, n) = super::conditional::capture_info(at)?;
        let mut before: Vec<cu::CUgraphNode> = if n == 0 || deps.is_null() {
            Vec::new()
        } else {
            // SAFETY: the driver returned `n` node handles at `deps`, valid
            // until the next call on the stream: copied out now, before the
            // launch.
            unsafe { std::slice::from_raw_parts(deps, n) }.to_vec()
        };
        self.launch_kernel(l)?;
        let node = self.captured_node()?;
        before.extend(join.map(|j| j.0));
        // SAFETY: the stream is live and capturing; `before` holds nodes of
        // its capture's graph (its dependencies before the launch, and a
        // node recorded beside earlier in the same capture: nodes are never
        // removed from a capture) and is read during the call; no edge data
        // (null), as in the capture.
        check("cuStreamUpdateCaptureDependencies", unsafe {
            cu::cuStreamUpdateCaptureDependencies_v2(
                at,
                before.as_mut_ptr(),
                ptr::null(),
                before.len(),
                cu::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES
                    as u32,
            )
        })?;
        Ok(node)
    }

    /// No: `cuGraphExecKernelNodeSetParams` "The modifications only affect
    /// future launches of hGraphExec. Already enqueued or running launches
    /// of hGraphExec are not affected by this call. hNode is also not
    /// modified by this call." (CUDA Driver API reference), which is what
    /// C13's "replays queued before the update run with the old bindings"
    /// needs; the graph keeps its captured parameters.
    fn update_needs_idle_stream(&self) -> bool {
        false
    }

    /// Unless `SEAM_CUDA_KEEP_EXECS=0` ([`super::KEEP_EXECS_ENV`]): the
    /// suite ran green with kept execs on an H100, and a rebind back and
    /// forth costs a switch instead of a patch of every node
    /// (docs/decisions.md, D18).
    fn keeps_execs(&self) -> bool {
        super::keep_execs()
    }

    /// Yes: on an H100, a stamp kernel beside each of 1000 dependent
    /// one-thread kernels, joined one launch later, made a replay 1.41× the
    /// plain one, a stamp kernel between them 1.93×, an event record node
    /// 3.23× (docs/tracing.md).
    fn node_stamps(&self) -> bool {
        true
    }

    fn set_kernel_node(
        &self,
        at: NodeIn<'_, GraphExec>,
        graph: &Graph,
        node: &KernelNode,
        l: &KernelLaunch<'_, Self>,
    ) -> Result<(), ErrorKind> {
        let call = match at {
            NodeIn::Exec(_) => "cuGraphExecKernelNodeSetParams",
            NodeIn::Graph => "cuGraphKernelNodeSetParams",
        };
        // One hash lookup in the graph's node set (fetched once, when the
        // capture ended), not a node-list query per patched node.
        if !graph.has_node(node) {
            return Err(ErrorKind::driver(
                call,
                "the node is not one of the graph's",
            ));
        }
        let mut args = l.args(self);
        let mut ptrs = args.pointers();
        let ((gx, gy, gz), (bx, by, bz)) = (l.grid(), l.block());
        let params = cu::CUDA_KERNEL_NODE_PARAMS {
            func: l.function().f,
            gridDimX: gx,
            gridDimY: gy,
            gridDimZ: gz,
            blockDimX: bx,
            blockDimY: by,
            blockDimZ: bz,
            sharedMemBytes: 0,
            kernelParams: ptrs.as_mut_ptr(),
            extra: ptr::null_mut(),
            // Ignored when `func` is set (the captured node's own function:
            // same op and dtype, so the same context).
            kern: ptr::null_mut(),
            ctx: ptr::null_mut(),
        };
        // SAFETY: `node` is a node of `graph` (checked above against the
        // graph's node set, which `cuGraphGetNodes` returned when the capture ended;
        // nothing in this crate adds or removes nodes of a captured graph, so
        // the set is still exactly the graph's nodes), and the graph is live
        // (borrowed), so the handle is valid; an exec not instantiated from
        // `graph` does not hold it, which the driver reports as an error.
        // Setting the graph's node changes no exec already instantiated
        // from it, so no queued replay reads the new values. `params`
        // carries a KernelLaunch's function, grid and block and one
        // pointer per kernel parameter to a value of its exact size and
        // layout in `args` (as for cuLaunchKernel above), all outliving the
        // call; the driver copies the values before returning. The
        // KernelLaunch's buffers are live allocations large enough for what
        // the kernel indexes, and the backend holds them for every exec
        // instantiated from the graph while that exec binds them.
        check(call, unsafe {
            match at {
                NodeIn::Exec(exec) => {
                    cu::cuGraphExecKernelNodeSetParams_v2(exec.raw(), node.0, &params)
                }
                NodeIn::Graph => cu::cuGraphKernelNodeSetParams_v2(node.0, &params),
            }
        })
    }
}
