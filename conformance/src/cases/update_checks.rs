//! C13 graph update: what an update refuses (named errors that change
//! nothing), what rebinds leave allocated, and what the device reports of
//! its updates.

use super::update::{capture, inputs, vals};
use crate::{check, check_eq, expect_err, Case, CaseResult, Ctx, Rule, Tag, ONCE};
use seam::{ops, Change, ErrorKind, EventKind, UpdateSupport};

const CAP: &[Tag] = &[Tag::NeedsCapture];

/// Every bad update is a named error and changes nothing: a new buffer of
/// another dtype, one too short for a launch, another device's buffer, a
/// freed one, a buffer the graph does not use, an update inside a capture,
/// a launch index past the end, parameters a launch cannot take, a launch
/// of the same op on another element type, one buffer rebound twice in one
/// call. Afterwards
/// the graph still gives its original result.
///
/// Mutation: drop the dtype check in `Device::rebind` → red on cpu:0 at
/// "expected ErrorKind::RebindMismatch { .. }, got error: … rebind: copy:
/// binding `dst` must be i32, buffer is f32" (lowering still refuses the
/// launch, but not by the name that says what the rebind did wrong). Also
/// red: a buffer rebound twice in one call taken as its first pair.
pub const C13_BAD_UPDATES_REFUSED: Case = Case {
    name: "c13_bad_updates_refused",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = 32;
        let [a, b, out] = inputs(d, n, 1.0, 2.0)?;
        let g = capture(d, &a, &b, &out)?;
        g.replay()?;
        let want = d.read_bytes(out.id())?;
        let ints = d.buffer_from(&vec![0i32; n])?;
        let short = d.buffer_from(&vec![0.0f32; n - 1])?;
        let other = (cx.reference)();
        let foreign = other.buffer_from(&vec![0.0f32; n])?;
        let freed = d.alloc(seam::DType::F32, n)?;
        d.free(freed)?;
        let unused = d.buffer_from(&vec![0.0f32; n])?;
        let e = expect_err!(
            g.device()
                .update(&g, &Change::rebinds(&[(a.id(), ints.id())])),
            ErrorKind::RebindMismatch { .. }
        );
        check!(e.call == "update", "the error names the call: {e}");
        expect_err!(
            g.device()
                .update(&g, &Change::rebinds(&[(a.id(), short.id())])),
            ErrorKind::OutOfRange { .. }
        );
        expect_err!(
            g.device()
                .update(&g, &Change::rebinds(&[(a.id(), foreign.id())])),
            ErrorKind::ForeignBuffer { .. }
        );
        expect_err!(
            g.device().update(&g, &Change::rebinds(&[(a.id(), freed)])),
            ErrorKind::UnknownBuffer { .. }
        );
        expect_err!(
            g.device()
                .update(&g, &Change::rebinds(&[(unused.id(), a.id())])),
            ErrorKind::NotUsedByGraph { .. }
        );
        // One good pair and one bad: nothing of it applies.
        let a2 = d.buffer_from(&vals(n, 9.0))?;
        expect_err!(
            g.device().update(
                &g,
                &Change::rebinds(&[(a.id(), a2.id()), (b.id(), ints.id())])
            ),
            ErrorKind::RebindMismatch { .. }
        );
        let p = ops::scale_add(out.id(), out.id(), n as u32, 1.0, 0.0).params;
        // One buffer rebound twice in one call, alone or beside a parameter change.
        let a3 = d.buffer_from(&vals(n, 5.0))?;
        let mut twice = Change::rebinds(&[(a.id(), a2.id()), (a.id(), a3.id())]);
        let e = expect_err!(
            g.device().update(&g, &twice),
            ErrorKind::InvalidUpdate { .. }
        );
        check!(
            e.to_string().contains("rebound twice"),
            "the error says why: {e}"
        );
        twice.push(Change::Params {
            index: 1,
            params: p,
        });
        expect_err!(
            g.device().update(&g, &twice),
            ErrorKind::InvalidUpdate { .. }
        );
        expect_err!(
            g.device().update(
                &g,
                &[Change::Params {
                    index: 3,
                    params: p
                }]
            ),
            ErrorKind::NoSuchLaunch { .. }
        );
        let mut bad = p;
        bad.d0 = 0;
        expect_err!(
            g.device().update(
                &g,
                &[Change::Params {
                    index: 1,
                    params: bad
                }]
            ),
            ErrorKind::InvalidParam { .. } | ErrorKind::ZeroSize { .. }
        );
        // The same op on another element type: its kernel was chosen for
        // the recorded one, so only a new capture may change it.
        let ints2 = d.buffer_from(&vec![0i32; n])?;
        expect_err!(
            g.device().update(
                &g,
                &Change::launches(&[(0, ops::copy(ints.id(), ints2.id(), n as u32))])
            ),
            ErrorKind::UpdateChangesDtype { index: 0, .. }
        );
        let s = d.capture()?;
        expect_err!(
            g.device()
                .update(&g, &Change::rebinds(&[(a.id(), a2.id())])),
            ErrorKind::UpdateInCapture
        );
        expect_err!(
            g.device().update(
                &g,
                &[Change::Params {
                    index: 1,
                    params: p
                }]
            ),
            ErrorKind::UpdateInCapture
        );
        s.end_graph()?;
        g.replay()?;
        check!(
            d.read_bytes(out.id())? == want,
            "after the refused updates the graph's result changed"
        );
        Ok(())
    },
};

