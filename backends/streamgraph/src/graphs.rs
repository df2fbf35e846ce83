//! One stream's capture state (C1, C3, C8), written once over
//! [`GraphDriver`]. The order every path keeps:
//! - capture: begin → (launches) → end → instantiate → upload; the exec is
//!   kept with its graph and destroyed before it;
//! - replay: launch the exec of the target; the exec made by `end_capture`
//!   (the current one) and handles from `end_capture_graph` never alias (C3);
//! - destroy / replace: wait for the stream before destroying anything a
//!   replay may still be using (C8);
//! - abort: end the capture, destroy whatever graph it produced, and check
//!   the stream has left capture mode;
//! - update (C13): each captured launch's node is kept, in capture order,
//!   with the graph that owns it and the exec made from that graph, so a
//!   node handle never outlives its graph and is only ever paired with that
//!   graph's exec.

use crate::driver::{GraphDriver, StreamDriver};
use crate::timing::NodeEvents;
use seam::kept::Runs;
use seam::table::Graphs;
use seam::{ErrorKind, RawBuffer, RawGraph, ReplayTarget};

/// What one captured launch put in the graph.
pub enum LaunchNode<N> {
    /// A kernel launch: the kernel node it added (patchable in place).
    Kernel(N),
    /// A vendor-library call (cuBLAS): the library chose its nodes (it may
    /// add several, of any kind), so it is never patched in place.
    Vendor,
    /// A kernel was recorded but the driver could not say which node it
    /// added: the launch cannot be patched (an update re-records instead).
    Unknown(ErrorKind),
}

/// An exec and the graph it was instantiated from, destroyed in that order,
/// and the launches captured into the graph (their nodes are the graph's).
pub struct Captured<D: StreamDriver> {
    exec: D::Exec,
    graph: D::Graph,
    launches: Vec<LaunchNode<D::Node>>,
    /// The other execs of `graph` kept for launch sets it ran before, and
    /// the sets it left (`seam::kept`); what `exec` runs is core's record.
    runs: Runs<D::Exec>,
    /// Where it was captured with node timing on: its event record nodes.
    nodes: Option<NodeEvents<D::Event>>,
    /// Events its graph records but nobody reads (node timing dropped in
    /// the middle of its capture): alive as long as the graph.
    kept: Vec<D::Event>,
    /// Where its launches are marked with stamp kernels
    /// ([`StreamDriver::node_stamps`]): the buffer they write, one stamp
    /// (two `u32` words) before the first launch and one after each. Its
    /// graph's stamp nodes write into it, so it lives as long as the graph,
    /// timed or not.
    stamps: Option<D::Memory>,
}

impl<D: StreamDriver> Captured<D> {
    pub fn exec(&self) -> &D::Exec {
        &self.exec
    }
    /// The graph `exec` was instantiated from; every node in
    /// [`launches`](Captured::launches) belongs to it.
    pub fn graph(&self) -> &D::Graph {
        &self.graph
    }
    /// The node of every launch captured into the graph, in capture order
    /// (core's index; core keeps what each launch was).
    pub fn launches(&self) -> &[LaunchNode<D::Node>] {
        &self.launches
    }
    /// Its node events, where it is node-timed.
    pub fn nodes_mut(&mut self) -> Option<&mut NodeEvents<D::Event>> {
        self.nodes.as_mut()
    }
    /// Its node events, where it is node-timed, and its stamps' buffer,
    /// where its launches are marked with stamp kernels.
    pub fn nodes_and_stamps(&mut self) -> (Option<&mut NodeEvents<D::Event>>, Option<&D::Memory>) {
        (self.nodes.as_mut(), self.stamps.as_ref())
    }
    /// What its other execs run (`seam::kept`).
    pub fn runs(&self) -> &Runs<D::Exec> {
        &self.runs
    }
    /// What its other execs run, and the current exec, to switch or patch them.
    pub fn runs_mut(&mut self) -> (&mut Runs<D::Exec>, &mut D::Exec) {
        (&mut self.runs, &mut self.exec)
    }
}

