//! `Device`: the shared semantics, implemented once for every backend.
//!
//! It owns the capture state machine (C5, C6, C9), argument validation (C12),
//! replay counting and tracing (C10), and the bookkeeping that keeps a graph
//! from outliving the buffers it reads. Backends only ever see calls this
//! layer has already checked.

use crate::backend::{Backend, CaptureSupport, DeviceInfo, RawGraph, ReplayTarget, ResourceCounts};
use crate::dtype::{DType, Element};
use crate::error::{Error, ErrorKind, Result, Site};
use crate::ops::{OpCall, OpKind};
use crate::trace::{EventKind, Trace, TraceEvent, TraceLog};
use crate::validate::{self, BufferMeta};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;

/// A buffer, by id. Ids are never reused within a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u64);

/// A graph handle, by id. Ids are never reused within a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphId(pub u64);

/// Which exec a replay targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphRef {
    /// The exec made by the last `end_capture`.
    Current,
    Handle(GraphId),
}

/// Live resources, as core and the backend each count them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    pub buffers: usize,
    /// Graph handles (not counting the current exec).
    pub graphs: usize,
    pub current_exec: bool,
    pub capturing: bool,
    pub backend: ResourceCounts,
}

struct BufEntry {
    meta: BufferMeta,
    /// Dropped by its owner; freed as soon as nothing uses it.
    released: bool,
}

struct ExecEntry {
    raw: Option<RawGraph>,
    uses: BTreeSet<BufferId>,
    replays: u64,
    released: bool,
}

struct Capture {
    thread: ThreadId,
    uses: BTreeSet<BufferId>,
    launches: usize,
}

struct State {
    backend: Box<dyn Backend>,
    buffers: BTreeMap<BufferId, BufEntry>,
    graphs: BTreeMap<GraphId, ExecEntry>,
    current: Option<ExecEntry>,
    capture: Option<Capture>,
    next_id: u64,
    trace: Trace,
}

struct Inner {
    info: DeviceInfo,
    site: Arc<Site>,
    support: CaptureSupport,
    state: Mutex<State>,
}

/// A device: a backend behind the shared semantics. Cheap to clone; all
/// clones are the same device. `Send + Sync`: calls from several threads are
/// serialised, and a capture belongs to the thread that began it.
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.inner.info.id())
            .finish()
    }
}

impl Device {
    pub fn new(backend: Box<dyn Backend>) -> Device {
        let info = backend.info().clone();
        let support = backend.capture_support();
        let site = Arc::new(Site {
            backend: info.backend.clone(),
            device: info.id(),
            device_name: info.name.clone(),
        });
        Device {
            inner: Arc::new(Inner {
                site,
                info,
                support,
                state: Mutex::new(State {
                    backend,
                    buffers: BTreeMap::new(),
                    graphs: BTreeMap::new(),
                    current: None,
                    capture: None,
                    next_id: 1,
                    trace: Trace::new(),
                }),
            }),
        }
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// `<backend>:<index>`.
    pub fn id(&self) -> String {
        self.inner.info.id()
    }

    pub fn capture_support(&self) -> &CaptureSupport {
        &self.inner.support
    }

    /// Capture op 1 of 6.
    pub fn supports_capture(&self) -> bool {
        self.inner.support.is_supported()
    }

    fn err(&self, call: &'static str, kind: ErrorKind) -> Error {
        Error {
            site: self.inner.site.clone(),
            call,
            kind,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic inside a backend call leaves core's tables consistent (they
        // are only updated after the backend returns), so a poisoned lock is
        // still safe to use.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` under the lock, attaching the call's context to any error.
    fn with<T>(
        &self,
        call: &'static str,
        f: impl FnOnce(&mut State) -> std::result::Result<T, ErrorKind>,
    ) -> Result<T> {
        let mut st = self.state();
        f(&mut st).map_err(|k| self.err(call, k))
    }

    // ----- memory -----

    /// Allocate `len` elements of `dtype`. Refused inside a capture (C5).
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<BufferId> {
        self.with("alloc", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::AllocInCapture);
            }
            if len == 0 {
                return Err(ErrorKind::ZeroSize { what: "allocation" });
            }
            if len as u64 > validate::MAX_ELEMENTS {
                return Err(ErrorKind::TooLarge {
                    what: "allocation",
                    detail: format!("{len} elements exceeds {}", validate::MAX_ELEMENTS),
                });
            }
            let raw = st.backend.alloc(len * dtype.size())?;
            let id = BufferId(st.next_id);
            st.next_id += 1;
            st.buffers.insert(
                id,
                BufEntry {
                    meta: BufferMeta { raw, dtype, len },
                    released: false,
                },
            );
            Ok(id)
        })
    }

