//! Command buffers recorded through the `sys` layer, as `VulkanBackend`
//! records a graph's, then updated (C13) or copied into: what the checks
//! there refuse, and that a refusal changes nothing. The suite reaches
//! these paths only through core, which refuses most bad updates first, so
//! each check is driven here.
//! This file holds the updates; `recording.rs` the checks of recording
//! itself (dispatches, copies, descriptor pools), `queue.rs` the queue.

use super::{read, words};
use crate::dispatch;
use crate::sys::{Buffer, CommandBuffer, DispatchUpdate, Pipeline};
use crate::VulkanBackend;
use seam::ops::Access;
use seam::ops::IMMEDIATE_BYTES;
use seam::testing::{Direct, RawCall};
use seam::{DType, OpKind, Params, RawBuffer, RawView};

mod queue;
mod recording;

type Immediates = [u8; IMMEDIATE_BYTES];

/// A device with u32 `add`'s pipeline, and the immediates and workgroups
/// of an add over `n` words.
struct Rig {
    b: Direct<VulkanBackend>,
    add: Pipeline,
}

/// Bindings as `CommandBuffer::dispatch` and `DispatchUpdate` take them.
type Binds<'a> = Vec<(&'a Buffer, Access)>;

impl Rig {
    /// `None` (saying so) where there is no Vulkan device.
    fn open() -> Option<Rig> {
        let mut b = match VulkanBackend::open(0) {
            Ok(b) => Direct::new(b),
            Err(e) => {
                super::skipped(e);
                return None;
            }
        };
        let add = b.pipeline(OpKind::Add, DType::U32).unwrap();
        Some(Rig { b, add })
    }

    /// A 256-word buffer of `v`s: its handle and its `sys` buffer.
    fn filled(&mut self, v: u32) -> (RawBuffer, Buffer) {
        let raw = self.b.alloc(1024).unwrap();
        self.b.write(raw, 0, &words(v)).unwrap();
        let buf = self.b.buffers.get(raw).unwrap().clone();
        (raw, buf)
    }

    /// The immediates and workgroups of `add` over the first `n` words.
    fn add_of(&mut self, n: u32) -> (Immediates, (u32, u32, u32)) {
        let (raw, _) = self.filled(0);
        let launch = self.add_of_words(raw, n);
        self.b.free(raw).unwrap();
        launch
    }

    /// The immediates and workgroups of `add` over the first `n` words of
    /// `raw` (at least as long) as every operand.
    fn add_of_words(&mut self, raw: RawBuffer, n: u32) -> (Immediates, (u32, u32, u32)) {
        let call = RawCall {
            op: OpKind::Add,
            dtype: DType::U32,
            buffers: [raw; 3].map(|r| RawView::whole(r, u64::from(n))).into(),
            params: Params {
                d0: n,
                ..Params::default()
            },
        };
        let launch = self.b.lower(&call).unwrap();
        let max = self.b.gpu.adapter().max_group_count;
        (launch.immediates(), dispatch::groups(&launch, max).unwrap())
    }
}

/// Submit `cmd` and wait for it.
fn run(b: &mut Direct<VulkanBackend>, cmd: &CommandBuffer) {
    b.gpu.submit(cmd).unwrap();
    b.gpu.wait_for(cmd).unwrap();
}

/// `dst = a + b`'s bindings, in `add`'s signature order.
fn add<'a>(a: &'a Buffer, b: &'a Buffer, dst: &'a Buffer) -> Binds<'a> {
    let sig = OpKind::Add.signature();
    [a, b, dst]
        .into_iter()
        .zip(sig)
        .map(|(x, s)| (x, s.access))
        .collect()
}

fn change<'a>(
    index: usize,
    pipeline: &'a Pipeline,
    bindings: &'a [(&'a Buffer, Access)],
    params: Immediates,
    groups: (u32, u32, u32),
) -> DispatchUpdate<'a> {
    DispatchUpdate {
        index,
        pipeline,
        bindings,
        params,
        groups,
    }
}

