//! Conditional bodies inside a capture (C14): IF runs its body once when a
//! `u32` condition on the device is non-zero; WHILE runs it while the
//! condition is non-zero, read before each iteration, at most
//! `max_iterations` times. The condition is read on the device when the
//! replay reaches the body, so kernels before or inside the body may write
//! it and host writes between replays are seen (C1, C2).
//!
//! Core records where each body begins and ends among the graph's
//! launches ([`Region`]), tells the backend at the same points
//! (`begin_conditional`/`end_conditional`), and tells it again, in the same
//! order, when a graph update records the graph anew ([`walk`]).

use super::handles::{BufferId, CaptureScope};
use super::state::State;
use super::Device;
use crate::backend::{Conditional, ConditionalKind, ConditionalSupport};
use crate::dtype::DType;
use crate::error::{ErrorKind, Result};
use crate::view::View;

/// One conditional body of a captured graph: launches `first..end` in
/// capture order, with the `inner` bodies that follow it in `regions`
/// nested in it (regions are kept in the order they were opened).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Region {
    pub(super) kind: ConditionalKind,
    /// The condition's buffer and element, as the user gave them.
    pub(super) cond: BufferId,
    pub(super) offset: usize,
    /// The same, lowered for the backend.
    pub(super) raw: Conditional,
    pub(super) first: usize,
    /// `usize::MAX` while the body is open.
    pub(super) end: usize,
    pub(super) inner: usize,
}

/// One step of a graph's structure, in the order a capture made it.
pub(super) enum Step<'a> {
    Launch(usize),
    Begin(&'a Region),
    End,
}