    /// Free a buffer. Refused inside a capture (C5) and while a live graph or
    /// the current exec reads it (it would be a use-after-free on replay).
    pub fn free(&self, id: BufferId) -> Result<()> {
        self.with("free", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::FreeInCapture);
            }
            if !st.buffers.contains_key(&id) {
                return Err(ErrorKind::UnknownBuffer { id: id.0 });
            }
            let users = st.users_of(id);
            if !users.is_empty() {
                return Err(ErrorKind::BufferInUse {
                    id: id.0,
                    graphs: users,
                });
            }
            let raw = st.buffers[&id].meta.raw;
            st.backend.free(raw)?;
            st.buffers.remove(&id);
            Ok(())
        })
    }

    /// Free as soon as it is legal (no open capture, no graph using it).
    /// What owned handles call on drop: never fails, never leaks.
    pub fn release_buffer(&self, id: BufferId) {
        let mut st = self.state();
        if let Some(b) = st.buffers.get_mut(&id) {
            b.released = true;
        }
        st.sweep();
    }

    /// Element type and length of a live buffer.
    pub fn buffer_meta(&self, id: BufferId) -> Result<(DType, usize)> {
        self.with("buffer_meta", |st| st.meta(id).map(|m| (m.dtype, m.len)))
    }

    /// Write `data` at element `offset`. Ordered after queued work.
    pub fn write<T: Element>(&self, id: BufferId, offset: usize, data: &[T]) -> Result<()> {
        self.write_bytes_typed(
            "write",
            id,
            T::DTYPE,
            offset,
            data.len(),
            bytemuck::cast_slice(data),
        )
    }

    /// Write raw bytes of the buffer's element type at element `offset`.
    pub fn write_bytes(&self, id: BufferId, offset: usize, bytes: &[u8]) -> Result<()> {
        let dtype = self.buffer_meta(id).map(|(d, _)| d).map_err(|e| Error {
            call: "write_bytes",
            ..e
        })?;
        if !bytes.len().is_multiple_of(dtype.size()) {
            return Err(self.err(
                "write_bytes",
                ErrorKind::SizeMismatch {
                    what: "write_bytes (bytes not a whole number of elements)",
                    expected: bytes.len() / dtype.size() * dtype.size(),
                    found: bytes.len(),
                },
            ));
        }
        self.write_bytes_typed(
            "write_bytes",
            id,
            dtype,
            offset,
            bytes.len() / dtype.size(),
            bytes,
        )
    }

    fn write_bytes_typed(
        &self,
        call: &'static str,
        id: BufferId,
        dtype: DType,
        offset: usize,
        count: usize,
        bytes: &[u8],
    ) -> Result<()> {
        self.with(call, |st| {
            let meta = st.host_access_check(id, dtype, offset, count, call)?;
            st.backend.write(meta.raw, offset * dtype.size(), bytes)
        })
    }

    /// Read the whole buffer. Waits for queued work.
    pub fn read<T: Element>(&self, id: BufferId) -> Result<Vec<T>> {
        let (_, len) = self
            .buffer_meta(id)
            .map_err(|e| Error { call: "read", ..e })?;
        self.read_range(id, 0, len)
    }

    /// Read `count` elements from element `offset`.
    pub fn read_range<T: Element>(
        &self,
        id: BufferId,
        offset: usize,
        count: usize,
    ) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); count];
        self.with("read", |st| {
            let meta = st.host_access_check(id, T::DTYPE, offset, count, "read")?;
            st.backend.read(
                meta.raw,
                offset * T::DTYPE.size(),
                bytemuck::cast_slice_mut(&mut out),
            )
        })?;
        Ok(out)
    }

    /// Read the whole buffer as raw bytes (for digests and cross-device comparison).
    pub fn read_bytes(&self, id: BufferId) -> Result<Vec<u8>> {
        self.with("read_bytes", |st| {
            let meta = st.meta(id)?;
            st.host_access_check(id, meta.dtype, 0, meta.len, "read_bytes")?;
            let mut out = vec![0u8; meta.len * meta.dtype.size()];
            st.backend.read(meta.raw, 0, &mut out)?;
            Ok(out)
        })
    }

    // ----- work -----

    /// Validate and queue (or, while capturing, record) one op.
    pub fn launch(&self, call: &OpCall) -> Result<()> {
        let me = std::thread::current().id();
        self.with("launch", |st| {
            if let Some(cap) = &st.capture {
                if cap.thread != me {
                    return Err(ErrorKind::CrossThreadCapture {
                        owner: format!("{:?}", cap.thread),
                    });
                }
            }
            let launch = validate::lower(call, |id| st.live_meta(id))?;
            let timed = st.trace.enabled() && st.capture.is_none();
            let tag = st.trace.next_seq();
            if timed {
                st.backend.begin_timed(tag)?;
            }
            st.backend.launch(&launch)?;
            if timed {
                st.backend.end_timed(tag)?;
            }
            let captured = if let Some(cap) = &mut st.capture {
                cap.uses.extend(call.buffers.iter().copied());
                cap.launches += 1;
                true
            } else {
                false
            };
            st.trace.record(|| EventKind::Launch {
                op: call.op,
                captured,
            });
            Ok(())
        })
    }

    /// Wait for all queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.with("synchronize", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::HostAccessInCapture {
                    what: "synchronize",
                });
            }
            st.backend.synchronize()
        })
    }

    /// Materialise lazy resources for these ops, so capturing them allocates nothing (C7).
    pub fn prepare(&self, ops: &[(OpKind, DType)]) -> Result<()> {
        self.with("prepare", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::HostAccessInCapture { what: "prepare" });
            }
            for &(op, dtype) in ops {
                if !op.dtypes().contains(&dtype) {
                    return Err(ErrorKind::UnsupportedDtype { op, dtype });
                }
            }
            st.backend.prepare(ops)
        })
    }

    // ----- capture -----

    /// Capture op 2: start recording launches on this thread.
    pub fn begin_capture(&self) -> Result<()> {
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
                uses: BTreeSet::new(),
                launches: 0,
            });
            st.trace.record(|| EventKind::BeginCapture);
            Ok(())
        })
    }

    fn take_capture(st: &mut State) -> std::result::Result<Capture, ErrorKind> {
        let me = std::thread::current().id();
        match &st.capture {
            None => Err(ErrorKind::NotCapturing),
            Some(c) if c.thread != me => Err(ErrorKind::CrossThreadCapture {
                owner: format!("{:?}", c.thread),
            }),
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

    /// Capture op 3: stop recording; the result replaces the current exec.
    pub fn end_capture(&self) -> Result<()> {
        self.with("end_capture", |st| {
            let cap = Self::take_capture(st)?;
            let r = st.backend.end_capture();
            if r.is_err() {
                Self::stop_recording(st);
            }
            if r.is_ok() {
                st.current = Some(ExecEntry {
                    raw: None,
                    uses: cap.uses,
                    replays: 0,
                    released: false,
                });
                st.trace.record(|| EventKind::EndCapture {
                    launches: cap.launches,
                });
            }
            st.sweep();
            r
        })
    }

    /// Capture op 4: stop recording; the result is a new graph handle.
    pub fn end_capture_graph(&self) -> Result<GraphId> {
        self.with("end_capture_graph", |st| {
            let cap = Self::take_capture(st)?;
            let r = st.backend.end_capture_graph();
            if r.is_err() {
                Self::stop_recording(st);
            }
            let out = r.map(|raw| {
                let id = GraphId(st.next_id);
                st.next_id += 1;
                st.graphs.insert(
                    id,
                    ExecEntry {
                        raw: Some(raw),
                        uses: cap.uses,
                        replays: 0,
                        released: false,
                    },
                );
                st.trace.record(|| EventKind::EndCaptureGraph {
                    graph: id.0,
                    launches: cap.launches,
                });
                id
            });
            st.sweep();
            out
        })
    }

    /// Discard an open capture; the device stays usable.
    pub fn abort_capture(&self) -> Result<()> {
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
            let raw_target = match target {
                GraphRef::Current => {
                    st.current.as_ref().ok_or(ErrorKind::NoCurrentExec)?;
                    ReplayTarget::Current
                }
                GraphRef::Handle(id) => {
                    let g = st
                        .graphs
                        .get(&id)
                        .ok_or(ErrorKind::UnknownGraph { id: id.0 })?;
                    ReplayTarget::Graph(g.raw.expect("handles always carry a raw graph"))
                }
            };
            let timed = st.trace.enabled();
            let tag = st.trace.next_seq();
            if timed {
                st.backend.begin_timed(tag)?;
            }
            st.backend.replay(raw_target)?;
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
            let graph = match target {
                GraphRef::Current => None,
                GraphRef::Handle(id) => Some(id.0),
            };
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
                .ok_or(ErrorKind::NoCurrentExec),
            GraphRef::Handle(id) => st
                .graphs
                .get(&id)
                .map(|e| e.replays)
                .ok_or(ErrorKind::UnknownGraph { id: id.0 }),
        })
    }

    /// Capture op 6: destroy a graph handle. A replay still running completes (C8).
    pub fn destroy_graph(&self, id: GraphId) -> Result<()> {
        self.with("destroy_graph", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::DestroyInCapture);
            }
            let raw = st
                .graphs
                .get(&id)
                .ok_or(ErrorKind::UnknownGraph { id: id.0 })?
                .raw
                .expect("handles always carry a raw graph");
            st.backend.destroy_graph(raw)?;
            st.graphs.remove(&id);
            st.trace.record(|| EventKind::Destroy { graph: id.0 });
            st.sweep();
            Ok(())
        })
    }

    /// Destroy as soon as it is legal; what owned handles call on drop.
    pub fn release_graph(&self, id: GraphId) {
        let mut st = self.state();
        if let Some(g) = st.graphs.get_mut(&id) {
            g.released = true;
        }
        st.sweep();
    }

    // ----- accounting -----

    pub fn live(&self) -> Live {
        let st = self.state();
        Live {
            buffers: st.buffers.len(),
            graphs: st.graphs.len(),
            current_exec: st.current.is_some(),
            capturing: st.capture.is_some(),
            backend: st.backend.live_resources(),
        }
    }

    /// Turn event recording on or off (off by default; C10). Where the
    /// backend can time the device, replays and eager launches also get
    /// device spans (see [`Device::take_trace_log`]).
    pub fn set_tracing(&self, on: bool) {
        let mut st = self.state();
        st.trace.set_enabled(on);
        if st.backend.device_timing().is_ok() {
            // A backend that fails to switch timing still records host events.
            let _ = st.backend.set_device_timing(on);
        }
    }

    /// Host events and device spans recorded so far, for export
    /// ([`crate::trace::chrome_trace`]). Waits for queued work so every
    /// finished span is included; refused inside a capture.
    pub fn take_trace_log(&self, label: &str) -> Result<TraceLog> {
        self.with("take_trace_log", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::HostAccessInCapture {
                    what: "take_trace_log",
                });
            }
            let timing = st.backend.device_timing();
            let device_spans = if timing.is_ok() {
                st.backend.take_device_spans()?
            } else {
                Vec::new()
            };
            Ok(TraceLog {
                device: self.inner.info.id(),
                device_name: self.inner.info.name.clone(),
                label: label.to_string(),
                events: st.trace.take(),
                device_spans,
                device_timing_unavailable: timing.err(),
            })
        })
    }

    /// Take the events recorded so far.
    pub fn take_trace(&self) -> Vec<TraceEvent> {
        self.state().trace.take()
    }

    // ----- safe layer -----

    /// Allocate a typed, owned buffer (freed on drop).
    pub fn buffer<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        let id = self.alloc(T::DTYPE, len)?;
        Ok(Buffer {
            dev: self.clone(),
            id,
            len,
            _t: std::marker::PhantomData,
        })
    }

    /// Allocate and fill from a slice.
    pub fn buffer_from<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        let b = self.buffer(data.len())?;
        self.write(b.id, 0, data)?;
        Ok(b)
    }

    /// Begin a capture whose scope aborts it on drop unless ended.
    pub fn capture(&self) -> Result<CaptureScope<'_>> {
        self.begin_capture()?;
        Ok(CaptureScope {
            dev: self,
            open: true,
        })
    }
}

