//! C5 no allocation or free inside a capture region; C6 order of calls.

use crate::{check, check_eq, expect_err, Case, CaseResult, Ctx, Rule, Tag, ONCE};
use seam::{ops, DType, ErrorKind, GraphId, GraphRef};

const CAP: &[Tag] = &[Tag::NeedsCapture];

/// Capture `dst += one` on 8 u32s, then replay it and check `dst == expect`:
/// proves a capture that saw a refused call is still usable.
fn finish_and_check(cx: &Ctx, one: seam::BufferId, dst: seam::BufferId, expect: u32) -> CaseResult {
    let d = &cx.dev;
    d.launch(&ops::add(one, dst, dst, 8))?;
    let g = d.low_level().end_capture_graph()?;
    d.replay(GraphRef::Handle(g))?;
    check_eq!(
        d.read::<u32>(dst)?,
        vec![expect; 8],
        "the capture stayed usable after the refusal"
    );
    d.destroy_graph(g)?;
    Ok(())
}

/// alloc inside a capture region is refused with AllocInCapture, on every
/// backend (the CUDA driver itself would accept it), and the capture stays usable.
///
/// Mutation: delete the `st.capture.is_some()` check in `Device::alloc` → red.
pub const C5_ALLOC_INSIDE_CAPTURE_REFUSED: Case = Case {
    name: "c5_alloc_inside_capture_refused",
    rule: Rule::C5,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 8])?;
        let dst = d.buffer_from(&[0u32; 8])?;
        let before = d.live();
        d.low_level().begin_capture()?;
        for dtype in DType::ALL {
            expect_err!(d.alloc(dtype, 1024), ErrorKind::AllocInCapture);
        }
        expect_err!(d.buffer::<f32>(16), ErrorKind::AllocInCapture);
        check_eq!(d.live().buffers, before.buffers, "no buffer was created");
        check_eq!(
            d.live().backend.buffers,
            before.backend.buffers,
            "the backend allocated nothing"
        );
        finish_and_check(cx, one.id(), dst.id(), 1)
    },
};

/// free inside a capture region is refused with FreeInCapture; the buffer
/// stays valid and the capture usable.
///
/// Mutation: delete the `st.capture.is_some()` check in `Device::free` → red.
pub const C5_FREE_INSIDE_CAPTURE_REFUSED: Case = Case {
    name: "c5_free_inside_capture_refused",
    rule: Rule::C5,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.alloc(DType::U32, 8)?;
        d.write(one, 0, &[1u32; 8])?;
        let dst = d.alloc(DType::U32, 8)?;
        d.write(dst, 0, &[5u32; 8])?;
        let spare = d.alloc(DType::F32, 8)?;
        d.low_level().begin_capture()?;
        expect_err!(d.free(spare), ErrorKind::FreeInCapture);
        expect_err!(d.free(dst), ErrorKind::FreeInCapture);
        finish_and_check(cx, one, dst, 6)?;
        d.free(spare)?;
        d.free(one)?;
        d.free(dst)?;
        check_eq!(d.live().buffers, 0, "every buffer freed after the capture");
        Ok(())
    },
};

/// An owned buffer dropped during a capture (early return, `?`) is not freed
/// there, and is freed once the capture ends and no graph reads it.
///
/// Mutation: make `Device::release_buffer` free immediately (skip the sweep
/// rules) → red.
pub const C5_DROPPED_BUFFER_DEFERRED_UNTIL_SAFE: Case = Case {
    name: "c5_dropped_buffer_deferred_until_safe",
    rule: Rule::C5,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 8])?;
        let dst = d.buffer_from(&[0u32; 8])?;
        let before = d.live().backend.buffers;
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), dst.id(), dst.id(), 8))?;
        let dst_id = dst.id();
        drop(dst);
        check_eq!(
            d.live().backend.buffers,
            before,
            "nothing freed inside the capture"
        );
        let g = s.end_graph()?;
        check_eq!(
            d.live().backend.buffers,
            before,
            "still held: the graph reads it"
        );
        g.replay()?;
        d.synchronize()?;
        drop(g);
        check_eq!(
            d.live().backend.buffers,
            before - 1,
            "freed once the graph is gone"
        );
        expect_err!(d.read::<u32>(dst_id), ErrorKind::UnknownBuffer { .. });
        Ok(())
    },
};

