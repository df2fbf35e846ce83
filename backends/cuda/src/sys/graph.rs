//! Capture, graphs and events: the stream's [`GraphDriver`] half (stream
//! capture into a graph, instantiation, replay, the kernel nodes a graph
//! update patches, and the events that time replays and their nodes).

use super::driver::Stream;
use super::{check, events};
use cudarc::driver::sys as cu;
use seam::ErrorKind;
use seam_streamgraph::{owned_handle, GraphDriver};
use std::collections::HashSet;
use std::ptr;

/// The nodes of a live graph (`cuGraphGetNodes`).
fn graph_nodes(graph: &GraphHandle) -> Result<Vec<cu::CUgraphNode>, ErrorKind> {
    let mut n: usize = 0;
    // SAFETY: the graph is live (borrowed); a null array asks only for the
    // count, written to `n`.
    check("cuGraphGetNodes", unsafe {
        cu::cuGraphGetNodes(graph.0, ptr::null_mut(), &mut n)
    })?;
    if n == 0 {
        // An empty capture: nothing to list (the driver refuses a second
        // call with room for none, CUDA_ERROR_INVALID_VALUE on the H200).
        return Ok(Vec::new());
    }
    let mut nodes: Vec<cu::CUgraphNode> = vec![ptr::null_mut(); n];
    // SAFETY: `nodes` has room for `n` handles and the driver writes at most
    // `n` (the count passed in), then the number written into `n`.
    check("cuGraphGetNodes", unsafe {
        cu::cuGraphGetNodes(graph.0, nodes.as_mut_ptr(), &mut n)
    })?;
    nodes.truncate(n);
    Ok(nodes)
}

owned_handle! {
    /// The owned handle of a captured graph ([`Graph`] keeps it).
    struct GraphHandle(cu::CUgraph) => cu::cuGraphDestroy;
}

/// A captured graph (topology only; replay needs an instantiated
/// [`GraphExec`]). An exec made from it is independent of it (the shared
/// logic still destroys the exec first, as HIP wants).
///
/// Kept with the set of its node handles (as addresses), fetched once with
/// `cuGraphGetNodes` when the capture ends: a captured graph is never edited
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
    /// An executable graph. The driver defers the free of an exec still in
    /// flight; the shared logic also waits for the stream first (C8).
    pub struct GraphExec(cu::CUgraphExec) => cu::cuGraphExecDestroy;
}

impl GraphExec {
    /// The raw handle, for the kernel-node patch (the stream's
    /// `set_kernel_node`); the exec keeps owning it.
    pub(super) fn raw(&self) -> cu::CUgraphExec {
        self.0
    }
}

/// A kernel node of a captured graph: not an owner (the graph owns its
/// nodes and destroys them with it). seam-streamgraph keeps each one with
/// the graph that owns it, and [`StreamDriver::set_kernel_node`] checks it
/// against the graph before the driver sees it.
pub struct KernelNode(pub(super) cu::CUgraphNode);

// SAFETY: a node handle is an opaque identifier of a node of a graph, which
// the driver accepts from any thread; this value is only ever passed back to
// the driver (never dereferenced here), and the backend serialises calls.
unsafe impl Send for KernelNode {}

owned_handle! {
    /// A timing event (default flags: timing enabled). Only created after
    /// [`events`] has checked the entry points, destroy included.
    pub struct Event(cu::CUevent) => cu::cuEventDestroy_v2;
}

/// The driver calls the shared capture logic makes; the HIP backend's list
/// is the same, call for call, with HIP's names.
impl GraphDriver for Stream {
    type Graph = Graph;
    type Exec = GraphExec;
    type Event = Event;
    type Node = KernelNode;

