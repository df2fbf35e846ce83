//! The backend's stream, which implements seam-streamgraph's driver traits
//! directly (each method body is the HIP call; there is no second
//! forwarding layer): memory, modules, kernel launches, capture, graphs,
//! events.

use super::check;
use hip_runtime_sys as hip;
use seam::ErrorKind;
use seam_streamgraph::{check_range, owned_handle, GraphDriver, KernelLaunch, StreamDriver};
use std::collections::HashSet;
use std::ffi::{c_int, c_void, CString};
use std::ptr;
use std::sync::{Arc, OnceLock};

// ----- stream -----

/// A non-blocking stream on one device: no implicit synchronisation with
/// the null stream, so other threads' work cannot join our captures.
pub struct Stream {
    raw: hip::hipStream_t,
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

    /// `hipGraphExecKernelNodeSetParams`, CUDA's call with HIP's name:
    /// future launches of the exec get the new parameters, the graph keeps
    /// its own. That launches already queued keep the old ones is CUDA's
    /// documented rule; HIP's runtime is not known to keep it (its exec may
    /// rewrite kernel arguments a queued launch has yet to read), so this
    /// driver asks for an idle stream first (`update_needs_idle_stream`).
    fn set_kernel_node(
        &self,
        exec: &GraphExec,
        graph: &Graph,
        node: &KernelNode,
        l: &KernelLaunch<'_, Self>,
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "hipGraphExecKernelNodeSetParams";
        // One hash lookup in the graph's node set (fetched once, when the
        // capture ended), not a node-list query per patched node.
        if !graph.has_node(node) {
            return Err(ErrorKind::driver(
                CALL,
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
        // `params` carries a KernelLaunch's function, grid and block and one
        // pointer per kernel parameter to a value of its exact size and
        // layout in `args` (as for hipModuleLaunchKernel above), all
        // outliving the call; the runtime copies the values. The
        // KernelLaunch's buffers are live allocations large enough for what
        // the kernel indexes, and the backend holds them for this exec.
        check(CALL, unsafe {
            hip::hipGraphExecKernelNodeSetParams(exec.0, node.0, &params)
        })
    }

    fn update_needs_idle_stream(&self) -> bool {
        true
    }
}

/// The nodes of a live graph (`hipGraphGetNodes`).
fn graph_nodes(graph: &GraphHandle) -> Result<Vec<hip::hipGraphNode_t>, ErrorKind> {
    let mut n: usize = 0;
    // SAFETY: the graph is live (borrowed); a null array asks only for the
    // count, written to `n`.
    check("hipGraphGetNodes", unsafe {
        hip::hipGraphGetNodes(graph.0, ptr::null_mut(), &mut n)
    })?;
    if n == 0 {
        // An empty capture: nothing to list (the driver refuses a second
        // call with room for none, CUDA_ERROR_INVALID_VALUE on the H200).
        return Ok(Vec::new());
    }
    let mut nodes: Vec<hip::hipGraphNode_t> = vec![ptr::null_mut(); n];
    // SAFETY: `nodes` has room for `n` handles and the runtime writes at
    // most `n` (the count passed in), then the number written into `n`.
    check("hipGraphGetNodes", unsafe {
        hip::hipGraphGetNodes(graph.0, nodes.as_mut_ptr(), &mut n)
    })?;
    nodes.truncate(n);
    Ok(nodes)
}

// ----- capture, graphs, events -----

owned_handle! {
    /// The owned handle of a captured graph ([`Graph`] keeps it).
    struct GraphHandle(hip::hipGraph_t) => hip::hipGraphDestroy;
}

/// A captured graph (topology; replay needs an instantiated
/// [`GraphExec`]); the shared logic destroys its exec first.
///
/// Kept with the set of its node handles (as addresses), fetched once with
/// `hipGraphGetNodes` when the capture ends: a captured graph is never edited
/// afterwards, so the set stays exact, and [`StreamDriver::set_kernel_node`]
/// checks a node against it in O(1) instead of listing the graph's nodes
/// for every patched node (O(N²) for a rebind of N launches).
pub struct Graph {
    handle: GraphHandle,
    nodes: HashSet<usize>,
}

impl Graph {
    /// Keep a graph the capture returned, with its nodes listed; on an
    /// error the handle is dropped, which destroys the graph.
    fn new(handle: GraphHandle) -> Result<Graph, ErrorKind> {
        let nodes = graph_nodes(&handle)?
            .into_iter()
            .map(|n| n as usize)
            .collect();
        Ok(Graph { handle, nodes })
    }

    /// Whether `node` is one of this graph's nodes.
    fn has_node(&self, node: &KernelNode) -> bool {
        self.nodes.contains(&(node.0 as usize))
    }
}

owned_handle! {
    /// An executable graph; the shared logic waits for the stream before
    /// destroying an exec a replay may still use (C8).
    pub struct GraphExec(hip::hipGraphExec_t) => hip::hipGraphExecDestroy;
}

/// A kernel node of a captured graph: not an owner (the graph owns its
/// nodes and destroys them with it). seam-streamgraph keeps each one with
/// the graph that owns it, and [`StreamDriver::set_kernel_node`] checks it
/// against the graph before the runtime sees it.
pub struct KernelNode(hip::hipGraphNode_t);

// SAFETY: a node handle is an opaque identifier of a node of a graph, which
// the runtime accepts from any thread; this value is only ever passed back
// to the runtime (never dereferenced here), and the backend serialises calls.
unsafe impl Send for KernelNode {}

owned_handle! {
    /// A timing event (default flags: timing enabled).
    pub struct Event(hip::hipEvent_t) => hip::hipEventDestroy;
}

type GraphUploadFn = unsafe extern "C" fn(hip::hipGraphExec_t, hip::hipStream_t) -> hip::hipError_t;

/// `hipGraphUpload`, which ROCm 5.2's runtime does not export (5.3 does):
/// looked up in the already-loaded libamdhip64, so linking never needs it.
fn graph_upload_fn() -> Option<GraphUploadFn> {
    static UPLOAD: OnceLock<Option<usize>> = OnceLock::new();
    let addr = *UPLOAD.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT only searches the loaded objects
        // (libamdhip64 is one: we link it) for a NUL-terminated name.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"hipGraphUpload".as_ptr()) };
        (!p.is_null()).then_some(p as usize)
    });
    // SAFETY: the symbol is HIP's hipGraphUpload, whose C signature is
    // hipError_t (hipGraphExec_t, hipStream_t).
    addr.map(|a| unsafe { std::mem::transmute::<usize, GraphUploadFn>(a) })
}

/// The HIP calls the shared capture logic makes: the CUDA backend's list,
/// call for call, with HIP's names.
impl GraphDriver for Stream {
    type Graph = Graph;
    type Exec = GraphExec;
    type Event = Event;
    type Node = KernelNode;

