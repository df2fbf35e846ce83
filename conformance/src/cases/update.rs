//! C13 graph update without re-capture: `rebind` (buffers) and
//! `update_params` (scalars and dims) of a captured graph behave exactly as
//! a fresh capture over the new bindings would, never silently.

use crate::{check, check_eq, expect_err, Case, CaseResult, Ctx, Rule, Tag, ONCE};
use seam::{ops, Buffer, Change, Device, ErrorKind, EventKind, Graph, UpdateSupport};

const CAP: &[Tag] = &[Tag::NeedsCapture];

/// The captured work every C13 case updates: `t = fma(2, a, 1)` into `out`
/// (copy a → out, scale_add over out), then `out = out + b`.
fn capture(d: &Device, a: &Buffer<f32>, b: &Buffer<f32>, out: &Buffer<f32>) -> seam::Result<Graph> {
    capture_with(d, a, b, out, (a.len() as u32, 2.0, 1.0))
}

/// [`capture`] with scale_add's length and factors given.
fn capture_with(
    d: &Device,
    a: &Buffer<f32>,
    b: &Buffer<f32>,
    out: &Buffer<f32>,
    (m, x, y): (u32, f32, f32),
) -> seam::Result<Graph> {
    let n = a.len() as u32;
    let s = d.capture()?;
    d.launch(&ops::copy(a.id(), out.id(), n))?;
    d.launch(&ops::scale_add(out.id(), out.id(), m, x, y))?;
    d.launch(&ops::add(out.id(), b.id(), out.id(), n))?;
    s.end_graph()
}

/// The inputs `a`, `b` (n values from `ka`, `kb`) and a zeroed output.
fn inputs(d: &Device, n: usize, ka: f32, kb: f32) -> seam::Result<[Buffer<f32>; 3]> {
    Ok([
        d.buffer_from(&vals(n, ka))?,
        d.buffer_from(&vals(n, kb))?,
        d.buffer_from(&vec![0.0f32; n])?,
    ])
}

fn vals(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| k + i as f32 * 0.25).collect()
}

/// Rebind `a` and `out` of a captured graph to fresh buffers; a replay then
/// gives, bit for bit, what a fresh capture over the new buffers gives, and
/// the old buffers keep what the last replay before the rebind left.
///
/// Mutation: `apply` in core/src/device/update.rs updating its tables but
/// neither patching nor re-recording the backend's graph (the backend's
/// `update_launches` answer replaced by `Ok`) → red on cpu:0 at "rebound
/// replay vs a fresh capture over the new buffers: they differ". Vulkan,
/// on a device without `UPDATE_AFTER_BIND` (Debian 12's lavapipe, Mesa
/// 22.3): rewriting a bound descriptor set and not recording the command
/// buffer again → green on lavapipe, red on vulkan:0 under
/// `SEAM_VULKAN_VALIDATION=sync` at "drop: validation: replay: … [
/// UNASSIGNED-CoreValidation-DrawState-InvalidCommandBuffer-VkDescriptorSet
/// ] … invalid because bound VkDescriptorSet 0x…[] was destroyed or
/// updated".
pub const C13_REBIND_EQUALS_FRESH_CAPTURE: Case = Case {
    name: "c13_rebind_equals_fresh_capture",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = 64;
        let [a, b, out] = inputs(d, n, 1.0, -3.0)?;
        let g = capture(d, &a, &b, &out)?;
        g.replay()?;
        let before = d.read_bytes(out.id())?;
        let (a2, out2) = (
            d.buffer_from(&vals(n, 7.5))?,
            d.buffer_from(&vec![0.0f32; n])?,
        );
        g.device().update(
            &g,
            &Change::rebinds(&[(a.id(), a2.id()), (out.id(), out2.id())]),
        )?;
        g.replay()?;
        let rebound = d.read_bytes(out2.id())?;
        let out3 = d.buffer_from(&vec![0.0f32; n])?;
        let fresh = capture(d, &a2, &b, &out3)?;
        fresh.replay()?;
        check!(
            rebound == d.read_bytes(out3.id())?,
            "rebound replay vs a fresh capture over the new buffers: they differ"
        );
        check!(
            d.read_bytes(out.id())? == before,
            "the old output changed after the rebind"
        );
        check_eq!(a.read()?, vals(n, 1.0), "the old input");
        cx.digest_bytes(&rebound);
        Ok(())
    },
};

