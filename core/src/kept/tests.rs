//! The kept-variant bookkeeping on its own: which plan each update gets,
//! what a swap, a fresh variant and a freed buffer do to the spares, and
//! the bounds on what is kept. Variants are plain numbers here; the
//! backends' own tests drive it through their updates.

use super::*;
use crate::ops::OpKind;
use crate::{DType, Params, RawView};

/// A fill of buffer `b` (4 floats) with parameter `p`.
fn fill(b: u64, p: u32) -> Launch {
    let view = RawView {
        buffer: RawBuffer(b),
        offset: 0,
        byte_offset: 0,
        len: 4,
    };
    Launch {
        op: OpKind::Fill,
        dtype: DType::F32,
        buffers: [view].into(),
        params: Params::dims(4, p, 0),
    }
}

/// A graph of three fills over buffers 1, 2, 3.
fn graph() -> Vec<Launch> {
    vec![fill(1, 0), fill(2, 0), fill(3, 0)]
}

/// Launch 1 moved to buffer `to`.
fn moved(to: u64) -> Vec<(usize, Launch)> {
    vec![(1, fill(to, 0))]
}

/// What a backend does on [`Plan::InPlace`]: the graph running `now` is
/// patched with `changes` (`slower` as [`Runs::patched`] takes it), and
/// runs them from then on.
fn patch(runs: &mut Runs<u32>, now: &mut Vec<Launch>, changes: &[(usize, Launch)], slower: bool) {
    runs.patched(now, changes, slower);
    *now = after(now, changes);
}

/// Variant 1 patched (not slower) from the graph to launch 1 over buffer
/// 9, then a fresh variant 2 made back to the graph: 2 is current and runs
/// the graph, 1 a spare running buffer 9.
fn one_spare() -> (Runs<u32>, u32, Vec<Launch>) {
    let mut runs = Runs::default();
    let (mut current, mut now) = (1, graph());
    patch(&mut runs, &mut now, &moved(9), false);
    assert_eq!(runs.keep(&mut current, 2, &mut now, graph()), None);
    (runs, current, now)
}

#[test]
fn after_applies_each_change_at_its_index() {
    let want = after(&graph(), &[(0, fill(7, 1)), (2, fill(8, 2))]);
    assert_eq!(want, vec![fill(7, 1), fill(2, 0), fill(8, 2)]);
}

#[test]
fn an_update_that_changes_nothing_is_planned_as_nothing() {
    let runs = Runs::<u32>::default();
    assert_eq!(runs.plan(&graph(), &[(1, fill(2, 0))]), Plan::Nothing);
    assert_eq!(runs.plan(&graph(), &[]), Plan::Nothing);
}

#[test]
fn a_set_never_seen_is_patched_in_place_and_one_left_gets_a_fresh_variant() {
    let mut runs = Runs::<u32>::default();
    let mut now = graph();
    assert_eq!(runs.plan(&now, &moved(9)), Plan::InPlace);
    patch(&mut runs, &mut now, &moved(9), false);
    // Back to buffer 2: the set the patch left.
    assert_eq!(runs.plan(&now, &moved(2)), Plan::Fresh);
    // Elsewhere: never seen.
    assert_eq!(runs.plan(&now, &moved(5)), Plan::InPlace);
}

#[test]
fn a_patch_that_changes_nothing_remembers_nothing() {
    let mut runs = Runs::<u32>::default();
    let now = graph();
    runs.patched(&now, &[(1, fill(2, 0))], true);
    // Nothing left behind, and the variant still counts as clean.
    assert_eq!(runs.plan(&after(&now, &moved(9)), &moved(2)), Plan::InPlace);
    assert_eq!(runs.make_room(), None);
    let mut current = 1;
    let mut now = now;
    assert_eq!(runs.keep(&mut current, 2, &mut now, graph()), None);
    assert_eq!(runs.spares(), 1);
}