    fn api(&self) -> &'static str {
        "hip"
    }

    /// As on CUDA: after one kernel launch on this one stream, the
    /// capture's dependency set is exactly the node that launch added.
    fn captured_node(&self) -> Result<KernelNode, ErrorKind> {
        const CALL: &str = "hipStreamGetCaptureInfo_v2";
        // Read as the C enums' 32 bits, not as the Rust enums: a newer
        // runtime may return a value these bindings do not list.
        let mut status: u32 = u32::MAX;
        let mut deps: *const hip::hipGraphNode_t = ptr::null();
        let mut n: usize = 0;
        // SAFETY: the stream is live; `status` (of the C enum's size),
        // `deps` and `n` are valid out-pointers; the id and graph outputs
        // are optional (null).
        check(CALL, unsafe {
            hip::hipStreamGetCaptureInfo_v2(
                self.raw,
                (&mut status as *mut u32).cast(),
                ptr::null_mut(),
                ptr::null_mut(),
                &mut deps,
                &mut n,
            )
        })?;
        if status != hip::hipStreamCaptureStatus::hipStreamCaptureStatusActive as u32 {
            return Err(ErrorKind::driver(
                CALL,
                format!("the capture is not active (status {status})"),
            ));
        }
        if n != 1 || deps.is_null() {
            return Err(ErrorKind::driver(
                CALL,
                format!("{n} nodes in the dependency set after one kernel launch, not 1"),
            ));
        }
        // SAFETY: the runtime returned an array of `n` = 1 node handles,
        // valid until the next call on the stream; it is read now, once.
        let node = unsafe { *deps };
        let mut kind: u32 = u32::MAX;
        // SAFETY: `node` is a node of the capture's live graph (just
        // returned); `kind` is a valid out-pointer of the C enum's size.
        check("hipGraphNodeGetType", unsafe {
            hip::hipGraphNodeGetType(node, (&mut kind as *mut u32).cast())
        })?;
        if kind != hip::hipGraphNodeType::hipGraphNodeTypeKernel as u32 {
            return Err(ErrorKind::driver(
                CALL,
                format!("the last captured node is of type {kind}, not a kernel node"),
            ));
        }
        Ok(KernelNode(node))
    }

