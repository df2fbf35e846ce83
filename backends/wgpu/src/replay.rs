//! A captured graph as the wgpu backend replays it: each launch resolved
//! once into a [`Dispatch`] (pipeline, bind group, immediates, workgroups),
//! the [`Step`]s of a [`Graph`] knowing which pass state they must set, a
//! replay submitted in pieces ([`replay_pieces`]) and each piece encoded
//! into one compute pass ([`encode`]).

use crate::backend::EAGER_BATCH;
use crate::gpu::Gpu;
use seam::ErrorKind;

/// Most graph steps per command buffer of a replay. A replay is submitted
/// in pieces, so the GPU runs one piece while the host encodes the next:
/// one command buffer of the whole graph made the GPU wait for all of it
/// to be encoded, which left a 1000-dispatch replay slower than the same
/// launches eager (4672 vs 3503 µs on the H200).
pub(crate) const REPLAY_CHUNK: usize = EAGER_BATCH;
/// The first piece of a replay: small, so the GPU starts after 16
/// dispatches are encoded, not 256 (a decode step of 128 long kernels
/// waited for all 128: ~3 µs of encoding each, 0.4 ms a step on the H200);
/// each later piece is twice the one before, up to [`REPLAY_CHUNK`], so a
/// long graph of short kernels still pays few submissions.
pub(crate) const REPLAY_FIRST: usize = 16;

/// The pieces a replay of `len` steps is submitted in, as ranges in order:
/// [`REPLAY_FIRST`], then doubling to [`REPLAY_CHUNK`], covering `0..len`.
pub(crate) fn replay_pieces(len: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut start = 0;
    let mut size = REPLAY_FIRST;
    std::iter::from_fn(move || {
        if start >= len {
            return None;
        }
        let end = (start + size).min(len);
        let piece = start..end;
        start = end;
        size = (size * 2).min(REPLAY_CHUNK);
        Some(piece)
    })
}
/// Timestamp queries per query set (wgpu's largest set); stamp `q` of a
/// timing cycle is query `q % QUERIES_PER_SET` of set `q / QUERIES_PER_SET`.
pub(crate) const QUERIES_PER_SET: u32 = wgpu::QUERY_SET_MAX_QUERIES;

/// The timestamps one command buffer writes inside its pass
/// (`backend/timing.rs` says what they measure); none where timing is
/// off.
pub(crate) struct Stamps<'a> {
    /// The device's query sets.
    pub(crate) sets: &'a [wgpu::QuerySet],
    /// Markers in the eager batch: (how many of its dispatches come
    /// before the marker, stamp), in batch order.
    pub(crate) batch: &'a [(usize, u32)],
    /// Node stamps of the steps: `Some((q, lead))` writes stamp `q + 1 + i`
    /// after step `i` of the piece and, where `lead` (the graph's first
    /// piece), stamp `q` before its first step.
    pub(crate) nodes: Option<(u32, bool)>,
}

impl Stamps<'_> {
    fn write(&self, pass: &mut wgpu::ComputePass<'_>, stamp: u32) {
        let set = &self.sets[(stamp / QUERIES_PER_SET) as usize];
        pass.write_timestamp(set, stamp % QUERIES_PER_SET);
    }
}

/// The immediate block a kernel receives (`Launch::immediates`).
pub(crate) type Immediates = [u8; seam::ops::IMMEDIATE_BYTES];

/// One fully resolved dispatch: everything a replay needs, nothing to look up.
#[derive(Clone)]
pub(crate) struct Dispatch {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) bind_group: wgpu::BindGroup,
    /// `Params` and the views' element offsets, as the kernel receives them.
    pub(crate) immediates: Immediates,
    pub(crate) groups: (u32, u32, u32),
    /// Inside a conditional body (C14): the workgroup counts are read
    /// from this buffer at this byte offset when the device reaches the
    /// dispatch (`seam_kernels::conditional`), not `groups`.
    pub(crate) indirect: Option<(wgpu::Buffer, u64)>,
}

impl Dispatch {
    fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>) {
        match &self.indirect {
            Some((buffer, offset)) => pass.dispatch_workgroups_indirect(buffer, *offset),
            None => pass.dispatch_workgroups(self.groups.0, self.groups.1, self.groups.2),
        }
    }
}

/// One dispatch of a captured graph with the pass state it must set, worked
/// out once at capture time (`Graph::new`): what the dispatch before it left
/// bound is not set again, so a replay records less per dispatch than an
/// eager batch does (which sets all three every time).
pub(crate) struct Step {
    dispatch: Dispatch,
    sets: Sets,
}

/// Which pass state a step sets before its dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sets {
    pipeline: bool,
    bind_group: bool,
    immediates: bool,
}

impl Sets {
    const ALL: Sets = Sets {
        pipeline: true,
        bind_group: true,
        immediates: true,
    };

