//! `StreamBackend`: the seam over one stream of one CUDA or HIP device. One
//! non-blocking stream per backend, kernels from the vendor's runtime
//! compiler, loaded once; an op the vendor's BLAS serves goes there.

mod bodies;
mod stamps;
#[cfg(test)]
pub(crate) use bodies::MAX_DEPTH;

use crate::driver::{Compiler, NoBlas, NodeIn, OpKernels, StreamDriver, VendorBlas};
use crate::graphs::{LaunchNode, StreamGraphs};
use crate::launch::{KernelLaunch, VendorLaunch};
use crate::tables::KernelTable;
use crate::timing::EventTimer;
use seam::kept::{after, Plan};
use seam::ops::BufferList;
use seam::table::Buffers;
use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, DeviceSpan, ErrorKind, Launch, OpKind, RawBuffer,
    RawGraph, ReplayTarget, ResourceCounts, UpdateSupport,
};

/// One device behind the seam.
///
/// Fields drop in declaration order, after `Drop` has released the graphs,
/// events and buffers: kernels, the compiler and the vendor BLAS's handles
/// before the driver (the stream, then the CUDA context).
pub struct StreamBackend<D: StreamDriver, C: Compiler<D>, B: VendorBlas<D> = NoBlas> {
    info: DeviceInfo,
    /// Capture state, the current exec and the handles.
    graphs: StreamGraphs<D>,
    /// Events around traced work (device timing).
    timer: EventTimer<D>,
    /// Graphs captured from now on record node events (node timing).
    node_timing: bool,
    /// The tag of the open timed bracket (`begin_timed` .. `end_timed`).
    bracket: Option<u64>,
    /// The capture's open conditional bodies, innermost last (`bodies.rs`).
    bodies: Vec<bodies::OpenBody>,
    /// The WHILE nodes' iteration counters, a word per nesting depth
    /// (`bodies.rs`), allocated before the first capture where the driver
    /// has conditional nodes; not a seam buffer.
    counters: Option<D::Memory>,
    /// The word node-timed captures' stamp kernels write until their graph
    /// has a stamp buffer of its own (`stamps.rs`), allocated before the
    /// first such capture; not a seam buffer. Graphs whose stamps could not
    /// be given a buffer keep writing it, so it lives as long as the backend.
    stamp_scratch: Option<D::Memory>,
    kernels: KernelTable<D::Function>,
    /// Live buffers and their bytes (`ResourceCounts::bytes`).
    buffers: Buffers<D::Memory>,
    compiler: C,
    blas: B,
    driver: D,
}

impl<D: StreamDriver, C: Compiler<D>, B: VendorBlas<D>> StreamBackend<D, C, B> {
    /// `driver` owns the device's stream (made current already); `compiler`
    /// makes its kernels and `blas` takes the ops it routes ([`NoBlas`]:
    /// none).
    pub fn new(info: DeviceInfo, driver: D, compiler: C, blas: B) -> Self {
        StreamBackend {
            info,
            graphs: StreamGraphs::new(),
            timer: EventTimer::new(),
            node_timing: false,
            bracket: None,
            bodies: Vec::new(),
            counters: None,
            stamp_scratch: None,
            kernels: KernelTable::new(),
            buffers: Buffers::new(),
            compiler,
            blas,
            driver,
        }
    }

    /// The vendor BLAS (where GEMMs go, for one).
    pub fn blas(&self) -> &B {
        &self.blas
    }

    /// Load `op`'s module (compiling it once per process) and look up every
    /// entry point it has, one per dtype the op accepts.
    fn load_kernels(&mut self, op: OpKind) -> Result<(), ErrorKind> {
        if op
            .dtypes()
            .iter()
            .all(|d| self.kernels.get(op, *d).is_some())
        {
            return Ok(());
        }
        let (d, t) = (&self.driver, &self.compiler);
        let fs = match t.shared_kernels() {
            Some(shared) => {
                shared.get_or_try_insert((self.info.index, op), || load_op(d, t, op))?
            }
            None => load_op(d, t, op)?,
        };
        for (dt, f) in fs {
            self.kernels.insert(op, dt, f);
        }
        Ok(())
    }

    fn buffer(&self, raw: RawBuffer) -> Result<&D::Memory, ErrorKind> {
        self.buffers.get(raw)
    }

    /// The entry point of the launch's (op, dtype), loaded already.
    fn kernel(&self, l: &Launch) -> Result<&D::Function, ErrorKind> {
        match self.kernels.get(l.op, l.dtype) {
            Some(f) => Ok(f),
            None => Err(ErrorKind::OpUnsupported {
                op: l.op,
                dtype: l.dtype,
            }),
        }
    }