#[test]
fn a_fresh_variant_keeps_the_old_one_and_switching_back_swaps() {
    let mut runs = Runs::<u32>::default();
    let (mut current, mut now) = (1, graph());
    patch(&mut runs, &mut now, &moved(9), false);
    let want = after(&now, &moved(2));
    assert_eq!(runs.keep(&mut current, 2, &mut now, want.clone()), None);
    assert_eq!((current, &now, runs.spares()), (2, &want, 1));
    // Over to 9 again: the spare (variant 1) runs it.
    assert_eq!(runs.plan(&now, &moved(9)), Plan::Swap(0));
    runs.swap(&mut current, 0, &mut now);
    assert_eq!(current, 1);
    assert_eq!(now, after(&graph(), &moved(9)));
    // And back: variant 2, now the spare.
    assert_eq!(runs.plan(&now, &moved(2)), Plan::Swap(0));
    // Also where the update names most of the graph (its fingerprint
    // summed afresh, not moved per change), the unchanged ones as they are.
    let most = [(0, fill(1, 0)), (1, fill(2, 0)), (2, fill(3, 0))];
    assert_eq!(runs.plan(&now, &most), Plan::Swap(0));
    assert_eq!(runs.plan(&now, &most[1..]), Plan::Swap(0));
    runs.swap(&mut current, 0, &mut now);
    assert_eq!((current, now), (2, graph()));
}

#[test]
fn a_variant_patched_slower_is_returned_not_kept() {
    let mut runs = Runs::<u32>::default();
    let (mut current, mut now) = (1, graph());
    patch(&mut runs, &mut now, &moved(9), true);
    // No room is made: the patched one goes, not a spare.
    assert_eq!(runs.make_room(), None);
    assert_eq!(runs.keep(&mut current, 2, &mut now, graph()), Some(1));
    assert_eq!((current, runs.spares()), (2, 0));
    // Its set is remembered: going there again makes a fresh variant.
    assert_eq!(runs.plan(&now, &moved(9)), Plan::Fresh);
    // The fresh variant is clean: the next one keeps it.
    assert_eq!(
        runs.keep(&mut current, 3, &mut now, after(&graph(), &moved(9))),
        None
    );
    assert_eq!((current, runs.spares()), (3, 1));
}

#[test]
fn whether_a_variant_was_patched_travels_with_it_in_a_swap() {
    // 1 moved to buffer 9 (clean); a fresh 2 runs the graph.
    let (mut runs, mut current, mut now) = one_spare();
    // 2 is patched slower to buffer 5, then 1 is swapped in.
    patch(&mut runs, &mut now, &moved(5), true);
    assert_eq!(runs.plan(&now, &moved(9)), Plan::Swap(0));
    runs.swap(&mut current, 0, &mut now);
    // 1 is clean: a fresh variant keeps it.
    assert_eq!(runs.keep(&mut current, 3, &mut now, graph()), None);
    assert_eq!(runs.spares(), 2);
    // 2 comes back, patched: a fresh variant drops it.
    assert_eq!(runs.plan(&now, &moved(5)), Plan::Swap(0));
    runs.swap(&mut current, 0, &mut now);
    assert_eq!(current, 2);
    assert_eq!(runs.keep(&mut current, 4, &mut now, graph()), Some(2));
}

#[test]
fn room_is_made_from_the_least_recently_used_spare() {
    let mut runs = Runs::<u32>::default();
    let (mut current, mut now) = (0, graph());
    for n in 1..=SPARES as u32 + 1 {
        let want = after(&graph(), &moved(100 + u64::from(n)));
        if n > SPARES as u32 {
            assert_eq!(runs.make_room(), Some(0), "the oldest spare goes first");
        } else {
            assert_eq!(runs.make_room(), None);
        }
        assert_eq!(runs.keep(&mut current, n, &mut now, want), None);
    }
    assert_eq!(runs.spares(), SPARES);
    assert_eq!(current, SPARES as u32 + 1);
}

