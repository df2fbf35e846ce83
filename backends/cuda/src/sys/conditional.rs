//! Conditional nodes (C14) inside a stream capture: a handle of the graph
//! being captured into, a conditional node added after the work captured
//! so far, and its body captured on a stream of its own
//! (`cuStreamBeginCaptureToGraph` cannot capture on a stream that is
//! already capturing), which the stream's kernel launches go to until the
//! body ends. The kernel that sets the handle from the condition is
//! seam-kernels' `SET_CONDITION`, launched by the stream backend.
//!
//! On where the driver has them, off with `SEAM_CUDA_CONDITIONAL=0`
//! (`super::conditional_nodes`).

use super::{check, conditional_nodes, driver::Stream};
use cudarc::driver::sys as cu;
use seam::{ConditionalKind, ErrorKind};
use std::ptr;

/// The graph the stream `s` is capturing into and the nodes the next
/// captured work would depend on (valid until the next call on `s`).
pub(super) fn capture_info(
    s: cu::CUstream,
) -> Result<(cu::CUgraph, *const cu::CUgraphNode, usize), ErrorKind> {
    const CALL: &str = "cuStreamGetCaptureInfo";
    let mut status = cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut graph: cu::CUgraph = ptr::null_mut();
    let mut deps: *const cu::CUgraphNode = ptr::null();
    let mut n: usize = 0;
    // SAFETY: the stream is live (the backend's, or a body stream made
    // below); every out-pointer is valid; the id and edge data are
    // optional (null): our edges carry no data.
    check(CALL, unsafe {
        cu::cuStreamGetCaptureInfo_v3(
            s,
            &mut status,
            ptr::null_mut(),
            &mut graph,
            &mut deps,
            ptr::null_mut(),
            &mut n,
        )
    })?;
    if status != cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE || graph.is_null() {
        return Err(ErrorKind::driver(
            CALL,
            format!("the capture is {status:?}"),
        ));
    }
    Ok((graph, deps, n))
}

impl Stream {
    /// A new conditional handle of the graph being captured into.
    pub(super) fn new_conditional_handle(&self) -> Result<u64, ErrorKind> {
        conditional_nodes().map_err(|reason| ErrorKind::ConditionalUnsupported { reason })?;
        let (graph, _, _) = capture_info(self.capturing())?;
        let mut handle: cu::CUgraphConditionalHandle = 0;
        // SAFETY: the symbol is present (`conditional_nodes`); `graph` is
        // the live graph of the capture (just returned); the context is
        // the stream's, current (the backend selects it); `handle` is a
        // valid out-pointer. Default value 0, no flags: the setter kernel
        // assigns it before the node reads it, every launch.
        check("cuGraphConditionalHandleCreate", unsafe {
            cu::cuGraphConditionalHandleCreate(&mut handle, graph, self.context.raw(), 0, 0)
        })?;
        Ok(handle)
    }

    /// Add a conditional node of `kind` over `handle` after the work
    /// captured so far, and capture its body from now on.
    pub(super) fn open_body(&self, kind: ConditionalKind, handle: u64) -> Result<(), ErrorKind> {
        conditional_nodes().map_err(|reason| ErrorKind::ConditionalUnsupported { reason })?;
        let at = self.capturing();
        let (graph, deps, n) = capture_info(at)?;
        // SAFETY: a C struct of integers, pointers and a union of such:
        // all zeros is a valid value (the driver's documented "zero the
        // reserved fields").
        let mut params: cu::CUgraphNodeParams = unsafe { std::mem::zeroed() };
        params.type_ = cu::CUgraphNodeType::CU_GRAPH_NODE_TYPE_CONDITIONAL;
        params.__bindgen_anon_1.conditional = cu::CUDA_CONDITIONAL_NODE_PARAMS {
            handle,
            type_: match kind {
                ConditionalKind::If => cu::CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_IF,
                ConditionalKind::While { .. } => {
                    cu::CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_WHILE
                }
            },
            size: 1,
            phGraph_out: ptr::null_mut(),
            ctx: self.context.raw(),
        };
        let mut node: cu::CUgraphNode = ptr::null_mut();
        // SAFETY: the symbol is present; `graph` is the capture's live
        // graph and `deps` its `n` current dependencies (returned just
        // above, read during the call); `params` is a conditional node's,
        // over a handle of this graph, in the stream's context; the driver
        // writes the node and the body graph's handle into `params`.
        check("cuGraphAddNode", unsafe {
            cu::cuGraphAddNode_v2(&mut node, graph, deps, ptr::null(), n, &mut params)
        })?;
        // SAFETY: as above; the node is the one just added, a node of the
        // capture's graph: work captured next depends on it alone.
        check("cuStreamUpdateCaptureDependencies", unsafe {
            cu::cuStreamUpdateCaptureDependencies_v2(
                at,
                &mut node,
                ptr::null(),
                1,
                cu::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES
                    as u32,
            )
        })?;
        // SAFETY: the driver filled `phGraph_out` with `size` = 1 body
        // graph, owned by the node (valid while the graph lives).
        let body = unsafe {
            let out = params.__bindgen_anon_1.conditional.phGraph_out;
            if out.is_null() {
                ptr::null_mut()
            } else {
                *out
            }
        };
        if body.is_null() {
            return Err(ErrorKind::driver(
                "cuGraphAddNode",
                "the conditional node has no body graph",
            ));
        }
        let s = self.body_stream()?;
        // SAFETY: `s` is a live stream of this context, not capturing (a
        // spare or a new one); `body` is the node's live, empty body graph;
        // no dependencies (null, 0); thread-local mode as the main capture.
        let r = check("cuStreamBeginCaptureToGraph", unsafe {
            cu::cuStreamBeginCaptureToGraph(
                s,
                body,
                ptr::null(),
                ptr::null(),
                0,
                cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        });
        match r {
            Ok(()) => {
                self.bodies.borrow_mut().push(s);
                Ok(())
            }
            Err(e) => {
                self.spare.borrow_mut().push(s);
                Err(e)
            }
        }
    }

    /// End the innermost body's capture: work is captured after its node.
    pub(super) fn close_body(&self) -> Result<(), ErrorKind> {
        let s = self
            .bodies
            .borrow_mut()
            .pop()
            .ok_or(ErrorKind::NoOpenConditional)?;
        let mut g: cu::CUgraph = ptr::null_mut();
        // SAFETY: `s` is capturing into a body graph (opened above); the
        // graph returned is that body, owned by its node: not destroyed
        // here.
        let r = unsafe { cu::cuStreamEndCapture(s, &mut g) };
        self.spare.borrow_mut().push(s);
        check("cuStreamEndCapture", r)
    }

    /// End every open body's capture (the main capture ends or is
    /// abandoned): errors are the main capture's to report.
    pub(super) fn close_all_bodies(&self) {
        while !self.bodies.borrow().is_empty() {
            let _ = self.close_body();
        }
    }

    /// A stream to capture a body on: a spare one, or a new one.
    fn body_stream(&self) -> Result<cu::CUstream, ErrorKind> {
        if let Some(s) = self.spare.borrow_mut().pop() {
            return Ok(s);
        }
        let mut s: cu::CUstream = ptr::null_mut();
        // SAFETY: `s` is a valid out-pointer; the stream's context is
        // current (the backend selects it before every call).
        check("cuStreamCreate", unsafe {
            cu::cuStreamCreate(&mut s, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(s)
    }
}
