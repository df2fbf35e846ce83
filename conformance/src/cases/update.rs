//! C13 graph update without re-capture: `rebind` (buffers) and
//! `update_params` (scalars and dims) of a captured graph behave exactly as
//! a fresh capture over the new bindings would, never silently.

use crate::{check, check_eq, expect_err, Case, Rule, Tag, ONCE};
use seam::{ops, Buffer, Change, Device, ErrorKind, Graph};

const CAP: &[Tag] = &[Tag::NeedsCapture];

/// The captured work every C13 case updates: `t = fma(2, a, 1)` into `out`
/// (copy a → out, scale_add over out), then `out = out + b`.
pub(super) fn capture(
    d: &Device,
    a: &Buffer<f32>,
    b: &Buffer<f32>,
    out: &Buffer<f32>,
) -> seam::Result<Graph> {
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
pub(super) fn inputs(d: &Device, n: usize, ka: f32, kb: f32) -> seam::Result<[Buffer<f32>; 3]> {
    Ok([
        d.buffer_from(&vals(n, ka))?,
        d.buffer_from(&vals(n, kb))?,
        d.buffer_from(&vec![0.0f32; n])?,
    ])
}

pub(super) fn vals(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| k + i as f32 * 0.25).collect()
}

/// Rebind `a` and `out` of a captured graph to fresh buffers; a replay then
/// gives, bit for bit, what a fresh capture over the new buffers gives, and
/// the old buffers keep what the last replay before the rebind left. With
/// `b` dropped by its owner (the graph holds it), updates of the launch
/// that binds it still apply, and a change binding it to another launch is
/// refused.
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
/// updated". Also red: an update refusing every launch that binds a
/// buffer its owner dropped ("unknown or freed buffer", which the graph
/// still holds).
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
        // `b` dropped: the graph holds it, and updates of the launch that
        // binds it still apply (a rebind, then a rebind with a parameter
        // change in one call), computing what they did.
        let add = ops::add(out2.id(), b.id(), out2.id(), n as u32).params;
        let b_id = b.id();
        drop(b);
        // No change binds it anew: launch 0 (the copy) never bound it.
        expect_err!(
            g.device().update(
                &g,
                &Change::launches(&[(0, ops::copy(b_id, out2.id(), n as u32))])
            ),
            ErrorKind::UnknownBuffer { .. }
        );
        let out4 = d.buffer_from(&vec![0.0f32; n])?;
        g.device()
            .update(&g, &Change::rebinds(&[(out2.id(), out4.id())]))?;
        g.replay()?;
        check!(
            d.read_bytes(out4.id())? == rebound,
            "rebound again after b was dropped: the result changed"
        );
        let mut back = Change::rebinds(&[(out4.id(), out2.id())]);
        back.push(Change::Params {
            index: 2,
            params: add,
        });
        out2.write(&vec![0.0f32; n])?;
        g.device().update(&g, &back)?;
        g.replay()?;
        check!(
            d.read_bytes(out2.id())? == rebound,
            "rebound back with new parameters after b was dropped: the result changed"
        );
        cx.digest_bytes(&rebound);
        Ok(())
    },
};

