//! The calls a generated sequence is made of, and how proptest draws them.
//!
//! Handles are chosen by index among those handed out so far (resolved when
//! the step runs), so shrinking keeps sequences meaningful; `Bogus` names an id
//! no call ever returned (C6, C12: unknown handles).

use crate::model::Thread;
use proptest::prelude::*;
use seam::{DType, OpKind};

/// Which buffer a step names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufSel {
    /// The `i % handed_out`-th buffer ever allocated (bogus if none yet).
    Nth(usize),
    Bogus,
}

/// Which graph handle a step names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphSel {
    Nth(usize),
    Bogus,
}

/// What a replay targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetSel {
    Current,
    Handle(GraphSel),
}

/// A fill value: a small number encoded for the destination's dtype, or raw
/// bits (which do not fit a 16-bit element: InvalidParam there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillValue {
    Small(u16),
    Raw(u32),
}

/// One seam call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `len: None` asks for more than the per-launch element limit.
    Alloc {
        dtype: DType,
        len: Option<usize>,
    },
    Free(BufSel),
    /// `release_buffer`: what dropping an owned `Buffer` does (deferred free).
    Release(BufSel),
    /// Small numbers, encoded as `host` elements.
    Write {
        buf: BufSel,
        host: DType,
        offset: usize,
        data: Vec<u16>,
    },
    /// `range: None` is `read` (whole buffer), else `read_range`.
    Read {
        buf: BufSel,
        host: DType,
        range: Option<(usize, usize)>,
    },
    Launch {
        op: OpKind,
        bufs: Vec<BufSel>,
        n: u32,
        value: FillValue,
        thread: Thread,
    },
    Synchronize,
    BeginCapture,
    EndCapture(Thread),
    EndCaptureGraph(Thread),
    AbortCapture(Thread),
    Replay(TargetSel),
    ReplayCount(TargetSel),
    Destroy(GraphSel),
    /// `release_graph`: what dropping an owned `Graph` does.
    ReleaseGraph(GraphSel),
}

impl Step {
    /// The `Device` call the step makes (what its errors must name).
    pub fn call(&self) -> &'static str {
        match self {
            Step::Alloc { .. } => "alloc",
            Step::Free(_) => "free",
            Step::Release(_) => "release_buffer",
            Step::Write { .. } => "write",
            Step::Read { .. } => "read",
            Step::Launch { .. } => "launch",
            Step::Synchronize => "synchronize",
            Step::BeginCapture => "begin_capture",
            Step::EndCapture(_) => "end_capture_into_current",
            Step::EndCaptureGraph(_) => "end_capture_graph",
            Step::AbortCapture(_) => "abort_capture",
            Step::Replay(_) => "replay",
            Step::ReplayCount(_) => "replay_count",
            Step::Destroy(_) => "destroy_graph",
            Step::ReleaseGraph(_) => "release_graph",
        }
    }
}

fn buf_sel() -> impl Strategy<Value = BufSel> {
    prop_oneof![
        19 => (0usize..8).prop_map(BufSel::Nth),
        1 => Just(BufSel::Bogus),
    ]
}

fn graph_sel() -> impl Strategy<Value = GraphSel> {
    prop_oneof![
        9 => (0usize..4).prop_map(GraphSel::Nth),
        1 => Just(GraphSel::Bogus),
    ]
}

fn target_sel() -> impl Strategy<Value = TargetSel> {
    prop_oneof![
        2 => Just(TargetSel::Current),
        3 => graph_sel().prop_map(TargetSel::Handle),
    ]
}

/// Mostly u32; f32 and f16 make dtype mismatches and (f16) unsupported adds.
fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![
        8 => Just(DType::U32),
        1 => Just(DType::F32),
        1 => Just(DType::F16),
    ]
}

fn thread() -> impl Strategy<Value = Thread> {
    prop_oneof![15 => Just(Thread::Main), 1 => Just(Thread::Other)]
}

fn launch() -> impl Strategy<Value = Step> {
    let op = prop_oneof![
        3 => Just(OpKind::Add),
        2 => Just(OpKind::Copy),
        2 => Just(OpKind::Fill),
    ];
    let n = prop_oneof![12 => 1u32..=4, 6 => 5u32..=8, 1 => Just(0u32), 1 => 9u32..=12];
    let value = prop_oneof![
        9 => (0u16..50).prop_map(FillValue::Small),
        1 => (0x1_0000u32..0x2_0000).prop_map(FillValue::Raw),
    ];
    // Right arity most of the time; any of 0..=4 buffers otherwise.
    let arity_off = prop_oneof![12 => Just(None), 1 => (0usize..=4).prop_map(Some)];
    (
        op,
        arity_off,
        prop::collection::vec(buf_sel(), 4),
        n,
        value,
        thread(),
    )
        .prop_map(|(op, off, mut bufs, n, value, thread)| {
            let arity = match op {
                OpKind::Fill => 1,
                OpKind::Copy => 2,
                _ => 3,
            };
            bufs.truncate(off.unwrap_or(arity));
            Step::Launch {
                op,
                bufs,
                n,
                value,
                thread,
            }
        })
}

/// One step; weights steer sequences into captures, replays and deferred frees.
pub fn step() -> impl Strategy<Value = Step> {
    let len = prop_oneof![
        10 => Just(Some(8)),
        6 => (1usize..=8).prop_map(Some),
        1 => Just(Some(0)),
        1 => Just(None),
    ];
    let offset = prop_oneof![6 => 0usize..=2, 1 => 3usize..=9];
    let data = prop::collection::vec(0u16..100, 0..=8);
    let range = prop_oneof![
        3 => Just(None),
        2 => (0usize..=3, 0usize..=8).prop_map(Some),
    ];
    prop_oneof![
        8 => (dtype(), len).prop_map(|(dtype, len)| Step::Alloc { dtype, len }),
        3 => buf_sel().prop_map(Step::Free),
        3 => buf_sel().prop_map(Step::Release),
        8 => (buf_sel(), dtype(), offset, data).prop_map(|(buf, host, offset, data)| {
            Step::Write { buf, host, offset, data }
        }),
        8 => (buf_sel(), dtype(), range).prop_map(|(buf, host, range)| Step::Read {
            buf,
            host,
            range
        }),
        14 => launch(),
        1 => Just(Step::Synchronize),
        4 => Just(Step::BeginCapture),
        4 => thread().prop_map(Step::EndCapture),
        4 => thread().prop_map(Step::EndCaptureGraph),
        1 => thread().prop_map(Step::AbortCapture),
        9 => target_sel().prop_map(Step::Replay),
        2 => target_sel().prop_map(Step::ReplayCount),
        2 => graph_sel().prop_map(Step::Destroy),
        2 => graph_sel().prop_map(Step::ReleaseGraph),
    ]
}

/// A sequence of at most `max_len` steps; it opens with one to three u32
/// allocations so most launches name live buffers.
pub fn sequence(max_len: usize) -> impl Strategy<Value = Vec<Step>> {
    let opening = prop::collection::vec(
        (1usize..=8).prop_map(|len| Step::Alloc {
            dtype: DType::U32,
            len: Some(len.max(4)),
        }),
        1..=3,
    );
    (
        opening,
        prop::collection::vec(step(), 0..=max_len.saturating_sub(3)),
    )
        .prop_map(|(mut a, b)| {
            a.extend(b);
            a
        })
}
