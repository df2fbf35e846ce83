//! The backend's stream, which implements seam-streamgraph's driver traits
//! directly (each method body is the HIP call; there is no second
//! forwarding layer): memory, modules, kernel launches, capture, graphs,
//! events.

use super::check;
use super::graph::{Graph, GraphExec, KernelNode};
use hip_runtime_sys as hip;
use seam::ErrorKind;
use seam_streamgraph::{check_range, GraphDriver, KernelLaunch, NodeIn, StreamDriver};
use std::ffi::{c_int, c_void, CString};
use std::ptr;
use std::sync::Arc;

// ----- stream -----

/// A non-blocking stream on one device: no implicit synchronisation with
/// the null stream, so other threads' work cannot join our captures.
pub struct Stream {
    pub(super) raw: hip::hipStream_t,
    device: c_int,
}

// SAFETY: a stream handle is usable from any thread once its device is
// selected there, which `select` does; the backend serialises calls (core
// holds it behind a lock).
unsafe impl Send for Stream {}

impl Stream {
    /// A new stream on device `ordinal`, which this selects.
    pub fn new(ordinal: usize) -> Result<Self, ErrorKind> {
        let device = c_int::try_from(ordinal).map_err(|_| {
            ErrorKind::driver("hipSetDevice", format!("ordinal {ordinal} out of range"))
        })?;
        super::set_device(device)?;
        let mut raw: hip::hipStream_t = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer for one handle; the device is
        // selected (above), so the stream is created on it.
        check("hipStreamCreateWithFlags", unsafe {
            hip::hipStreamCreateWithFlags(&mut raw, hip::hipStreamNonBlocking)
        })?;
        Ok(Stream { raw, device })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: destroys the stream created in new, once (owned, never
        // copied out); work still queued on it completes.
        let _ = unsafe { hip::hipStreamDestroy(self.raw) };
    }
}

// ----- memory -----

/// One `hipMalloc` allocation (C5 is core's to enforce): device memory,
/// so device work on it never touches host memory.
pub struct DeviceMemory {
    ptr: hip::hipDeviceptr_t,
    bytes: usize,
}

// SAFETY: a device pointer is a plain address, valid from any thread.
unsafe impl Send for DeviceMemory {}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: frees the allocation made in alloc, once (owned, never
        // copied). Device work still using it would fault or read freed
        // device memory, not host memory; the backend waits for its stream
        // before every free anyway.
        let _ = unsafe { hip::hipFree(self.ptr) };
    }
}

/// `base + offset` as a device pointer (an address only: never dereferenced here).
fn at(base: hip::hipDeviceptr_t, offset: usize) -> hip::hipDeviceptr_t {
    (base as *mut u8).wrapping_add(offset) as hip::hipDeviceptr_t
}

// ----- modules and kernels -----

struct ModuleHandle(hip::hipModule_t);

// SAFETY: a module handle is never mutated after loading and is valid from
// any thread.
unsafe impl Send for ModuleHandle {}
// SAFETY: as above: shared references only read the handle.
unsafe impl Sync for ModuleHandle {}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        // SAFETY: unloads the module loaded in load_module, once, after every
        // Function (which holds an Arc to it) is gone.
        let _ = unsafe { hip::hipModuleUnload(self.0) };
    }
}

/// A loaded code object.
pub struct Module(Arc<ModuleHandle>);

/// A kernel; keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    _module: Arc<ModuleHandle>,
    f: hip::hipFunction_t,
}

// SAFETY: function handles are immutable and usable from any thread.
unsafe impl Send for Function {}

impl StreamDriver for Stream {
    type Memory = DeviceMemory;
    type Module = Module;
    type Function = Function;

    fn select(&self) -> Result<(), ErrorKind> {
        super::set_device(self.device)
    }

    fn alloc(&self, bytes: usize) -> Result<DeviceMemory, ErrorKind> {
        let mut ptr: *mut c_void = ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer for one device address.
        check("hipMalloc", unsafe { hip::hipMalloc(&mut ptr, bytes) })?;
        Ok(DeviceMemory { ptr, bytes })
    }

