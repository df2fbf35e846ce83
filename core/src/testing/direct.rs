//! [`Direct`]: a backend's own tests, calling it without a `Device`.
#![allow(unsafe_code)]

use crate::backend::{Backend, RawBuffer, RawGraph, ReplayTarget};
use crate::dtype::DType;
use crate::error::{ErrorKind, GraphUser};
use crate::ops::{BufferList, Launch, OpKind, Params, RawView};
use crate::validate;
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

/// A launch as a backend's test states it, over raw buffers: what
/// [`Direct`] checks and turns into the [`Launch`] the backend receives.
#[derive(Clone, Debug, PartialEq)]
pub struct RawCall {
    /// The op.
    pub op: OpKind,
    /// The element type of its inputs.
    pub dtype: DType,
    /// Its views, in signature order.
    pub buffers: BufferList<RawView>,
    /// Its parameters.
    pub params: Params,
}

impl RawCall {
    /// `op` over whole buffers (each view from element 0, `len` elements).
    pub fn whole(
        op: OpKind,
        dtype: DType,
        buffers: &[RawBuffer],
        len: u64,
        params: Params,
    ) -> RawCall {
        RawCall {
            op,
            dtype,
            buffers: buffers.iter().map(|&b| RawView::whole(b, len)).collect(),
            params,
        }
    }
}

/// A backend driven directly, as its own unit tests drive it, with the
/// guarantees core gives it (the [`Backend`] trait's trust boundary)
/// checked on the way in instead of assumed: handles must be live, host
/// access in range, every launch pass [`validate::check_launch`] against
/// the sizes allocated, and no buffer a graph uses may be freed. A call
/// that breaks one is refused with the error core would give and never
/// reaches the backend; so every method is safe. The backend's own
/// methods (counters, options) are reached through `Deref`.
///
/// ```
/// use seam::testing::{RawCall, Direct, NullBackend};
/// use seam::{CaptureSupport, DType, OpKind, Params};
///
/// let mut d = Direct::new(NullBackend::new(CaptureSupport::Native));
/// let buf = d.alloc(64).unwrap();
/// let fill = RawCall::whole(OpKind::Fill, DType::U32, &[buf], 16, Params::dims(16, 0, 0));
/// d.launch(&fill).unwrap();
/// let past_the_end = RawCall::whole(OpKind::Fill, DType::U32, &[buf], 16, Params::dims(17, 0, 0));
/// assert!(d.launch(&past_the_end).is_err());
/// ```
pub struct Direct<B: Backend> {
    backend: B,
    /// Bytes of each live allocation.
    sizes: BTreeMap<RawBuffer, usize>,
    /// Each launch of each live graph (the current graph's under `None`),
    /// in capture order.
    graphs: BTreeMap<Option<RawGraph>, Vec<Recorded>>,
    /// What the open capture has recorded.
    recording: Option<Vec<Recorded>>,
}

/// What a graph's launch was captured as: what an update must keep (op
/// and dtype) and the buffers it holds.
struct Recorded {
    op: OpKind,
    dtype: DType,
    buffers: Vec<RawBuffer>,
}

impl Recorded {
    fn of(call: &RawCall) -> Recorded {
        Recorded {
            op: call.op,
            dtype: call.dtype,
            buffers: call.buffers.iter().map(|v| v.buffer).collect(),
        }
    }
}

impl<B: Backend> Direct<B> {
    /// Drive `backend` directly.
    pub fn new(backend: B) -> Direct<B> {
        Direct {
            backend,
            sizes: BTreeMap::new(),
            graphs: BTreeMap::new(),
            recording: None,
        }
    }

    /// The backend back.
    pub fn into_inner(self) -> B {
        self.backend
    }

    fn size(&self, buffer: RawBuffer) -> Result<usize, ErrorKind> {
        self.sizes
            .get(&buffer)
            .copied()
            .ok_or(ErrorKind::UnknownBuffer { id: buffer.0 })
    }

    /// The launch `call` is, once it passes core's checks against the live
    /// allocations (what [`Direct::launch`] gives the backend; for tests
    /// that read a launch's geometry or immediates).
    pub fn lower(&self, call: &RawCall) -> Result<Launch, ErrorKind> {
        let mut sizes = [0usize; crate::kernel::MAX_BINDINGS];
        for (s, v) in sizes.iter_mut().zip(call.buffers.iter()) {
            *s = self.size(v.buffer)?;
        }
        let launch = Launch {
            op: call.op,
            dtype: call.dtype,
            buffers: call.buffers.clone(),
            params: call.params,
        };
        validate::check_launch(&launch, |i| sizes.get(i).copied().unwrap_or(0))?;
        Ok(launch)
    }

