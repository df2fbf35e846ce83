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
/// and dtype), the buffers it holds, and the launch the backend was given
/// (what [`Backend::update_launches`] is told the graph runs).
struct Recorded {
    op: OpKind,
    dtype: DType,
    buffers: Vec<RawBuffer>,
    launch: Launch,
}

impl Recorded {
    fn of(call: &RawCall, launch: Launch) -> Recorded {
        Recorded {
            op: call.op,
            dtype: call.dtype,
            buffers: call.buffers.iter().map(|v| v.buffer).collect(),
            launch,
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
            rec.push(Recorded::of(call, launch));
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

    /// [`Backend::begin_conditional`] inside the open capture, its
    /// condition a whole `u32` word of a live buffer.
    pub fn begin_conditional(&mut self, c: &crate::backend::Conditional) -> Result<(), ErrorKind> {
        if self.recording.is_none() {
            return Err(ErrorKind::NotCapturing);
        }
        let bytes = self.size(c.cond)?;
        if !c.byte_offset.is_multiple_of(4)
            || c.byte_offset
                .checked_add(4)
                .is_none_or(|end| end > bytes as u64)
        {
            return Err(ErrorKind::ConditionOutOfRange {
                id: c.cond.0,
                offset: (c.byte_offset / 4) as usize,
                len: bytes / 4,
            });
        }
        // SAFETY: `c.cond` is a live allocation (its size is known) and
        // the word at `c.byte_offset` lies within it (checked above).
        unsafe { self.backend.begin_conditional(c) }
    }

    /// [`Backend::end_conditional`].
    pub fn end_conditional(&mut self) -> Result<(), ErrorKind> {
        self.backend.end_conditional()
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
    /// launch it replaces, and what the graph runs as recorded. A failed
    /// update leaves the record as it was (the backend may have patched
    /// part of the graph: core records such a graph again before its next
    /// update, which this harness leaves to the test).
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
        let mut now: Vec<Launch> = recorded.iter().map(|r| r.launch.clone()).collect();
        // SAFETY: the graph is live, every index in range, every launch
        // checked as `launch` checks it and of the op and dtype it
        // replaces; `now` is what it runs (the caller's part where an
        // earlier update failed, as the doc says).
        let updated = unsafe { self.backend.update_launches(target, &mut now, &lowered) };
        let key = match target {
            ReplayTarget::Current => None,
            ReplayTarget::Graph(g) => Some(g),
        };
        if let Some(graph) = self.graphs.get_mut(&key) {
            for ((index, call), (_, launch)) in changes.iter().zip(lowered) {
                let new = Recorded::of(call, launch);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::CaptureSupport;
    use crate::ops::Params;
    use crate::testing::NullBackend;

    fn fill(buf: RawBuffer, n: u32) -> RawCall {
        RawCall::whole(
            OpKind::Fill,
            DType::U32,
            &[buf],
            u64::from(n),
            Params::dims(n, 0, 0),
        )
    }

    /// Every guarantee of the trust boundary is checked on the way in: a
    /// call that breaks one is refused with core's error and never reaches
    /// the backend.
    #[test]
    fn every_broken_guarantee_is_refused_before_the_backend() {
        let null = NullBackend::new(CaptureSupport::Native);
        let log = null.log();
        let mut d = Direct::new(null);
        let a = d.alloc(64).unwrap();
        let b = d.alloc(64).unwrap();
        let calls = || log.lock().unwrap().len();
        let before = calls();
        let gone = RawBuffer(999);
        assert_eq!(
            d.write(gone, 0, &[0]),
            Err(ErrorKind::UnknownBuffer { id: 999 })
        );
        assert!(matches!(
            d.write(a, 60, &[0; 8]),
            Err(ErrorKind::HostRange { .. })
        ));
        assert!(matches!(
            d.read(a, 64, &mut [0]),
            Err(ErrorKind::HostRange { .. })
        ));
        assert!(matches!(
            d.read(a, usize::MAX, &mut [0]),
            Err(ErrorKind::HostRange { .. })
        ));
        assert!(d.launch(&fill(a, 17)).is_err(), "past the buffer");
        assert!(d.launch(&fill(gone, 1)).is_err(), "an unknown buffer");
        assert_eq!(d.free(gone), Err(ErrorKind::UnknownBuffer { id: 999 }));
        assert_eq!(
            d.replay(ReplayTarget::Current),
            Err(ErrorKind::NoCurrentGraph)
        );
        let g = RawGraph(7);
        assert_eq!(
            d.replay(ReplayTarget::Graph(g)),
            Err(ErrorKind::UnknownGraph { id: 7 })
        );
        assert_eq!(d.destroy_graph(g), Err(ErrorKind::UnknownGraph { id: 7 }));
        assert_eq!(calls(), before, "no refused call reached the backend");
        d.write(a, 56, &[0; 8]).unwrap();
        d.read(a, 0, &mut [0; 64]).unwrap();
        d.launch(&fill(a, 16)).unwrap();
        assert_eq!(calls(), before + 3);
        d.free(b).unwrap();
        assert_eq!(d.free(b), Err(ErrorKind::UnknownBuffer { id: b.0 }));
    }

    /// A conditional body reaches the backend only inside a capture, over a
    /// whole word of a live buffer: outside a capture, an unknown buffer,
    /// a word past the end or unaligned are refused before it (the null
    /// backend, which has no bodies, answers the rest). Mutations: the
    /// call kept from the backend (`Ok(())`), the range test reversed →
    /// red.
    #[test]
    fn a_body_reaches_the_backend_only_over_a_word_of_a_live_buffer() {
        use crate::backend::{Conditional, ConditionalKind};
        let mut d = Direct::new(NullBackend::new(CaptureSupport::Native));
        let cond = d.alloc(64).unwrap();
        let at = |cond, byte_offset| Conditional {
            kind: ConditionalKind::If,
            cond,
            byte_offset,
        };
        assert_eq!(
            d.begin_conditional(&at(cond, 0)),
            Err(ErrorKind::NotCapturing)
        );
        d.begin_capture().unwrap();
        assert_eq!(
            d.begin_conditional(&at(RawBuffer(999), 0)),
            Err(ErrorKind::UnknownBuffer { id: 999 })
        );
        // The error names the word asked for and the buffer's words.
        for (byte_offset, word) in [(64, 16), (62, 15), (u64::MAX - 3, (u64::MAX / 4) as usize)] {
            assert_eq!(
                d.begin_conditional(&at(cond, byte_offset)),
                Err(ErrorKind::ConditionOutOfRange {
                    id: cond.0,
                    offset: word,
                    len: 16
                }),
                "byte {byte_offset}"
            );
        }
        for byte_offset in [0, 60] {
            assert!(
                matches!(
                    d.begin_conditional(&at(cond, byte_offset)),
                    Err(ErrorKind::ConditionalUnsupported { .. })
                ),
                "byte {byte_offset}: the backend's own answer"
            );
        }
        assert!(matches!(
            d.end_conditional(),
            Err(ErrorKind::ConditionalUnsupported { .. })
        ));
    }

    /// A buffer the open capture, the current graph or a handle uses is not
    /// freed, and each user is named; what an update does to that: a
    /// finished one moves the hold, a failed one (the backend may have
    /// patched part) holds old and new alike. An update must keep each
    /// launch's op and dtype and name a launch the graph has.
    #[test]
    fn a_buffer_in_use_stays_and_updates_keep_op_and_dtype() {
        let mut d = Direct::new(NullBackend::new(CaptureSupport::Native));
        let [x, y, z] = [0, 1, 2].map(|_| d.alloc(64).unwrap());
        d.begin_capture().unwrap();
        d.launch(&fill(x, 16)).unwrap();
        let in_use = |d: &mut Direct<NullBackend>, buf: RawBuffer| match d.free(buf) {
            Err(ErrorKind::BufferInUse { users, .. }) => users,
            other => panic!("{other:?}"),
        };
        assert_eq!(in_use(&mut d, x), [GraphUser::OpenCapture]);
        d.end_capture_into_current().unwrap();
        assert_eq!(in_use(&mut d, x), [GraphUser::Current]);
        d.begin_capture().unwrap();
        d.launch(&fill(x, 16)).unwrap();
        let h = d.end_capture_graph().unwrap();
        assert_eq!(
            in_use(&mut d, x),
            [GraphUser::Current, GraphUser::Handle(h.0)]
        );
        d.begin_capture().unwrap();
        d.launch(&fill(z, 16)).unwrap();
        d.abort_capture().unwrap();
        let t = ReplayTarget::Graph(h);
        assert_eq!(
            d.update_launches(t, &[(1, fill(y, 16))]),
            Err(ErrorKind::NoSuchLaunch {
                index: 1,
                launches: 1
            })
        );
        let copy = RawCall::whole(
            OpKind::Copy,
            DType::U32,
            &[y, x],
            16,
            Params::dims(16, 0, 0),
        );
        assert!(matches!(
            d.update_launches(t, &[(0, copy)]),
            Err(ErrorKind::UpdateChangesOp { index: 0, .. })
        ));
        let other = RawCall {
            dtype: DType::F32,
            ..fill(y, 16)
        };
        assert!(matches!(
            d.update_launches(t, &[(0, other)]),
            Err(ErrorKind::UpdateChangesDtype { index: 0, .. })
        ));
        // The null backend refuses updates: the graph may now use y too.
        assert_eq!(
            d.update_launches(t, &[(0, fill(y, 16))]),
            Err(ErrorKind::UpdateUnsupported)
        );
        assert_eq!(in_use(&mut d, y), [GraphUser::Handle(h.0)]);
        assert_eq!(
            in_use(&mut d, x),
            [GraphUser::Current, GraphUser::Handle(h.0)]
        );
        d.destroy_graph(h).unwrap();
        d.free(y).unwrap();
        d.free(z).unwrap();
        d.replay(ReplayTarget::Current).unwrap();
        assert_eq!(in_use(&mut d, x), [GraphUser::Current]);
    }
}