impl State {
    fn meta(&self, id: BufferId) -> std::result::Result<BufferMeta, ErrorKind> {
        self.buffers
            .get(&id)
            .map(|b| b.meta)
            .ok_or(ErrorKind::UnknownBuffer { id: id.0 })
    }

    /// Metadata of a buffer its owner still holds (released buffers are gone to users).
    fn live_meta(&self, id: BufferId) -> Option<BufferMeta> {
        self.buffers
            .get(&id)
            .filter(|b| !b.released)
            .map(|b| b.meta)
    }

    fn host_access_check(
        &self,
        id: BufferId,
        dtype: DType,
        offset: usize,
        count: usize,
        what: &'static str,
    ) -> std::result::Result<BufferMeta, ErrorKind> {
        if self.capture.is_some() {
            return Err(ErrorKind::HostAccessInCapture { what });
        }
        let meta = self
            .live_meta(id)
            .ok_or(ErrorKind::UnknownBuffer { id: id.0 })?;
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
        if offset.checked_add(count).is_none_or(|end| end > meta.len) {
            return Err(ErrorKind::HostRange {
                what,
                offset,
                count,
                len: meta.len,
            });
        }
        Ok(meta)
    }

    /// Graphs (by id; 0 for the current exec) that read this buffer, including an open capture.
    fn users_of(&self, id: BufferId) -> Vec<u64> {
        let mut users: Vec<u64> = self
            .graphs
            .iter()
            .filter(|(_, g)| g.uses.contains(&id))
            .map(|(gid, _)| gid.0)
            .collect();
        if self.current.as_ref().is_some_and(|c| c.uses.contains(&id)) {
            users.push(0);
        }
        if self.capture.as_ref().is_some_and(|c| c.uses.contains(&id)) {
            users.push(u64::MAX);
        }
        users
    }

