//! A captured graph as the CPU queue runs it: the launch list and its
//! conditional bodies (C14), each body the queue thread's own loop over a
//! part of the list, deciding on its condition as the queue reaches it.

use crate::{Bound, Memory};
use seam::ConditionalKind;
use std::sync::Arc;

/// What a replay runs: the launches in capture order and the conditional
/// bodies among them (C14), in the order they were opened.
#[derive(Clone, Default)]
pub(crate) struct Program {
    pub(crate) launches: Arc<Vec<Bound>>,
    pub(crate) regions: Arc<Vec<Region>>,
}

/// One conditional body: launches `first..end`, the `inner` regions after
/// it nested in it, run while (or if) the `u32` at `offset` bytes into
/// `cond` is non-zero when the queue reaches it.
#[derive(Clone)]
pub(crate) struct Region {
    pub(crate) kind: ConditionalKind,
    pub(crate) cond: Memory,
    pub(crate) offset: usize,
    pub(crate) first: usize,
    pub(crate) end: usize,
    pub(crate) inner: usize,
}

impl Program {
    /// Run `f` over the launches a replay runs, in order (C14: bodies as
    /// their conditions say).
    pub(crate) fn each(&self, mut f: impl FnMut(&Bound)) {
        execute(0, self.launches.len(), &self.regions, &mut |i| {
            f(&self.launches[i])
        });
    }
}

impl Region {
    /// The condition as the queue finds it now.
    fn holds(&self) -> bool {
        let b = self.cond.lock().unwrap_or_else(|p| p.into_inner());
        let word: [u8; 4] = b[self.offset..self.offset + 4]
            .try_into()
            .expect("four bytes");
        u32::from_ne_bytes(word) != 0
    }
}

/// Run launches `lo..hi` of `launches`, whose bodies are `regions`, with
/// `run` (given each launch's index): a body runs while (or if) its
/// condition holds when the queue reaches it, a WHILE at most its bound.
pub(crate) fn execute(lo: usize, hi: usize, regions: &[Region], run: &mut impl FnMut(usize)) {
    // A region and the ones nested in it, then the rest, as slices.
    let mut next = lo;
    let mut rest = regions;
    while let Some((r, tail)) = rest.split_first() {
        let (inner, after) = tail.split_at(r.inner);
        (next..r.first).for_each(&mut *run);
        match r.kind {
            ConditionalKind::If => {
                if r.holds() {
                    execute(r.first, r.end, inner, run);
                }
            }
            ConditionalKind::While { max_iterations } => {
                for _ in 0..max_iterations {
                    if !r.holds() {
                        break;
                    }
                    execute(r.first, r.end, inner, run);
                }
            }
        }
        next = r.end;
        rest = after;
    }
    (next..hi).for_each(run);
}

/// The open capture: its launches and bodies, the bodies still open
/// (innermost last), and whether node timing was on when it began.
pub(crate) struct Recording {
    pub(crate) launches: Vec<Bound>,
    pub(crate) regions: Vec<Region>,
    pub(crate) open: Vec<usize>,
    pub(crate) node_timed: bool,
}