/// Replays queued before a rebind run with the old bindings; the replay
/// queued after it, with the new ones. No host call in between: four adds
/// over 4 Mi elements, three replays, the rebind and one more replay are
/// queued back to back, so the replays are still queued at the rebind.
///
/// Mutation: the CPU backend's `update_launches` patching the launch list
/// only when no queued replay holds it (`Arc::get_mut`) and returning Ok
/// otherwise (HIP's "success while keeping the stale packet") → red on
/// cpu:0 at "the three replays before the rebind: [4, …] != [3, …]" (the
/// replay after the rebind still ran on the old buffer). Vulkan: the
/// backend's `update_launches` rewriting the graph's descriptor sets
/// without waiting for its pending replays → red on vulkan:0 (lavapipe) at
/// "the three replays before the rebind: [1, …] != [3, …]" (3 of 4 runs:
/// the queued replays read the new sets when they ran), and every run
/// under `SEAM_VULKAN_VALIDATION=sync` at "update_launches: Validation
/// Error: [ VUID-vkUpdateDescriptorSets-None-03047 ] … in use by a command
/// buffer".
/// Elements of each add queued ahead of the replays.
const AHEAD: usize = 1 << 22;

pub const C13_QUEUED_REPLAYS_KEEP_OLD_BINDINGS: Case = Case {
    name: "c13_queued_replays_keep_old_bindings",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 256])?;
        let (x, y) = (d.buffer_from(&[0u32; 256])?, d.buffer_from(&[100u32; 256])?);
        let ahead = d.buffer_from(&vec![1u32; AHEAD])?;
        let s = d.capture()?;
        d.launch(&ops::add(x.id(), one.id(), x.id(), 256))?;
        let g = s.end_graph()?;
        // Work queued ahead of the replays, long enough that they are still
        // queued when the rebind comes, however fast the device runs a
        // 256-element add (an optimised CPU reference drained three such
        // replays before the rebind, and the case could no longer tell).
        for _ in 0..4 {
            d.launch(&ops::add(ahead.id(), ahead.id(), ahead.id(), AHEAD as u32))?;
        }
        for _ in 0..3 {
            g.replay()?;
        }
        g.device()
            .update(&g, &Change::rebinds(&[(x.id(), y.id())]))?;
        g.replay()?;
        check_eq!(
            x.read()?,
            vec![3u32; 256],
            "the three replays before the rebind"
        );
        check_eq!(y.read()?, vec![101u32; 256], "the replay after the rebind");
        Ok(())
    },
};

/// `update_params` of one launch (scale_add's factors and its length)
/// equals a fresh capture with those parameters, and the other launches
/// keep theirs.
///
/// Mutation: `update_params` building the new call with the recorded
/// parameters instead of the given ones → red on cpu:0 at "updated replay
/// vs a fresh capture with the new parameters: they differ".
pub const C13_UPDATE_PARAMS_EQUALS_FRESH_CAPTURE: Case = Case {
    name: "c13_update_params_equals_fresh_capture",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = 64;
        let [a, b, out] = inputs(d, n, 1.0, 0.5)?;
        let g = capture(d, &a, &b, &out)?;
        let mut p = ops::scale_add(out.id(), out.id(), 48, -0.5, 3.0).params;
        g.device().update(
            &g,
            &[Change::Params {
                index: 1,
                params: p,
            }],
        )?;
        g.replay()?;
        let updated = d.read_bytes(out.id())?;
        let out2 = d.buffer_from(&vec![0.0f32; n])?;
        let fresh = capture_with(d, &a, &b, &out2, (48, -0.5, 3.0))?;
        fresh.replay()?;
        check!(
            updated == d.read_bytes(out2.id())?,
            "updated replay vs a fresh capture with the new parameters: they differ"
        );
        p.d0 = n as u32 + 1;
        expect_err!(
            g.device().update(
                &g,
                &[Change::Params {
                    index: 1,
                    params: p
                }]
            ),
            ErrorKind::OutOfRange { .. }
        );
        cx.digest_bytes(&updated);
        Ok(())
    },
};

