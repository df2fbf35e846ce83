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

/// A launch of the graph an update step names: mostly one it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexSel {
    /// The `i % launches`-th launch (0 for a graph of none).
    Within(usize),
    /// Index `i` as given (past the end: `NoSuchLaunch`).
    Raw(usize),
}

/// The buffer a rebind moves: mostly one the graph uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UseSel {
    /// The `i % used`-th buffer the graph binds (any buffer if it binds none).
    Used(usize),
    Any(BufSel),
}

/// One change of an update step (C13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeSel {
    Rebind(UseSel, BufSel),
    Params {
        index: IndexSel,
        n: u32,
        value: FillValue,
    },
    Launch {
        index: IndexSel,
        op: OpKind,
        bufs: Vec<BufSel>,
        n: u32,
        value: FillValue,
    },
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
    /// `Device::update` with these changes, as one update.
    Update(TargetSel, Vec<ChangeSel>),
    /// Open an IF body (C14) on element `offset` of a buffer.
    BeginIf {
        cond: BufSel,
        offset: usize,
        thread: Thread,
    },
    /// Open a WHILE body of at most `max` iterations (0: refused).
    BeginWhile {
        cond: BufSel,
        offset: usize,
        max: u32,
        thread: Thread,
    },
    /// Close the innermost open body.
    EndBody(Thread),
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
            Step::Update(..) => "update",
            Step::BeginIf { .. } | Step::BeginWhile { .. } => "begin_conditional",
            Step::EndBody(_) => "end_conditional",
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

/// A condition's element: mostly within a small buffer, sometimes past it.
fn offset_in() -> impl Strategy<Value = usize> {
    prop_oneof![9 => 0usize..=3, 1 => 4usize..=9]
}

/// A launch index: mostly one the graph has, sometimes any.
fn index() -> impl Strategy<Value = IndexSel> {
    prop_oneof![
        9 => (0usize..16).prop_map(IndexSel::Within),
        1 => (0usize..=12).prop_map(IndexSel::Raw),
    ]
}

fn use_sel() -> impl Strategy<Value = UseSel> {
    prop_oneof![
        9 => (0usize..16).prop_map(UseSel::Used),
        1 => buf_sel().prop_map(UseSel::Any),
    ]
}

fn change() -> impl Strategy<Value = ChangeSel> {
    prop_oneof![
        5 => (use_sel(), buf_sel()).prop_map(|(a, b)| ChangeSel::Rebind(a, b)),
        3 => (index(), elements(), fill_value()).prop_map(|(index, n, value)| ChangeSel::Params {
            index,
            n,
            value
        }),
        3 => (index(), launch()).prop_map(|(index, l)| match l {
            Step::Launch { op, bufs, n, value, .. } => ChangeSel::Launch {
                index,
                op,
                bufs,
                n,
                value,
            },
            _ => unreachable!("launch() draws launches"),
        }),
    ]
}

/// An update: mostly one change, up to four.
fn update() -> impl Strategy<Value = Step> {
    let changes = prop_oneof![
        6 => prop::collection::vec(change(), 1..=1),
        3 => prop::collection::vec(change(), 2..=4),
        1 => Just(Vec::new()),
    ];
    (target_sel(), changes).prop_map(|(t, c)| Step::Update(t, c))
}

/// A launch's element count: mostly within the buffers, sometimes 0 or past them.
fn elements() -> impl Strategy<Value = u32> {
    prop_oneof![12 => 1u32..=4, 6 => 5u32..=8, 1 => Just(0u32), 1 => 9u32..=12]
}

fn fill_value() -> impl Strategy<Value = FillValue> {
    prop_oneof![
        9 => (0u16..50).prop_map(FillValue::Small),
        1 => (0x1_0000u32..0x2_0000).prop_map(FillValue::Raw),
    ]
}

