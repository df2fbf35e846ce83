//! Conditional bodies (C14) as the driver's conditional nodes (CUDA's IF
//! and WHILE): at a body's start, a handle of the graph being captured, a
//! one-thread kernel ([`SET_CONDITION`]) that sets it from the condition,
//! then the node, whose body the stream captures into until the body ends;
//! a WHILE's body ends with the same kernel, so the node reads the
//! condition again after each iteration. Event record nodes may not be in
//! a body, so a graph that opens one is captured untimed.

use super::StreamBackend;
use crate::driver::{Compiler, StreamDriver, VendorBlas};
use crate::launch::KernelLaunch;
use seam::ops::BufferList;
use seam::{Conditional, ConditionalKind, DType, ErrorKind, Kernel, Launch, OpKind, RawView};
use seam_kernels::conditional::{set_condition_params, SET_CONDITION};

/// The setter's op.
pub(crate) fn setter() -> OpKind {
    OpKind::User(Kernel::new(&SET_CONDITION))
}

/// A body open in the capture: its kind, its condition, and its handle.
pub(crate) struct OpenBody {
    kind: ConditionalKind,
    cond: RawView,
    handle: u64,
}

impl<D: StreamDriver, C: Compiler<D>, B: VendorBlas<D>> StreamBackend<D, C, B> {
    /// Open a body (`Backend::begin_conditional`).
    pub(crate) fn open_body(&mut self, c: &Conditional) -> Result<(), ErrorKind> {
        self.driver.select()?;
        self.graphs.untime(&self.driver);
        let handle = self.driver.conditional_handle()?;
        let cond = RawView::at(c.cond, (c.byte_offset / 4) as u32, 4, 1);
        self.set_condition(cond, handle)?;
        self.driver.begin_body(c.kind, handle)?;
        self.bodies.push(OpenBody {
            kind: c.kind,
            cond,
            handle,
        });
        Ok(())
    }

    /// Close the innermost body (`Backend::end_conditional`).
    pub(crate) fn close_body(&mut self) -> Result<(), ErrorKind> {
        self.driver.select()?;
        let body = self.bodies.pop().ok_or(ErrorKind::NoOpenConditional)?;
        if let ConditionalKind::While { .. } = body.kind {
            self.set_condition(body.cond, body.handle)?;
        }
        self.driver.end_body()
    }

    /// Queue (record) the setter of `handle` from `cond`.
    fn set_condition(&mut self, cond: RawView, handle: u64) -> Result<(), ErrorKind> {
        let op = setter();
        let views = BufferList::from_slice(&[cond]);
        // SAFETY: the launch is what core's validation makes of it: `cond`
        // is a live u32 buffer of this backend holding the element at its
        // offset (`Backend::begin_conditional`'s guarantee), which is all
        // the setter reads (its extents: one element); its params set only
        // the fields it reads.
        #[allow(unsafe_code)]
        let launch =
            unsafe { Launch::new_unchecked(op, DType::U32, views, set_condition_params(handle)) };
        let f = self.kernel(&launch)?;
        let kl = KernelLaunch::new(&self.driver, f, &launch, self.bindings(&launch)?)?;
        self.driver.launch_kernel(&kl)
    }
}
