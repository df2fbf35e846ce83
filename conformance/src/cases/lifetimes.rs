//! Lifetimes: what a freed or dropped resource still owes queued work (C8),
//! what a drop inside a capture may reach (C5), and what a handle keeps when
//! the current exec changes after it (C3).

use crate::{check_eq, Case, Rule, Tag, ONCE};
use seam::{ops, GraphRef};

const CAP: &[Tag] = &[Tag::NeedsCapture];
const N: usize = 1 << 16;
const STEPS: usize = 24;
/// Elements and launches of the work queued ahead in C8's free case.
const AHEAD: usize = 1 << 20;
const AHEAD_STEPS: usize = 4;

/// A buffer freed (`Device::free`), and another whose owned handle is
/// dropped, while queued eager work still reads them: the work completes
/// with correct outputs. A graph and its input dropped while three replays
/// of it are queued: the replays complete. Every buffer reaches the backend
/// as freed (the counts fall).
///
/// Mutation: the CPU queue drops a launch whose buffer was freed after the
/// launch was queued (a backend that releases memory at once) → red at "acc
/// after 24 adds of the freed buffer and 24 of the dropped one: (161, 161)
/// != (168, 168)" (3 of 3 runs, 2026-12-02). The work queued ahead (4 adds
/// over 1 Mi elements) keeps the queue busy while the rest is queued. The
/// CPU backend's `free` takes no lock the queue holds: a free that waited
/// behind the running launch let the queue drain first, and a backend that
/// frees at once then passed by timing.
pub const C8_FREE_WHILE_QUEUED_WORK_READS: Case = Case {
    name: "c8_free_while_queued_work_reads",
    rule: Rule::C8,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = N as u32;
        let acc = d.buffer_from(&vec![0u32; N])?;
        // Work queued ahead of everything below, long enough that the free
        // and the drop reach the backend while the adds that read them are
        // still queued (without it a fast queue could finish them first and
        // a backend that frees at once would pass by timing).
        let ahead = d.buffer_from(&vec![1u32; AHEAD])?;
        let start = d.live().backend.buffers;
        let freed = d.alloc(seam::DType::U32, N)?;
        d.write(freed, 0, &vec![2u32; N])?;
        let dropped = d.buffer_from(&vec![5u32; N])?;
        for _ in 0..AHEAD_STEPS {
            d.launch(&ops::add(ahead.id(), ahead.id(), ahead.id(), AHEAD as u32))?;
        }
        for _ in 0..STEPS {
            d.launch(&ops::add(freed, acc.id(), acc.id(), n))?;
        }
        d.free(freed)?;
        for _ in 0..STEPS {
            d.launch(&ops::add(dropped.id(), acc.id(), acc.id(), n))?;
        }
        drop(dropped);
        check_eq!(
            d.live().backend.buffers,
            start,
            "both buffers reached the backend as freed, with work queued"
        );
        let want = (STEPS * 2 + STEPS * 5) as u32;
        let got = acc.read()?;
        check_eq!(
            (got[0], got[N - 1]),
            (want, want),
            "acc after {STEPS} adds of the freed buffer and {STEPS} of the dropped one"
        );

        let input = d.buffer_from(&vec![3u32; N])?;
        let s = d.capture()?;
        for _ in 0..STEPS {
            d.launch(&ops::add(input.id(), acc.id(), acc.id(), n))?;
        }
        let g = s.end_graph()?;
        for _ in 0..3 {
            g.replay()?;
        }
        drop(g);
        drop(input);
        check_eq!(
            d.live().backend.buffers,
            start,
            "the input is freed once its graph is gone, replays queued"
        );
        let want = want + (3 * STEPS * 3) as u32;
        let got = acc.read()?;
        check_eq!(
            (got[0], got[N - 1]),
            (want, want),
            "acc after three queued replays of a dropped graph over a dropped input"
        );
        Ok(())
    },
};