#[test]
fn at_most_left_sets_are_remembered_the_oldest_forgotten() {
    let mut runs = Runs::<u32>::default();
    // Patched in place from buffer 200 to 201, …, to 200 + LEFT + 1:
    // LEFT + 1 sets left, the oldest (200) forgotten.
    let mut now = after(&graph(), &moved(200));
    for n in 1..=LEFT as u64 + 1 {
        patch(&mut runs, &mut now, &moved(200 + n), false);
    }
    assert_eq!(
        runs.plan(&now, &moved(200)),
        Plan::InPlace,
        "the oldest is gone"
    );
    for n in 1..=LEFT as u64 {
        assert_eq!(runs.plan(&now, &moved(200 + n)), Plan::Fresh, "set {n}");
    }
    // Patched to a set left behind and back: each set is held once, so
    // 202 is still remembered (LEFT sets: 202 … 200 + LEFT, and the
    // current one, now left too).
    let last = 200 + LEFT as u64 + 1;
    patch(&mut runs, &mut now, &moved(200 + LEFT as u64), false);
    patch(&mut runs, &mut now, &moved(last), false);
    assert_eq!(runs.plan(&now, &moved(202)), Plan::Fresh);
    assert_eq!(runs.plan(&now, &moved(201)), Plan::InPlace);
}

#[test]
fn a_freed_buffer_takes_every_spare_that_binds_it() {
    let (mut runs, _, mut now) = one_spare();
    // Spare 1 runs buffer 9.
    assert_eq!(runs.forget(RawBuffer(4)), Vec::<u32>::new());
    assert_eq!(runs.spares(), 1);
    assert_eq!(runs.forget(RawBuffer(9)), vec![1]);
    assert_eq!(runs.spares(), 0);
    assert_eq!(runs.plan(&now, &moved(9)), Plan::InPlace);
    // A set left behind is a fingerprint: it binds nothing, and stays.
    patch(&mut runs, &mut now, &moved(8), false);
    assert!(runs.forget(RawBuffer(2)).is_empty());
    assert_eq!(runs.plan(&now, &moved(2)), Plan::Fresh);
}

/// Every launch hashing to 0: every set has one fingerprint.
fn colliding() -> Runs<u32> {
    Runs {
        term: |_, _| 0,
        ..Runs::default()
    }
}

/// Fingerprints only narrow the search: where every set has the same one,
/// a swap is still decided by the launches themselves, a spare of another
/// length never matches, and a fingerprint match makes at most a fresh
/// variant (from the launches asked for). Mutations: a swap decided by
/// the fingerprint alone, or by the changed launches alone, or the length
/// left unchecked → red.
#[test]
fn colliding_fingerprints_never_decide_a_swap() {
    let mut runs = colliding();
    let (mut current, mut now) = (1, graph());
    patch(&mut runs, &mut now, &moved(9), false);
    assert_eq!(runs.keep(&mut current, 2, &mut now, graph()), None);
    // Spare 1 runs buffer 9 at launch 1; the graph runs buffer 2 there.
    assert_eq!(runs.plan(&now, &moved(9)), Plan::Swap(0));
    assert_ne!(runs.plan(&now, &moved(8)), Plan::Swap(0));
    // The changed launch as the spare has it, another one not.
    let changes = [(1, fill(9, 0)), (2, fill(3, 0))];
    assert_eq!(runs.plan(&now, &changes), Plan::Swap(0));
    let other = [(1, fill(9, 0)), (0, fill(5, 0))];
    assert_ne!(runs.plan(&now, &other), Plan::Swap(0));

    // A spare of two launches against a graph of three.
    let mut runs = colliding();
    let (mut current, mut short) = (1, graph());
    short.pop();
    let mut now = short.clone();
    assert_eq!(runs.keep(&mut current, 2, &mut now, graph()), None);
    let prefix = [(0, fill(1, 0)), (1, fill(5, 0))];
    assert_ne!(runs.plan(&now, &prefix), Plan::Swap(0));
}