fn launch() -> impl Strategy<Value = Step> {
    let op = prop_oneof![
        3 => Just(OpKind::Add),
        2 => Just(OpKind::Copy),
        2 => Just(OpKind::Fill),
    ];
    let n = elements();
    let value = fill_value();
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
        6 => update(),
        2 => (buf_sel(), offset_in(), thread()).prop_map(|(cond, offset, thread)| Step::BeginIf {
            cond,
            offset,
            thread
        }),
        2 => (buf_sel(), offset_in(), 0u32..=4, thread()).prop_map(|(cond, offset, max, thread)| {
            Step::BeginWhile { cond, offset, max, thread }
        }),
        4 => thread().prop_map(Step::EndBody),
    ]
}

/// How a sequence opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// One to three u32 allocations, so most launches name live buffers.
    Buffers,
    /// Four written u32 buffers of 8 elements and a graph of one to four
    /// launches over them, half the time with some of them in an IF or a
    /// WHILE (C14) on the fourth, so most updates (C13) find a graph to
    /// change, bodies included.
    Graph,
}

/// A sequence of at most `max_len` steps after its opening.
pub fn sequence(max_len: usize, opening: Opening) -> impl Strategy<Value = Vec<Step>> {
    let allocs = prop::collection::vec(
        (1usize..=8).prop_map(|len| Step::Alloc {
            dtype: DType::U32,
            len: Some(len.max(4)),
        }),
        1..=3,
    );
    // Half the graphs hold a body over some of their launches, conditioned
    // on a fourth buffer's first element (0 to 3, which launches may write).
    let body = prop_oneof![
        2 => Just(None),
        1 => Just(Some(None)),
        1 => (1u32..=4).prop_map(|max| Some(Some(max))),
    ];
    let graph = (
        prop::collection::vec(graph_launch(), 1..=4),
        body,
        0usize..=4,
        0u16..=3,
    )
        .prop_map(|(launches, body, split, ctl)| {
            let mut s = Vec::new();
            for i in 0..4 {
                s.push(Step::Alloc {
                    dtype: DType::U32,
                    len: Some(8),
                });
                let data = match i {
                    3 => vec![ctl; 8],
                    _ => (0..8).map(|k| (10 * i + k) as u16).collect(),
                };
                s.push(Step::Write {
                    buf: BufSel::Nth(i),
                    host: DType::U32,
                    offset: 0,
                    data,
                });
            }
            s.push(Step::BeginCapture);
            let split = split.min(launches.len());
            let (before, inside) = launches.split_at(split);
            s.extend(before.iter().cloned());
            if let Some(kind) = body {
                let (cond, offset, thread) = (BufSel::Nth(3), 0, Thread::Main);
                s.push(match kind {
                    None => Step::BeginIf {
                        cond,
                        offset,
                        thread,
                    },
                    Some(max) => Step::BeginWhile {
                        cond,
                        offset,
                        max,
                        thread,
                    },
                });
                s.extend(inside.iter().cloned());
                s.push(Step::EndBody(Thread::Main));
            } else {
                s.extend(inside.iter().cloned());
            }
            s.push(Step::EndCaptureGraph(Thread::Main));
            s
        });
    let opening = match opening {
        Opening::Buffers => allocs.boxed(),
        Opening::Graph => graph.boxed(),
    };
    (
        opening,
        prop::collection::vec(step(), 0..=max_len.saturating_sub(3)),
    )
        .prop_map(|(mut a, b)| {
            a.extend(b);
            a
        })
}

/// A launch of the right arity over the graph opening's buffers (the
/// fourth holds the condition of its body, if it has one).
fn graph_launch() -> impl Strategy<Value = Step> {
    let op = prop_oneof![
        3 => Just(OpKind::Add),
        2 => Just(OpKind::Copy),
        2 => Just(OpKind::Fill),
    ];
    (
        op,
        prop::collection::vec(prop_oneof![6 => 0usize..3, 1 => Just(3usize)], 3),
        1u32..=8,
        0u16..50,
    )
        .prop_map(|(op, bufs, n, v)| {
            let arity = match op {
                OpKind::Fill => 1,
                OpKind::Copy => 2,
                _ => 3,
            };
            Step::Launch {
                op,
                bufs: bufs[..arity].iter().map(|&i| BufSel::Nth(i)).collect(),
                n,
                value: FillValue::Small(v),
                thread: Thread::Main,
            }
        })
}