/// One stream's capture state: whether a capture is open, the current exec
/// (`end_capture`) and the handles (`end_capture_graph`).
pub struct StreamGraphs<D: StreamDriver> {
    capturing: bool,
    /// The open capture's launches so far, in capture order: the node
    /// each added.
    recording: Vec<LaunchNode<D::Node>>,
    /// The open capture's node events so far, where node timing is on
    /// (`None` also once one failed to record: the graph is not timed).
    recording_events: Option<Vec<D::Event>>,
    /// The open capture's node events already recorded into its graph
    /// when node timing stopped in the middle of it: its event record
    /// nodes still name them, so they live as long as the graph does.
    kept_events: Vec<D::Event>,
    /// Where the open capture marks its launches with stamp kernels: the
    /// stamp nodes so far (`recording_events` then holds the one event
    /// before the first stamp). `None` also once timing stopped.
    recording_stamps: Option<Vec<D::Node>>,
    /// The exec `end_capture` made (current) and the handles'
    /// (`end_capture_graph`), never aliasing (C3).
    graphs: Graphs<Captured<D>>,
}

impl<D: StreamDriver> Default for StreamGraphs<D> {
    fn default() -> Self {
        StreamGraphs {
            capturing: false,
            recording: Vec::new(),
            recording_events: None,
            kept_events: Vec::new(),
            recording_stamps: None,
            graphs: Graphs::new(),
        }
    }
}

