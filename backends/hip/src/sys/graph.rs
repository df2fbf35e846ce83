//! Capture, graphs and events: the stream's [`GraphDriver`] half (stream
//! capture into a graph, instantiation, replay, the kernel nodes a graph
//! update patches, and the events that time replays and their nodes).

use super::check;
use super::driver::Stream;
use hip_runtime_sys as hip;
use seam::ErrorKind;
use seam_streamgraph::{owned_handle, GraphDriver};
use std::collections::HashSet;
use std::ptr;
use std::sync::OnceLock;

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
    pub(super) fn has_node(&self, node: &KernelNode) -> bool {
        self.nodes.contains(&(node.0 as usize))
    }
}

owned_handle! {
    /// An executable graph; the shared logic waits for the stream before
    /// destroying an exec a replay may still use (C8).
    pub struct GraphExec(hip::hipGraphExec_t) => hip::hipGraphExecDestroy;
}

impl GraphExec {
    /// The raw handle, for the kernel-node patch (the stream's
    /// `set_kernel_node`); the exec keeps owning it.
    pub(super) fn raw(&self) -> hip::hipGraphExec_t {
        self.0
    }
}

/// A kernel node of a captured graph: not an owner (the graph owns its
/// nodes and destroys them with it). seam-streamgraph keeps each one with
/// the graph that owns it, and [`StreamDriver::set_kernel_node`] checks it
/// against the graph before the runtime sees it.
pub struct KernelNode(pub(super) hip::hipGraphNode_t);

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
        let (graph, deps, n) = self.capture_info()?;
        let mut node: hip::hipGraphNode_t = ptr::null_mut();
        // SAFETY: `graph` is the live capture's graph; `deps` holds `n`
        // nodes of it (returned just now, valid until the next call on the
        // stream, and read by this call); the event is live (borrowed);
        // `node` is a valid out-pointer.
        check("hipGraphAddEventRecordNode", unsafe {
            hip::hipGraphAddEventRecordNode(&mut node, graph, deps, n, event.0)
        })?;
        self.set_capture_dependencies(std::slice::from_mut(&mut node))
    }

    /// ROCm has no conditional nodes (through 7.x); the emulation by
    /// kernels that return early is not built.
    fn conditional_available(&self) -> Result<(), String> {
        Err("ROCm has no conditional graph nodes, and the hip backend's emulation (kernels that return early) is not built".into())
    }

    fn conditional_handle(&self) -> Result<u64, ErrorKind> {
        let reason = self.conditional_available().err().unwrap_or_default();
        Err(ErrorKind::ConditionalUnsupported { reason })
    }

    fn begin_body(&self, _: seam::ConditionalKind, _: u64) -> Result<(), ErrorKind> {
        self.conditional_handle().map(drop)
    }

    fn end_body(&self) -> Result<(), ErrorKind> {
        self.conditional_handle().map(drop)
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

impl Stream {
    /// The graph the stream is capturing into and the nodes the next
    /// captured work would depend on (valid until the next call on the
    /// stream).
    pub(super) fn capture_info(
        &self,
    ) -> Result<(hip::hipGraph_t, *const hip::hipGraphNode_t, usize), ErrorKind> {
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
        Ok((graph, deps, n))
    }

    /// Make `nodes` (of the capture's graph) all that the next captured
    /// work depends on.
    pub(super) fn set_capture_dependencies(
        &self,
        nodes: &mut [hip::hipGraphNode_t],
    ) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live and capturing; `nodes` are nodes of
        // its capture's graph, read during the call.
        check("hipStreamUpdateCaptureDependencies", unsafe {
            hip::hipStreamUpdateCaptureDependencies(
                self.raw,
                nodes.as_mut_ptr(),
                nodes.len(),
                hip::hipStreamUpdateCaptureDependenciesFlags::hipStreamSetCaptureDependencies
                    as u32,
            )
        })
    }
}