/// An update that never comes back is planned per change: the plan, the
/// patch and the next plan give the same answers whether the graph is
/// three launches long or ten thousand. What they cost per launch is
/// measured by `backends/streamgraph/examples/host_profile.rs params`.
#[test]
fn a_moving_update_is_planned_the_same_at_any_length() {
    for len in [3usize, 10_000] {
        let mut runs = Runs::<u32>::default();
        let mut now: Vec<Launch> = (0..len as u64).map(|b| fill(b + 1, 0)).collect();
        for step in 0..5u32 {
            let change = [(1, fill(2, step + 1))];
            assert_eq!(runs.plan(&now, &change), Plan::InPlace, "len {len}");
            patch(&mut runs, &mut now, &change, false);
        }
        // Back to the set of step 3: it was left behind.
        assert_eq!(runs.plan(&now, &[(1, fill(2, 3))]), Plan::Fresh);
    }
}

#[test]
fn a_lost_graph_is_only_ever_patched_in_place() {
    let (mut runs, _, now) = one_spare();
    runs.lose();
    assert_eq!(runs.plan(&now, &moved(9)), Plan::InPlace);
    assert_eq!(runs.plan(&now, &[(1, fill(2, 0))]), Plan::InPlace);
    assert_eq!(runs.take_spares(), vec![1]);
}

#[test]
fn a_change_past_the_graph_is_planned_in_place() {
    let mut runs = Runs::<u32>::default();
    runs.patched(&graph(), &moved(9), false);
    let now = after(&graph(), &moved(9));
    let mut changes = moved(2);
    changes.push((3, fill(1, 0)));
    assert_eq!(runs.plan(&now, &changes), Plan::InPlace);
}

#[test]
fn take_spares_forgets_the_sets_left_too() {
    let mut runs = Runs::<u32>::default();
    runs.patched(&graph(), &moved(9), false);
    assert!(runs.take_spares().is_empty());
    assert_eq!(
        runs.plan(&after(&graph(), &moved(9)), &moved(2)),
        Plan::InPlace
    );
}

/// Launches that differ in any one thing a launch compares by (its index
/// in the set, op, element type, a view's buffer, offset or length, the
/// number of views, a parameter) get different fingerprint terms, over
/// thousands of such launches. Mutations: the hasher dropping what it is
/// written, keeping only some of it, or answering a constant → red.
#[test]
fn launches_that_differ_get_different_terms() {
    use std::collections::HashSet;
    let view = |b: u64, off: u32, len: u64| RawView {
        buffer: RawBuffer(b),
        offset: off,
        byte_offset: u64::from(off) * 4,
        len,
    };
    let launch = |op: OpKind, dtype: DType, views: &[RawView], p: Params| Launch {
        op,
        dtype,
        buffers: views.into(),
        params: p,
    };
    let base = |p: Params| launch(OpKind::Add, DType::F32, &[view(1, 0, 4), view(2, 0, 4)], p);
    let mut launches: Vec<(usize, Launch)> = Vec::new();
    for i in 0..64 {
        launches.push((i, base(Params::ZERO)));
    }
    for n in 1..256u32 {
        let v = u64::from(n);
        launches.push((0, base(Params::dims(n, 0, 0))));
        launches.push((0, base(Params::dims(0, n, 0))));
        launches.push((0, base(Params::ZERO.with_scalars(n as f32, 0.0))));
        let views = [
            [view(1 + 2 * v, 0, 4), view(2, 0, 4)],
            [view(1, n, 4), view(2, 0, 4)],
            [view(1, 0, 4 + v), view(2, 0, 4)],
            [view(1, 0, 4), view(2 + 2 * v, 0, 4)],
            [view(1, 0, 4), view(2, n, 4)],
        ];
        for vs in views {
            launches.push((0, launch(OpKind::Add, DType::F32, &vs, Params::ZERO)));
        }
    }
    for (op, dtype) in [
        (OpKind::Mul, DType::F32),
        (OpKind::Add, DType::U32),
        (OpKind::Add, DType::F16),
    ] {
        launches.push((
            0,
            launch(op, dtype, &[view(1, 0, 4), view(2, 0, 4)], Params::ZERO),
        ));
    }
    launches.push((
        0,
        launch(OpKind::Add, DType::F32, &[view(1, 0, 4)], Params::ZERO),
    ));
    let terms: HashSet<u64> = launches.iter().map(|(i, l)| term(*i, l)).collect();
    assert_eq!(
        terms.len(),
        launches.len(),
        "two different launches share a term"
    );
}

