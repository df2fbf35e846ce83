//! The seam between the shared stream backend and a vendor: the driver
//! calls that differ between CUDA and HIP ([`GraphDriver`], [`StreamDriver`],
//! implemented by each backend's `sys` stream type, whose method bodies are
//! the FFI calls) and what each vendor brings on top of its driver
//! ([`Compiler`]: kernel compilation; [`VendorBlas`]: a vendor BLAS, or
//! [`NoBlas`]).
//!
//! Handles are owned values; `destroy_*` and `free` consume them. Real
//! drivers also release on `Drop`, but the shared logic always releases
//! explicitly, so the order is the one written in this crate.

use crate::cache::OnceMap;
use crate::launch::{KernelLaunch, VendorLaunch};
use seam::{ConditionalKind, DType, ErrorKind, OpKind};
use std::sync::Arc;

/// Stream capture, graphs and events: the calls the capture logic
/// ([`crate::StreamGraphs`]) and device timing ([`crate::EventTimer`]) make.
pub trait GraphDriver {
    /// A captured graph (topology).
    type Graph;
    /// An instantiated, launchable graph.
    type Exec;
    /// A timing event.
    type Event;
    /// A kernel node of a captured graph. Not an owner: the graph it belongs
    /// to owns it, and the handle is only meaningful while that graph lives
    /// (the shared logic keeps each node with its graph, [`crate::StreamGraphs`]).
    type Node;

    /// The driver's prefix for a call, for error messages (`cu`, `hip`).
    fn api(&self) -> &'static str;

    /// Start stream capture (thread-local mode).
    fn begin_capture(&self) -> Result<(), ErrorKind>;
    /// End stream capture. The stream leaves capture mode whatever the result.
    fn end_capture(&self) -> Result<Self::Graph, ErrorKind>;
    /// Whether the stream is still capturing.
    fn is_capturing(&self) -> Result<bool, ErrorKind>;
    /// While capturing, right after a kernel launch on the stream: the node
    /// that launch added (CUDA: `cuStreamGetCaptureInfo`'s dependency set,
    /// HIP: `hipStreamGetCaptureInfo_v2`'s, which after one launch on one
    /// stream is exactly that launch's node). An error if the set is not one
    /// kernel node.
    fn captured_node(&self) -> Result<Self::Node, ErrorKind>;
    /// Instantiate a graph (CUDA: 3 arguments; HIP: 5).
    fn instantiate(&self, graph: &Self::Graph) -> Result<Self::Exec, ErrorKind>;
    /// Upload the exec's work ahead of its first launch.
    fn upload(&self, exec: &Self::Exec) -> Result<(), ErrorKind>;
    /// Queue one launch of the exec on the stream.
    fn launch(&self, exec: &Self::Exec) -> Result<(), ErrorKind>;
    /// Block until the stream is idle.
    fn synchronize(&self) -> Result<(), ErrorKind>;
    /// Release an exec (default: its `Drop`, for owning handle types).
    fn destroy_exec(&self, exec: Self::Exec) {
        drop(exec);
    }
    /// Release a graph after every exec made from it (default: its `Drop`).
    fn destroy_graph(&self, graph: Self::Graph) {
        drop(graph);
    }

    // --- events (device timing) ---
    /// Whether the event calls device timing needs are there; `Err` says why not.
    fn events_available(&self) -> Result<(), String> {
        Ok(())
    }
    fn create_event(&self) -> Result<Self::Event, ErrorKind>;
    /// Record the event on the stream (after all work queued so far).
    fn record_event(&self, event: &Self::Event) -> Result<(), ErrorKind>;
    /// Block until the event has completed.
    fn wait_event(&self, event: &Self::Event) -> Result<(), ErrorKind>;
    /// Milliseconds from `start` to `end`, both completed.
    fn elapsed_ms(&self, start: &Self::Event, end: &Self::Event) -> Result<f32, ErrorKind>;
    /// Release an event (default: its `Drop`).
    fn destroy_event(&self, event: Self::Event) {
        drop(event);
    }
    /// Whether an event can be recorded into a capture as a node of the
    /// graph (node timing); `Err` says why not.
    fn node_events_available(&self) -> Result<(), String>;
    /// Record `event` into the open capture as a node after the work
    /// captured so far, and make it what the next captured work depends
    /// on (CUDA: `cuEventRecordWithFlags` with `CU_EVENT_RECORD_EXTERNAL`):
    /// every replay of the graph records it.
    fn record_event_in_capture(&self, event: &Self::Event) -> Result<(), ErrorKind>;