/// The message of what `check_update` refused, or a panic naming `what`.
fn refused(cmd: &CommandBuffer, changes: &[DispatchUpdate<'_>], what: &str) -> String {
    match cmd.check_update(changes) {
        Ok(_) => panic!("{what}: taken"),
        Err(e) => e.to_string(),
    }
}

/// The barrier audit still refuses an update that would make two
/// dispatches of one stretch (no barrier between them) alias unordered,
/// and a refused update changes nothing (through the suite:
/// `c13_rebind_makes_launches_dependent`). The stretch is recorded here:
/// dispatch 0 writes p, dispatch 1 writes q, then a barrier and dispatch 2
/// (doubles q). Mutation (tried): skip the audit of every stretch after a
/// barrier (`start > 0`) → red.
#[test]
fn an_update_making_a_stretch_alias_unordered_is_refused() {
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let [(_, one), (p, pb), (q, qb)] = [1, 100, 200].map(|v| r.filled(v));
    let (to_p, to_q) = (add(&one, &one, &pb), add(&one, &one, &qb));
    let (double_p, double_q) = (add(&pb, &pb, &pb), add(&qb, &qb, &qb));
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    cmd.begin(true).unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&r.add, &to_p, &params, groups).unwrap();
    cmd.dispatch(&r.add, &to_q, &params, groups).unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&r.add, &double_q, &params, groups).unwrap();
    cmd.end().unwrap();
    macro_rules! c {
        ($i:expr, $b:expr) => {
            change($i, &r.add, $b, params, groups)
        };
    }
    // Dispatch 1 → p: write after write with dispatch 0 (unchanged).
    let e = refused(&cmd, &[c!(1, &to_p)], "1 → p");
    assert!(e.contains("write after write"), "{e}");
    // Dispatch 0 → q: with dispatch 1 after it (unchanged) as well.
    let e = refused(&cmd, &[c!(0, &to_q)], "0 → q");
    assert!(e.contains("write after write"), "{e}");
    // Both at once swap them: no alias. Dispatch 2 alone, after its own
    // barrier: taken whatever it binds.
    cmd.check_update(&[c!(0, &to_q), c!(1, &to_p)]).unwrap();
    let last = [c!(2, &double_p)];
    let checked = cmd.check_update(&last).unwrap();
    // Nothing changed: the recorded bindings run (q = 2, then doubled).
    run(&mut r.b, &cmd);
    assert_eq!(
        read(&mut r.b, p),
        words(2),
        "refused updates changed nothing"
    );
    assert_eq!(
        read(&mut r.b, q),
        words(4),
        "refused updates changed nothing"
    );
    // Dispatch 2 doubles p now.
    cmd.update(checked).unwrap();
    run(&mut r.b, &cmd);
    assert_eq!(read(&mut r.b, p), words(4), "dispatch 2 after the update");
    assert_eq!(read(&mut r.b, q), words(2), "dispatch 1 only");
}

