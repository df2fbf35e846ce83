//! The tables behind a `Device`: live buffers and graphs, the open capture,
//! which graphs read which buffers, and the sweep that carries out deferred
//! frees and destroys once they are legal. Also the table of live devices
//! that lets a device tell a foreign id from an unknown one (C12).

use super::conditional::Region;
use super::handles::{BufferId, GraphId, GraphRef};
use crate::backend::{Backend, RawGraph, ReplayTarget};
use crate::dtype::DType;
use crate::error::{ErrorKind, GraphUser};
use crate::ops::{Launch, OpCall, OpKind};
use crate::trace::{EventKind, Trace};
use crate::validate::BufferMeta;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

/// One serial per `Device`, so two devices opened on the same hardware
/// (same device id) still tell their ids apart. Serial 0 is no device's.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// Each live device's id (`cpu:0`), by serial: read only to name the owner
/// of a foreign id, written once when a device opens and once when it goes.
static DEVICES: Mutex<BTreeMap<u64, Arc<str>>> = Mutex::new(BTreeMap::new());

fn devices() -> std::sync::MutexGuard<'static, BTreeMap<u64, Arc<str>>> {
    DEVICES.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) struct BufEntry {
    pub(super) meta: BufferMeta,
    /// Dropped by its owner; freed as soon as nothing uses it.
    pub(super) released: bool,
    /// Elements allocated past `meta.len`, filled with a canary, that no
    /// launch may write (checked mode, `checked.rs`); 0 otherwise.
    pub(super) guard: usize,
}

/// What a graph runs, launch by launch in capture order: each launch as
/// the user stated it (`calls`: what a graph update, C13, re-validates)
/// and as core lowered it (`launches`: what the backend was given, what a
/// re-record captures again, and what a backend patching in place is told
/// the graph runs). The one record of what was captured: backends keep
/// only their executable form.
#[derive(Clone, Debug, Default)]
pub(super) struct Record {
    pub(super) calls: Vec<OpCall>,
    pub(super) launches: Vec<Launch>,
}

impl Record {
    pub(super) fn len(&self) -> usize {
        self.launches.len()
    }

    pub(super) fn push(&mut self, call: OpCall, launch: Launch) {
        self.calls.push(call);
        self.launches.push(launch);
    }
}

pub(super) struct ExecEntry {
    /// `None` for the current graph (the backend's `ReplayTarget::Current`).
    pub(super) raw: Option<RawGraph>,
    pub(super) uses: BTreeSet<BufferId>,
    pub(super) record: Record,
    /// Its conditional bodies (C14), in the order they were opened.
    pub(super) regions: Vec<Region>,
    pub(super) replays: u64,
    pub(super) released: bool,
    /// Captured (or last re-recorded) while node timing was on: its traced
    /// replays have node spans, described by a `Nodes` event.
    pub(super) node_timed: bool,
    /// Set when an update failed half-way and could not be undone: replays
    /// are refused (`GraphBroken`) until an update succeeds, which records
    /// the graph again whole (never an in-place patch).
    pub(super) broken: Option<String>,
}

impl ExecEntry {
    pub(super) fn new(raw: Option<RawGraph>, cap: Capture) -> ExecEntry {
        ExecEntry {
            raw,
            uses: cap.uses,
            record: cap.record,
            regions: cap.regions,
            replays: 0,
            released: false,
            node_timed: cap.node_timed,
            broken: None,
        }
    }
}

pub(super) struct Capture {
    pub(super) thread: ThreadId,
    /// Node timing was on when it began (the backend times its nodes).
    pub(super) node_timed: bool,
    pub(super) uses: BTreeSet<BufferId>,
    pub(super) record: Record,
    /// Conditional bodies opened so far (C14), and which are still open
    /// (indices into `regions`, innermost last).
    pub(super) regions: Vec<Region>,
    pub(super) open: Vec<usize>,
}

pub(super) struct State {
    pub(super) backend: Box<dyn Backend>,
    /// This device's id (`cpu:0`) and serial (every id it makes carries it).
    pub(super) device: Arc<str>,
    serial: u64,
    /// The number of the next buffer or graph id.
    next_id: u64,
    pub(super) buffers: BTreeMap<BufferId, BufEntry>,
    pub(super) graphs: BTreeMap<GraphId, ExecEntry>,
    pub(super) current: Option<ExecEntry>,
    pub(super) capture: Option<Capture>,
    /// Backend graphs a C13 re-record replaced whose destroy the backend
    /// refused: retried by every sweep, destroyed at teardown.
    pub(super) orphans: Vec<RawGraph>,
    pub(super) trace: Trace,
    /// User kernels registered on this device (a short list: a launch
    /// looks its kernel up without allocating), each with the bindings its
    /// WGSL declares `var<storage, read>` (bit k: binding k).
    pub(super) kernels: Vec<(crate::kernel::Kernel, u8)>,
    /// Checked mode (`Device::set_checked`): each eager user-kernel launch
    /// is held to the extents its kernel declares.
    pub(super) checked: bool,
    /// Node timing is on (`Device::set_node_timing`), for the graphs
    /// captured from now on.
    pub(super) node_timing: bool,
}