    // --- conditional nodes (C14); a driver without them says why ---
    /// Whether the capture can hold conditional nodes; `Err` says why not.
    fn conditional_available(&self) -> Result<(), String>;
    /// In the open capture: a new conditional handle of the graph being
    /// captured into (the innermost body's, inside one), for the node
    /// [`begin_body`](GraphDriver::begin_body) adds.
    fn conditional_handle(&self) -> Result<u64, ErrorKind>;
    /// Add a conditional node of `kind` over `handle` after the work
    /// captured so far; until [`end_body`](GraphDriver::end_body), kernels
    /// (and [`captured_node`](GraphDriver::captured_node)) go to its body.
    fn begin_body(&self, kind: ConditionalKind, handle: u64) -> Result<(), ErrorKind>;
    /// Close the innermost body: work is captured after its node again.
    fn end_body(&self) -> Result<(), ErrorKind>;
}

/// One device's stream: memory, modules and kernel launches on top of the
/// capture calls. The backend calls [`select`](StreamDriver::select) at the
/// top of every seam call and before releasing anything.
pub trait StreamDriver: GraphDriver + Send {
    /// One device allocation.
    type Memory: Send;
    /// A loaded module (code object).
    type Module;
    /// A kernel entry point; keeps its module loaded.
    type Function: Clone + Send + 'static;

    /// Make this device current on the calling thread (CUDA: the context;
    /// HIP: `hipSetDevice`).
    fn select(&self) -> Result<(), ErrorKind>;