/// The graph of `launches` launches with `regions` (closed, in opening
/// order) as the capture calls that made it: each launch, and each body's
/// begin before its launches and its end after them.
pub(super) fn walk<E>(
    launches: usize,
    regions: &[Region],
    visit: &mut impl FnMut(Step<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    walk_range(0, launches, regions, visit)
}

fn walk_range<E>(
    lo: usize,
    hi: usize,
    regions: &[Region],
    visit: &mut impl FnMut(Step<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    // Slices, not counters: a region and the ones nested in it, then the
    // rest (no index arithmetic a slip could turn into an endless loop).
    let mut next = lo;
    let mut rest = regions;
    while let Some((r, tail)) = rest.split_first() {
        let (inner, after) = tail.split_at(r.inner);
        for i in next..r.first {
            visit(Step::Launch(i))?;
        }
        visit(Step::Begin(r))?;
        walk_range(r.first, r.end, inner, visit)?;
        visit(Step::End)?;
        next = r.end;
        rest = after;
    }
    for i in next..hi {
        visit(Step::Launch(i))?;
    }
    Ok(())
}

impl Device {
    /// How this device runs conditional bodies (C14).
    pub fn conditional_support(&self) -> ConditionalSupport {
        self.state().backend.conditional_support()
    }

    /// Open a conditional body in the open capture.
    pub(super) fn begin_body(&self, kind: ConditionalKind, cond: View) -> Result<()> {
        let me = std::thread::current().id();
        self.with("begin_conditional", |st| {
            let cap = st.capture.as_ref().ok_or(ErrorKind::NotCapturing)?;
            if cap.thread != me {
                return Err(ErrorKind::CrossThreadCapture {
                    owner: format!("{:?}", cap.thread),
                });
            }
            if kind == (ConditionalKind::While { max_iterations: 0 }) {
                return Err(ErrorKind::ZeroIterations);
            }
            if let ConditionalSupport::Unsupported(reason) = st.backend.conditional_support() {
                return Err(ErrorKind::ConditionalUnsupported { reason });
            }
            let raw = lower_condition(st, kind, cond)?;
            st.begin_conditional_raw(&raw)?;
            let cap = st.capture.as_mut().expect("checked above");
            cap.uses.insert(cond.buffer);
            cap.open.push(cap.regions.len());
            cap.regions.push(Region {
                kind,
                cond: cond.buffer,
                offset: cond.offset,
                raw,
                first: cap.record.len(),
                end: usize::MAX,
                inner: 0,
            });
            Ok(())
        })
    }

    /// Close the innermost open body.
    pub(super) fn end_body(&self) -> Result<()> {
        let me = std::thread::current().id();
        self.with("end_conditional", |st| {
            let cap = st.capture.as_ref().ok_or(ErrorKind::NotCapturing)?;
            if cap.thread != me {
                return Err(ErrorKind::CrossThreadCapture {
                    owner: format!("{:?}", cap.thread),
                });
            }
            if cap.open.is_empty() {
                return Err(ErrorKind::NoOpenConditional);
            }
            st.backend.end_conditional()?;
            let cap = st.capture.as_mut().expect("checked above");
            let at = cap.open.pop().expect("checked above");
            let end = cap.record.len();
            let inner = cap.regions.len() - at - 1;
            let r = &mut cap.regions[at];
            r.end = end;
            r.inner = inner;
            Ok(())
        })
    }
}

/// The condition `cond` names, checked: a live `u32` buffer of this device
/// holding element `cond.offset`.
pub(super) fn lower_condition(
    st: &State,
    kind: ConditionalKind,
    cond: View,
) -> std::result::Result<Conditional, ErrorKind> {
    let meta = st.live_meta(cond.buffer)?;
    if meta.dtype != DType::U32 {
        return Err(ErrorKind::ConditionDType {
            id: cond.buffer.n,
            found: meta.dtype,
        });
    }
    if cond.offset >= meta.len || cond.len == Some(0) {
        return Err(ErrorKind::ConditionOutOfRange {
            id: cond.buffer.n,
            offset: cond.offset,
            len: meta.len,
        });
    }
    Ok(Conditional {
        kind,
        cond: meta.raw,
        byte_offset: (cond.offset * 4) as u64,
    })
}

impl CaptureScope<'_> {
    /// Record `body` as a WHILE (C14): on each replay it runs while the
    /// `u32` at `cond` (its first element) is non-zero, read on the device
    /// before each iteration, at most `max_iterations` times. The body is
    /// recorded like any capture (launches, user kernels, nested bodies)
    /// and may write the condition. `max_iterations` of 0, a condition of
    /// another element type or device, or a device without conditional
    /// bodies is refused before anything is recorded; the capture stays
    /// open either way. An error of the body is returned after the body
    /// is closed: the launches it recorded before failing stay in it.
    pub fn run_while(
        &self,
        cond: impl Into<View>,
        max_iterations: u32,
        body: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.body(ConditionalKind::While { max_iterations }, cond.into(), body)
    }

    /// Record `body` as an IF (C14): on each replay it runs once when the
    /// `u32` at `cond` is non-zero. As [`CaptureScope::run_while`]
    /// otherwise.
    pub fn run_if(&self, cond: impl Into<View>, body: impl FnOnce() -> Result<()>) -> Result<()> {
        self.body(ConditionalKind::If, cond.into(), body)
    }

    fn body(
        &self,
        kind: ConditionalKind,
        cond: View,
        body: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.dev.begin_body(kind, cond)?;
        let ran = body();
        let closed = self.dev.end_body();
        ran.and(closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(first: usize, end: usize, inner: usize) -> Region {
        Region {
            kind: ConditionalKind::If,
            cond: BufferId { device: 0, n: 0 },
            offset: 0,
            raw: Conditional {
                kind: ConditionalKind::If,
                cond: crate::ids::RawBuffer(0),
                byte_offset: 0,
            },
            first,
            end,
            inner,
        }
    }

    fn steps(launches: usize, regions: &[Region]) -> String {
        let mut out = String::new();
        walk::<()>(launches, regions, &mut |s| {
            out += &match s {
                Step::Launch(i) => format!("{i} "),
                Step::Begin(r) => format!("[{} ", r.first),
                Step::End => "] ".into(),
            };
            Ok(())
        })
        .unwrap();
        out.trim_end().into()
    }

    /// A backend that declares nothing about conditional bodies reports
    /// them unsupported, naming itself, and refuses to close one by that
    /// name too (core never opens one there; a forwarding wrapper might).
    #[test]
    fn a_backend_that_declares_nothing_runs_no_bodies() {
        use crate::backend::{Backend, CaptureSupport};
        let mut b = crate::testing::NullBackend::new(CaptureSupport::Native);
        let name = b.info().backend.clone();
        match b.conditional_support() {
            ConditionalSupport::Unsupported(why) => assert!(why.contains(&name), "{why}"),
            other => panic!("{other:?}"),
        }
        match b.end_conditional() {
            Err(ErrorKind::ConditionalUnsupported { reason }) => {
                assert!(reason.contains(&name), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn walk_gives_the_capture_calls_back_in_order() {
        assert_eq!(steps(3, &[]), "0 1 2");
        // 0 [1 [2 3] 4] 5, then an empty body at the end.
        let nested = [region(1, 5, 1), region(2, 4, 0), region(6, 6, 0)];
        assert_eq!(steps(6, &nested), "0 [1 1 [2 2 3 ] 4 ] 5 [6 ]");
        // An empty body inside another at its end, then a sibling at the same point.
        let tail = [region(0, 2, 1), region(2, 2, 0), region(2, 2, 0)];
        assert_eq!(steps(2, &tail), "[0 0 1 [2 ] ] [2 ]");
    }
}
