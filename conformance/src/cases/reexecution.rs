//! C1 re-execution, C2 host writes between replays, C3 handles own their exec.

use crate::{check, check_eq, Case, CaseResult, Ctx, Rule, Tag, ONCE};
use seam::{ops, GraphRef};

const CAP: &[Tag] = &[Tag::NeedsCapture];

/// dst += a, captured once into a graph handle: 17, then 34 after the second
/// replay, then 35 after a host write of a = 1 (C1: a replay runs its
/// launches again, on the buffers as they are now).
///
/// Mutation: make the CPU backend's `replay` run a graph only the first time
/// and serve that result afterwards (a snapshot) → red at "34".
pub const C1_REPLAY_REEXECUTES: Case = Case {
    name: "c1_replay_reexecutes",
    rule: Rule::C1,
    tags: CAP,
    modes: ONCE,
    body: |cx| reexecute(cx, false),
};

/// The same 17 → 34 → 35 through end_capture and the current exec.
///
/// Mutation: make `Device::replay(GraphRef::Current)` return Ok without calling the backend → red at "17".
pub const C1_CURRENT_EXEC_REEXECUTES: Case = Case {
    name: "c1_current_exec_reexecutes",
    rule: Rule::C1,
    tags: CAP,
    modes: ONCE,
    body: |cx| reexecute(cx, true),
};

fn reexecute(cx: &Ctx, current: bool) -> CaseResult {
    let d = &cx.dev;
    let a = d.buffer_from(&[17.0f32])?;
    let dst = d.buffer_from(&[0.0f32])?;
    let scope = d.capture()?;
    d.launch(&ops::add(a.id(), dst.id(), dst.id(), 1))?;
    let (target, _graph) = if current {
        scope.end_into_current()?;
        (GraphRef::Current, None)
    } else {
        let g = scope.end_graph()?;
        (GraphRef::Handle(g.id()), Some(g))
    };
    d.replay(target)?;
    check_eq!(dst.read()?, vec![17.0f32], "after the first replay");
    d.replay(target)?;
    check_eq!(
        dst.read()?,
        vec![34.0f32],
        "after the second replay (a snapshot replay gives 17)"
    );
    a.write(&[1.0])?;
    d.replay(target)?;
    check_eq!(
        dst.read()?,
        vec![35.0f32],
        "after a = 1 and a third replay (stale input gives 51)"
    );
    cx.digest_bytes(&d.read_bytes(dst.id())?);
    Ok(())
}

/// Capturing records; it does not run: outputs are untouched until the first replay.
///
/// Mutation: make the CPU backend's `launch` queue the op even while recording → red.
pub const C1_CAPTURE_DOES_NOT_EXECUTE: Case = Case {
    name: "c1_capture_does_not_execute",
    rule: Rule::C1,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let bytes = d.live().backend.bytes;
        let x = d.buffer_from(&[3.0f32; 64])?;
        check!(
            d.live().backend.bytes >= bytes + 64 * 4,
            "the backend holds 64 f32 for x: {} → {} bytes",
            bytes,
            d.live().backend.bytes
        );
        let y = d.buffer_from(&[0.0f32; 64])?;
        let scope = d.capture()?;
        d.launch(&ops::scale_add(x.id(), y.id(), 64, 2.0, 1.0))?;
        let g = scope.end_graph()?;
        d.synchronize()?;
        check_eq!(y.read()?, vec![0.0f32; 64], "output before any replay");
        g.replay()?;
        check_eq!(y.read()?, vec![7.0f32; 64], "output after one replay");
        Ok(())
    },
};

/// A chain of dependent ops replays in capture order, every time:
/// y = 2x + 1; z = y * y; x = z (copy back). x: 1 → 9 → 361 over two replays.
///
/// Mutation: make the CPU backend's replay run the recorded list in reverse → red.
pub const C1_DEPENDENT_CHAIN_REPLAYS_IN_ORDER: Case = Case {
    name: "c1_dependent_chain_replays_in_order",
    rule: Rule::C1,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = 300;
        let x = d.buffer_from(&vec![1.0f32; n])?;
        let y = d.buffer_from(&vec![0.0f32; n])?;
        let z = d.buffer_from(&vec![0.0f32; n])?;
        let scope = d.capture()?;
        d.launch(&ops::scale_add(x.id(), y.id(), n as u32, 2.0, 1.0))?;
        d.launch(&ops::mul(y.id(), y.id(), z.id(), n as u32))?;
        d.launch(&ops::copy(z.id(), x.id(), n as u32))?;
        let g = scope.end_graph()?;
        g.replay()?;
        check_eq!(x.read()?, vec![9.0f32; n], "x after one replay");
        g.replay()?;
        check_eq!(x.read()?, vec![361.0f32; n], "x after two replays");
        Ok(())
    },
};