    /// Carry out deferred destroys and frees that have become legal.
    fn sweep(&mut self) {
        if self.capture.is_some() {
            return;
        }
        let graphs: Vec<GraphId> = self
            .graphs
            .iter()
            .filter(|(_, g)| g.released)
            .map(|(id, _)| *id)
            .collect();
        for id in graphs {
            let raw = self.graphs[&id]
                .raw
                .expect("handles always carry a raw graph");
            if self.backend.destroy_graph(raw).is_ok() {
                self.graphs.remove(&id);
                self.trace.record(|| EventKind::Destroy { graph: id.0 });
            }
        }
        let bufs: Vec<BufferId> = self
            .buffers
            .iter()
            .filter(|(_, b)| b.released)
            .map(|(id, _)| *id)
            .collect();
        for id in bufs {
            if self.users_of(id).is_empty() && self.backend.free(self.buffers[&id].meta.raw).is_ok()
            {
                self.buffers.remove(&id);
            }
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // Tear down in dependency order; errors here have nowhere to go.
        if self.capture.take().is_some() {
            let _ = self.backend.abort_capture();
        }
        let _ = self.backend.synchronize();
        for (_, g) in std::mem::take(&mut self.graphs) {
            if let Some(raw) = g.raw {
                let _ = self.backend.destroy_graph(raw);
            }
        }
        self.current = None;
        for (_, b) in std::mem::take(&mut self.buffers) {
            let _ = self.backend.free(b.meta.raw);
        }
    }
}

/// A typed buffer owned by the caller; freed on drop (deferred while a
/// capture is open or a graph still reads it).
pub struct Buffer<T: Element> {
    dev: Device,
    id: BufferId,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Element> Buffer<T> {
    pub fn id(&self) -> BufferId {
        self.id
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn write(&self, data: &[T]) -> Result<()> {
        self.dev.write(self.id, 0, data)
    }
    pub fn read(&self) -> Result<Vec<T>> {
        self.dev.read(self.id)
    }
}

impl<T: Element> Drop for Buffer<T> {
    fn drop(&mut self) {
        self.dev.release_buffer(self.id);
    }
}

/// A graph handle owned by the caller; destroyed on drop.
pub struct Graph {
    dev: Device,
    id: GraphId,
}

impl Graph {
    pub fn id(&self) -> GraphId {
        self.id
    }
    pub fn replay(&self) -> Result<()> {
        self.dev.replay(GraphRef::Handle(self.id))
    }
    pub fn replay_count(&self) -> Result<u64> {
        self.dev.replay_count(GraphRef::Handle(self.id))
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        self.dev.release_graph(self.id);
    }
}

/// An open capture. Ending it consumes the scope; dropping it (early return,
/// `?`, panic) aborts the capture so the device is never left capturing.
pub struct CaptureScope<'d> {
    dev: &'d Device,
    open: bool,
}

impl CaptureScope<'_> {
    /// End into a new owned graph handle.
    pub fn end_graph(mut self) -> Result<Graph> {
        self.open = false;
        let id = self.dev.end_capture_graph()?;
        Ok(Graph {
            dev: self.dev.clone(),
            id,
        })
    }