impl<D: StreamDriver> StreamGraphs<D> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a capture is open on the stream.
    pub fn is_capturing(&self) -> bool {
        self.capturing
    }

    /// Graphs alive: the handles plus the current exec, if any.
    pub fn live(&self) -> usize {
        self.graphs.len()
    }

    /// Capture op 2: put the stream in capture mode; `node_timed`: the
    /// graph records an event before its first launch and, unless
    /// `stamps` (then the caller records stamp kernels,
    /// [`record_stamp`](StreamGraphs::record_stamp)), after each.
    pub fn begin_capture(
        &mut self,
        d: &D,
        node_timed: bool,
        stamps: bool,
    ) -> Result<(), ErrorKind> {
        d.begin_capture()?;
        self.capturing = true;
        self.recording.clear();
        self.drop_events(d);
        self.recording_events = node_timed.then(Vec::new);
        self.mark(d);
        self.recording_stamps =
            (node_timed && stamps && self.recording_events.is_some()).then(Vec::new);
        Ok(())
    }

    /// The number of the open capture's next stamp, where it marks its
    /// launches with stamp kernels and is still timed.
    pub fn next_stamp(&self) -> Option<usize> {
        self.recording_stamps.as_ref().map(Vec::len)
    }

    /// The node of the open capture's last stamp kernel, if any.
    pub fn last_stamp(&self) -> Option<&D::Node> {
        self.recording_stamps.as_ref().and_then(|s| s.last())
    }

    /// Keep the node of the open capture's stamp kernel
    /// [`next_stamp`](StreamGraphs::next_stamp) named.
    pub fn record_stamp(&mut self, node: D::Node) {
        if let Some(stamps) = self.recording_stamps.as_mut() {
            stamps.push(node);
        }
    }

    /// Record the open capture's next node event (after a launch), where
    /// its launches are marked with events. One that fails leaves the
    /// graph untimed (its events kept unread until the graph goes): a
    /// launch is never refused for it.
    pub fn mark(&mut self, d: &D) {
        if self.recording_stamps.is_some() {
            return;
        }
        let Some(events) = self.recording_events.as_mut() else {
            return;
        };
        let ev = match d.create_event() {
            Ok(ev) => ev,
            Err(_) => {
                self.untime();
                return;
            }
        };
        let recorded = d.record_event_in_capture(&ev);
        events.push(ev);
        if recorded.is_err() {
            self.untime();
        }
    }

    /// The open capture records no more node events and is captured
    /// untimed (a conditional body, where event nodes may not go). The
    /// events it recorded so far are kept: its graph's event record nodes
    /// name them, and destroying an event such a node names leaves the
    /// graph recording into a freed event (a crash on the H200 when a
    /// node-timed capture opened a body).
    pub fn untime(&mut self) {
        if let Some(events) = self.recording_events.take() {
            self.kept_events.extend(events);
        }
        self.recording_stamps = None;
    }

    /// Destroy the open capture's events (its graph is gone or was never
    /// made).
    fn drop_events(&mut self, d: &D) {
        self.untime();
        for ev in self.kept_events.drain(..) {
            d.destroy_event(ev);
        }
    }

    /// Note a launch the open capture has just recorded (only launches that
    /// succeeded: core's capture-order index counts exactly those).
    pub fn record_launch(&mut self, launch: LaunchNode<D::Node>) {
        if self.capturing {
            self.recording.push(launch);
        }
    }

    /// `buffer` is about to be freed (the stream is idle): the execs kept
    /// for launch sets that bind it are destroyed, and those sets
    /// forgotten (`seam::kept`). No graph holds the buffer itself.
    pub fn forget_buffer(&mut self, d: &D, buffer: RawBuffer) {
        let targets: Vec<ReplayTarget> = self.graphs.iter().map(|(t, _)| t).collect();
        for t in targets {
            if let Ok(c) = self.graphs.target_mut(t) {
                for exec in c.runs.forget(buffer) {
                    d.destroy_exec(exec);
                }
            }
        }
    }

    /// The exec, graph and captured launches of `target`.
    pub fn captured(&self, target: ReplayTarget) -> Result<&Captured<D>, ErrorKind> {
        self.graphs.target(target)
    }

    /// Every graph with a traced replay whose node events are unread.
    pub fn node_timed_unread(&self) -> Vec<ReplayTarget> {
        self.graphs
            .iter()
            .filter(|(_, c)| c.nodes.as_ref().is_some_and(|n| n.unread.is_some()))
            .map(|(t, _)| t)
            .collect()
    }

    /// As [`captured`](StreamGraphs::captured), to record a patch.
    pub fn captured_mut(&mut self, target: ReplayTarget) -> Result<&mut Captured<D>, ErrorKind> {
        self.graphs.target_mut(target)
    }

    /// Capture op 3: end the capture; the result replaces the current exec.
    /// The exec being replaced may still be running, so the stream is
    /// waited for before it is destroyed (C8).
    pub fn end_capture(&mut self, d: &D) -> Result<(), ErrorKind> {
        self.end_capture_with(d, &no_stamps::<D>, |_| {})
    }

    /// [`end_capture`](StreamGraphs::end_capture), with `set_stamps`
    /// setting the graph's stamp nodes before it is instantiated, and
    /// calling `going` with the exec being replaced once the stream is
    /// idle, before it is destroyed (its node events are read there).
    pub fn end_capture_with(
        &mut self,
        d: &D,
        set_stamps: SetStamps<'_, D>,
        going: impl FnOnce(&mut Captured<D>),
    ) -> Result<(), ErrorKind> {
        let new = self.end_and_instantiate(d, set_stamps)?;
        if self.graphs.target(ReplayTarget::Current).is_ok() {
            if let Err(e) = d.synchronize() {
                // Keep the old exec (and drop the new one) rather than destroy
                // something that may still be running.
                destroy(d, new);
                return Err(e);
            }
        }
        if let Some(mut old) = self.graphs.set_current(new) {
            going(&mut old);
            destroy(d, old);
        }
        Ok(())
    }

    /// Capture op 4: end the capture into a new handle; the current exec
    /// is untouched (C3).
    pub fn end_capture_graph(&mut self, d: &D) -> Result<RawGraph, ErrorKind> {
        self.end_capture_graph_with(d, &no_stamps::<D>)
    }

    /// [`end_capture_graph`](StreamGraphs::end_capture_graph), with
    /// `set_stamps` setting the graph's stamp nodes before it is
    /// instantiated.
    pub fn end_capture_graph_with(
        &mut self,
        d: &D,
        set_stamps: SetStamps<'_, D>,
    ) -> Result<RawGraph, ErrorKind> {
        let new = self.end_and_instantiate(d, set_stamps)?;
        Ok(self.graphs.insert(new))
    }

    /// Capture op 5: queue one launch of the target's exec.
    pub fn replay(&mut self, d: &D, target: ReplayTarget) -> Result<(), ErrorKind> {
        d.launch(&self.captured(target)?.exec)
    }

    /// Capture op 6: a replay of it may still be running, so wait for the
    /// stream, then destroy exec and graph (C8). The handle is gone even if
    /// the wait reports an error (the error is returned).
    pub fn destroy_graph(&mut self, d: &D, graph: RawGraph) -> Result<(), ErrorKind> {
        let captured = self.graphs.remove(graph)?;
        let waited = d.synchronize();
        destroy(d, captured);
        waited
    }

    /// Drop whatever was recorded since begin_capture. Ending the capture
    /// takes the stream out of capture mode whatever it reports (an
    /// invalidated capture is an error here, and fine); a graph it returns
    /// is destroyed unused.
    pub fn abort_capture(&mut self, d: &D) -> Result<(), ErrorKind> {
        self.capturing = false;
        self.recording.clear();
        if let Ok(graph) = d.end_capture() {
            d.destroy_graph(graph);
        }
        self.drop_events(d);
        if d.is_capturing()? {
            return Err(ErrorKind::driver(
                format!("{}StreamEndCapture", d.api()),
                "the stream is still capturing after ending the capture",
            ));
        }
        Ok(())
    }

    /// Tear down: abort an open capture, wait for the stream, destroy every
    /// exec before its graph. For the backend's `Drop`.
    pub fn release_all(&mut self, d: &D) {
        if self.capturing {
            let _ = self.abort_capture(d);
        }
        let _ = d.synchronize();
        for c in self.graphs.drain() {
            destroy(d, c);
        }
    }

    /// End the capture and make an uploaded exec of it, its stamp nodes
    /// (where it marks its launches with stamp kernels) set by
    /// `set_stamps` first. The stream is out of capture mode afterwards
    /// whatever happens; nothing leaks on failure.
    fn end_and_instantiate(
        &mut self,
        d: &D,
        set_stamps: SetStamps<'_, D>,
    ) -> Result<Captured<D>, ErrorKind> {
        self.capturing = false;
        let launches = std::mem::take(&mut self.recording);
        let runs = Runs::default();
        let mut events = self.recording_events.take();
        let mut kept = std::mem::take(&mut self.kept_events);
        let stamp_nodes = self.recording_stamps.take();
        let drop_all = |events: Option<Vec<D::Event>>, kept: Vec<D::Event>| {
            events
                .into_iter()
                .flatten()
                .chain(kept)
                .for_each(|ev| d.destroy_event(ev));
        };
        let graph = match d.end_capture() {
            Ok(graph) => graph,
            Err(e) => {
                drop_all(events, kept);
                return Err(e);
            }
        };
        let mut stamps = None;
        if let Some(nodes) = stamp_nodes {
            let (memory, timed) = set_stamps(&graph, &nodes);
            stamps = memory;
            if !timed {
                // Its stamps are not all in its buffer: the graph is
                // untimed; its event node keeps its event.
                kept.extend(events.take().into_iter().flatten());
            }
        }
        let exec = match d.instantiate(&graph) {
            Ok(exec) => exec,
            Err(e) => {
                d.destroy_graph(graph);
                drop_all(events, kept);
                if let Some(memory) = stamps {
                    d.free(memory);
                }
                return Err(e);
            }
        };
        let captured = Captured {
            exec,
            graph,
            launches,
            runs,
            nodes: events.map(|events| NodeEvents {
                events,
                unread: None,
            }),
            kept,
            stamps,
        };
        if let Err(e) = d.upload(&captured.exec) {
            destroy(d, captured);
            return Err(e);
        }
        Ok(captured)
    }
}