    /// Allocate `bytes` (> 0) of device memory (not stream-ordered; core
    /// refuses an allocation inside a capture, C5).
    fn alloc(&self, bytes: usize) -> Result<Self::Memory, ErrorKind>;
    /// Size of an allocation in bytes, as asked for.
    fn memory_bytes(&self, memory: &Self::Memory) -> usize;
    /// The allocation's device address, as a kernel parameter holds it.
    fn device_address(&self, memory: &Self::Memory) -> u64;
    /// Release an allocation (default: its `Drop`). The backend waits for
    /// the stream first.
    fn free(&self, memory: Self::Memory) {
        drop(memory);
    }
    /// Copy `data` in at `offset` after all work queued on the stream, and
    /// wait, so `data` may be reused when this returns. Checks the range.
    fn write(&self, memory: &Self::Memory, offset: usize, data: &[u8]) -> Result<(), ErrorKind>;
    /// Copy out from `offset` after all queued work, and wait. Checks the range.
    fn read(&self, memory: &Self::Memory, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind>;

    /// Load a compiled image (cubin, PTX ending in NUL, AMD code object).
    fn load_module(&self, image: &[u8]) -> Result<Self::Module, ErrorKind>;
    /// Look an entry point up by name.
    fn function(&self, module: &Self::Module, name: &str) -> Result<Self::Function, ErrorKind>;
    /// Queue the kernel (or record it, while capturing). [`KernelLaunch`]
    /// can only be made by this crate, after checking every buffer against
    /// the op: what the driver's `unsafe` launch relies on.
    fn launch_kernel(&self, launch: &KernelLaunch<'_, Self>) -> Result<(), ErrorKind>;
    /// While capturing: record `launch` as a branch beside the captured
    /// work, and return its node. It depends on what the next captured work
    /// would have depended on, and the work captured after it does not
    /// depend on it: the stream's capture dependencies are read before the
    /// launch and set back after it (CUDA `cuStreamGetCaptureInfo` and
    /// `cuStreamUpdateCaptureDependencies`, HIP the same calls by HIP's
    /// names), with `join` (a node recorded beside earlier, if any) added:
    /// the next captured work waits for that one. Node timing's stamp
    /// kernels are recorded so, each joined one launch later
    /// ([`StreamDriver::node_stamps`]).
    fn launch_beside(
        &self,
        launch: &KernelLaunch<'_, Self>,
        join: Option<&Self::Node>,
    ) -> Result<Self::Node, ErrorKind>;
    /// Replace the parameters of kernel node `node` of `graph` with
    /// `launch`'s (grid, block, function and packed arguments), where `at`
    /// says: in one exec instantiated from `graph` (CUDA
    /// `cuGraphExecKernelNodeSetParams`, HIP `hipGraphExecKernelNodeSetParams`;
    /// launches of the exec already queued must keep the old parameters,
    /// later ones get the new), or in the graph itself (CUDA
    /// `cuGraphKernelNodeSetParams`, HIP `hipGraphKernelNodeSetParams`; execs
    /// instantiated afterwards run the new parameters, execs already made
    /// keep theirs). The implementation checks that `node` is one of
    /// `graph`'s nodes before handing it to the driver, in O(1) (a rebind
    /// patches every changed node: CUDA and HIP keep the graph's node set,
    /// listed once when the capture ended, with the graph).
    fn set_kernel_node(
        &self,
        at: NodeIn<'_, Self::Exec>,
        graph: &Self::Graph,
        node: &Self::Node,
        launch: &KernelLaunch<'_, Self>,
    ) -> Result<(), ErrorKind>;
    /// Whether [`set_kernel_node`](StreamDriver::set_kernel_node) can only
    /// keep queued launches on the old parameters if the stream is idle
    /// first; then the backend waits for the stream before patching.
    /// CUDA: no (its documentation promises it); HIP: yes (see docs/hip.md).
    /// No default: each driver says which.
    fn update_needs_idle_stream(&self) -> bool;
    /// Whether a node-timed graph marks its launches with stamp kernels
    /// (`seam_kernels::stamp::STAMP`: the device clock written into a buffer
    /// after each launch, each a branch beside the launches
    /// ([`launch_beside`](StreamDriver::launch_beside)), set in the graph
    /// before it is instantiated) rather than event record nodes after the
    /// first. No default: each driver says which (CUDA: stamps, cheaper by
    /// the probe in docs/tracing.md; HIP: events, its CUDA C has no
    /// `%globaltimer`).
    fn node_stamps(&self) -> bool;
    /// Whether an update back to launches a graph ran before may switch to
    /// an exec kept for them (`seam::kept`) rather than patch in place. No
    /// default: each driver says which (CUDA unless `SEAM_CUDA_KEEP_EXECS=0`;
    /// HIP only with `SEAM_HIP_KEEP_EXECS=1`, never run on an AMD GPU).
    fn keeps_execs(&self) -> bool;
}

/// Where [`StreamDriver::set_kernel_node`] sets a node's parameters.
#[derive(Debug)]
pub enum NodeIn<'a, E> {
    /// In this exec only (instantiated from the graph): an in-place patch.
    Exec(&'a E),
    /// In the graph, for the execs instantiated from it afterwards. On an
    /// H100 an exec made so replays at the captured graph's speed, where
    /// one patched node by node in the exec replays 12 % slower (a chain of
    /// 1000 one-thread kernels, 891 against 999 µs of GPU time;
    /// `bench/probes/idle_probe.cu`, 2026-12-05): what a kept exec
    /// (`seam::kept`) is made with.
    Graph,
}

/// Every entry point of one op on one device, one per dtype it accepts.
pub type OpKernels<F> = Vec<(DType, F)>;

/// Loaded kernels by (device ordinal, op), kept for the process.
pub type SharedKernels<F> = OnceMap<(usize, OpKind), OpKernels<F>>;

/// A vendor's kernel compiler (NVRTC, hipRTC): the compiled images of the
/// catalogue's kernels for this device. Implemented outside the `sys`
/// layers.
pub trait Compiler<D: StreamDriver>: Send {
    /// The compiled image of `op`'s kernels for this device (compiled once
    /// per process per architecture; the compiler caches it).
    fn image(&self, op: OpKind) -> Result<Arc<Vec<u8>>, ErrorKind>;
    /// Functions loaded once per process per (device, op): the modules stay
    /// loaded (CUDA: in the retained primary context) for backends opened
    /// later. `None`: each backend loads its own.
    fn shared_kernels(&self) -> Option<&'static SharedKernels<D::Function>> {
        None
    }
    /// What its kernels promise for f32 subnormals (C11), from the options
    /// it compiles them with. The default promises nothing.
    fn subnormals(&self) -> seam::Subnormals {
        seam::Subnormals::MayFlush("the compiler declares nothing about f32 subnormals".into())
    }
}

/// A vendor BLAS (cuBLAS) that takes some ops instead of a kernel.
/// Implemented outside the `sys` layers; [`NoBlas`] where the vendor has
/// none.
pub trait VendorBlas<D: StreamDriver>: Send {
    /// Whether `op` goes to the vendor library instead of a kernel.
    fn routes(&self, op: OpKind) -> bool;
    /// Whether the library's handle and workspace exist.
    fn ready(&self) -> bool;
    /// Create the handle and its workspace. This allocates: the backend
    /// never calls it while capturing (C7).
    fn prepare(&mut self, driver: &D) -> Result<(), ErrorKind>;
    /// Queue `launch` through the library on the driver's stream.
    fn launch(&self, driver: &D, launch: &VendorLaunch<'_, D>) -> Result<(), ErrorKind>;
}

/// No vendor BLAS (HIP: no hipBLAS): every op, GEMM included, runs as a
/// kernel, there is nothing to prepare, and a vendor launch is refused by
/// op and dtype.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoBlas;

impl<D: StreamDriver> VendorBlas<D> for NoBlas {
    fn routes(&self, _op: OpKind) -> bool {
        false
    }
    fn ready(&self) -> bool {
        true
    }
    fn prepare(&mut self, _driver: &D) -> Result<(), ErrorKind> {
        Ok(())
    }
    fn launch(&self, _driver: &D, launch: &VendorLaunch<'_, D>) -> Result<(), ErrorKind> {
        Err(ErrorKind::OpUnsupported {
            op: launch.op(),
            dtype: launch.dtype(),
        })
    }
}