/// Each thing an update cannot patch in place is refused, saying what,
/// before anything changes: changes out of dispatch order or twice, a
/// dispatch that is not there, another pipeline, other bindings (their
/// number or an access), a buffer of another device or past
/// maxStorageBufferRange, workgroups past maxComputeWorkGroupCount on any
/// axis (exactly the limit is taken), a command buffer still recording or
/// recorded for one submission, and one that records a copy. Dispatches
/// here each follow a barrier, as a graph's do.
#[test]
fn an_update_is_refused_whole_for_each_thing_it_cannot_patch() {
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let [(_, one), (p, pb), (q, qb), (_, other)] = [1, 100, 200, 300].map(|v| r.filled(v));
    let (to_p, to_q, to_other) = (
        add(&one, &one, &pb),
        add(&one, &one, &qb),
        add(&one, &one, &other),
    );
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    cmd.begin(true).unwrap();
    for b in [&to_p, &to_q] {
        cmd.barrier().unwrap();
        cmd.dispatch(&r.add, b, &params, groups).unwrap();
    }
    cmd.end().unwrap();
    macro_rules! c {
        ($i:expr, $b:expr) => {
            change($i, &r.add, $b, params, groups)
        };
    }
    let cases: Vec<(&str, Vec<DispatchUpdate<'_>>, &str)> = vec![
        (
            "out of order",
            vec![c!(1, &to_q), c!(0, &to_p)],
            "dispatch order",
        ),
        (
            "twice",
            vec![c!(0, &to_p), c!(0, &to_other)],
            "changed twice",
        ),
        ("no dispatch 2", vec![c!(2, &to_p)], "no such dispatch"),
    ];
    for (what, changes, says) in &cases {
        let e = refused(&cmd, changes, what);
        assert!(e.contains(says), "{what}: {e}");
    }
    let mul = r.b.pipeline(OpKind::Mul, DType::U32).unwrap();
    let e = refused(
        &cmd,
        &[change(0, &mul, &to_other, params, groups)],
        "mul's pipeline",
    );
    assert!(e.contains("another pipeline"), "{e}");
    let fewer = &to_other[1..];
    let e = refused(&cmd, &[c!(0, fewer)], "two bindings");
    assert!(e.contains("other bindings"), "{e}");
    let mut writes_input = to_other.clone();
    writes_input[0].1 = Access::Write;
    let e = refused(&cmd, &[c!(0, &writes_input)], "an input written");
    assert!(e.contains("other bindings"), "{e}");
    // A buffer of another device (a second device opened on the same GPU).
    let mut elsewhere = Rig::open().unwrap();
    let (_, foreign) = elsewhere.filled(0);
    let to_foreign = add(&one, &one, &foreign);
    let e = refused(&cmd, &[c!(0, &to_foreign)], "a foreign buffer");
    assert!(e.contains("another device"), "{e}");
    // Workgroups: past the limit on one axis (each in turn) is refused;
    // exactly the limit on every axis is taken.
    let max = r.b.gpu.adapter().max_group_count;
    for axis in 0..3 {
        let mut g = [1u32; 3];
        g[axis] = max[axis] + 1;
        let ch = [change(0, &r.add, &to_other, params, (g[0], g[1], g[2]))];
        let e = refused(&cmd, &ch, "too many workgroups");
        assert!(e.contains("maxComputeWorkGroupCount"), "axis {axis}: {e}");
    }
    let at_max = (max[0], max[1], max[2]);
    cmd.check_update(&[change(0, &r.add, &to_other, params, at_max)])
        .expect("exactly maxComputeWorkGroupCount");
    // A buffer past maxStorageBufferRange (the sys layer makes one; a
    // device's `alloc` refuses it), where the range is small enough to.
    let range = r.b.gpu.adapter().max_storage_buffer_range;
    if range <= 1 << 30 {
        let huge =
            r.b.gpu
                .create_buffer(range + 4, &[ash::vk::MemoryPropertyFlags::empty()])
                .unwrap();
        let to_huge = add(&one, &one, &huge);
        let e = refused(&cmd, &[c!(0, &to_huge)], "a buffer past the range");
        assert!(e.contains("maxStorageBufferRange"), "{e}");
        // Exactly the range is taken, by an update as by a dispatch.
        let whole =
            r.b.gpu
                .create_buffer(range, &[ash::vk::MemoryPropertyFlags::empty()])
                .unwrap();
        let to_whole = add(&one, &one, &whole);
        cmd.check_update(&[c!(0, &to_whole)])
            .expect("a buffer of exactly maxStorageBufferRange");
        let mut fresh = r.b.gpu.command_buffer().unwrap();
        fresh.begin(true).unwrap();
        fresh.barrier().unwrap();
        fresh
            .dispatch(&r.add, &to_whole, &params, groups)
            .expect("a dispatch on exactly maxStorageBufferRange");
    } else {
        eprintln!("maxStorageBufferRange {range}: that row skipped");
    }
    // Nothing changed: p and q are 2, `other` still 300.
    run(&mut r.b, &cmd);
    assert_eq!(read(&mut r.b, p), words(2));
    assert_eq!(read(&mut r.b, q), words(2));

    // Not an ended graph command buffer: still recording, or for one
    // submission.
    let mut open = r.b.gpu.command_buffer().unwrap();
    open.begin(true).unwrap();
    open.barrier().unwrap();
    open.dispatch(&r.add, &to_p, &params, groups).unwrap();
    let e = refused(&open, &[c!(0, &to_q)], "still recording");
    assert!(e.contains("only an ended graph"), "{e}");
    let mut once = r.b.gpu.command_buffer().unwrap();
    once.begin(false).unwrap();
    once.barrier().unwrap();
    once.dispatch(&r.add, &to_p, &params, groups).unwrap();
    once.end().unwrap();
    let e = refused(&once, &[c!(0, &to_q)], "one submission");
    assert!(e.contains("only an ended graph"), "{e}");
    // A copy in the graph: an update does not patch it.
    let mut copies = r.b.gpu.command_buffer().unwrap();
    copies.begin(true).unwrap();
    copies.barrier().unwrap();
    copies.dispatch(&r.add, &to_p, &params, groups).unwrap();
    copies.barrier().unwrap();
    copies.copy(&pb, 0, &qb, 0, 1024).unwrap();
    copies.end().unwrap();
    let e = refused(&copies, &[c!(0, &to_q)], "a copy recorded");
    assert!(e.contains("records a copy"), "{e}");
    drop((open, once, copies));
}

