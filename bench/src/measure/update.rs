//! Graph updates (C13): rebind vs re-capture vs copy-in against a
//! plain replay of the same work, every mode in one interleaved loop.

use super::{err, submit, us, Config, Meta, Res, Sink};
use crate::stats::{reps_for, summarize};
use seam::{ops, BufferId, Change, Device, Graph, OpCall, UpdateSupport};
use std::time::Instant;

/// The buffers a graph update swaps: `a`, what the graph was captured over
/// (the workload's input and output); `b`, the other set a rebind switches
/// to; `fresh`, a new input copied into `a` before a replay (PyTorch's
/// static-buffer pattern). Each holds `len` floats; `x0` is the
/// workload's input, from which the update paths are checked.
#[derive(Clone, Copy, Debug)]
pub(super) struct Swap<'a> {
    pub(super) a: BufferId,
    pub(super) b: BufferId,
    pub(super) fresh: BufferId,
    pub(super) len: u32,
    pub(super) x0: &'a [f32],
}

/// `calls` with every use of `from` replaced by `to`.
fn swapped(calls: &[OpCall], from: BufferId, to: BufferId) -> Vec<OpCall> {
    calls
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.buffers
                .iter_mut()
                .filter(|v| v.buffer == from)
                .for_each(|v| v.buffer = to);
            c
        })
        .collect()
}

/// The update modes, in the order each round runs them.
const UPDATE_MODES: [&str; 4] = ["replay", "rebind", "recapture", "copyin"];

/// Median of a round's samples.
pub(crate) fn median(v: &[f64]) -> f64 {
    summarize(v).median
}

/// A per-round ratio: its median and p99 over the rounds (`metric`), and
/// its smallest and largest round (`metric_range`: min in the median
/// column, max in the p99 column). Dimensionless, not µs.
pub(crate) fn ratio_rows(
    m: &Meta,
    mode: &str,
    metric: &str,
    per_round: &[f64],
    out: &mut dyn Sink,
) {
    out.row(m.row(mode, metric, per_round));
    let mut range = m.row(mode, &format!("{metric}_range"), per_round);
    range.median_us = per_round.iter().copied().fold(f64::MAX, f64::min);
    range.p99_us = per_round.iter().copied().fold(f64::MIN, f64::max);
    out.row(range);
}