    /// The launch's buffers, inline (at most eight: no allocation).
    fn bindings(&self, l: &Launch) -> Result<BufferList<&D::Memory>, ErrorKind> {
        l.buffers.iter().map(|v| self.buffer(v.buffer)).collect()
    }

    fn launch_vendor(&mut self, l: &Launch) -> Result<(), ErrorKind> {
        if !self.blas.ready() {
            // Creating the handle and workspace allocates: not inside a
            // capture. Fail loudly before touching the stream (C7).
            if self.graphs.is_capturing() {
                return Err(ErrorKind::NotPrepared {
                    op: l.op,
                    dtype: l.dtype,
                });
            }
            self.blas.prepare(&self.driver)?;
        }
        let launch = VendorLaunch::new(&self.driver, l, self.bindings(l)?)?;
        self.blas.launch(&self.driver, &launch)
    }

    /// Keep a launch the open capture just recorded, in capture order,
    /// and record the node event or stamp kernel after it where the graph
    /// is node-timed.
    fn note_captured(&mut self, node: LaunchNode<D::Node>) {
        self.graphs.record_launch(node);
        self.graphs.mark(&self.driver);
        self.stamp();
    }

    /// Read the node timing of the last traced replay of `target`, if
    /// unread (waiting for it): the next replay records it again.
    fn read_nodes(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        let (timer, driver) = (&mut self.timer, &self.driver);
        let (Some(nodes), stamps) = self.graphs.captured_mut(target)?.nodes_and_stamps() else {
            return Ok(());
        };
        match nodes.unread.take() {
            Some(tag) => stamps::read_marks(timer, driver, tag, nodes, stamps),
            None => Ok(()),
        }
    }

    /// C13: every change is checked before any node is touched, so a
    /// refused update patches nothing. Then the graph switches to a kept
    /// exec that runs the result, or gets a fresh one where it ran the
    /// result before, or has its changed nodes patched in place
    /// (`seam::kept`); only the last packs arguments for the changed nodes.
    fn patch(
        &mut self,
        target: ReplayTarget,
        now: &mut Vec<Launch>,
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        let api = self.driver.api();
        let set_params = || format!("{api}GraphExecKernelNodeSetParams");
        let captured = self.graphs.captured(target)?;
        let launches = captured.launches();
        let mut nodes = Vec::with_capacity(changes.len());
        for (index, l) in changes {
            let index = *index;
            // Core gave an index the graph holds and a launch of the op and
            // dtype recorded there (the trait's guarantees): not checked again.
            let node = match &launches[index] {
                LaunchNode::Kernel(node) => node,
                // A cuBLAS call is captured as whatever nodes cuBLAS chose
                // (kernels of its own, with its own argument layout, maybe a
                // memset): there is no kernel node of ours to patch. Refused,
                // and core re-records the whole graph instead, which is correct.
                LaunchNode::Vendor => {
                    return Err(ErrorKind::driver(
                        set_params(),
                        format!(
                            "launch {index} ({}/{}) is a vendor library call: its graph nodes are the library's, not patched in place",
                            l.op, l.dtype
                        ),
                    ))
                }
                LaunchNode::Unknown(e) => {
                    return Err(ErrorKind::driver(
                        set_params(),
                        format!("launch {index}'s graph node is unknown ({e})"),
                    ))
                }
            };
            if self.blas.routes(l.op) {
                return Err(ErrorKind::driver(
                    set_params(),
                    format!("launch {index} ({}) now goes to the vendor library", l.op),
                ));
            }
            nodes.push(node);
        }
        let keep = self.driver.keeps_execs();
        let plan = if keep {
            captured.runs().plan(now, changes)
        } else {
            Plan::InPlace
        };
        match plan {
            Plan::Nothing => return Ok(()),
            Plan::Swap(i) => {
                let (runs, exec) = self.graphs.captured_mut(target)?.runs_mut();
                runs.swap(exec, i, now);
                return Ok(());
            }
            Plan::Fresh => {
                let want = after(now, changes);
                return self.fresh_exec(target, now, want);
            }
            Plan::InPlace => {}
        }
        let mut patches = Vec::with_capacity(changes.len());
        for (node, (_, l)) in nodes.into_iter().zip(changes) {
            let f = self.kernel(l)?;
            let launch = KernelLaunch::new(&self.driver, f, l, self.bindings(l)?)?;
            patches.push((node, launch));
        }
        if self.driver.update_needs_idle_stream() {
            self.driver.synchronize()?;
        }
        // The changes are patched in order, up to the first failure. A
        // partly patched exec is never replayed: core re-records the graph,
        // and refuses its replays if that fails too.
        let mut patched = Ok(());
        for (node, launch) in &patches {
            // CUDA: "The modifications only affect future launches of
            // hGraphExec. Already enqueued or running launches of hGraphExec
            // are not affected by this call." (cuGraphExecKernelNodeSetParams,
            // CUDA Driver API reference): what C13 needs, replays queued
            // before the update run with the old bindings. HIP documents no
            // such rule, so its driver asks for an idle stream first
            // (update_needs_idle_stream, above; docs/hip.md).
            patched = self.driver.set_kernel_node(
                NodeIn::Exec(captured.exec()),
                captured.graph(),
                node,
                launch,
            );
            if patched.is_err() {
                break;
            }
        }
        drop(patches);
        let runs = self.graphs.captured_mut(target)?.runs_mut().0;
        match &patched {
            Ok(()) if keep => runs.patched(now, changes, true),
            Ok(()) => {}
            Err(_) => runs.lose(),
        }
        patched
    }