impl State {
    /// Whether user kernel `k` is registered here.
    pub(super) fn registered(&self, k: crate::kernel::Kernel) -> bool {
        self.kernels.iter().any(|(x, _)| *x == k)
    }

    /// Check `call` against the live buffers and lower it (C12): the rules
    /// of `validate::lower`, a user kernel's with the bindings its WGSL
    /// declares read-only (found when it was registered here).
    pub(super) fn lower(&self, call: &OpCall) -> Result<Launch, ErrorKind> {
        self.lower_keeping(call, &[])
    }

    /// [`State::lower`] for a launch of a graph update: a buffer of `kept`
    /// (what the launch bound before the update) may be one its owner
    /// released, which the graph still holds; any other must be live.
    pub(super) fn lower_keeping(
        &self,
        call: &OpCall,
        kept: &[crate::View],
    ) -> Result<Launch, ErrorKind> {
        let read_only = match call.op {
            OpKind::User(k) => self
                .kernels
                .iter()
                .find(|(x, _)| *x == k)
                .map_or(0, |(_, r)| *r),
            _ => 0,
        };
        crate::validate::lower(call, read_only, |id| {
            if kept.iter().any(|v| v.buffer == id) {
                self.meta(id)
            } else {
                self.live_meta(id)
            }
        })
    }

    pub(super) fn new(backend: Box<dyn Backend>, device: Arc<str>) -> State {
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
        devices().insert(serial, device.clone());
        State {
            backend,
            device,
            serial,
            next_id: 1,
            buffers: BTreeMap::new(),
            graphs: BTreeMap::new(),
            current: None,
            capture: None,
            orphans: Vec::new(),
            trace: Trace::new(),
            kernels: Vec::new(),
            checked: false,
            node_timing: false,
        }
    }

    /// A fresh buffer id of this device.
    pub(super) fn new_buffer_id(&mut self) -> BufferId {
        self.next_id += 1;
        BufferId {
            device: self.serial,
            n: self.next_id - 1,
        }
    }

    /// A fresh graph id of this device.
    pub(super) fn new_graph_id(&mut self) -> GraphId {
        self.next_id += 1;
        GraphId {
            device: self.serial,
            n: self.next_id - 1,
        }
    }

    /// The error for an id this device does not hold: foreign if another
    /// live device made it, unknown otherwise.
    pub(super) fn missing_buffer(&self, id: BufferId) -> ErrorKind {
        match self.foreign_owner(id.device) {
            Some(owner) => ErrorKind::ForeignBuffer { id: id.n, owner },
            None => ErrorKind::UnknownBuffer { id: id.n },
        }
    }

    pub(super) fn missing_graph(&self, id: GraphId) -> ErrorKind {
        match self.foreign_owner(id.device) {
            Some(owner) => ErrorKind::ForeignGraph { id: id.n, owner },
            None => ErrorKind::UnknownGraph { id: id.n },
        }
    }

    /// The device whose serial is `device`, if it is another live one.
    /// Two `Device`s opened on the same hardware have the same device id
    /// but are told apart by their serial.
    fn foreign_owner(&self, device: u64) -> Option<String> {
        if device == self.serial {
            return None;
        }
        let devices = devices();
        let name = devices.get(&device)?;
        Some(if **name == *self.device {
            format!("{name} (a separately opened Device)")
        } else {
            name.to_string()
        })
    }

    pub(super) fn meta(&self, id: BufferId) -> Result<BufferMeta, ErrorKind> {
        self.buffers
            .get(&id)
            .map(|b| b.meta)
            .ok_or_else(|| self.missing_buffer(id))
    }

    /// Metadata of a buffer its owner still holds (released buffers are gone to users).
    pub(super) fn live_meta(&self, id: BufferId) -> Result<BufferMeta, ErrorKind> {
        self.buffers
            .get(&id)
            .filter(|b| !b.released)
            .map(|b| b.meta)
            .ok_or_else(|| self.missing_buffer(id))
    }

    /// The raw handle of a live graph handle.
    pub(super) fn raw_graph(&self, id: GraphId) -> Result<RawGraph, ErrorKind> {
        let g = self.graphs.get(&id).ok_or_else(|| self.missing_graph(id))?;
        Ok(g.raw.expect("handles always carry a raw graph"))
    }

    /// The graph a [`GraphRef`] names.
    pub(super) fn entry(&self, target: GraphRef) -> Result<&ExecEntry, ErrorKind> {
        match target {
            GraphRef::Current => self.current.as_ref().ok_or(ErrorKind::NoCurrentGraph),
            GraphRef::Handle(id) => self.graphs.get(&id).ok_or_else(|| self.missing_graph(id)),
        }
    }

    pub(super) fn entry_mut(&mut self, target: GraphRef) -> Result<&mut ExecEntry, ErrorKind> {
        if let GraphRef::Handle(id) = target {
            if !self.graphs.contains_key(&id) {
                return Err(self.missing_graph(id));
            }
        }
        match target {
            GraphRef::Current => self.current.as_mut().ok_or(ErrorKind::NoCurrentGraph),
            GraphRef::Handle(id) => Ok(self.graphs.get_mut(&id).expect("checked above")),
        }
    }

