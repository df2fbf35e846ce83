//! The capture state machine (C5, C6, C9) and the graph calls: begin, end
//! (into the current graph or into a handle), abort, replay, destroy.

use super::handles::{GraphId, GraphRef};
use super::state::{Capture, ExecEntry, State};
use super::Device;
use crate::backend::CaptureSupport;
use crate::error::{ErrorKind, Result};
use crate::ops::OpCall;
use crate::trace::{EventKind, NodeDesc};
use std::collections::BTreeSet;

/// The capture state machine's calls one at a time, for tests of a
/// backend or of the state machine itself (ending a capture that was never
/// begun, ending it from another thread, aborting twice): what
/// [`Device::capture`]'s scope does for you, with none of its guarantees.
/// Use [`Device::capture`]. Each call refuses what the state machine does
/// not allow with a named error (`NotCapturing`, `NestedCapture`,
/// `CrossThreadCapture`, ...).
pub struct LowLevel<'d> {
    dev: &'d Device,
}

impl Device {
    /// The capture calls one at a time ([`LowLevel`]); [`Device::capture`]
    /// is the capture API.
    pub fn low_level(&self) -> LowLevel<'_> {
        LowLevel { dev: self }
    }
}

impl LowLevel<'_> {
    /// Start recording launches on this thread (capture op 2).
    pub fn begin_capture(&self) -> Result<()> {
        self.dev.begin_capture()
    }
    /// Stop recording; the result becomes the device's current graph
    /// ([`GraphRef::Current`]), replacing the previous one (capture op 3).
    pub fn end_capture_into_current(&self) -> Result<()> {
        self.dev.end_capture_into_current()
    }
    /// Stop recording; the result is a new graph handle, which the caller
    /// destroys with [`Device::destroy_graph`] (capture op 4).
    pub fn end_capture_graph(&self) -> Result<GraphId> {
        self.dev.end_capture_graph()
    }
    /// Drop what was recorded since `begin_capture`; the device stays
    /// usable (open conditional bodies included).
    pub fn abort_capture(&self) -> Result<()> {
        self.dev.abort_capture()
    }
    /// Open an IF body (C14): what [`CaptureScope::run_if`](crate::CaptureScope::run_if)
    /// does before its closure. Close it with [`LowLevel::end_body`]; a
    /// capture ended with a body open is refused (`UnclosedConditional`)
    /// and stays open.
    pub fn begin_if(&self, cond: impl Into<crate::View>) -> Result<()> {
        self.dev.begin_body(crate::ConditionalKind::If, cond.into())
    }
    /// Open a WHILE body (C14), as [`LowLevel::begin_if`].
    pub fn begin_while(&self, cond: impl Into<crate::View>, max_iterations: u32) -> Result<()> {
        self.dev.begin_body(
            crate::ConditionalKind::While { max_iterations },
            cond.into(),
        )
    }
    /// Close the innermost open body (`NoOpenConditional` if none is).
    pub fn end_body(&self) -> Result<()> {
        self.dev.end_body()
    }
    /// What dropping an owned [`Buffer`](crate::Buffer) does, by id: the
    /// id is unusable from now on and the memory is freed as soon as that
    /// is legal. [`Device::free`] frees now or says why not.
    pub fn release_buffer(&self, id: crate::BufferId) {
        self.dev.release_buffer(id)
    }
    /// What dropping an owned [`Graph`](crate::Graph) does, by id:
    /// destroyed as soon as that is legal. [`Device::destroy_graph`]
    /// destroys now or says why not.
    pub fn release_graph(&self, id: GraphId) {
        self.dev.release_graph(id)
    }
}

impl Device {
    /// Capture op 2: start recording launches on this thread.
    pub(crate) fn begin_capture(&self) -> Result<()> {
        let me = std::thread::current().id();
        let support = self.inner.support.clone();
        self.with("begin_capture", |st| {
            if let CaptureSupport::Unsupported(reason) = support {
                return Err(ErrorKind::CaptureUnsupported { reason });
            }
            if st.capture.is_some() {
                return Err(ErrorKind::NestedCapture);
            }
            st.backend.begin_capture()?;
            st.capture = Some(Capture {
                thread: me,
                node_timed: st.node_timing,
                uses: BTreeSet::new(),
                record: Default::default(),
                regions: Vec::new(),
                open: Vec::new(),
            });
            st.trace.record(|| EventKind::BeginCapture);
            Ok(())
        })
    }

    /// Close core's capture if this thread owns it. Done before the backend
    /// is told, so a backend that fails (or panics) cannot leave core
    /// believing the capture is still open.
    fn take_capture(st: &mut State) -> std::result::Result<Capture, ErrorKind> {
        Self::take_capture_with(st, false)
    }

    /// [`Device::take_capture`] for an end: refused while a conditional
    /// body is open (C14), the capture left open for it to be closed.
    fn take_closed_capture(st: &mut State) -> std::result::Result<Capture, ErrorKind> {
        Self::take_capture_with(st, true)
    }

    fn take_capture_with(st: &mut State, closed: bool) -> std::result::Result<Capture, ErrorKind> {
        let me = std::thread::current().id();
        match &st.capture {
            None => Err(ErrorKind::NotCapturing),
            Some(c) if c.thread != me => Err(ErrorKind::CrossThreadCapture {
                owner: format!("{:?}", c.thread),
            }),
            Some(c) if closed && !c.open.is_empty() => {
                Err(ErrorKind::UnclosedConditional { open: c.open.len() })
            }
            Some(_) => Ok(st.capture.take().expect("checked above")),
        }
    }