/// A second begin_capture is refused with NestedCapture; the first stays usable.
///
/// Mutation: delete the nested-capture check in `Device::begin_capture` → red.
pub const C6_NESTED_BEGIN_REFUSED: Case = Case {
    name: "c6_nested_begin_refused",
    rule: Rule::C6,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 8])?;
        let dst = d.buffer_from(&[0u32; 8])?;
        d.low_level().begin_capture()?;
        check!(d.capturing(), "capturing() while a capture is open");
        expect_err!(d.low_level().begin_capture(), ErrorKind::NestedCapture);
        expect_err!(d.capture().map(drop), ErrorKind::NestedCapture);
        finish_and_check(cx, one.id(), dst.id(), 1)
    },
};

/// end_capture, end_capture_graph and abort_capture without a begin are each NotCapturing.
///
/// Mutation: make `Device::take_capture` return a copy of the open capture
/// instead of taking it (ending does not close the capture in core) → red at
/// "no capture left open".
pub const C6_END_WITHOUT_BEGIN_REFUSED: Case = Case {
    name: "c6_end_without_begin_refused",
    rule: Rule::C6,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        expect_err!(
            d.low_level().end_capture_into_current(),
            ErrorKind::NotCapturing
        );
        expect_err!(d.low_level().end_capture_graph(), ErrorKind::NotCapturing);
        expect_err!(d.low_level().abort_capture(), ErrorKind::NotCapturing);
        d.low_level().begin_capture()?;
        d.low_level().end_capture_graph()?;
        expect_err!(d.low_level().end_capture_graph(), ErrorKind::NotCapturing);
        check!(!d.capturing(), "no capture left open");
        Ok(())
    },
};

/// Replay or destroy of an unknown or destroyed handle is UnknownGraph; replay
/// of the current exec before any end_capture is NoCurrentGraph.
///
/// Mutation: make `Device::destroy_graph` leave the entry in core's table → red
/// at "no handle left" (the backend's own check still refuses the replay).
pub const C6_UNKNOWN_OR_DESTROYED_HANDLE_REFUSED: Case = Case {
    name: "c6_unknown_or_destroyed_handle_refused",
    rule: Rule::C6,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        expect_err!(d.replay(GraphRef::Current), ErrorKind::NoCurrentGraph);
        expect_err!(
            d.replay(GraphRef::Handle(GraphId::unknown())),
            ErrorKind::UnknownGraph { id: u64::MAX }
        );
        expect_err!(
            d.destroy_graph(GraphId::unknown()),
            ErrorKind::UnknownGraph { .. }
        );
        expect_err!(
            d.replay_count(GraphRef::Handle(GraphId::unknown())),
            ErrorKind::UnknownGraph { .. }
        );
        d.low_level().begin_capture()?;
        let g = d.low_level().end_capture_graph()?;
        d.replay(GraphRef::Handle(g))?;
        d.destroy_graph(g)?;
        expect_err!(
            d.replay(GraphRef::Handle(g)),
            ErrorKind::UnknownGraph { .. }
        );
        expect_err!(d.destroy_graph(g), ErrorKind::UnknownGraph { .. });
        // A new graph never reuses a destroyed id.
        d.low_level().begin_capture()?;
        let g2 = d.low_level().end_capture_graph()?;
        check!(g2 != g, "graph ids are not reused");
        d.destroy_graph(g2)?;
        check_eq!(d.live().graphs, 0, "no handle left");
        check_eq!(d.live().backend.graphs, 0, "backend holds no graph");
        Ok(())
    },
};

/// Host calls that would fall outside the graph are refused inside a capture:
/// write, read, synchronize, prepare, replay and destroy.
///
/// Mutation: delete the capture check in `State::host_access_check` → red (write accepted).
pub const C6_HOST_CALLS_INSIDE_CAPTURE_REFUSED: Case = Case {
    name: "c6_host_calls_inside_capture_refused",
    rule: Rule::C6,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 8])?;
        let dst = d.buffer_from(&[0u32; 8])?;
        d.low_level().begin_capture()?;
        let g0 = d.low_level().end_capture_graph()?;
        d.low_level().begin_capture()?;
        expect_err!(
            d.write(dst.id(), 0, &[9u32]),
            ErrorKind::HostAccessInCapture { .. }
        );
        expect_err!(
            d.read::<u32>(dst.id()),
            ErrorKind::HostAccessInCapture { .. }
        );
        expect_err!(
            d.read_bytes(dst.id()),
            ErrorKind::HostAccessInCapture { .. }
        );
        expect_err!(d.synchronize(), ErrorKind::HostAccessInCapture { .. });
        expect_err!(
            d.prepare(&[(seam::OpKind::Gemm, DType::F32)]),
            ErrorKind::HostAccessInCapture { .. }
        );
        expect_err!(d.replay(GraphRef::Handle(g0)), ErrorKind::ReplayInCapture);
        expect_err!(d.destroy_graph(g0), ErrorKind::DestroyInCapture);
        finish_and_check(cx, one.id(), dst.id(), 1)?;
        d.destroy_graph(g0)?;
        Ok(())
    },
};