/// An update checked before another update was applied is checked again
/// when applied: dispatch 0 → r passed while dispatch 1 wrote q; once
/// dispatch 1 writes r (same stretch, no barrier), it is refused, and
/// changes nothing.
#[test]
fn an_update_checked_before_another_is_checked_again() {
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let [(_, one), (p, pb), (_, qb), (rr, rb)] = [1, 100, 200, 300].map(|v| r.filled(v));
    let (to_p, to_q, to_r) = (
        add(&one, &one, &pb),
        add(&one, &one, &qb),
        add(&one, &one, &rb),
    );
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    cmd.begin(true).unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&r.add, &to_p, &params, groups).unwrap();
    cmd.dispatch(&r.add, &to_q, &params, groups).unwrap();
    cmd.end().unwrap();
    macro_rules! c {
        ($i:expr, $b:expr) => {
            change($i, &r.add, $b, params, groups)
        };
    }
    let first = [c!(0, &to_r)];
    let stale = cmd.check_update(&first).expect("0 → r while 1 writes q");
    let second = [c!(1, &to_r)];
    let checked = cmd.check_update(&second).expect("1 → r while 0 writes p");
    cmd.update(checked).unwrap();
    let e = cmd.update(stale).expect_err("0 → r while 1 writes r");
    assert!(e.to_string().contains("write after write"), "{e}");
    run(&mut r.b, &cmd);
    assert_eq!(read(&mut r.b, p), words(2), "dispatch 0 still writes p");
    assert_eq!(read(&mut r.b, rr), words(2), "dispatch 1 writes r");
}