    fn memory_bytes(&self, memory: &DeviceMemory) -> usize {
        memory.bytes
    }

    fn device_address(&self, memory: &DeviceMemory) -> u64 {
        memory.ptr as u64
    }

    fn write(&self, memory: &DeviceMemory, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        check_range("hipMemcpyHtoDAsync", offset, data.len(), memory.bytes)?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the destination range lies inside this live allocation
        // (checked above); the runtime only reads the source, which stays
        // borrowed until the stream is synchronised below.
        check("hipMemcpyHtoDAsync", unsafe {
            hip::hipMemcpyHtoDAsync(
                at(memory.ptr, offset),
                data.as_ptr() as *mut c_void,
                data.len(),
                self.raw,
            )
        })?;
        self.synchronize()
    }

    fn read(&self, memory: &DeviceMemory, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        check_range("hipMemcpyDtoHAsync", offset, out.len(), memory.bytes)?;
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: the source range lies inside this live allocation (checked
        // above); `out` is borrowed mutably, so nothing else touches it,
        // until the stream is synchronised below.
        check("hipMemcpyDtoHAsync", unsafe {
            hip::hipMemcpyDtoHAsync(
                out.as_mut_ptr() as *mut c_void,
                at(memory.ptr, offset),
                out.len(),
                self.raw,
            )
        })?;
        self.synchronize()
    }

    /// `image` is an AMD code object from hipRTC.
    fn load_module(&self, image: &[u8]) -> Result<Module, ErrorKind> {
        if image.is_empty() {
            return Err(ErrorKind::driver("hipModuleLoadData", "empty image"));
        }
        let mut m: hip::hipModule_t = ptr::null_mut();
        // SAFETY: the runtime reads the code object only during the call and
        // validates it (an ELF carries its own size); `m` is a valid out-pointer.
        check("hipModuleLoadData", unsafe {
            hip::hipModuleLoadData(&mut m, image.as_ptr() as *const c_void)
        })?;
        Ok(Module(Arc::new(ModuleHandle(m))))
    }

    fn function(&self, module: &Module, name: &str) -> Result<Function, ErrorKind> {
        let cname = CString::new(name)
            .map_err(|_| ErrorKind::driver("hipModuleGetFunction", "name contains NUL"))?;
        let mut f: hip::hipFunction_t = ptr::null_mut();
        // SAFETY: the module is live (held by `module`); the name is
        // NUL-terminated; `f` is a valid out-pointer.
        let r = unsafe { hip::hipModuleGetFunction(&mut f, module.0 .0, cname.as_ptr()) };
        if r != hip::hipError_t::hipSuccess {
            let text = super::describe(r);
            return Err(ErrorKind::driver(
                "hipModuleGetFunction",
                format!("{name}: {text}"),
            ));
        }
        Ok(Function {
            _module: module.0.clone(),
            f,
        })
    }

    /// A launch that may start early (`KernelLaunch::early_start`) is
    /// launched as any other: HIP has no programmatic dependent launch.
    fn launch_kernel(&self, l: &KernelLaunch<'_, Self>) -> Result<(), ErrorKind> {
        let mut args = l.args(self);
        let mut ptrs = args.pointers();
        let (grid, block) = (l.grid(), l.block());
        // SAFETY: a KernelLaunch (made only by seam-streamgraph, after
        // checking the launch against the op, C12) holds the op's entry point
        // and one live allocation per parameter, each large enough for what
        // the kernel indexes; `ptrs` (an inline array that borrows `args`)
        // starts with one pointer per parameter (the kernel reads no more;
        // the slots after them are null), each to a value of its exact size
        // and layout in `args` (64-bit device addresses, the size of
        // hipDeviceptr_t, then the 32-byte repr(C) Params), which outlives
        // the call; the runtime copies the values.
        check("hipModuleLaunchKernel", unsafe {
            hip::hipModuleLaunchKernel(
                l.function().f,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                0,
                self.raw,
                ptrs.as_mut_ptr(),
                ptr::null_mut(),
            )
        })
    }

    /// Never called while [`node_stamps`](StreamDriver::node_stamps) is
    /// false; written and type-checked, never run on an AMD GPU.
    fn launch_beside(
        &self,
        l: &KernelLaunch<'_, Self>,
        join: Option<&KernelNode>,
    ) -> Result<KernelNode, ErrorKind> {
        let (_, deps, n) = self.capture_info()?;
        let mut before: Vec<hip::hipGraphNode_t> = if n == 0 || deps.is_null() {
            Vec::new()
        } else {
            // SAFETY: the runtime returned `n` node handles at `deps`, valid
            // until the next call on the stream: copied out now, before the
            // launch.
            unsafe { std::slice::from_raw_parts(deps, n) }.to_vec()
        };
        self.launch_kernel(l)?;
        let node = self.captured_node()?;
        before.extend(join.map(|j| j.0));
        self.set_capture_dependencies(&mut before)?;
        Ok(node)
    }

    /// `hipGraphExecKernelNodeSetParams` (in an exec) and
    /// `hipGraphKernelNodeSetParams` (in the graph), CUDA's calls with HIP's
    /// names: future launches of the exec get the new parameters, the graph
    /// keeps its own. That launches already queued keep the old ones is
    /// CUDA's documented rule; HIP's runtime is not known to keep it (its
    /// exec may rewrite kernel arguments a queued launch has yet to read),
    /// so this driver asks for an idle stream first
    /// (`update_needs_idle_stream`).
    fn set_kernel_node(
        &self,
        at: NodeIn<'_, GraphExec>,
        graph: &Graph,
        node: &KernelNode,
        l: &KernelLaunch<'_, Self>,
    ) -> Result<(), ErrorKind> {
        let call = match at {
            NodeIn::Exec(_) => "hipGraphExecKernelNodeSetParams",
            NodeIn::Graph => "hipGraphKernelNodeSetParams",
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
        let (grid, block) = (l.grid(), l.block());
        let params = hip::hipKernelNodeParams {
            blockDim: hip::dim3 {
                x: block.0,
                y: block.1,
                z: block.2,
            },
            extra: ptr::null_mut(),
            // The module function, as a captured hipModuleLaunchKernel
            // stores it in its node (the runtime takes a func it cannot
            // find among registered host functions as a hipFunction_t).
            func: l.function().f as *mut c_void,
            gridDim: hip::dim3 {
                x: grid.0,
                y: grid.1,
                z: grid.2,
            },
            kernelParams: ptrs.as_mut_ptr(),
            sharedMemBytes: 0,
        };
        // SAFETY: `node` is a node of `graph` (checked above against the
        // graph's node set, which `hipGraphGetNodes` returned when the capture ended;
        // nothing in this crate adds or removes nodes of a captured graph, so
        // the set is still exactly the graph's nodes), and the graph is live
        // (borrowed), so the handle is valid; an exec not instantiated from
        // `graph` does not hold it, which the runtime reports as an error.
        // Setting the graph's node changes no exec already instantiated
        // from it. `params` carries a KernelLaunch's function, grid and block and one
        // pointer per kernel parameter to a value of its exact size and
        // layout in `args` (as for hipModuleLaunchKernel above), all
        // outliving the call; the runtime copies the values. The
        // KernelLaunch's buffers are live allocations large enough for what
        // the kernel indexes, and the backend holds them for this exec.
        check(call, unsafe {
            match at {
                NodeIn::Exec(exec) => {
                    hip::hipGraphExecKernelNodeSetParams(exec.raw(), node.0, &params)
                }
                NodeIn::Graph => hip::hipGraphKernelNodeSetParams(node.0, &params),
            }
        })
    }

    fn update_needs_idle_stream(&self) -> bool {
        true
    }

    /// Only with `SEAM_HIP_KEEP_EXECS=1`: kept execs have not run on an
    /// AMD GPU (docs/hip.md).
    fn keeps_execs(&self) -> bool {
        std::env::var("SEAM_HIP_KEEP_EXECS").as_deref() == Ok("1")
    }

    /// No: the stamp kernel reads PTX's `%globaltimer`, which HIP's CUDA C
    /// does not have; a node-timed graph records event nodes.
    fn node_stamps(&self) -> bool {
        false
    }
}