    /// [`Plan::Fresh`]: every kernel node of `target`'s graph set to what
    /// `want` runs, in the graph itself, then a new exec of it, made
    /// current (an exec made so replays at the captured speed, where one
    /// patched in the exec does not: [`NodeIn::Graph`]). The old exec is
    /// kept as a spare (one pushed out first, once the stream is idle), or
    /// destroyed where it was patched in place. The graph's nodes are only
    /// ever read by an instantiation, and every instantiation after the
    /// capture's sets them all first, so a failure part-way leaves nothing
    /// stale; nothing else changes where it fails before the swap: core
    /// then re-records.
    fn fresh_exec(
        &mut self,
        target: ReplayTarget,
        now: &mut Vec<Launch>,
        want: Vec<Launch>,
    ) -> Result<(), ErrorKind> {
        if let Some(old) = self.graphs.captured_mut(target)?.runs_mut().0.make_room() {
            // A replay of it may still be running (C8).
            self.driver.synchronize()?;
            self.driver.destroy_exec(old);
        }
        let captured = self.graphs.captured(target)?;
        for (node, l) in captured.launches().iter().zip(&want) {
            // Vendor and unknown nodes are never patched: every exec of
            // the graph runs them as captured.
            if let LaunchNode::Kernel(node) = node {
                let f = self.kernel(l)?;
                let launch = KernelLaunch::new(&self.driver, f, l, self.bindings(l)?)?;
                self.driver
                    .set_kernel_node(NodeIn::Graph, captured.graph(), node, &launch)?;
            }
        }
        let fresh = self.driver.instantiate(captured.graph())?;
        if let Err(e) = self.driver.upload(&fresh) {
            self.driver.destroy_exec(fresh);
            return Err(e);
        }
        let (runs, exec) = self.graphs.captured_mut(target)?.runs_mut();
        if let Some(patched) = runs.keep(exec, fresh, now, want) {
            // A replay of it may still be running (C8). Where the wait
            // fails the stream is broken; the exec is destroyed all the
            // same (the driver frees one in flight when it completes).
            let idle = self.driver.synchronize();
            self.driver.destroy_exec(patched);
            idle?;
        }
        Ok(())
    }

    /// Block the host until the stream is idle, with the device current
    /// (used before releasing anything work may still use).
    fn quiesce(&self) -> Result<(), ErrorKind> {
        self.driver.select()?;
        self.driver.synchronize()
    }
}

/// Compile (once per process) and load `op`'s module; every entry point.
fn load_op<D: StreamDriver, C: Compiler<D>>(
    d: &D,
    t: &C,
    op: OpKind,
) -> Result<OpKernels<D::Function>, ErrorKind> {
    let image = t.image(op)?;
    let module = d.load_module(&image)?;
    op.dtypes()
        .iter()
        .map(|&dt| Ok((dt, d.function(&module, &seam_kernels::entry_point(op, dt))?)))
        .collect()
}