/// Sets a stamp-marked graph's stamp nodes, in capture order, to a buffer
/// of its own before the graph is instantiated (the backend's: it launches
/// the stamp kernel). Returns the buffer, where one was made, and whether
/// every stamp node now writes into it (else the graph is untimed; the
/// buffer still lives as long as the graph, which may write into it).
pub type SetStamps<'a, D> = &'a dyn Fn(
    &<D as GraphDriver>::Graph,
    &[<D as GraphDriver>::Node],
) -> (Option<<D as StreamDriver>::Memory>, bool);

/// A [`SetStamps`] for captures that record no stamp kernels.
fn no_stamps<D: StreamDriver>(_: &D::Graph, _: &[D::Node]) -> (Option<D::Memory>, bool) {
    (None, false)
}

/// Execs first, then the graph they came from, then its events and the
/// buffer its stamps write.
fn destroy<D: StreamDriver>(d: &D, mut c: Captured<D>) {
    for exec in c.runs.take_spares() {
        d.destroy_exec(exec);
    }
    d.destroy_exec(c.exec);
    d.destroy_graph(c.graph);
    for ev in c.nodes.into_iter().flat_map(|n| n.events).chain(c.kept) {
        d.destroy_event(ev);
    }
    if let Some(memory) = c.stamps {
        d.free(memory);
    }
}