/// A launch from another thread while a capture is open is refused with
/// CrossThreadCapture, and is not recorded into the capture.
///
/// Mutation: delete the owner-thread check in `Device::launch` → red.
pub const C6_LAUNCH_FROM_OTHER_THREAD_REFUSED: Case = Case {
    name: "c6_launch_from_other_thread_refused",
    rule: Rule::C6,
    tags: &[Tag::NeedsCapture, Tag::Threads],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 8])?;
        let dst = d.buffer_from(&[0u32; 8])?;
        let other = d.buffer_from(&[0u32; 8])?;
        d.low_level().begin_capture()?;
        let (dev2, a, o) = (d.clone(), one.id(), other.id());
        let r = std::thread::spawn(move || {
            let launch = dev2.launch(&ops::add(a, o, o, 8));
            let end = dev2.low_level().end_capture_graph();
            (launch, end)
        })
        .join()
        .map_err(|_| crate::Failure("the other thread panicked".into()))?;
        expect_err!(r.0, ErrorKind::CrossThreadCapture { .. });
        expect_err!(r.1, ErrorKind::CrossThreadCapture { .. });
        finish_and_check(cx, one.id(), dst.id(), 1)?;
        check_eq!(other.read()?, vec![0u32; 8], "the refused launch never ran");
        Ok(())
    },
};

/// A capture scope dropped by an early return aborts the capture: the device
/// is not left capturing, and nothing recorded runs.
///
/// Mutation: make `CaptureScope::drop` do nothing → red.
pub const C6_CAPTURE_SCOPE_ABORTS_ON_EARLY_RETURN: Case = Case {
    name: "c6_capture_scope_aborts_on_early_return",
    rule: Rule::C6,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 8])?;
        let dst = d.buffer_from(&[0u32; 8])?;
        let attempt = || -> seam::Result<()> {
            let _scope = d.capture()?;
            d.launch(&ops::add(one.id(), dst.id(), dst.id(), 8))?;
            d.launch(&ops::add(one.id(), dst.id(), dst.id(), 9))?; // out of range: `?` returns early
            unreachable!("the bad launch is refused");
        };
        expect_err!(attempt(), ErrorKind::OutOfRange { .. });
        check!(!d.capturing(), "the scope aborted the capture");
        check_eq!(
            d.live().backend.graphs,
            0,
            "an aborted capture leaves no graph"
        );
        dst.write(&[0; 8])?;
        d.launch(&ops::add(one.id(), dst.id(), dst.id(), 8))?;
        check_eq!(
            dst.read()?,
            vec![1u32; 8],
            "eager work runs after the abort"
        );
        Ok(())
    },
};

/// After a run of refused calls, the device still works and nothing leaks:
/// core's and the backend's counts both return to zero.
///
/// Mutation: make `State::sweep` never free released buffers → red at "core buffers".
pub const C6_NOTHING_LEAKS_AFTER_ERRORS: Case = Case {
    name: "c6_nothing_leaks_after_errors",
    rule: Rule::C6,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let start = d.live();
        {
            let one = d.buffer_from(&[1u32; 8])?;
            let dst = d.buffer_from(&[0u32; 8])?;
            for _ in 0..3 {
                let _ = d.low_level().end_capture_into_current();
                let _ = d.replay(GraphRef::Handle(GraphId::unknown()));
                d.low_level().begin_capture()?;
                let _ = d.low_level().begin_capture();
                let _ = d.alloc(DType::F32, 4);
                let _ = d.free(dst.id());
                d.launch(&ops::add(one.id(), dst.id(), dst.id(), 8))?;
                let g = d.low_level().end_capture_graph()?;
                d.replay(GraphRef::Handle(g))?;
                expect_err!(d.free(dst.id()), ErrorKind::BufferInUse { .. });
                d.destroy_graph(g)?;
            }
            check_eq!(dst.read()?, vec![3u32; 8], "three replays ran");
            d.low_level().begin_capture()?;
            d.low_level().abort_capture()?;
        }
        let end = d.live();
        check_eq!(end.buffers, start.buffers, "core buffers");
        check_eq!(end.graphs, start.graphs, "core graphs");
        check_eq!(end.backend, start.backend, "backend resources");
        check!(!end.capturing, "no capture left open");
        Ok(())
    },
};