/// Buffers and graphs the capture does not use, dropped inside it, are
/// given up by core at once but reach the backend only after the capture
/// ends (C5: nothing is freed or destroyed inside a capture region), and
/// then every one of them does: the backend's buffer, graph and byte counts
/// are unchanged during the capture and fall by exactly what was dropped
/// after it.
///
/// Mutation: delete the `self.capture.is_some()` early return in
/// `State::sweep` → red at "nothing reaches the backend inside the
/// capture: ResourceCounts { buffers: 2, graphs: 0, bytes: 64 } !=
/// ResourceCounts { buffers: 5, graphs: 2, bytes: 656 }".
pub const C5_UNUSED_DROPS_IN_CAPTURE_WAIT_FOR_ITS_END: Case = Case {
    name: "c5_unused_drops_in_capture_wait_for_its_end",
    rule: Rule::C5,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 8])?;
        let dst = d.buffer_from(&[0u32; 8])?;
        let spares = [d.buffer_from(&[7u32; 100])?, d.buffer_from(&[8u32; 36])?];
        let spare_f = d.buffer_from(&[0.5f32; 12])?;
        let mk = || -> seam::Result<seam::Graph> {
            let s = d.capture()?;
            d.launch(&ops::add(one.id(), dst.id(), dst.id(), 8))?;
            s.end_graph()
        };
        let (g1, g2) = (mk()?, mk()?);
        let before = d.live();
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), dst.id(), dst.id(), 8))?;
        drop(spares);
        drop(spare_f);
        drop(g1);
        drop(g2);
        check_eq!(
            d.live().backend,
            before.backend,
            "nothing reaches the backend inside the capture"
        );
        let g = s.end_graph()?;
        let after = d.live().backend;
        check_eq!(after.buffers, before.backend.buffers - 3, "buffers freed");
        check_eq!(
            after.graphs,
            before.backend.graphs - 2 + 1,
            "both dropped graphs destroyed (the new one kept)"
        );
        check_eq!(
            after.bytes,
            before.backend.bytes - (136 + 12) * 4,
            "device bytes fell by the dropped buffers'"
        );
        check_eq!(
            d.live().bytes,
            before.bytes - (136 + 12) * 4,
            "core's bytes fell by the dropped buffers'"
        );
        g.replay()?;
        check_eq!(dst.read()?, vec![1u32; 8], "the capture replays");
        Ok(())
    },
};

/// A handle made before a later `end_capture_into_current` (and the
/// current exec made before a later handle) runs only its own work, in
/// both orders, each capture with different work on its own buffer, so a
/// backend that keeps one slot of shared state shows it.
///
/// Mutation: make the CPU backend's `end_capture` also overwrite the most
/// recently made handle's graph (one shared slot) → red at "order 1: the
/// handle, made before end_capture_into_current, adds 1 to A only: [0, 10,
/// 0, 0] != [1, 0, 0, 0]".
pub const C3_HANDLE_KEEPS_ITS_WORK_ACROSS_LATER_ENDS: Case = Case {
    name: "c3_handle_keeps_its_work_across_later_ends",
    rule: Rule::C3,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let bufs: Vec<seam::Buffer<u32>> = (0..4)
            .map(|_| d.buffer_from(&[0u32; 4]))
            .collect::<Result<_, _>>()?;
        let adds: Vec<seam::Buffer<u32>> = [1u32, 10, 100, 1000]
            .iter()
            .map(|v| d.buffer_from(&[*v; 4]))
            .collect::<Result<_, _>>()?;
        let step = |i: usize| ops::add(adds[i].id(), bufs[i].id(), bufs[i].id(), 4);
        let read = || -> seam::Result<Vec<u32>> { bufs.iter().map(|b| Ok(b.read()?[0])).collect() };
        // Order 1: handle (A += 1), then current (B += 10).
        let s = d.capture()?;
        d.launch(&step(0))?;
        let h = s.end_graph()?;
        let s = d.capture()?;
        d.launch(&step(1))?;
        s.end_into_current()?;
        h.replay()?;
        check_eq!(
            read()?,
            vec![1, 0, 0, 0],
            "order 1: the handle, made before end_capture_into_current, adds 1 to A only"
        );
        d.replay(GraphRef::Current)?;
        check_eq!(
            read()?,
            vec![1, 10, 0, 0],
            "order 1: the current exec adds 10 to B only"
        );
        // Order 2: current (C += 100), then a handle (D += 1000), then a
        // new current again (B += 10) after the handle exists.
        let s = d.capture()?;
        d.launch(&step(2))?;
        s.end_into_current()?;
        let s = d.capture()?;
        d.launch(&step(3))?;
        let h2 = s.end_graph()?;
        d.replay(GraphRef::Current)?;
        check_eq!(
            read()?,
            vec![1, 10, 100, 0],
            "order 2: the current exec, made before the handle, adds 100 to C only"
        );
        h2.replay()?;
        check_eq!(
            read()?,
            vec![1, 10, 100, 1000],
            "order 2: the later handle adds 1000 to D only"
        );
        let s = d.capture()?;
        d.launch(&step(1))?;
        s.end_into_current()?;
        h2.replay()?;
        h.replay()?;
        check_eq!(
            read()?,
            vec![2, 10, 100, 2000],
            "both handles, after a newer end_capture_into_current, run only their own work"
        );
        d.replay(GraphRef::Current)?;
        check_eq!(
            read()?,
            vec![2, 20, 100, 2000],
            "the newest current exec adds 10 to B only"
        );
        Ok(())
    },
};
