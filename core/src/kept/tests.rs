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

/// Variant 1 patched (not slower) from the graph to launch 1 over buffer
/// 9, then a fresh variant 2 made back to the graph: 2 is current and runs
/// the graph, 1 a spare running buffer 9.
fn one_spare() -> (Runs<u32>, u32, Vec<Launch>) {
    let mut runs = Runs::default();
    let (mut current, mut now) = (1, graph());
    runs.patched(&now, &moved(9), false);
    now = after(&now, &moved(9));
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
    runs.patched(&now, &moved(9), false);
    now = after(&now, &moved(9));
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
    runs.patched(&now, &moved(9), false);
    now = after(&now, &moved(9));
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
    runs.swap(&mut current, 0, &mut now);
    assert_eq!((current, now), (2, graph()));
}

#[test]
fn a_variant_patched_slower_is_returned_not_kept() {
    let mut runs = Runs::<u32>::default();
    let (mut current, mut now) = (1, graph());
    runs.patched(&now, &moved(9), true);
    now = after(&now, &moved(9));
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
    runs.patched(&now, &moved(5), true);
    now = after(&now, &moved(5));
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
    let sets: Vec<Vec<Launch>> = (0..=LEFT as u64)
        .map(|n| after(&graph(), &moved(200 + n)))
        .collect();
    for s in &sets {
        runs.patched(s, &moved(1), false);
    }
    let now = after(&graph(), &moved(1));
    assert_eq!(
        runs.plan(&now, &moved(200)),
        Plan::InPlace,
        "the oldest is gone"
    );
    for n in 1..=LEFT as u64 {
        assert_eq!(runs.plan(&now, &moved(200 + n)), Plan::Fresh, "set {n}");
    }
    // Remembered again, a set is not held twice.
    runs.patched(&sets[LEFT], &moved(1), false);
    runs.patched(&sets[LEFT], &moved(1), false);
    assert_eq!(runs.plan(&now, &moved(201)), Plan::Fresh);
}

#[test]
fn a_freed_buffer_takes_every_spare_and_set_that_binds_it() {
    let mut runs = Runs::<u32>::default();
    let (mut current, mut now) = (1, graph());
    runs.patched(&now, &moved(9), false);
    runs.patched(&after(&graph(), &moved(8)), &moved(2), false);
    now = after(&now, &moved(9));
    assert_eq!(runs.keep(&mut current, 2, &mut now, graph()), None);
    // Spare 1 runs buffer 9; remembered: buffer 8.
    assert_eq!(runs.forget(RawBuffer(4)), Vec::<u32>::new());
    assert_eq!(runs.spares(), 1);
    assert_eq!(runs.forget(RawBuffer(9)), vec![1]);
    assert_eq!(runs.spares(), 0);
    assert_eq!(runs.plan(&now, &moved(9)), Plan::InPlace);
    assert_eq!(runs.plan(&now, &moved(8)), Plan::Fresh);
    assert!(runs.forget(RawBuffer(8)).is_empty());
    assert_eq!(runs.plan(&now, &moved(8)), Plan::InPlace);
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
fn a_set_of_another_length_never_matches() {
    let mut runs = Runs::<u32>::default();
    let mut short = graph();
    short.pop();
    runs.patched(&short, &[(1, fill(9, 0))], false);
    // The same first launches over a graph of three: not that set.
    let now = after(&graph(), &moved(9));
    assert_eq!(runs.plan(&now, &moved(2)), Plan::InPlace);
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