    /// After a failed end or abort, core has closed its capture; make sure
    /// the backend is not left recording either (found by fault injection:
    /// later launches were silently recorded instead of run). The backend may
    /// already have stopped, so its answer is ignored.
    fn stop_recording(st: &mut State) {
        let _ = st.backend.abort_capture();
    }

    /// Capture op 3: stop recording; the result becomes the device's current
    /// graph ([`GraphRef::Current`]), replacing the previous one.
    pub(crate) fn end_capture_into_current(&self) -> Result<()> {
        self.with("end_capture_into_current", |st| {
            let cap = Self::take_closed_capture(st)?;
            let r = st.backend.end_capture_into_current();
            if r.is_err() {
                Self::stop_recording(st);
            }
            if r.is_ok() {
                let launches = cap.record.len();
                st.current = Some(ExecEntry::new(None, cap));
                st.trace.forget(None);
                st.trace.record(|| EventKind::EndCapture { launches });
            }
            st.sweep();
            r
        })
    }

    /// Capture op 4: stop recording; the result is a new graph handle.
    pub(crate) fn end_capture_graph(&self) -> Result<GraphId> {
        self.with("end_capture_graph", |st| {
            let cap = Self::take_closed_capture(st)?;
            let r = st.backend.end_capture_graph();
            if r.is_err() {
                Self::stop_recording(st);
            }
            let out = r.map(|raw| {
                let id = st.new_graph_id();
                let launches = cap.record.len();
                st.graphs.insert(id, ExecEntry::new(Some(raw), cap));
                st.trace.record(|| EventKind::EndCaptureGraph {
                    graph: id.n,
                    launches,
                });
                id
            });
            st.sweep();
            out
        })
    }

    /// Discard an open capture; the device stays usable. Only the thread
    /// that began the capture may abort it (`CrossThreadCapture` otherwise,
    /// and the capture stays open for its owner).
    pub(crate) fn abort_capture(&self) -> Result<()> {
        self.with("abort_capture", |st| {
            Self::take_capture(st)?;
            let r = st.backend.abort_capture();
            if r.is_err() {
                Self::stop_recording(st);
            }
            st.trace.record(|| EventKind::AbortCapture);
            st.sweep();
            r
        })
    }

    /// Whether a capture is open.
    pub fn capturing(&self) -> bool {
        self.state().capture.is_some()
    }

    /// Capture op 5: queue one re-execution over the buffers' current contents (C1).
    pub fn replay(&self, target: GraphRef) -> Result<()> {
        self.with("replay", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::ReplayInCapture);
            }
            st.replay_target(target)?;
            if let Some(reason) = &st.entry(target)?.broken {
                return Err(ErrorKind::GraphBroken {
                    reason: reason.clone(),
                });
            }
            let timed = st.trace.enabled();
            let graph = match target {
                GraphRef::Current => None,
                GraphRef::Handle(id) => Some(id.n),
            };
            let entry = st.entry(target)?;
            if timed && entry.node_timed {
                // Names this replay's node spans (before its tag is taken).
                let nodes: Vec<NodeDesc> = entry.record.calls.iter().map(describe).collect();
                st.trace.describe(graph, || nodes);
            }
            let tag = st.trace.next_seq();
            if timed {
                st.backend.begin_timed(tag)?;
            }
            st.replay_raw(target)?;
            if timed {
                st.backend.end_timed(tag)?;
            }
            let entry = match target {
                GraphRef::Current => st.current.as_mut(),
                GraphRef::Handle(id) => st.graphs.get_mut(&id),
            }
            .expect("checked above");
            let index = entry.replays;
            entry.replays += 1;
            st.trace.record(|| EventKind::Replay { graph, index });
            Ok(())
        })
    }

    /// How many replays of this target were queued (C10).
    pub fn replay_count(&self, target: GraphRef) -> Result<u64> {
        self.with("replay_count", |st| match target {
            GraphRef::Current => st
                .current
                .as_ref()
                .map(|e| e.replays)
                .ok_or(ErrorKind::NoCurrentGraph),
            GraphRef::Handle(id) => st
                .graphs
                .get(&id)
                .map(|e| e.replays)
                .ok_or_else(|| st.missing_graph(id)),
        })
    }

    /// Capture op 6: destroy a graph handle now, or say why not (refused
    /// inside a capture). A replay still running completes (C8). For
    /// "destroy it once legal", what an owned [`super::Graph`] does on drop,
    /// see [`LowLevel::release_graph`](crate::LowLevel::release_graph).
    pub fn destroy_graph(&self, id: GraphId) -> Result<()> {
        self.with("destroy_graph", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::DestroyInCapture);
            }
            st.destroy_handle(id)?;
            st.sweep();
            Ok(())
        })
    }

    /// Give the handle up: destroyed as soon as that is legal (after an
    /// open capture ends). Never fails; what owned handles call on drop. An
    /// id this device does not hold is ignored. For a destroy that reports
    /// why it cannot happen now, see [`Device::destroy_graph`].
    pub(crate) fn release_graph(&self, id: GraphId) {
        let mut st = self.state();
        if let Some(g) = st.graphs.get_mut(&id) {
            g.released = true;
        }
        st.sweep();
    }
}

/// A launch as its node spans name it.
fn describe(call: &OpCall) -> NodeDesc {
    let bindings = call
        .buffers
        .iter()
        .map(|v| match (v.offset, v.len) {
            (0, None) => format!("b{}", v.buffer.n),
            (first, None) => format!("b{}[{first}..]", v.buffer.n),
            (first, Some(len)) => format!("b{}[{first}..{}]", v.buffer.n, first + len),
        })
        .collect();
    NodeDesc {
        op: call.op.name().into(),
        bindings,
    }
}