    fn api(&self) -> &'static str {
        "cu"
    }

    /// After one kernel launch on this one stream, the capture's dependency
    /// set (the nodes the next captured work will depend on) is exactly the
    /// node that launch added.
    fn captured_node(&self) -> Result<KernelNode, ErrorKind> {
        const CALL: &str = "cuStreamGetCaptureInfo";
        let mut status = cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut deps: *const cu::CUgraphNode = ptr::null();
        let mut n: usize = 0;
        // SAFETY: the stream is live; `status`, `deps` and `n` are valid
        // out-pointers; the id, graph and edge-data outputs are optional
        // (null). Our edges carry no data, so leaving edge data out loses
        // nothing (the driver would report a lossy query otherwise).
        check(CALL, unsafe {
            cu::cuStreamGetCaptureInfo_v3(
                self.capturing(),
                &mut status,
                ptr::null_mut(),
                ptr::null_mut(),
                &mut deps,
                ptr::null_mut(),
                &mut n,
            )
        })?;
        if status != cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
            return Err(ErrorKind::driver(
                CALL,
                format!("the capture is {status:?}"),
            ));
        }
        if n != 1 || deps.is_null() {
            return Err(ErrorKind::driver(
                CALL,
                format!("{n} nodes in the dependency set after one kernel launch, not 1"),
            ));
        }
        // SAFETY: the driver returned an array of `n` = 1 node handles, valid
        // until the next call on the stream; it is read now, once.
        let node = unsafe { *deps };
        // Read as the C enum's 32 bits, not as the Rust enum: a newer driver
        // may return a node type these bindings do not list.
        let mut kind: u32 = u32::MAX;
        // SAFETY: `node` is a node of the capture's live graph (just
        // returned); `kind` is a valid out-pointer of the C enum's size.
        check("cuGraphNodeGetType", unsafe {
            cu::cuGraphNodeGetType(node, (&mut kind as *mut u32).cast())
        })?;
        if kind != cu::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL as u32 {
            return Err(ErrorKind::driver(
                CALL,
                format!("the last captured node is of type {kind}, not a kernel node"),
            ));
        }
        Ok(KernelNode(node))
    }

    /// Thread-local mode: only the capturing thread is barred from unsafe
    /// calls, so other devices' threads keep working.
    fn begin_capture(&self) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live; a stream already capturing is an error
        // the driver reports (core never asks: its state machine).
        check("cuStreamBeginCapture", unsafe {
            cu::cuStreamBeginCapture_v2(
                self.raw,
                cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        })
    }

    /// An invalidated capture is an error and yields no graph. Bodies
    /// still open (an abandoned capture) end first.
    fn end_capture(&self) -> Result<Graph, ErrorKind> {
        self.close_all_bodies();
        let mut g: cu::CUgraph = ptr::null_mut();
        // SAFETY: the stream is live; `g` is a valid out-pointer (left null
        // if the capture was invalidated).
        let r = unsafe { cu::cuStreamEndCapture(self.raw, &mut g) };
        let graph = (!g.is_null()).then_some(GraphHandle(g));
        check("cuStreamEndCapture", r)?;
        let graph = graph
            .ok_or_else(|| ErrorKind::driver("cuStreamEndCapture", "no graph was returned"))?;
        // Dropped (destroyed) if listing its nodes fails.
        Graph::new(graph)
    }

    fn is_capturing(&self) -> Result<bool, ErrorKind> {
        let mut status = cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: the stream is live; `status` is a valid out-pointer.
        check("cuStreamIsCapturing", unsafe {
            cu::cuStreamIsCapturing(self.raw, &mut status)
        })?;
        Ok(status != cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    fn instantiate(&self, graph: &Graph) -> Result<GraphExec, ErrorKind> {
        let mut e: cu::CUgraphExec = ptr::null_mut();
        // SAFETY: the graph is live (borrowed); `e` is a valid out-pointer.
        check("cuGraphInstantiate", unsafe {
            cu::cuGraphInstantiateWithFlags(&mut e, graph.handle.0, 0)
        })?;
        Ok(GraphExec(e))
    }

    fn upload(&self, exec: &GraphExec) -> Result<(), ErrorKind> {
        // SAFETY: exec and stream are live (borrowed).
        check("cuGraphUpload", unsafe {
            cu::cuGraphUpload(exec.0, self.raw)
        })
    }

    fn launch(&self, exec: &GraphExec) -> Result<(), ErrorKind> {
        // SAFETY: exec and stream are live (borrowed). Execs are only made
        // and held by seam-streamgraph's StreamBackend (this crate hands the
        // stream to nothing else): each recorded kernel was a checked
        // KernelLaunch, and it refuses to free a buffer a live exec uses.
        check("cuGraphLaunch", unsafe {
            cu::cuGraphLaunch(exec.0, self.raw)
        })
    }

    fn synchronize(&self) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live (borrowed).
        check("cuStreamSynchronize", unsafe {
            cu::cuStreamSynchronize(self.raw)
        })
    }

    fn events_available(&self) -> Result<(), String> {
        events()
    }

    fn create_event(&self) -> Result<Event, ErrorKind> {
        events().map_err(|reason| ErrorKind::Unavailable { reason })?;
        let mut e: cu::CUevent = ptr::null_mut();
        // SAFETY: the event symbols are present (checked above); `e` is a
        // valid out-pointer; the context is current (the backend selects).
        check("cuEventCreate", unsafe {
            cu::cuEventCreate(&mut e, cu::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
        Ok(Event(e))
    }

    fn record_event(&self, event: &Event) -> Result<(), ErrorKind> {
        // SAFETY: event and stream are live (borrowed).
        check("cuEventRecord", unsafe {
            cu::cuEventRecord(event.0, self.raw)
        })
    }

    fn node_events_available(&self) -> Result<(), String> {
        events()
    }

    fn conditional_available(&self) -> Result<(), String> {
        super::conditional_nodes()
    }

    fn conditional_handle(&self) -> Result<u64, ErrorKind> {
        self.new_conditional_handle()
    }

    fn begin_body(&self, kind: seam::ConditionalKind, handle: u64) -> Result<(), ErrorKind> {
        self.open_body(kind, handle)
    }

    fn end_body(&self) -> Result<(), ErrorKind> {
        self.close_body()
    }

    fn record_event_in_capture(&self, event: &Event) -> Result<(), ErrorKind> {
        let external = cu::CUevent_record_flags_enum::CU_EVENT_RECORD_EXTERNAL as u32;
        // SAFETY: event and stream are live (borrowed); the symbol is
        // present (`events` probes it before any event is made); with
        // CU_EVENT_RECORD_EXTERNAL on a capturing stream the driver adds an
        // event record node to the graph instead of recording now.
        check("cuEventRecordWithFlags", unsafe {
            cu::cuEventRecordWithFlags(event.0, self.raw, external)
        })
    }

    fn wait_event(&self, event: &Event) -> Result<(), ErrorKind> {
        // SAFETY: the event is live (borrowed).
        check("cuEventSynchronize", unsafe {
            cu::cuEventSynchronize(event.0)
        })
    }

    fn elapsed_ms(&self, start: &Event, end: &Event) -> Result<f32, ErrorKind> {
        let mut ms = 0f32;
        // SAFETY: both events are live (borrowed); `ms` is a valid out-pointer.
        check("cuEventElapsedTime", unsafe {
            cu::cuEventElapsedTime_v2(&mut ms, start.0, end.0)
        })?;
        Ok(ms)
    }
}
