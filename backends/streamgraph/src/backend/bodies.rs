//! Conditional bodies (C14) as the driver's conditional nodes (CUDA's IF
//! and WHILE): at a body's start, a handle of the graph being captured, a
//! one-thread kernel ([`SET_CONDITION`]) that sets it from the condition,
//! then the node, whose body the stream captures into until the body ends;
//! a WHILE's body ends with the same kernel, so the node reads the
//! condition again after each iteration. The driver's WHILE node has no
//! bound, so the setter also counts the iterations, in a word of the
//! backend's own (one per nesting depth: the stream runs one body of a
//! depth at a time), and clears the handle at `max_iterations`. Event
//! record nodes may not be in a body, so a graph that opens one is
//! captured untimed.

use super::StreamBackend;
use crate::driver::{Compiler, StreamDriver, VendorBlas};
use crate::launch::KernelLaunch;
use seam::ops::BufferList;
use seam::{
    Conditional, ConditionalKind, DType, ErrorKind, Kernel, Launch, OpKind, RawBuffer, RawView,
};
use seam_kernels::conditional::{set_condition_params, SET_CONDITION};

/// The setter's op.
pub(crate) fn setter() -> OpKind {
    OpKind::User(Kernel::new(&SET_CONDITION))
}

/// The deepest nesting of bodies: the words of the iteration counters.
pub(crate) const MAX_DEPTH: usize = 64;

/// A body open in the capture: its kind, its condition, its handle, and
/// its depth (its counter's word).
pub(crate) struct OpenBody {
    kind: ConditionalKind,
    cond: RawView,
    handle: u64,
    depth: usize,
}

impl OpenBody {
    /// An IF runs once; a WHILE at most `max_iterations` times.
    fn bound(&self) -> u32 {
        match self.kind {
            ConditionalKind::If => 1,
            ConditionalKind::While { max_iterations } => max_iterations,
        }
    }
}

impl<D: StreamDriver, C: Compiler<D>, B: VendorBlas<D>> StreamBackend<D, C, B> {
    /// Open a body (`Backend::begin_conditional`).
    pub(crate) fn open_body(&mut self, c: &Conditional) -> Result<(), ErrorKind> {
        self.driver.select()?;
        let depth = self.bodies.len();
        if depth >= MAX_DEPTH {
            return Err(ErrorKind::TooLarge {
                what: "conditional body",
                detail: format!(
                    "nested {} deep; native bodies nest at most {MAX_DEPTH} deep",
                    depth + 1
                ),
            });
        }
        self.graphs.untime();
        let handle = self.driver.conditional_handle()?;
        let body = OpenBody {
            kind: c.kind,
            cond: RawView::at(c.cond, (c.byte_offset / 4) as u32, 4, 1),
            handle,
            depth,
        };
        self.set_condition(&body, false)?;
        self.driver.begin_body(c.kind, handle)?;
        self.bodies.push(body);
        Ok(())
    }

    /// Close the innermost body (`Backend::end_conditional`).
    pub(crate) fn close_body(&mut self) -> Result<(), ErrorKind> {
        self.driver.select()?;
        let body = self.bodies.pop().ok_or(ErrorKind::NoOpenConditional)?;
        if let ConditionalKind::While { .. } = body.kind {
            self.set_condition(&body, true)?;
        }
        self.driver.end_body()
    }

    /// Queue (record) the setter of `body`'s handle from its condition,
    /// before the node (`after_iteration` false: its counter to 0) or at the
    /// end of an iteration (one more).
    fn set_condition(&mut self, body: &OpenBody, after_iteration: bool) -> Result<(), ErrorKind> {
        let counters = self.counters.as_ref().ok_or_else(|| {
            ErrorKind::ConditionalUnsupported {
                reason: "the iteration counters were not allocated (no capture began with conditional nodes available)".into(),
            }
        })?;
        let op = setter();
        // The counter's view: not a seam buffer (the backend's own, bound
        // directly below), so its handle is never looked up.
        let iter = RawView::at(RawBuffer(u64::MAX), body.depth as u32, 4, 1);
        let views = BufferList::from_slice(&[body.cond, iter]);
        let params = set_condition_params(body.handle, body.bound(), after_iteration);
        // SAFETY: the launch is what core's validation makes of it: `cond`
        // is a live u32 buffer of this backend holding the element at its
        // offset (`Backend::begin_conditional`'s guarantee), `iter` a word
        // of the counters (`depth` < MAX_DEPTH words), each all the setter
        // touches (its extents: one element each); its params set only the
        // fields it reads.
        #[allow(unsafe_code)]
        let launch = unsafe { Launch::new_unchecked(op, DType::U32, views, params) };
        let f = self.kernel(&launch)?;
        let bindings = BufferList::from_slice(&[self.buffer(body.cond.buffer)?, counters]);
        let kl = KernelLaunch::new(&self.driver, f, &launch, bindings)?;
        self.driver.launch_kernel(&kl)
    }
}