    /// What the backend replays for a [`GraphRef`].
    pub(super) fn replay_target(&self, target: GraphRef) -> Result<ReplayTarget, ErrorKind> {
        match target {
            GraphRef::Current => self.entry(target).map(|_| ReplayTarget::Current),
            GraphRef::Handle(id) => self.raw_graph(id).map(ReplayTarget::Graph),
        }
    }

    pub(super) fn host_access_check(
        &self,
        id: BufferId,
        dtype: DType,
        count: usize,
        what: &'static str,
    ) -> Result<BufferMeta, ErrorKind> {
        if self.capture.is_some() {
            return Err(ErrorKind::HostAccessInCapture { what });
        }
        let meta = self.live_meta(id)?;
        if meta.dtype != dtype {
            return Err(ErrorKind::HostDtypeMismatch {
                what,
                expected: meta.dtype,
                found: dtype,
            });
        }
        if count == 0 {
            return Err(ErrorKind::ZeroSize { what });
        }
        // The range is checked where the backend is called (`calls.rs`):
        // once, by the code whose soundness rests on it.
        Ok(meta)
    }

    /// Everything that reads this buffer: graph handles, the current graph,
    /// and an open capture that has recorded it.
    pub(super) fn users_of(&self, id: BufferId) -> Vec<GraphUser> {
        let mut users: Vec<GraphUser> = self
            .graphs
            .iter()
            .filter(|(_, g)| g.uses.contains(&id))
            .map(|(gid, _)| GraphUser::Handle(gid.n))
            .collect();
        if self.current.as_ref().is_some_and(|c| c.uses.contains(&id)) {
            users.push(GraphUser::Current);
        }
        if self.capture.as_ref().is_some_and(|c| c.uses.contains(&id)) {
            users.push(GraphUser::OpenCapture);
        }
        users
    }

    /// Free a buffer on the backend, then drop it from the tables.
    pub(super) fn free_buffer(&mut self, id: BufferId) -> Result<(), ErrorKind> {
        let meta = self.meta(id)?;
        self.free_raw(meta)?;
        self.buffers.remove(&id);
        Ok(())
    }

    /// Destroy a graph handle on the backend, then drop it from the tables.
    pub(super) fn destroy_handle(&mut self, id: GraphId) -> Result<(), ErrorKind> {
        let raw = self.raw_graph(id)?;
        self.destroy_raw(raw)?;
        self.graphs.remove(&id);
        self.trace.record(|| EventKind::Destroy { graph: id.n });
        Ok(())
    }

    /// Carry out deferred destroys and frees that have become legal. A
    /// backend that refuses one keeps it for the next sweep.
    pub(super) fn sweep(&mut self) {
        if self.capture.is_some() {
            return;
        }
        for raw in std::mem::take(&mut self.orphans) {
            if self.destroy_raw(raw).is_err() {
                self.orphans.push(raw);
            }
        }
        let graphs: Vec<GraphId> = self
            .graphs
            .iter()
            .filter(|(_, g)| g.released)
            .map(|(id, _)| *id)
            .collect();
        for id in graphs {
            let _ = self.destroy_handle(id);
        }
        let bufs: Vec<BufferId> = self
            .buffers
            .iter()
            .filter(|(_, b)| b.released)
            .map(|(id, _)| *id)
            .collect();
        for id in bufs {
            if self.users_of(id).is_empty() {
                let _ = self.free_buffer(id);
            }
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        devices().remove(&self.serial);
        // Tear down in dependency order; errors here have nowhere to go.
        if self.capture.take().is_some() {
            let _ = self.backend.abort_capture();
        }
        let _ = self.backend.synchronize();
        for raw in std::mem::take(&mut self.orphans) {
            let _ = self.destroy_raw(raw);
        }
        for (_, g) in std::mem::take(&mut self.graphs) {
            if let Some(raw) = g.raw {
                let _ = self.destroy_raw(raw);
            }
        }
        // The backend has no call that destroys its current graph, and a
        // backend may refuse to free a buffer the current graph still reads
        // (the stream backend does: BufferInUse). Replacing it with an
        // empty capture releases those buffers (the empty capture is a
        // replayable no-op on every backend: c6_empty_capture_...); the
        // backend frees the empty exec with itself.
        // If that fails, core frees no buffer (the current graph may use
        // any of them): the backend releases them with itself.
        let mut may_free = true;
        if self.current.take().is_some() {
            may_free = self.backend.begin_capture().is_ok()
                && self.backend.end_capture_into_current().is_ok();
            if !may_free {
                let _ = self.backend.abort_capture();
            }
        }
        for (_, b) in std::mem::take(&mut self.buffers) {
            if may_free {
                // Every graph is destroyed and the current graph, if any,
                // was replaced by an empty one: nothing uses the buffer.
                let _ = self.free_raw(b.meta);
            }
        }
    }
}