    fn range(&self, buffer: RawBuffer, offset: usize, len: usize) -> Result<(), ErrorKind> {
        let size = self.size(buffer)?;
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(ErrorKind::HostRange {
                what: "direct host access (bytes)",
                offset,
                count: len,
                len: size,
            });
        }
        Ok(())
    }

    fn graph(&self, target: ReplayTarget) -> Result<&Vec<Recorded>, ErrorKind> {
        let key = match target {
            ReplayTarget::Current => None,
            ReplayTarget::Graph(g) => Some(g),
        };
        self.graphs.get(&key).ok_or(match target {
            ReplayTarget::Current => ErrorKind::NoCurrentGraph,
            ReplayTarget::Graph(g) => ErrorKind::UnknownGraph { id: g.0 },
        })
    }

    /// [`Backend::alloc`].
    pub fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        let raw = self.backend.alloc(bytes)?;
        self.sizes.insert(raw, bytes);
        Ok(raw)
    }

    /// [`Backend::free`] of a live buffer no graph uses.
    pub fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        self.size(buffer)?;
        let holds = |launches: &[Recorded]| launches.iter().any(|l| l.buffers.contains(&buffer));
        let recording = self.recording.as_deref().is_some_and(holds);
        let users: Vec<GraphUser> = recording
            .then_some(GraphUser::OpenCapture)
            .into_iter()
            .chain(
                self.graphs
                    .iter()
                    .filter(|(_, launches)| holds(launches))
                    .map(|(g, _)| match g {
                        Some(g) => GraphUser::Handle(g.0),
                        None => GraphUser::Current,
                    }),
            )
            .collect();
        if !users.is_empty() {
            return Err(ErrorKind::BufferInUse {
                id: buffer.0,
                users,
            });
        }
        // SAFETY: the buffer is live (in `sizes`) and no graph uses it.
        unsafe { self.backend.free(buffer) }?;
        self.sizes.remove(&buffer);
        Ok(())
    }

    /// [`Backend::write`] within the buffer.
    pub fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        self.range(buffer, offset, data.len())?;
        // SAFETY: the buffer is live and the range within it (`range`).
        unsafe { self.backend.write(buffer, offset, data) }
    }

    /// [`Backend::read`] within the buffer.
    pub fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        self.range(buffer, offset, out.len())?;
        // SAFETY: the buffer is live and the range within it (`range`).
        unsafe { self.backend.read(buffer, offset, out) }
    }

    /// [`Backend::launch`] of a call that passes core's checks.
    pub fn launch(&mut self, call: &RawCall) -> Result<(), ErrorKind> {
        let launch = self.lower(call)?;
        // SAFETY: `lower` held the launch to core's validation against the
        // live allocations' sizes.
        unsafe { self.backend.launch(&launch) }?;
        if let Some(rec) = &mut self.recording {
            rec.push(Recorded::of(call));
        }
        Ok(())
    }

    /// [`Backend::begin_capture`].
    pub fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.backend.begin_capture()?;
        self.recording = Some(Vec::new());
        Ok(())
    }

    fn finish(&mut self, key: Option<RawGraph>) {
        let launches = self.recording.take().unwrap_or_default();
        self.graphs.insert(key, launches);
    }

    /// [`Backend::end_capture_into_current`].
    pub fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        self.backend.end_capture_into_current()?;
        self.finish(None);
        Ok(())
    }

    /// [`Backend::end_capture_graph`].
    pub fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        let g = self.backend.end_capture_graph()?;
        self.finish(Some(g));
        Ok(g)
    }

    /// [`Backend::abort_capture`].
    pub fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.recording = None;
        self.backend.abort_capture()
    }

    /// [`Backend::replay`] of a live graph.
    pub fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.graph(target)?;
        // SAFETY: the graph is live, and its buffers cannot have been
        // freed (`free` refuses a buffer a graph uses).
        unsafe { self.backend.replay(target) }
    }

    /// [`Backend::destroy_graph`] of a live graph.
    pub fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.graph(ReplayTarget::Graph(graph))?;
        // SAFETY: the graph is live (made by `end_capture_graph`, not
        // destroyed since).
        unsafe { self.backend.destroy_graph(graph) }?;
        self.graphs.remove(&Some(graph));
        Ok(())
    }

    /// [`Backend::update_launches`] with calls that pass core's checks,
    /// at indices the graph holds, each with the op and dtype of the
    /// launch it replaces.
    pub fn update_launches(
        &mut self,
        target: ReplayTarget,
        changes: &[(usize, RawCall)],
    ) -> Result<(), ErrorKind> {
        let recorded = self.graph(target)?;
        let mut lowered = Vec::with_capacity(changes.len());
        for &(index, ref call) in changes {
            let was = recorded.get(index).ok_or(ErrorKind::NoSuchLaunch {
                index,
                launches: recorded.len(),
            })?;
            if call.op != was.op {
                return Err(ErrorKind::UpdateChangesOp {
                    index,
                    recorded: was.op,
                    requested: call.op,
                });
            }
            if call.dtype != was.dtype {
                return Err(ErrorKind::UpdateChangesDtype {
                    index,
                    recorded: was.dtype,
                    requested: call.dtype,
                });
            }
            lowered.push((index, self.lower(call)?));
        }
        // SAFETY: the graph is live, every index in range, every launch
        // checked as `launch` checks it and of the op and dtype it replaces.
        let updated = unsafe { self.backend.update_launches(target, &lowered) };
        let key = match target {
            ReplayTarget::Current => None,
            ReplayTarget::Graph(g) => Some(g),
        };
        if let Some(graph) = self.graphs.get_mut(&key) {
            for (index, call) in changes {
                let new = Recorded::of(call);
                match updated {
                    Ok(()) => graph[*index] = new,
                    // A failed update may have patched part of the graph:
                    // it holds the old buffers and the new ones alike.
                    Err(_) => graph[*index].buffers.extend(new.buffers),
                }
            }
        }
        updated
    }
}

impl<B: Backend> Deref for Direct<B> {
    type Target = B;
    fn deref(&self) -> &B {
        &self.backend
    }
}

impl<B: Backend> DerefMut for Direct<B> {
    fn deref_mut(&mut self) -> &mut B {
        &mut self.backend
    }
}