/// 10,000 rebinds back and forth between two buffers leave the device's
/// and the backend's live buffers and graphs where they were, and the
/// graph still computes.
///
/// Mutations: `rerecord` (core's emulated update) not destroying the graph
/// it replaced → red on wgpu:0 (lavapipe), which updates by re-recording
/// (vulkan:0 too, before it patched in place), at "backend graphs after
/// 10,000 rebinds: 10001 != 1"; the CPU backend's in-place update leaving
/// a copy of the graph behind → red on cpu:0 with the same message.
pub const C13_REBINDS_LEAVE_RESOURCES_FLAT: Case = Case {
    name: "c13_rebinds_leave_resources_flat",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 16])?;
        let (x, y) = (d.buffer_from(&[0u32; 16])?, d.buffer_from(&[0u32; 16])?);
        let s = d.capture()?;
        d.launch(&ops::add(x.id(), one.id(), x.id(), 16))?;
        let g = s.end_graph()?;
        g.replay()?;
        d.synchronize()?;
        let start = d.live();
        for i in 0..10_000 {
            let (from, to) = if i % 2 == 0 { (&x, &y) } else { (&y, &x) };
            g.device()
                .update(&g, &Change::rebinds(&[(from.id(), to.id())]))?;
        }
        g.replay()?;
        d.synchronize()?;
        let end = d.live();
        check_eq!(end.graphs, start.graphs, "graphs after 10,000 rebinds");
        check_eq!(end.buffers, start.buffers, "buffers after 10,000 rebinds");
        check_eq!(
            end.backend.graphs,
            start.backend.graphs,
            "backend graphs after 10,000 rebinds"
        );
        check_eq!(
            end.backend.buffers,
            start.backend.buffers,
            "backend buffers after 10,000 rebinds"
        );
        check_eq!(x.read()?, vec![2u32; 16], "the graph still adds into x");
        Ok(())
    },
};

/// The device's update report matches what updates do: a traced update is
/// recorded as native exactly when the device reports `Native`, and a
/// device that captures never reports `Unsupported`.
///
/// Mutation: core re-recording every update even where the backend
/// patches in place (ignoring `update_support`) → red on cpu:0 at "cpu
/// reports Native but the update was re-recorded".
pub const C13_UPDATE_REPORT_MATCHES_BEHAVIOUR: Case = Case {
    name: "c13_update_report_matches_behaviour",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| update_report(cx),
};

fn update_report(cx: &Ctx) -> CaseResult {
    let d = &cx.dev;
    let support = d.update_support();
    check!(
        !matches!(support, UpdateSupport::Unsupported(_)),
        "a device that captures reports update {support:?}"
    );
    let one = d.buffer_from(&[1u32; 4])?;
    let (x, y) = (d.buffer_from(&[0u32; 4])?, d.buffer_from(&[0u32; 4])?);
    let s = d.capture()?;
    d.launch(&ops::add(x.id(), one.id(), x.id(), 4))?;
    let g = s.end_graph()?;
    d.set_tracing(true);
    g.device()
        .update(&g, &Change::rebinds(&[(x.id(), y.id())]))?;
    d.set_tracing(false);
    let events = d.take_trace_log("c13")?.events;
    let natives: Vec<bool> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Update { graph, native, .. } if graph == Some(g.id().number()) => {
                Some(native)
            }
            _ => None,
        })
        .collect();
    check_eq!(natives.len(), 1, "update events for the one rebind");
    let want = support == UpdateSupport::Native;
    check!(
        natives[0] == want,
        "{} reports {support:?} but the update was {}",
        cx.registration.name,
        if natives[0] {
            "patched in place"
        } else {
            "re-recorded"
        }
    );
    Ok(())
}