/// Host writes between replays are seen by the next replay, round after round.
///
/// Mutation: make the CPU backend's `write` a no-op once a graph exists → red at round 0.
pub const C2_HOST_WRITE_SEEN_BY_NEXT_REPLAY: Case = Case {
    name: "c2_host_write_seen_by_next_replay",
    rule: Rule::C2,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = 1000;
        let src = d.buffer::<u32>(n)?;
        let dst = d.buffer_from(&vec![0u32; n])?;
        let scope = d.capture()?;
        d.launch(&ops::copy(src.id(), dst.id(), n as u32))?;
        let g = scope.end_graph()?;
        let mut rng = crate::workloads::Rng::new(2);
        for round in 0..5 {
            let data: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
            src.write(&data)?;
            g.replay()?;
            check_eq!(
                dst.read()? == data,
                true,
                "round {round}: dst equals the data written before the replay"
            );
        }
        Ok(())
    },
};

/// A write of part of a buffer is seen, and the rest keeps its old contents.
///
/// Mutation: make `Device::write` ignore the element offset (write at 0) → red.
pub const C2_PARTIAL_WRITE_SEEN_BY_NEXT_REPLAY: Case = Case {
    name: "c2_partial_write_seen_by_next_replay",
    rule: Rule::C2,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let a = d.buffer_from(&[1i32, 2, 3, 4, 5, 6, 7, 8])?;
        let b = d.buffer_from(&[10i32; 8])?;
        let out = d.buffer_from(&[0i32; 8])?;
        let scope = d.capture()?;
        d.launch(&ops::add(a.id(), b.id(), out.id(), 8))?;
        let g = scope.end_graph()?;
        g.replay()?;
        check_eq!(
            out.read()?,
            vec![11, 12, 13, 14, 15, 16, 17, 18],
            "first replay"
        );
        d.write(a.id(), 5, &[-100i32, -200])?;
        g.replay()?;
        check_eq!(
            out.read()?,
            vec![11, 12, 13, 14, 15, -90, -190, 18],
            "after a partial write at offset 5"
        );
        check_eq!(
            d.read_range::<i32>(out.id(), 5, 2)?,
            vec![-90, -190],
            "a read at an element offset"
        );
        Ok(())
    },
};

/// Replaying handle A never runs B's work (each graph writes its own buffer).
///
/// Mutation: make the CPU backend's replay of a handle run the most recently
/// ended graph instead of the one named → red.
pub const C3_HANDLES_DO_NOT_ALIAS: Case = Case {
    name: "c3_handles_do_not_alias",
    rule: Rule::C3,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 16])?;
        let da = d.buffer_from(&[0u32; 16])?;
        let db = d.buffer_from(&[0u32; 16])?;
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), da.id(), da.id(), 16))?;
        let ga = s.end_graph()?;
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), db.id(), db.id(), 16))?;
        d.launch(&ops::add(one.id(), db.id(), db.id(), 16))?;
        let gb = s.end_graph()?;
        ga.replay()?;
        ga.replay()?;
        gb.replay()?;
        check_eq!(
            da.read()?,
            vec![2u32; 16],
            "A's buffer after 2 replays of A"
        );
        check_eq!(
            db.read()?,
            vec![2u32; 16],
            "B's buffer after 1 replay of B (2 adds)"
        );
        drop(gb);
        ga.replay()?;
        check_eq!(
            da.read()?,
            vec![3u32; 16],
            "A still replays after B is destroyed"
        );
        check_eq!(db.read()?, vec![2u32; 16], "B's buffer untouched by A");
        Ok(())
    },
};

/// The implicit exec (end_capture) and a handle (end_capture_graph) never
/// alias: each targets its own buffer, so a stale or shared exec is caught.
///
/// Mutation: make the CPU backend's `end_capture_graph` also set the current
/// exec to the new graph → red.
pub const C3_CURRENT_EXEC_AND_HANDLE_DISTINCT: Case = Case {
    name: "c3_current_exec_and_handle_distinct",
    rule: Rule::C3,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 4])?;
        let x = d.buffer_from(&[0u32; 4])?;
        let y = d.buffer_from(&[0u32; 4])?;
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), x.id(), x.id(), 4))?;
        s.end_into_current()?;
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), y.id(), y.id(), 4))?;
        let g = s.end_graph()?;
        d.replay(GraphRef::Current)?;
        check_eq!(x.read()?, vec![1u32; 4], "current exec writes x");
        check_eq!(y.read()?, vec![0u32; 4], "current exec leaves y");
        g.replay()?;
        check_eq!(x.read()?, vec![1u32; 4], "handle leaves x");
        check_eq!(y.read()?, vec![1u32; 4], "handle writes y");
        Ok(())
    },
};

/// A second end_capture replaces the current exec; the old one is gone.
///
/// Mutation: make the CPU backend's `end_capture` keep the first exec when one exists → red.
pub const C3_NEW_CURRENT_EXEC_REPLACES_OLD: Case = Case {
    name: "c3_new_current_exec_replaces_old",
    rule: Rule::C3,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 4])?;
        let x = d.buffer_from(&[0u32; 4])?;
        let z = d.buffer_from(&[0u32; 4])?;
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), x.id(), x.id(), 4))?;
        s.end_into_current()?;
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), z.id(), z.id(), 4))?;
        s.end_into_current()?;
        d.replay(GraphRef::Current)?;
        check_eq!(x.read()?, vec![0u32; 4], "the replaced exec no longer runs");
        check_eq!(z.read()?, vec![1u32; 4], "the new exec runs");
        check_eq!(
            d.replay_count(GraphRef::Current)?,
            1,
            "the new exec's replay count starts at 0"
        );
        Ok(())
    },
};