/// A variant is made only of changes this command buffer passes now: a
/// pass checked on another command buffer, whose dispatch 0 has another
/// pipeline, is refused and makes nothing; on its own command buffer the
/// same pass makes a variant that runs the change, and leaves the original
/// as it was. Mutation: `variant` trusting the pass → red at "another
/// command buffer's pass".
#[test]
fn a_variant_is_made_only_of_changes_its_command_buffer_passes() {
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let mul = r.b.pipeline(OpKind::Mul, DType::U32).unwrap();
    let [(_, one), (p, pb), (q, qb)] = [1, 100, 200].map(|v| r.filled(v));
    let (to_p, to_q) = (add(&one, &one, &pb), add(&one, &one, &qb));
    let record = |r: &mut Rig, pipeline: &Pipeline| {
        let mut cmd = r.b.gpu.command_buffer().unwrap();
        cmd.begin(true).unwrap();
        cmd.barrier().unwrap();
        cmd.dispatch(pipeline, &to_p, &params, groups).unwrap();
        cmd.end().unwrap();
        cmd
    };
    let add_pipeline = r.add.clone();
    let (adds, muls) = (record(&mut r, &add_pipeline), record(&mut r, &mul));
    let moved = [change(0, &r.add, &to_q, params, groups)];
    let e = muls
        .variant(adds.check_update(&moved).unwrap())
        .err()
        .expect("another command buffer's pass");
    assert!(e.to_string().contains("another pipeline"), "{e}");
    let fresh = adds.variant(adds.check_update(&moved).unwrap()).unwrap();
    run(&mut r.b, &fresh);
    assert_eq!(read(&mut r.b, q), words(2), "the variant writes q");
    assert_eq!(read(&mut r.b, p), words(100), "and not p");
    run(&mut r.b, &adds);
    assert_eq!(read(&mut r.b, p), words(2), "the original still writes p");
}

/// What an update applies runs: every binding of a dispatch moved (its
/// two inputs from one buffer to two), new immediates alone (an add over
/// half the words, the workgroups unchanged), new workgroup counts, and an
/// update that changes nothing records nothing again. The command buffer
/// is recorded again exactly where the recorded commands change: workgroup
/// counts, or bindings on a device without UPDATE_AFTER_BIND; immediates
/// are written to the dispatch's parameter block. Mutations: leave the
/// block unwritten (red at "the first 128 words only"), or record again
/// for new immediates → red.
#[test]
fn an_update_applies_new_bindings_and_immediates() {
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let (half, half_groups) = r.add_of(128);
    assert_ne!(half_groups, groups);
    let in_place = r.b.rebind_in_place().is_ok();
    let [(_, one), (p, pb), (_, xb), (_, yb), (s, sb)] = [1, 100, 3, 5, 0].map(|v| r.filled(v));
    let (to_p, x_y_s) = (add(&one, &one, &pb), add(&xb, &yb, &sb));
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    cmd.begin(true).unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&r.add, &to_p, &params, groups).unwrap();
    cmd.end().unwrap();
    run(&mut r.b, &cmd);
    assert_eq!(read(&mut r.b, p), words(2));
    // Every binding moves; `one` binds twice before, x and y once each.
    let moved = [change(0, &r.add, &x_y_s, params, groups)];
    let checked = cmd.check_update(&moved).unwrap();
    assert_eq!(cmd.update(checked).unwrap(), !in_place, "rebinds");
    run(&mut r.b, &cmd);
    assert_eq!(read(&mut r.b, s), words(8), "s = x + y");
    // Nothing changes: nothing recorded again.
    let same = [change(0, &r.add, &x_y_s, params, groups)];
    let checked = cmd.check_update(&same).unwrap();
    assert!(!cmd.update(checked).unwrap(), "an update changing nothing");
    // New immediates alone: an add over the first 128 words.
    r.b.write(s, 0, &words(0)).unwrap();
    let halved = [change(0, &r.add, &x_y_s, half, groups)];
    let checked = cmd.check_update(&halved).unwrap();
    assert!(
        !cmd.update(checked).unwrap(),
        "new immediates are written, not recorded"
    );
    run(&mut r.b, &cmd);
    let want: Vec<u8> = (0..256u32)
        .flat_map(|i| u32::from(i < 128).wrapping_mul(8).to_le_bytes())
        .collect();
    assert_eq!(read(&mut r.b, s), want, "the first 128 words only");
    assert_eq!(read(&mut r.b, p), words(2), "p no longer written");
    // The whole add again, then the half with its own workgroup count:
    // recorded again.
    let whole = [change(0, &r.add, &x_y_s, params, groups)];
    let checked = cmd.check_update(&whole).unwrap();
    assert!(!cmd.update(checked).unwrap(), "immediates back");
    run(&mut r.b, &cmd);
    assert_eq!(read(&mut r.b, s), words(8), "the whole add again");
    r.b.write(s, 0, &words(0)).unwrap();
    let fewer = [change(0, &r.add, &x_y_s, half, half_groups)];
    let checked = cmd.check_update(&fewer).unwrap();
    assert!(
        cmd.update(checked).unwrap(),
        "new workgroup counts are recorded"
    );
    run(&mut r.b, &cmd);
    assert_eq!(
        read(&mut r.b, s),
        want,
        "the first 128 words, fewer workgroups"
    );
}