/// A graph rebound back and forth between buffer sets (double-buffered
/// inputs), with a parameter change and back on the way, computes at every
/// replay what the last update asked for, into that set's output only; a
/// set whose buffers were freed after the graph left them is never used
/// again, and a set made later computes right. Every input value is new at
/// every step (small multiples of 1/4: exact in f32 whichever way a device
/// rounds `2a + 1 + b`), so a replay that ran an earlier step's bindings or
/// parameters shows. Backends that keep an exec per launch set (the stream
/// backend where its driver keeps them, `backends/streamgraph/src/execs.rs`:
/// CUDA unless `SEAM_CUDA_KEEP_EXECS=0`) switch between them here.
///
/// Mutation: the CPU backend answering Ok to an update of fewer than 3
/// launches without patching (a parameter change alone) → red on cpu:0 at
/// "step 4 (set 0)". The stream backend's `Runs::swap` leaving the current
/// exec in place (the update answered Ok, nothing switched) turns its
/// fake-driver test of the same walk red, and this case red on cuda:0 at
/// "step 2 (set 1)" (one H100, 2026-12-05, docs/results/h100-7bfba6a/).
/// What a free does to the execs kept for a set is held
/// by the stream backend's own tests: buffer handles are never reused, so
/// no update can name a freed set again.
pub const C13_UPDATES_BACK_AND_FORTH: Case = Case {
    name: "c13_updates_back_and_forth",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = 64;
        let b = d.buffer_from(&vals(n, -3.0))?;
        let set = |k: f32| -> seam::Result<(Buffer<f32>, Buffer<f32>)> {
            Ok((
                d.buffer_from(&vals(n, k))?,
                d.buffer_from(&vec![0.0f32; n])?,
            ))
        };
        let mut sets = vec![Some(set(1.0)?), Some(set(2.0)?), Some(set(3.0)?)];
        let g = {
            let (a0, out0) = sets[0].as_ref().expect("made above");
            capture(d, a0, &b, out0)?
        };
        // scale_add's parameters with factor `f` (its buffers are not in them).
        let scale = |f: f32| ops::scale_add(b.id(), b.id(), n as u32, f, 1.0).params;
        // (set, scale factor); the set freed after step 7 and the one made
        // after it (3) at 8 on.
        let steps = [
            (1, 2.0),
            (0, 2.0),
            (1, 2.0),
            (0, 3.0),
            (0, 2.0),
            (2, 2.0),
            (1, 2.0),
            (0, 2.0),
            (3, 2.0),
            (3, 2.0),
            (0, 2.0),
            (3, 2.0),
        ];
        let (mut cur, mut factor) = (0usize, 2.0f32);
        let mut last: Vec<Option<Vec<f32>>> = vec![None; 4];
        for (step, &(to, f)) in steps.iter().enumerate() {
            if step == 8 {
                // Set 1 was left at step 7: its buffers go back to their owner.
                drop(sets[1].take());
                last[1] = None;
                sets.push(Some(set(4.0)?));
            }
            let k = 10.0 + step as f32;
            let input = vals(n, k);
            let (a_to, out_to) = sets[to].as_ref().expect("a live set");
            a_to.write(&input)?;
            let mut changes = Vec::new();
            if to != cur {
                let (a_cur, out_cur) = sets[cur].as_ref().expect("the graph's set");
                changes = Change::rebinds(&[(a_cur.id(), a_to.id()), (out_cur.id(), out_to.id())]);
            }
            if f != factor {
                changes.push(Change::Params {
                    index: 1,
                    params: scale(f),
                });
            }
            if !changes.is_empty() {
                g.device().update(&g, &changes)?;
            }
            (cur, factor) = (to, f);
            g.replay()?;
            let want: Vec<f32> = input
                .iter()
                .zip(vals(n, -3.0))
                .map(|(a, b)| a * f + 1.0 + b)
                .collect();
            check_eq!(out_to.read()?, want, "step {step} (set {to})");
            last[to] = Some(want);
            for (i, s) in sets.iter().enumerate() {
                if let (Some((_, out)), Some(kept)) = (s, &last[i]) {
                    check_eq!(
                        &out.read()?,
                        kept,
                        "step {step}: set {i}'s output, not the replay's"
                    );
                }
            }
        }
        let (_, out3) = sets[3].as_ref().expect("the last set");
        cx.digest_bytes(&d.read_bytes(out3.id())?);
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

/// Queue four adds over [`AHEAD`] elements, then three replays of `g`, so
/// the replays are still queued when the caller's update comes, however
/// fast the device runs the graph (an optimised CPU reference drained
/// three replays of a 256-element add before the update, and the queued
/// cases could no longer tell). The work's buffer is returned: the caller
/// holds it past its update, so nothing about freeing it can drain the
/// queue first.
fn three_replays_behind_queued_work(d: &Device, g: &Graph) -> seam::Result<Buffer<u32>> {
    let ahead = d.buffer_from(&vec![1u32; AHEAD])?;
    for _ in 0..4 {
        d.launch(&ops::add(ahead.id(), ahead.id(), ahead.id(), AHEAD as u32))?;
    }
    for _ in 0..3 {
        g.replay()?;
    }
    Ok(ahead)
}

pub const C13_QUEUED_REPLAYS_KEEP_OLD_BINDINGS: Case = Case {
    name: "c13_queued_replays_keep_old_bindings",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 256])?;
        let (x, y) = (d.buffer_from(&[0u32; 256])?, d.buffer_from(&[100u32; 256])?);
        let s = d.capture()?;
        d.launch(&ops::add(x.id(), one.id(), x.id(), 256))?;
        let g = s.end_graph()?;
        let _ahead = three_replays_behind_queued_work(d, &g)?;
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