    /// End into the device's current exec.
    pub fn end_into_current(mut self) -> Result<()> {
        self.open = false;
        self.dev.end_capture()
    }
}

impl Drop for CaptureScope<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.dev.abort_capture();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ResourceCounts;

    /// A backend that runs nothing and logs the calls core's teardown and
    /// timing make: enough to test core's own bookkeeping.
    struct Null {
        info: DeviceInfo,
        support: CaptureSupport,
        log: Arc<Mutex<Vec<&'static str>>>,
    }
    impl Null {
        fn note(&self, call: &'static str) {
            self.log.lock().unwrap().push(call);
        }
    }
    impl Backend for Null {
        fn info(&self) -> &DeviceInfo {
            &self.info
        }
        fn capture_support(&self) -> CaptureSupport {
            self.support.clone()
        }
        fn begin_timed(&mut self, _: u64) -> std::result::Result<(), ErrorKind> {
            self.note("begin_timed");
            Ok(())
        }
        fn alloc(&mut self, _: usize) -> std::result::Result<crate::RawBuffer, ErrorKind> {
            Ok(crate::RawBuffer(1))
        }
        fn free(&mut self, _: crate::RawBuffer) -> std::result::Result<(), ErrorKind> {
            self.note("free");
            Ok(())
        }
        fn write(
            &mut self,
            _: crate::RawBuffer,
            _: usize,
            _: &[u8],
        ) -> std::result::Result<(), ErrorKind> {
            Ok(())
        }
        fn read(
            &mut self,
            _: crate::RawBuffer,
            _: usize,
            _: &mut [u8],
        ) -> std::result::Result<(), ErrorKind> {
            Ok(())
        }
        fn launch(&mut self, _: &crate::Launch) -> std::result::Result<(), ErrorKind> {
            Ok(())
        }
        fn synchronize(&mut self) -> std::result::Result<(), ErrorKind> {
            self.note("synchronize");
            Ok(())
        }
        fn prepare(&mut self, _: &[(OpKind, DType)]) -> std::result::Result<(), ErrorKind> {
            Ok(())
        }
        fn begin_capture(&mut self) -> std::result::Result<(), ErrorKind> {
            Ok(())
        }
        fn end_capture(&mut self) -> std::result::Result<(), ErrorKind> {
            Ok(())
        }
        fn end_capture_graph(&mut self) -> std::result::Result<RawGraph, ErrorKind> {
            Ok(RawGraph(1))
        }
        fn replay(&mut self, _: ReplayTarget) -> std::result::Result<(), ErrorKind> {
            Ok(())
        }
        fn destroy_graph(&mut self, _: RawGraph) -> std::result::Result<(), ErrorKind> {
            self.note("destroy_graph");
            Ok(())
        }
        fn abort_capture(&mut self) -> std::result::Result<(), ErrorKind> {
            self.note("abort_capture");
            Ok(())
        }
        fn live_resources(&self) -> ResourceCounts {
            ResourceCounts::default()
        }
    }