/// Graph updates (C13) against a plain replay of the same work, every mode
/// in one interleaved loop (replay, rebind, recapture, copyin, replay, …;
/// `cfg.rounds` rounds of k iterations each), each iteration queued and
/// waited for on its own:
///
/// - `replay`: the captured graph, as is;
/// - `rebind`: `Graph::rebind` to the other buffer set, then replay;
/// - `recapture`: capture the same calls anew over the other set,
///   `end_graph` (instantiate), replay, drop the previous graph;
/// - `copyin`: a device-to-device `copy` of a fresh input into the captured
///   buffer, then replay of the plain graph.
///
/// Rows: `submit_us` / `e2e_us` / `update_us` (the update alone) over every
/// iteration, and per-round ratios of medians (`x_replay`, `x_rebind`).
/// `check` reads a buffer after one step from the workload's input and
/// compares it with the eager result.
pub(super) fn updates(
    dev: &Device,
    calls: &[OpCall],
    sw: Swap,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
    check: &dyn Fn(&str, BufferId) -> Res<()>,
) -> Res<()> {
    let x0 = sw.x0;
    let support = dev.update_support();
    let rebind = !matches!(support, UpdateSupport::Unsupported(_));
    let recapture = m.nodes <= cfg.rerecord_max_nodes;
    let calls_b = swapped(calls, sw.a, sw.b);
    let capture = |calls: &[OpCall]| -> seam::Result<Graph> {
        let scope = dev.capture()?;
        submit(dev, calls)?;
        scope.end_graph()
    };
    let plain = capture(calls).map_err(err)?;
    let moving = capture(calls).map_err(err)?;
    // One step from x0 through each update path gives the eager result.
    dev.write(sw.fresh, 0, x0).map_err(err)?;
    dev.launch(&ops::copy(sw.fresh, sw.a, sw.len))
        .map_err(err)?;
    plain.replay().map_err(err)?;
    check("copy-in + replay", sw.a)?;
    if rebind {
        dev.write(sw.b, 0, x0).map_err(err)?;
        moving
            .device()
            .update(&moving, &Change::rebinds(&[(sw.a, sw.b)]))
            .map_err(err)?;
        moving.replay().map_err(err)?;
        check("rebind + replay", sw.b)?;
        moving
            .device()
            .update(&moving, &Change::rebinds(&[(sw.b, sw.a)]))
            .map_err(err)?;
    } else {
        out.comment(&format!(
            "seam {} {}: no rebind ({support:?})",
            m.device, m.workload
        ));
    }
    let mut recaptured: Option<Graph> = None;
    // (current buffer of the rebound graph, set the next re-capture uses)
    let (mut cur, mut flip) = (sw.a, false);
    let mut step = |mode: &str| -> seam::Result<Option<(f64, f64, f64)>> {
        let t = Instant::now();
        match mode {
            "replay" => plain.replay()?,
            "rebind" => {
                if !rebind {
                    return Ok(None);
                }
                let next = if cur == sw.a { sw.b } else { sw.a };
                moving
                    .device()
                    .update(&moving, &Change::rebinds(&[(cur, next)]))?;
                cur = next;
                let u = us(t);
                moving.replay()?;
                return Ok(Some(finish(dev, t, u)?));
            }
            "recapture" => {
                if !recapture {
                    return Ok(None);
                }
                flip = !flip;
                let g = capture(if flip { &calls_b } else { calls })?;
                let u = us(t);
                g.replay()?;
                drop(recaptured.replace(g));
                return Ok(Some(finish(dev, t, u)?));
            }
            _ => {
                dev.launch(&ops::copy(sw.fresh, sw.a, sw.len))?;
                let u = us(t);
                plain.replay()?;
                return Ok(Some(finish(dev, t, u)?));
            }
        }
        Ok(Some(finish(dev, t, 0.0)?))
    };
    // warm-up and estimate
    let mut est = 0.0;
    for mode in UPDATE_MODES {
        let mut best = f64::MAX;
        for _ in 0..2 {
            if let Some((_, _, e2e)) = step(mode).map_err(err)? {
                best = best.min(e2e);
            }
        }
        if best < f64::MAX {
            est += best;
        }
    }
    let rounds = cfg.rounds.max(1);
    let total = cfg.budget_us * UPDATE_MODES.len() as f64;
    let k = reps_for(total / rounds as f64, est, 3, 200);
    // samples[mode] = (update, submit, e2e) of every iteration; round medians of e2e
    let mut samples: Vec<[Vec<f64>; 3]> = UPDATE_MODES.iter().map(|_| Default::default()).collect();
    let mut round_med: Vec<Vec<f64>> = vec![Vec::new(); UPDATE_MODES.len()];
    for _ in 0..rounds {
        let mut this: Vec<Vec<f64>> = vec![Vec::with_capacity(k); UPDATE_MODES.len()];
        for _ in 0..k {
            for (i, mode) in UPDATE_MODES.iter().enumerate() {
                if let Some((u, s, e)) = step(mode).map_err(err)? {
                    samples[i][0].push(u);
                    samples[i][1].push(s);
                    samples[i][2].push(e);
                    this[i].push(e);
                }
            }
        }
        for (i, v) in this.iter().enumerate() {
            if !v.is_empty() {
                round_med[i].push(median(v));
            }
        }
    }
    for (i, mode) in UPDATE_MODES.iter().enumerate() {
        let [u, s, e] = &samples[i];
        if e.is_empty() {
            continue;
        }
        if *mode != "replay" {
            out.row(m.row(mode, "update_us", u));
        }
        out.row(m.row(mode, "submit_us", s));
        out.row(m.row(mode, "e2e_us", e));
    }
    let per_round = |num: usize, den: usize| -> Vec<f64> {
        round_med[num]
            .iter()
            .zip(&round_med[den])
            .map(|(a, b)| a / b)
            .collect()
    };
    for (i, mode) in UPDATE_MODES.iter().enumerate().skip(1) {
        if !round_med[i].is_empty() {
            ratio_rows(&m, mode, "x_replay", &per_round(i, 0), out);
        }
    }
    if !round_med[1].is_empty() && !round_med[2].is_empty() {
        ratio_rows(&m, "recapture", "x_rebind", &per_round(2, 1), out);
    }
    Ok(())
}

/// (update, submit, e2e) of one iteration started at `t`, its update part
/// having taken `update` µs: wait for it.
fn finish(dev: &Device, t: Instant, update: f64) -> seam::Result<(f64, f64, f64)> {
    let submit = us(t);
    dev.synchronize()?;
    Ok((update, submit, us(t)))
}