/// Two bindings moving from two buffers onto one each move from their own
/// buffer: after dispatch 0's a and b both become c, the command buffer
/// still holds a for dispatch 1, which runs on it after its handle is
/// freed. Mutation (tried): moves grouped by their new buffer alone (a's
/// count taken twice, b's never) → red.
#[test]
fn bindings_from_two_buffers_onto_one_move_each_from_its_own() {
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let [(a, ab), (_, bb), (_, cb), (_, one), (p, pb), (q, qb)] =
        [3, 5, 7, 1, 0, 0].map(|v| r.filled(v));
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    cmd.begin(true).unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&r.add, &add(&ab, &bb, &pb), &params, groups)
        .unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&r.add, &add(&ab, &one, &qb), &params, groups)
        .unwrap();
    cmd.end().unwrap();
    let c_c_p = add(&cb, &cb, &pb);
    let moved = [change(0, &r.add, &c_c_p, params, groups)];
    let checked = cmd.check_update(&moved).unwrap();
    cmd.update(checked).unwrap();
    drop(ab);
    r.b.free(a).unwrap();
    run(&mut r.b, &cmd);
    assert_eq!(read(&mut r.b, p), words(14), "p = c + c");
    assert_eq!(read(&mut r.b, q), words(4), "q = a + 1, a held");
}

/// A timestamp between two dispatches of one stretch touches no memory: an
/// update of that stretch is audited over the dispatches alone and taken,
/// and the command buffer, timestamps and all, still runs. Query resets
/// take any range inside the pool and refuse one past its end.
/// Mutations: the audit taking a timestamp for a copy → red; the reset's
/// range check reversed → red.
#[test]
fn timestamps_in_a_stretch_and_query_ranges() {
    use ash::vk::PipelineStageFlags;
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let [(_, one), (p, pb), (q, qb)] = [1, 100, 200].map(|v| r.filled(v));
    let (to_p, to_q) = (add(&one, &one, &pb), add(&one, &one, &qb));
    let pool = r.b.gpu.create_query_pool(4).unwrap();
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    cmd.begin(true).unwrap();
    let e = cmd.reset_queries(&pool, 3, 2).unwrap_err();
    assert!(e.to_string().contains("outside the pool"), "{e}");
    cmd.reset_queries(&pool, 0, 1).unwrap();
    cmd.reset_queries(&pool, 1, 3).unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&r.add, &to_p, &params, groups).unwrap();
    cmd.write_timestamp(PipelineStageFlags::BOTTOM_OF_PIPE, &pool, 0)
        .unwrap();
    cmd.dispatch(&r.add, &to_q, &params, groups).unwrap();
    cmd.write_timestamp(PipelineStageFlags::BOTTOM_OF_PIPE, &pool, 1)
        .unwrap();
    cmd.end().unwrap();
    // The two swap destinations: no alias, so taken.
    let swapped = [
        change(0, &r.add, &to_q, params, groups),
        change(1, &r.add, &to_p, params, groups),
    ];
    let checked = cmd.check_update(&swapped).unwrap();
    cmd.update(checked).unwrap();
    run(&mut r.b, &cmd);
    assert_eq!(read(&mut r.b, p), words(2));
    assert_eq!(read(&mut r.b, q), words(2));
}