#[allow(unsafe_code)] // the trait's `unsafe fn`s (the trust boundary, seam::Backend)
impl<D, C, B> Backend for StreamBackend<D, C, B>
where
    D: StreamDriver,
    D::Graph: Send,
    D::Exec: Send,
    D::Event: Send,
    D::Node: Send,
    C: Compiler<D>,
    B: VendorBlas<D>,
{
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn capture_support(&self) -> CaptureSupport {
        CaptureSupport::Native
    }

    /// As the compiler compiled the kernels (NVRTC, hipRTC options).
    fn subnormals(&self) -> seam::Subnormals {
        self.compiler.subnormals()
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.driver.select()?;
        let mem = self.driver.alloc(bytes)?;
        Ok(self.buffers.insert(mem, bytes as u64))
    }

    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        // No graph uses it (the trait's guarantees); queued eager work may
        // still read or write it.
        self.quiesce()?;
        // Execs kept for launch sets that bind it go first (`seam::kept`).
        self.graphs.forget_buffer(&self.driver, buffer);
        let mem = self.buffers.remove(buffer)?;
        self.driver.free(mem);
        Ok(())
    }

    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        self.driver.select()?;
        self.driver.write(self.buffer(buffer)?, offset, data)
    }

    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        self.driver.select()?;
        self.driver.read(self.buffer(buffer)?, offset, out)
    }

    unsafe fn launch(&mut self, l: &Launch) -> Result<(), ErrorKind> {
        self.driver.select()?;
        if self.blas.routes(l.op) {
            self.launch_vendor(l)?;
            self.note_captured(LaunchNode::Vendor);
            return Ok(());
        }
        if self.kernels.get(l.op, l.dtype).is_none() {
            // begin_capture loads every module, so this is eager-only in practice.
            self.load_kernels(l.op)?;
        }
        let f = self.kernel(l)?;
        let launch = KernelLaunch::new(&self.driver, f, l, self.bindings(l)?)?;
        self.driver.launch_kernel(&launch)?;
        if self.graphs.is_capturing() {
            // The kernel is in the graph now; which node it is, asked at
            // once (the driver's answer is only valid until the next call on
            // the stream). If the driver cannot say, the launch still
            // stands (the graph holds it and core counts it); only an
            // in-place update of it is refused, and core re-records instead.
            let node = match self.driver.captured_node() {
                Ok(node) => LaunchNode::Kernel(node),
                Err(e) => LaunchNode::Unknown(e),
            };
            self.note_captured(node);
        }
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.quiesce()
    }

    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        self.driver.select()?;
        for &(op, _) in ops {
            if !self.blas.routes(op) {
                self.load_kernels(op)?;
            } else if !self.blas.ready() {
                // The vendor handle and workspace, so a captured call allocates nothing (C7).
                self.blas.prepare(&self.driver)?;
            }
        }
        Ok(())
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.driver.select()?;
        // Modules are loaded (and compiled, once per process) outside the
        // capture: loading allocates (cuModuleLoadData, hipModuleLoadData),
        // so recording a kernel never loads or allocates anything.
        for op in OpKind::ALL {
            if !self.blas.routes(op) {
                self.load_kernels(op)?;
            }
        }
        // So is the setter of conditional nodes, where the driver has them.
        if self.driver.conditional_available().is_ok() {
            self.load_kernels(bodies::setter())?;
            if self.counters.is_none() {
                self.counters = Some(self.driver.alloc(4 * bodies::MAX_DEPTH)?);
            }
        }
        let stamped = self.prepare_stamps()?;
        self.bodies.clear();
        self.graphs
            .begin_capture(&self.driver, self.node_timing, stamped)?;
        self.stamp();
        Ok(())
    }

    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        self.driver.select()?;
        // The exec being replaced may still be running: waited for (C8).
        // Its last traced replay's node events are read before it goes (a
        // failed read loses those spans, not the capture).
        let (timer, driver, kernels) = (&mut self.timer, &self.driver, &self.kernels);
        let set = |g: &D::Graph, n: &[D::Node]| stamps::set_stamps(driver, kernels, g, n);
        self.graphs.end_capture_with(driver, &set, |old| {
            if let (Some(nodes), stamps) = old.nodes_and_stamps() {
                if let Some(tag) = nodes.unread.take() {
                    let _ = stamps::read_marks(timer, driver, tag, nodes, stamps);
                }
            }
        })
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.driver.select()?;
        let (driver, kernels) = (&self.driver, &self.kernels);
        let set = |g: &D::Graph, n: &[D::Node]| stamps::set_stamps(driver, kernels, g, n);
        self.graphs.end_capture_graph_with(driver, &set)
    }

    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.driver.select()?;
        // A node-timed graph's events hold one replay: the last traced
        // one is read (waited for) before this one records them again.
        self.read_nodes(target)?;
        self.graphs.replay(&self.driver, target)?;
        // Inside a bracket its events are this replay's (a bracket the
        // timer did not record, timing being off, has nothing to read them
        // against: `read_nodes` skips it).
        if let (Some(tag), Some(nodes)) =
            (self.bracket, self.graphs.captured_mut(target)?.nodes_mut())
        {
            nodes.unread = Some(tag);
        }
        Ok(())
    }

    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.driver.select()?;
        // Its last traced replay's node events are read before it goes (a
        // failed read loses those spans, not the destroy).
        let _ = self.read_nodes(ReplayTarget::Graph(graph));
        // A replay of it may still be running: wait, then destroy (C8).
        self.graphs.destroy_graph(&self.driver, graph)
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.driver.select()?;
        self.bodies.clear();
        self.graphs.abort_capture(&self.driver)
    }

    /// The driver's conditional nodes, where it has them (CUDA's IF and
    /// WHILE, `bodies.rs`).
    fn conditional_support(&self) -> seam::ConditionalSupport {
        match self.driver.conditional_available() {
            Ok(()) => seam::ConditionalSupport::Native,
            Err(why) => seam::ConditionalSupport::Unsupported(why),
        }
    }

    unsafe fn begin_conditional(&mut self, c: &seam::Conditional) -> Result<(), ErrorKind> {
        self.open_body(c)
    }

    fn end_conditional(&mut self) -> Result<(), ErrorKind> {
        self.close_body()
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.live(),
            bytes: self.buffers.bytes(),
        }
    }

    /// Kernel nodes are patched in the instantiated graph
    /// (`cuGraphExecKernelNodeSetParams`, `hipGraphExecKernelNodeSetParams`),
    /// no re-capture; where the driver keeps execs, an update back to
    /// launches the graph ran before switches to an exec kept for them
    /// (`seam::kept`). A vendor (cuBLAS)
    /// launch is the exception: its update is refused here and core
    /// re-records the graph.
    fn update_support(&self) -> UpdateSupport {
        UpdateSupport::Native
    }

    unsafe fn update_launches(
        &mut self,
        target: ReplayTarget,
        now: &mut Vec<Launch>,
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        self.driver.select()?;
        if self.graphs.is_capturing() {
            return Err(ErrorKind::UpdateInCapture);
        }
        self.patch(target, now, changes)
    }

    fn device_timing(&self) -> Result<(), String> {
        self.driver.events_available()
    }

    /// An event record node before the graph's first launch and, after
    /// each launch, another (HIP) or a stamp kernel after one before the
    /// first launch (CUDA, `backend/stamps.rs`); launch i runs from mark i
    /// to mark i + 1.
    fn node_timing(&self) -> seam::NodeTiming {
        match self
            .driver
            .events_available()
            .and_then(|()| self.driver.node_events_available())
        {
            Ok(()) => seam::NodeTiming::Native,
            Err(why) => seam::NodeTiming::Unavailable(why),
        }
    }

    fn set_node_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        if on {
            if let seam::NodeTiming::Unavailable(reason) = self.node_timing() {
                return Err(ErrorKind::Unavailable { reason });
            }
        }
        self.node_timing = on;
        Ok(())
    }

    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.timer.set(on);
        Ok(())
    }

    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.driver.select()?;
        self.timer.begin(&self.driver, tag)?;
        self.bracket = Some(tag);
        Ok(())
    }

    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.driver.select()?;
        self.bracket = None;
        self.timer.end(&self.driver, tag)
    }

    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.driver.select()?;
        let unread: Vec<ReplayTarget> = self.graphs.node_timed_unread();
        for target in unread {
            self.read_nodes(target)?;
        }
        self.timer.take(&self.driver)
    }
}

impl<D: StreamDriver, C: Compiler<D>, B: VendorBlas<D>> Drop for StreamBackend<D, C, B> {
    fn drop(&mut self) {
        // Handles are released with the device current and the stream idle:
        // an open capture is aborted, every exec goes before its graph, then
        // the events, then (after one more wait) the buffers; the remaining
        // fields then drop in declaration order.
        let _ = self.driver.select();
        self.graphs.release_all(&self.driver);
        self.timer.release_all(&self.driver);
        let _ = self.quiesce();
        let own = self
            .counters
            .take()
            .into_iter()
            .chain(self.stamp_scratch.take());
        for mem in self.buffers.drain().chain(own) {
            self.driver.free(mem);
        }
    }
}