    fn null(support: CaptureSupport) -> Null {
        Null {
            info: DeviceInfo {
                backend: "null".into(),
                index: 0,
                name: "null".into(),
                driver: "0".into(),
            },
            support,
            log: Arc::default(),
        }
    }

    fn device() -> Device {
        Device::new(Box::new(null(CaptureSupport::Native)))
    }

    /// C9's plumbing on a backend that reports Unsupported (no real backend
    /// does). Mutations: `is_supported -> true`, `Backend::supports_capture
    /// -> true / false`, `Device::supports_capture -> true` → red.
    #[test]
    fn capture_support_is_reported_through_every_layer() {
        let no = null(CaptureSupport::Unsupported("none here".into()));
        assert!(!no.support.is_supported());
        assert!(!no.supports_capture());
        let yes = null(CaptureSupport::Emulated);
        assert!(yes.support.is_supported() && yes.supports_capture());
        let d = Device::new(Box::new(no));
        assert!(!d.supports_capture());
        assert_eq!(
            d.begin_capture().unwrap_err().kind,
            ErrorKind::CaptureUnsupported {
                reason: "none here".into()
            }
        );
        assert!(device().supports_capture());
    }

    /// The allocation limit is inclusive: exactly MAX_ELEMENTS elements is
    /// legal (the Null backend allocates nothing, so 16 GiB costs nothing).
    /// Mutation: `>` → `>=` in `Device::alloc` → red.
    #[test]
    fn alloc_limit_is_inclusive() {
        let d = device();
        let max = validate::MAX_ELEMENTS as usize;
        d.alloc(DType::U32, max).unwrap();
        let e = d.alloc(DType::U32, max + 1).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::TooLarge { .. }), "{e}");
    }

    /// Timing markers bracket eager launches only while tracing, never
    /// inside a capture. Mutation: `&&` → `||` in `Device::launch` → red.
    #[test]
    fn timing_markers_only_for_traced_eager_launches() {
        let backend = null(CaptureSupport::Native);
        let log = backend.log.clone();
        let count = || {
            log.lock()
                .unwrap()
                .iter()
                .filter(|c| **c == "begin_timed")
                .count()
        };
        let d = Device::new(Box::new(backend));
        let b = d.alloc(DType::U32, 4).unwrap();
        d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
        assert_eq!(count(), 0, "tracing is off");
        d.set_tracing(true);
        d.begin_capture().unwrap();
        d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
        d.end_capture().unwrap();
        assert_eq!(count(), 0, "inside a capture");
        d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
        assert_eq!(count(), 1, "a traced eager launch");
    }

    /// Dropping the last handle tears down in dependency order: the open
    /// capture aborted, queued work finished, graphs destroyed, then every
    /// buffer freed. Mutation: `impl Drop for State` → `()` → red.
    #[test]
    fn drop_tears_down_in_dependency_order() {
        let backend = null(CaptureSupport::Native);
        let log = backend.log.clone();
        let d = Device::new(Box::new(backend));
        let b = d.alloc(DType::U32, 4).unwrap();
        d.begin_capture().unwrap();
        d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
        let _g = d.end_capture_graph().unwrap();
        d.begin_capture().unwrap();
        log.lock().unwrap().clear();
        drop(d);
        assert_eq!(
            *log.lock().unwrap(),
            ["abort_capture", "synchronize", "destroy_graph", "free"]
        );
    }

    /// Mutation: `impl Debug for Device` → `Ok(Default::default())` → red.
    #[test]
    fn debug_names_the_device() {
        assert_eq!(format!("{:?}", device()), r#"Device { id: "null:0" }"#);
    }

    #[test]
    fn tracing_is_off_by_default_and_records_nothing() {
        let d = device();
        let b = d.alloc(DType::U32, 4).unwrap();
        d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
        d.begin_capture().unwrap();
        let g = d.end_capture_graph().unwrap();
        d.replay(GraphRef::Handle(g)).unwrap();
        assert!(d.take_trace().is_empty());
        let log = d.take_trace_log("t").unwrap();
        assert!(log.events.is_empty() && log.device_spans.is_empty());
        assert!(log.device_timing_unavailable.unwrap().contains("null"));
    }

    #[test]
    fn errors_name_backend_device_and_call() {
        let d = device();
        let e = d.alloc(DType::F32, 0).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("null device null:0 (null): alloc: "),
            "{msg}"
        );
    }
}