/// Replays queued before a parameter update run with the old parameters;
/// the replay queued after it, with the new ones. No host call in
/// between: adds over 4 Mi elements, three replays of `x = x + 1`
/// (scale_add), the update to `x = x + 10` and one more replay are queued
/// back to back, so the replays are still queued at the update. A backend
/// that keeps parameters outside its recorded commands (the Vulkan
/// backend's parameter blocks) must not let the queued replays see the new
/// ones.
///
/// Mutation: the CPU backend's `update_launches` patching the launch list
/// only when no queued replay holds it (`Arc::get_mut`) and returning Ok
/// otherwise → red on cpu:0 at "three replays of x + 1, then one of x +
/// 10: [4.0, …] != [13.0, …]" (the replay after the update ran the old
/// parameters).
pub const C13_QUEUED_REPLAYS_KEEP_OLD_PARAMS: Case = Case {
    name: "c13_queued_replays_keep_old_params",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = 256;
        let x = d.buffer_from(&vec![0.0f32; n])?;
        let s = d.capture()?;
        d.launch(&ops::scale_add(x.id(), x.id(), n as u32, 1.0, 1.0))?;
        let g = s.end_graph()?;
        let _ahead = three_replays_behind_queued_work(d, &g)?;
        let params = ops::scale_add(x.id(), x.id(), n as u32, 1.0, 10.0).params;
        g.device()
            .update(&g, &[Change::Params { index: 0, params }])?;
        g.replay()?;
        check_eq!(
            x.read()?,
            vec![13.0f32; n],
            "three replays of x + 1, then one of x + 10"
        );
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

/// A rebind that makes two independent launches depend on each other (the
/// second now reads what the first writes, or both write one buffer)
/// gives what a fresh capture over the new bindings gives: capture order
/// holds for the dependence the update made. A backend that orders only
/// the launches that depended on each other at capture (the Vulkan backend
/// records no barrier between independent dispatches) must order them
/// again, or refuse the update and let core capture anew.
///
/// Mutation: core's `apply` taking a backend's refusal of an in-place
/// update as done (`Err(_) => patched_partly = true` → `native = true`) →
/// red on vulkan:0 at "read after write made by the rebind" (the Vulkan
/// backend refuses an update that leaves two dispatches between two
/// barriers touching one buffer, and its graph keeps the old bindings).
pub const C13_REBIND_MAKES_LAUNCHES_DEPENDENT: Case = Case {
    name: "c13_rebind_makes_launches_dependent",
    rule: Rule::C13,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let n = 64;
        let (a, b) = (d.buffer_from(&vals(n, 1.0))?, d.buffer_from(&vals(n, 5.0))?);
        let zeros = vec![0.0f32; n];
        let (x, y) = (d.buffer_from(&zeros)?, d.buffer_from(&zeros)?);
        // Independent at capture: x = a, y = b.
        let independent = || -> seam::Result<Graph> {
            let s = d.capture()?;
            d.launch(&ops::copy(a.id(), x.id(), n as u32))?;
            d.launch(&ops::copy(b.id(), y.id(), n as u32))?;
            s.end_graph()
        };
        let g = independent()?;
        g.replay()?;
        check_eq!(y.read()?, vals(n, 5.0), "y before the rebind");
        // b → x: the second copy reads what the first writes.
        d.update(&g, &Change::rebinds(&[(b.id(), x.id())]))?;
        x.write(&zeros)?;
        y.write(&zeros)?;
        g.replay()?;
        check_eq!(
            y.read()?,
            vals(n, 1.0),
            "read after write made by the rebind"
        );
        // y → x in a fresh graph: both copies write x, the second last.
        let g = independent()?;
        d.update(&g, &Change::rebinds(&[(y.id(), x.id())]))?;
        x.write(&zeros)?;
        g.replay()?;
        check_eq!(
            x.read()?,
            vals(n, 5.0),
            "write after write made by the rebind"
        );
        cx.digest_bytes(&d.read_bytes(x.id())?);
        Ok(())
    },
};