    /// What a dispatch over (`pipeline`, `bind_group`, `immediates`) must set
    /// after one over `prev` in the same pass (`None`: the first of the
    /// graph, after whatever an eager batch left bound). A pipeline change
    /// sets everything again: wgpu resets the immediates when the pipeline
    /// layout changes, and rebinding is what a fresh pipeline expects.
    fn after<P: PartialEq, G: PartialEq, I: PartialEq>(
        prev: Option<(&P, &G, &I)>,
        (pipeline, bind_group, immediates): (&P, &G, &I),
    ) -> Sets {
        match prev {
            Some((p, _, _)) if p != pipeline => Sets::ALL,
            Some((_, g, i)) => Sets {
                pipeline: false,
                bind_group: g != bind_group,
                immediates: i != immediates,
            },
            None => Sets::ALL,
        }
    }
}

/// A captured graph: the current exec or a handle. Replays encode its steps
/// into one pass; nothing is resolved, created or compared at replay time.
pub(crate) struct Graph {
    pub(crate) steps: Vec<Step>,
    /// Captured with node timing on: a traced replay stamps every step.
    pub(crate) node_timed: bool,
    /// With conditional bodies (unrolled, with gates): the launch each
    /// step is (`None`: a gate), for its node span. Without: step `i` is
    /// launch `i`.
    pub(crate) launch_of: Option<std::sync::Arc<[Option<u32>]>>,
}

impl Graph {
    pub(crate) fn new(dispatches: Vec<Dispatch>, node_timed: bool) -> Graph {
        let mut steps: Vec<Step> = Vec::with_capacity(dispatches.len());
        for dispatch in dispatches {
            let sets = Sets::after(
                steps.last().map(|s| {
                    let d = &s.dispatch;
                    (&d.pipeline, &d.bind_group, &d.immediates)
                }),
                (
                    &dispatch.pipeline,
                    &dispatch.bind_group,
                    &dispatch.immediates,
                ),
            );
            steps.push(Step { dispatch, sets });
        }
        Graph {
            steps,
            node_timed,
            launch_of: None,
        }
    }
}

/// One thing a pass holds: a stamp, dispatch `k` of the eager batch, or
/// step `i` of the graph's piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    Stamp(u32),
    Batch(usize),
    Step(usize),
}

/// The order of a pass of `batch` eager dispatches and `steps` steps of a
/// piece, with `marks` ([`Stamps::batch`]) and `nodes` ([`Stamps::nodes`]):
/// each marker before the batch dispatch it was placed ahead of (after the
/// whole batch where no dispatch follows it), then the first piece's
/// opening node stamp, then each step followed by its node stamp.
pub(crate) fn order(
    marks: &[(usize, u32)],
    nodes: Option<(u32, bool)>,
    batch: usize,
    steps: usize,
    mut each: impl FnMut(Slot),
) {
    let mut marks = marks.iter().peekable();
    for k in 0..batch {
        while let Some(&(_, stamp)) = marks.next_if(|&&(at, _)| at <= k) {
            each(Slot::Stamp(stamp));
        }
        each(Slot::Batch(k));
    }
    for &(_, stamp) in marks {
        each(Slot::Stamp(stamp));
    }
    if let Some((stamp, true)) = nodes {
        if steps > 0 {
            each(Slot::Stamp(stamp));
        }
    }
    for i in 0..steps {
        each(Slot::Step(i));
        if let Some((stamp, _)) = nodes {
            each(Slot::Stamp(stamp + 1 + i as u32));
        }
    }
}

