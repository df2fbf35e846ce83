//! Node timing by stamp kernels (C10, where the driver marks launches so:
//! [`StreamDriver::node_stamps`], CUDA). A node-timed capture records one
//! event node, then a one-thread stamp kernel ([`STAMP`]) that writes the
//! device clock, then one after each launch, each beside the launches
//! ([`StreamDriver::launch_beside`]): a stamp depends on the work before
//! it, and the next launch depends on that work and on the stamp before
//! this one, not on this one. So stamp `i + 1` runs when launch `i`
//! completed, alongside launch `i + 1`, and launch `i + 2` waits for it:
//! no launch waits for the stamp beside it, and no launch after the next
//! is scheduled ahead of a stamp. While the capture is open each stamp
//! writes into a scratch word of the backend's own (a capture may not
//! allocate); when it ends, before the graph is instantiated, the graph
//! gets a buffer of its own and every stamp node is set, in the graph
//! itself, to its slot there (`set_stamps`). A traced replay's stamps are
//! read back once it completed: launch `i` runs from stamp `i` (the work
//! before it done) to stamp `i + 1` (it done), placed after the replay's
//! start event by the event node.
//!
//! Why: on an H100, stamp kernels beside each of 1000 dependent one-thread
//! kernels, each joined one launch later, made a replay 1.41× the plain
//! one, beside and never joined 1.62×, between the kernels 1.93×, event
//! record nodes 3.23×; beside 100 wide kernels a stamp ran 160 ns before
//! the next kernel's first block started, between them 770 ns
//! (`bench/probes/node_timing_probe.cu`; docs/tracing.md). Never joined,
//! a stamp beside a launch that may start early waited behind the next
//! launch's early blocks: in a traced decode step one span held two
//! layers and a later one almost none.

use super::StreamBackend;
use crate::driver::{Compiler, NodeIn, StreamDriver, VendorBlas};
use crate::launch::KernelLaunch;
use crate::tables::KernelTable;
use crate::timing::{EventTimer, NodeEvents};
use seam::ops::BufferList;
use seam::{DType, ErrorKind, Kernel, Launch, OpKind, Params, RawBuffer, RawView};
use seam_kernels::stamp::{stamp_ns, STAMP, WORDS};

/// The stamp kernel's op.
pub(crate) fn stamper() -> OpKind {
    OpKind::User(Kernel::new(&STAMP))
}

/// The launch of stamp `slot` of a buffer of the backend's own (not a seam
/// buffer: bound directly, so its handle is never looked up).
fn stamp_launch(slot: usize) -> Result<Launch, ErrorKind> {
    let offset = u32::try_from(slot * WORDS as usize).map_err(|_| ErrorKind::TooLarge {
        what: "node-timed graph",
        detail: format!("{slot} stamps; a stamp's word offset must fit in 32 bits"),
    })?;
    let view = RawView::at(RawBuffer(u64::MAX), offset, 4, u64::from(WORDS));
    // SAFETY: what core's validation makes of it: the view is two words of
    // a buffer the caller binds and holds (the scratch word, or a graph's
    // stamp buffer of one slot per stamp node, `slot` among them), all the
    // stamp kernel writes (its extents); it reads no params.
    #[allow(unsafe_code)]
    Ok(unsafe {
        Launch::new_unchecked(
            stamper(),
            DType::U32,
            BufferList::from_slice(&[view]),
            Params::ZERO,
        )
    })
}

impl<D: StreamDriver, C: Compiler<D>, B: VendorBlas<D>> StreamBackend<D, C, B> {
    /// Before a capture opens: where it will mark its launches with stamp
    /// kernels, their module and the scratch word are ready (neither may be
    /// made inside a capture). Returns whether it will.
    pub(super) fn prepare_stamps(&mut self) -> Result<bool, ErrorKind> {
        if !(self.node_timing && self.driver.node_stamps()) {
            return Ok(false);
        }
        self.load_kernels(stamper())?;
        if self.stamp_scratch.is_none() {
            self.stamp_scratch = Some(self.driver.alloc(4 * WORDS as usize)?);
        }
        Ok(true)
    }

    /// Record the open capture's next stamp kernel, where it marks its
    /// launches so, beside the launches: into the scratch word until the
    /// capture ends. One that
    /// fails leaves the graph untimed: a launch is never refused for it.
    pub(super) fn stamp(&mut self) {
        if self.graphs.next_stamp().is_none() {
            return;
        }
        let marked = (|| {
            let scratch = self.stamp_scratch.as_ref().ok_or_else(|| {
                ErrorKind::driver(
                    "stamp",
                    "no scratch word (the capture did not prepare stamps)",
                )
            })?;
            let launch = stamp_launch(0)?;
            let f = self.kernel(&launch)?;
            let kl =
                KernelLaunch::new(&self.driver, f, &launch, BufferList::from_slice(&[scratch]))?;
            self.driver.launch_beside(&kl, self.graphs.last_stamp())
        })();
        match marked {
            Ok(node) => self.graphs.record_stamp(node),
            Err(_) => self.graphs.untime(),
        }
    }
}

/// A buffer of one stamp slot per stamp node of the graph that just ended,
/// and every node set to its slot in the graph itself, before the graph is
/// instantiated (`graphs::SetStamps`). Where the buffer cannot be made
/// the nodes still write the scratch word, and the graph is untimed.
pub(super) fn set_stamps<D: StreamDriver>(
    driver: &D,
    kernels: &KernelTable<D::Function>,
    graph: &D::Graph,
    nodes: &[D::Node],
) -> (Option<D::Memory>, bool) {
    let Ok(memory) = driver.alloc(nodes.len() * 4 * WORDS as usize) else {
        return (None, false);
    };
    let Some(f) = kernels.get(stamper(), DType::U32) else {
        return (Some(memory), false);
    };
    let set = nodes.iter().enumerate().try_for_each(|(slot, node)| {
        let launch = stamp_launch(slot)?;
        let kl = KernelLaunch::new(driver, f, &launch, BufferList::from_slice(&[&memory]))?;
        driver.set_kernel_node(NodeIn::Graph, graph, node, &kl)
    });
    let timed = set.is_ok();
    (Some(memory), timed)
}

/// Read the node timing of the replay tagged `tag` of a node-timed graph
/// (`nodes`): from its stamps where it has a stamp buffer (read back, which
/// waits for the stream), else from its event nodes.
pub(super) fn read_marks<D: StreamDriver>(
    timer: &mut EventTimer<D>,
    driver: &D,
    tag: u64,
    nodes: &NodeEvents<D::Event>,
    stamps: Option<&D::Memory>,
) -> Result<(), ErrorKind> {
    let (Some(memory), Some(first)) = (stamps, nodes.events.first()) else {
        return timer.read_nodes(driver, tag, &nodes.events);
    };
    let mut bytes = vec![0u8; driver.memory_bytes(memory)];
    driver.read(memory, 0, &mut bytes)?;
    let stamps: Vec<u64> = bytes
        .chunks_exact(4 * WORDS as usize)
        .map(|c| {
            let word = |k: usize| u32::from_le_bytes([c[k], c[k + 1], c[k + 2], c[k + 3]]);
            stamp_ns([word(0), word(4)])
        })
        .collect();
    timer.read_stamps(driver, tag, first, &stamps)
}