/// `update_launch` moves a launch's view (a KV-cache write going to the
/// next slot) and `update_launches` changes several launches as one
/// update: each equals a fresh capture over the new views, the old slot
/// keeps what the replays before the move wrote, every element outside
/// the written slots is untouched, and a bad batch (one index twice, one
/// view past its buffer) is a named error that changes nothing.
///
/// Mutation: `Device::update_launches` keeping the recorded views (each
/// change's `buffers` set back to the recorded launch's before `apply`) →
/// red on cpu:0 (tried: "slot 0 after the move: [3.0, …] != [2.0, …]": the
/// replay wrote slot 0 again).
pub const C13_UPDATE_LAUNCH_MOVES_A_VIEW: Case = Case {
    name: "c13_update_launch_moves_a_view",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let (slot, slots) = (8usize, 4usize);
        let k = d.buffer_from(&vals(slot, 1.0))?;
        let kv = d.buffer_from(&vec![-1.0f32; slot * slots])?;
        let write = |s: usize| ops::copy(k.id(), kv.id().view(s * slot, slot), slot as u32);
        let scope = d.capture()?;
        d.launch(&ops::scale_add(k.id(), k.id(), slot as u32, 1.0, 1.0))?;
        d.launch(&write(0))?;
        let g = scope.end_graph()?;
        g.replay()?; // k += 1, slot 0 = k
        let slot0 = d.read_range::<f32>(kv.id(), 0, slot)?;
        g.device().update(
            &g,
            &[Change::Launch {
                index: 1,
                call: write(1),
            }],
        )?;
        g.replay()?; // k += 1, slot 1 = k
        let got = kv.read()?;
        let kk = k.read()?;
        check_eq!(got[..slot].to_vec(), slot0, "slot 0 after the move");
        check_eq!(got[slot..2 * slot].to_vec(), kk, "slot 1 after the move");
        check!(
            got[2 * slot..].iter().all(|&v| v == -1.0),
            "an element outside the written slots changed: {got:?}"
        );
        // Two launches as one update: k's increment becomes 10, the write
        // goes to slot 3; the same as a fresh capture of those launches.
        g.device().update(
            &g,
            &Change::launches(&[
                (1, write(3)),
                (0, ops::scale_add(k.id(), k.id(), slot as u32, 1.0, 10.0)),
            ]),
        )?;
        g.replay()?;
        let fresh_kv = d.buffer_from(&got)?;
        let fresh_k = d.buffer_from(&kk)?;
        let scope = d.capture()?;
        d.launch(&ops::scale_add(
            fresh_k.id(),
            fresh_k.id(),
            slot as u32,
            1.0,
            10.0,
        ))?;
        d.launch(&ops::copy(
            fresh_k.id(),
            fresh_kv.id().view(3 * slot, slot),
            slot as u32,
        ))?;
        let fresh = scope.end_graph()?;
        fresh.replay()?;
        check_eq!(
            kv.read()?,
            fresh_kv.read()?,
            "batched update vs a fresh capture"
        );
        let before = kv.read()?;
        expect_err!(
            g.device()
                .update(&g, &Change::launches(&[(1, write(2)), (1, write(0))])),
            ErrorKind::InvalidUpdate { .. }
        );
        expect_err!(
            g.device().update(
                &g,
                &Change::launches(&[
                    (1, write(2)),
                    (0, ops::copy(k.id(), kv.id().view(31, 8), 8))
                ])
            ),
            ErrorKind::ViewOutOfRange { .. } | ErrorKind::UpdateChangesOp { .. }
        );
        g.replay()?;
        let after = kv.read()?;
        check_eq!(
            after[..3 * slot].to_vec(),
            before[..3 * slot].to_vec(),
            "a refused batch changed a slot it named"
        );
        cx.digest_bytes(&d.read_bytes(kv.id())?);
        Ok(())
    },
};

/// Every bad update is a named error and changes nothing: a new buffer of
/// another dtype, one too short for a launch, another device's buffer, a
/// freed one, a buffer the graph does not use, an update inside a capture,
/// a launch index past the end, parameters a launch cannot take, a launch
/// of the same op on another element type. Afterwards
/// the graph still gives its original result.
///
/// Mutation: drop the dtype check in `Device::rebind` → red on cpu:0 at
/// "expected ErrorKind::RebindMismatch { .. }, got error: … rebind: copy:
/// binding `dst` must be i32, buffer is f32" (lowering still refuses the
/// launch, but not by the name that says what the rebind did wrong).
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