/// Encode the eager `batch`, then `steps` (a graph's, or a piece of them),
/// in order, into one compute pass of one command buffer, with the
/// timestamps `stamps` places between them. wgpu puts a
/// barrier between dependent dispatches. An eager dispatch sets all of its
/// state; a step sets what its `Sets` say, except the first, which sets all
/// (a new pass starts with nothing bound, and what the batch left bound
/// never leaks into the graph). Mutation: the first step of a piece setting
/// only its `Sets` → `c1_ten_thousand_launches_in_one_capture` red on
/// wgpu:0 ("CommandEncoder::finish failed: Validation Error", tried).
pub(crate) fn encode(
    gpu: &Gpu,
    batch: &[Dispatch],
    steps: &[Step],
    stamps: &Stamps<'_>,
) -> Result<wgpu::CommandBuffer, ErrorKind> {
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("seam"),
        });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes: None,
        });
        let (batch_len, steps_len) = (batch.len(), steps.len());
        order(
            stamps.batch,
            stamps.nodes,
            batch_len,
            steps_len,
            |slot| match slot {
                Slot::Stamp(stamp) => stamps.write(&mut pass, stamp),
                Slot::Batch(k) => {
                    let d = &batch[k];
                    pass.set_pipeline(&d.pipeline);
                    pass.set_bind_group(0, &d.bind_group, &[]);
                    pass.set_immediates(0, &d.immediates);
                    d.dispatch(&mut pass);
                }
                Slot::Step(i) => {
                    let s = &steps[i];
                    let d = &s.dispatch;
                    let sets = if i == 0 { Sets::ALL } else { s.sets };
                    if sets.pipeline {
                        pass.set_pipeline(&d.pipeline);
                    }
                    if sets.bind_group {
                        pass.set_bind_group(0, &d.bind_group, &[]);
                    }
                    if sets.immediates {
                        pass.set_immediates(0, &d.immediates);
                    }
                    d.dispatch(&mut pass);
                }
            },
        );
    }
    gpu.checked("wgpu::CommandEncoder::finish", || encoder.finish())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{order, replay_pieces, Sets, Slot, REPLAY_CHUNK, REPLAY_FIRST};

    /// Stamps sit where they were placed: a marker placed when the batch
    /// held `k` dispatches comes before dispatch `k` and after the ones
    /// before it (several at one place keep their order; one placed at the
    /// batch's end comes after all of it, before the graph); a node-timed
    /// piece has its lead stamp (the first piece only) before its first
    /// step and stamp `q + 1 + i` after step `i`; without timing the pass
    /// holds only dispatches. Mutations: a marker after its dispatch
    /// (`at <= k` → `at < k`), the opening stamp written for later pieces
    /// too or for no piece,
    /// a node stamp off by one, stamps for an empty piece → red.
    pub fn pass_order_puts_stamps_where_they_were_placed() {
        use Slot::{Batch as B, Stamp as T, Step as S};
        let run = |marks: &[(usize, u32)], nodes, batch, steps| {
            let mut out = Vec::new();
            order(marks, nodes, batch, steps, |s| out.push(s));
            out
        };
        assert_eq!(run(&[], None, 2, 2), [B(0), B(1), S(0), S(1)]);
        // An eager launch bracketed between two others; a replay's begin
        // marker at the batch's end.
        assert_eq!(
            run(&[(1, 0), (2, 1), (3, 2)], None, 3, 1),
            [B(0), T(0), B(1), T(1), B(2), T(2), S(0)]
        );
        // The end marker of the replay before, then two markers at once.
        assert_eq!(
            run(&[(0, 4), (1, 5), (1, 6)], None, 2, 0),
            [T(4), B(0), T(5), T(6), B(1)]
        );
        // A node-timed replay's first piece, after its begin marker.
        assert_eq!(
            run(&[(0, 7)], Some((8, true)), 0, 3),
            [T(7), T(8), S(0), T(9), S(1), T(10), S(2), T(11)]
        );
        // A later piece: stamps go on from where its first step's start is.
        assert_eq!(
            run(&[], Some((24, false)), 0, 2),
            [S(0), T(25), S(1), T(26)]
        );
        assert_eq!(run(&[], Some((3, true)), 1, 0), [B(0)]);
    }

    /// A replay's pieces cover every step once, in order: 16, 32, 64, 128,
    /// then 256 at most. Mutations: the size not doubled (`size * 2` →
    /// `size`), a piece skipped (`start = end` → `start = end + 1`), the
    /// cap dropped → red.
    pub fn replay_pieces_cover_the_graph_in_order_and_grow() {
        let sizes = |len| -> Vec<usize> { replay_pieces(len).map(|r| r.len()).collect() };
        assert_eq!(sizes(0), Vec::<usize>::new());
        assert_eq!(sizes(10), vec![10]);
        assert_eq!(sizes(128), vec![16, 32, 64, 16]);
        assert_eq!(sizes(1000), vec![16, 32, 64, 128, 256, 256, 248]);
        for len in [1, 15, 16, 17, 255, 256, 257, 4097] {
            let mut next = 0;
            for r in replay_pieces(len) {
                assert_eq!(r.start, next, "len {len}: a gap or an overlap");
                assert!(!r.is_empty() && r.len() <= REPLAY_CHUNK, "len {len}: {r:?}");
                next = r.end;
            }
            assert_eq!(next, len, "len {len}: not covered");
        }
        assert_eq!(replay_pieces(100).next(), Some(0..REPLAY_FIRST));
    }

    /// The state a step sets: everything first and after a pipeline
    /// change, otherwise only the bind group or immediates that differ from
    /// the step before. Mutations: a pipeline change keeping the old bind
    /// group or immediates, `!=` → `==`, the first step setting less → red.
    pub fn replay_steps_set_only_what_changes() {
        let s = |pipeline, bind_group, immediates| Sets {
            pipeline,
            bind_group,
            immediates,
        };
        let after = |prev: Option<(u8, u8, u8)>, next: (u8, u8, u8)| {
            Sets::after(
                prev.as_ref().map(|(p, g, i)| (p, g, i)),
                (&next.0, &next.1, &next.2),
            )
        };
        assert_eq!(after(None, (1, 1, 1)), Sets::ALL);
        assert_eq!(after(Some((1, 1, 1)), (1, 1, 1)), s(false, false, false));
        assert_eq!(after(Some((1, 1, 1)), (1, 2, 1)), s(false, true, false));
        assert_eq!(after(Some((1, 1, 1)), (1, 1, 2)), s(false, false, true));
        assert_eq!(after(Some((1, 1, 1)), (1, 2, 2)), s(false, true, true));
        assert_eq!(after(Some((1, 1, 1)), (2, 1, 1)), Sets::ALL);
        assert_eq!(after(Some((1, 1, 1)), (2, 2, 2)), Sets::ALL);
    }
}