/// A parameter that moves every update (a decode step's position) never
/// matches a set the graph left: 2,000 updates of one launch each, over a
/// graph of 1,000, all planned in place. With the terms' finalizer left
/// out, the sums of terms collided within 21 updates. Mutations: a weaker
/// mix of the terms → red where they collide.
#[test]
fn a_moving_parameter_never_matches_a_set_left() {
    let view = |b: u64| RawView {
        buffer: RawBuffer(b),
        offset: 0,
        byte_offset: 0,
        len: 1 << 16,
    };
    let launch = |s0: f32| Launch {
        op: OpKind::ScaleAdd,
        dtype: DType::F32,
        buffers: [view(11), view(13)].into(),
        params: Params::dims(1 << 16, 0, 0).with_scalars(s0, 1.0),
    };
    let n = 1000;
    let mut runs = Runs::<u32>::default();
    let mut now: Vec<Launch> = (0..n).map(|_| launch(2.0)).collect();
    for i in 1..=2000 {
        let change = [(i * 7 % n, launch(2.0 + i as f32))];
        assert_eq!(runs.plan(&now, &change), Plan::InPlace, "update {i}");
        patch(&mut runs, &mut now, &change, false);
    }
}

/// Where an update names one launch twice, the last change wins (as
/// `after` applies them), in the plan's comparison and in its
/// fingerprint. Mutation: the changes of one index not merged (each
/// compared and summed) → red.
#[test]
fn the_last_change_of_an_index_wins() {
    let (runs, _, now) = one_spare();
    // Spare 1 runs buffer 9 at launch 1.
    assert_eq!(
        runs.plan(&now, &[(1, fill(8, 0)), (1, fill(9, 0))]),
        Plan::Swap(0)
    );
    assert_ne!(
        runs.plan(&now, &[(1, fill(9, 0)), (1, fill(8, 0))]),
        Plan::Swap(0)
    );
}

/// A fresh variant takes its own set out of the sets left behind, and
/// only that one: the others still get a fresh variant when the graph
/// comes back to them. Mutation: `keep`'s filter inverted (keeping only
/// the set it made a variant for) → red.
#[test]
fn a_fresh_variant_leaves_the_other_sets_remembered() {
    let mut runs = Runs::<u32>::default();
    let (mut current, mut now) = (1, graph());
    patch(&mut runs, &mut now, &moved(9), false);
    patch(&mut runs, &mut now, &moved(8), false);
    // Left: the graph (buffer 2) and buffer 9. Back to 9: a fresh variant.
    assert_eq!(runs.plan(&now, &moved(9)), Plan::Fresh);
    let want = after(&now, &moved(9));
    assert_eq!(runs.keep(&mut current, 2, &mut now, want), None);
    assert_eq!(runs.plan(&now, &moved(2)), Plan::Fresh);
    assert_eq!(runs.plan(&now, &moved(8)), Plan::Swap(0));
}

/// An update that changes most of the graph back to a set it left gets a
/// fresh variant, as one changing a single launch does: its fingerprint,
/// summed afresh, is the one remembered. Mutation: the fresh sum taking
/// the unchanged launches for the changed ones (`==` → `!=`) → red.
#[test]
fn most_of_the_graph_changed_back_finds_the_set_left() {
    let mut runs = Runs::<u32>::default();
    let mut now = graph();
    let away = [(1, fill(8, 0)), (2, fill(9, 0))];
    patch(&mut runs, &mut now, &away, false);
    let back = [(1, fill(2, 0)), (2, fill(3, 0))];
    assert_eq!(runs.plan(&now, &back), Plan::Fresh);
    assert_eq!(
        runs.plan(&now, &[(1, fill(2, 0)), (2, fill(4, 0))]),
        Plan::InPlace
    );
}