    /// Thread-local mode, as the CUDA backend.
    fn begin_capture(&self) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live; a stream already capturing is an error
        // the runtime reports (core never asks: its state machine).
        check("hipStreamBeginCapture", unsafe {
            hip::hipStreamBeginCapture(
                self.raw,
                hip::hipStreamCaptureMode::hipStreamCaptureModeThreadLocal,
            )
        })
    }

    /// An invalidated capture is an error and yields no graph.
    fn end_capture(&self) -> Result<Graph, ErrorKind> {
        let mut g: hip::hipGraph_t = ptr::null_mut();
        // SAFETY: the stream is live; `g` is a valid out-pointer (left null
        // if the capture was invalidated).
        let r = unsafe { hip::hipStreamEndCapture(self.raw, &mut g) };
        let graph = (!g.is_null()).then_some(GraphHandle(g));
        check("hipStreamEndCapture", r)?;
        let graph = graph
            .ok_or_else(|| ErrorKind::driver("hipStreamEndCapture", "no graph was returned"))?;
        // Dropped (destroyed) if listing its nodes fails.
        Graph::new(graph)
    }

    fn is_capturing(&self) -> Result<bool, ErrorKind> {
        let mut status = hip::hipStreamCaptureStatus::hipStreamCaptureStatusNone;
        // SAFETY: the stream is live; `status` is a valid out-pointer.
        check("hipStreamIsCapturing", unsafe {
            hip::hipStreamIsCapturing(self.raw, &mut status)
        })?;
        Ok(status != hip::hipStreamCaptureStatus::hipStreamCaptureStatusNone)
    }

    /// The 5-argument `hipGraphInstantiate` (CUDA's 3-argument form plus an
    /// error node and a log buffer, which we do not ask for).
    fn instantiate(&self, graph: &Graph) -> Result<GraphExec, ErrorKind> {
        let mut e: hip::hipGraphExec_t = ptr::null_mut();
        // SAFETY: the graph is live (borrowed); `e` is a valid out-pointer;
        // null error-node and log pointers with size 0 are allowed.
        check("hipGraphInstantiate", unsafe {
            hip::hipGraphInstantiate(&mut e, graph.handle.0, ptr::null_mut(), ptr::null_mut(), 0)
        })?;
        Ok(GraphExec(e))
    }

    /// Where the runtime can (ROCm ≥ 5.3); on older runtimes the first
    /// launch uploads it.
    fn upload(&self, exec: &GraphExec) -> Result<(), ErrorKind> {
        match graph_upload_fn() {
            // SAFETY: exec and stream are live (borrowed).
            Some(upload) => check("hipGraphUpload", unsafe { upload(exec.0, self.raw) }),
            None => Ok(()),
        }
    }

    fn launch(&self, exec: &GraphExec) -> Result<(), ErrorKind> {
        // SAFETY: exec and stream are live (borrowed). Execs are only made
        // and held by seam-streamgraph's StreamBackend (this crate hands the
        // stream to nothing else): each recorded kernel was a checked
        // KernelLaunch, and it refuses to free a buffer a live exec uses.
        check("hipGraphLaunch", unsafe {
            hip::hipGraphLaunch(exec.0, self.raw)
        })
    }

    fn synchronize(&self) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live (borrowed).
        check("hipStreamSynchronize", unsafe {
            hip::hipStreamSynchronize(self.raw)
        })
    }

    fn create_event(&self) -> Result<Event, ErrorKind> {
        let mut e: hip::hipEvent_t = ptr::null_mut();
        // SAFETY: `e` is a valid out-pointer; the device is selected.
        check("hipEventCreate", unsafe { hip::hipEventCreate(&mut e) })?;
        Ok(Event(e))
    }

    /// HIP 5.2 has no `hipEventRecordWithFlags`: an event record node is
    /// added to the capture's graph by hand and made the capture's only
    /// dependency, so the next captured launch follows it.
    fn node_events_available(&self) -> Result<(), String> {
        Ok(())
    }

    fn record_event_in_capture(&self, event: &Event) -> Result<(), ErrorKind> {
        const CALL: &str = "hipStreamGetCaptureInfo_v2";
        let mut status: u32 = u32::MAX;
        let mut graph: hip::hipGraph_t = ptr::null_mut();
        let mut deps: *const hip::hipGraphNode_t = ptr::null();
        let mut n: usize = 0;
        // SAFETY: the stream is live; `status` (of the C enum's size),
        // `graph`, `deps` and `n` are valid out-pointers; the id output is
        // optional (null).
        check(CALL, unsafe {
            hip::hipStreamGetCaptureInfo_v2(
                self.raw,
                (&mut status as *mut u32).cast(),
                ptr::null_mut(),
                &mut graph,
                &mut deps,
                &mut n,
            )
        })?;
        if status != hip::hipStreamCaptureStatus::hipStreamCaptureStatusActive as u32
            || graph.is_null()
        {
            return Err(ErrorKind::driver(
                CALL,
                format!("the capture is not active (status {status})"),
            ));
        }
        let mut node: hip::hipGraphNode_t = ptr::null_mut();
        // SAFETY: `graph` is the live capture's graph; `deps` holds `n`
        // nodes of it (returned just now, valid until the next call on the
        // stream, and read by this call); the event is live (borrowed);
        // `node` is a valid out-pointer.
        check("hipGraphAddEventRecordNode", unsafe {
            hip::hipGraphAddEventRecordNode(&mut node, graph, deps, n, event.0)
        })?;
        // SAFETY: the stream is live and capturing; `node` is one node of
        // its capture's graph.
        check("hipStreamUpdateCaptureDependencies", unsafe {
            hip::hipStreamUpdateCaptureDependencies(
                self.raw,
                &mut node,
                1,
                hip::hipStreamUpdateCaptureDependenciesFlags::hipStreamSetCaptureDependencies
                    as u32,
            )
        })
    }

    fn record_event(&self, event: &Event) -> Result<(), ErrorKind> {
        // SAFETY: event and stream are live (borrowed).
        check("hipEventRecord", unsafe {
            hip::hipEventRecord(event.0, self.raw)
        })
    }

    fn wait_event(&self, event: &Event) -> Result<(), ErrorKind> {
        // SAFETY: the event is live (borrowed).
        check("hipEventSynchronize", unsafe {
            hip::hipEventSynchronize(event.0)
        })
    }

    fn elapsed_ms(&self, start: &Event, end: &Event) -> Result<f32, ErrorKind> {
        let mut ms = 0f32;
        // SAFETY: both events are live (borrowed); `ms` is a valid out-pointer.
        check("hipEventElapsedTime", unsafe {
            hip::hipEventElapsedTime(&mut ms, start.0, end.0)
        })?;
        Ok(ms)
    }
}
