//! One case's seam runs: eager, the one-time capture costs, replay,
//! pipelined and re-recorded, and the `--profile` split of a seam call into
//! core's and the backend's time.

use super::{err, randoms, submit, us, Config, Meta, Res, Sink};
use crate::stats::reps_for;
use crate::timed::timed;
use seam::{ops, DType, Device, Graph, GraphRef, OpCall, OpKind};
use seam_backends::DeviceSlot;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// `step` queued back to back `per` times between two waits, in batches.
pub(super) fn pipelined(
    dev: &Device,
    est: f64,
    budget_us: f64,
    mut step: impl FnMut() -> seam::Result<()>,
) -> Res<Vec<f64>> {
    let per = if est < 1000.0 { 20 } else { 5 };
    let batches = reps_for(budget_us, est * per as f64, 3, 50);
    let mut v = Vec::with_capacity(batches);
    for _ in 0..batches {
        dev.synchronize().map_err(err)?;
        let t = Instant::now();
        for _ in 0..per {
            step().map_err(err)?;
        }
        dev.synchronize().map_err(err)?;
        v.push(us(t) / per as f64);
    }
    Ok(v)
}

/// Host times of one graph's replays, each queued and waited for on its
/// own: the best of three warm-up replays (`est`), then as many as fit
/// `budget` µs (15 to 3000), their submit and end-to-end times.
pub(super) struct Replays {
    pub(super) est: f64,
    pub(super) sub: Vec<f64>,
    pub(super) e2e: Vec<f64>,
}

/// Replay `g` and wait, as [`Replays`] says.
pub(super) fn replays(dev: &Device, g: &Graph, budget: f64) -> Res<Replays> {
    let mut est = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        g.replay().map_err(err)?;
        dev.synchronize().map_err(err)?;
        est = est.min(us(t));
    }
    let reps = reps_for(budget, est, 15, 3000);
    let (mut sub, mut e2e) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        let t = Instant::now();
        g.replay().map_err(err)?;
        sub.push(us(t));
        dev.synchronize().map_err(err)?;
        e2e.push(us(t));
    }
    Ok(Replays { est, sub, e2e })
}

/// Eager, one-time capture costs, replay, pipelined and re-recorded runs of `calls`.
pub(super) fn measure(
    dev: &Device,
    calls: &[OpCall],
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    let budget = cfg.budget_us;
    // eager
    let mut est = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        submit(dev, calls).map_err(err)?;
        dev.synchronize().map_err(err)?;
        est = est.min(us(t));
    }
    let reps = reps_for(budget, est, 15, 3000);
    let (mut sub, mut e2e) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        let t = Instant::now();
        submit(dev, calls).map_err(err)?;
        sub.push(us(t));
        dev.synchronize().map_err(err)?;
        e2e.push(us(t));
    }
    out.row(m.row("eager", "submit_us", &sub));
    out.row(m.row("eager", "e2e_us", &e2e));
    let pipe = pipelined(dev, est, budget, || submit(dev, calls))?;
    out.row(m.row("eager", "pipe_us", &pipe));
    if !dev.capture_support().is_supported() {
        out.comment(&format!(
            "seam {}: no capture ({:?})",
            m.device,
            dev.capture_support()
        ));
        return Ok(());
    }
    // graph: one-time costs
    let (mut cap, mut inst, mut first) = (Vec::new(), Vec::new(), Vec::new());
    let mut graph = None;
    for _ in 0..3 {
        drop(graph.take());
        dev.synchronize().map_err(err)?;
        let t = Instant::now();
        let scope = dev.capture().map_err(err)?;
        submit(dev, calls).map_err(err)?;
        let a = us(t);
        let g = scope.end_graph().map_err(err)?;
        let b = us(t);
        g.replay().map_err(err)?;
        dev.synchronize().map_err(err)?;
        let c = us(t);
        cap.push(a);
        inst.push(b - a);
        first.push(c - b);
        graph = Some(g);
    }
    let g = graph.expect("three captures");
    out.row(m.row("graph", "capture_us", &cap));
    out.row(m.row("graph", "instantiate_us", &inst));
    out.row(m.row("graph", "first_replay_us", &first));
    let Replays { est, sub, e2e } = replays(dev, &g, budget)?;
    out.row(m.row("graph", "submit_us", &sub));
    out.row(m.row("graph", "e2e_us", &e2e));
    let pipe = pipelined(dev, est, budget, || g.replay())?;
    out.row(m.row("graph", "pipe_us", &pipe));
    drop(g);
    // re-recorded every iteration: capture, end into the current exec, replay, wait
    if m.nodes <= cfg.rerecord_max_nodes {
        let rerecord = || -> seam::Result<()> {
            let scope = dev.capture()?;
            submit(dev, calls)?;
            scope.end_into_current()?;
            dev.replay(GraphRef::Current)
        };
        let mut est = f64::MAX;
        for _ in 0..2 {
            let t = Instant::now();
            rerecord().map_err(err)?;
            dev.synchronize().map_err(err)?;
            est = est.min(us(t));
        }
        let reps = reps_for(budget, est, 10, 2000);
        let (mut sub, mut e2e) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
        for _ in 0..reps {
            let t = Instant::now();
            rerecord().map_err(err)?;
            sub.push(us(t));
            dev.synchronize().map_err(err)?;
            e2e.push(us(t));
        }
        out.row(m.row("rerecord", "submit_us", &sub));
        out.row(m.row("rerecord", "e2e_us", &e2e));
    }
    Ok(())
}

/// Split the host time of seam calls into core's share and the backend's,
/// on a second device of the same backend wrapped in [`Timed`].
pub(super) fn profile(slot: &DeviceSlot, m: Meta, cfg: &Config, out: &mut dyn Sink) -> Res<()> {
    let (timed, clock) = timed((slot.open)().map_err(err)?);
    let dev = Device::new(Box::new(timed));
    dev.prepare(&[(OpKind::ScaleAdd, DType::F32)])
        .map_err(err)?;
    let x = dev
        .buffer_from(&randoms(m.elems as usize, 7, 0.5, 1.5))
        .map_err(err)?;
    let calls =
        vec![ops::scale_add(x.id(), x.id(), m.elems as u32, 0.999, 0.001); m.nodes as usize];
    let reps = reps_for(cfg.budget_us, m.nodes as f64 * 5.0, 15, 1000);
    // The cost of the two clock reads the wrapper adds inside each call.
    let timer: Vec<f64> = (0..1000)
        .map(|_| {
            let t = Instant::now();
            let _ = Instant::now();
            us(t)
        })
        .collect();
    out.row(m.row("profile", "timer_us", &timer));
    let mut split =
        |mode: &str, step: &mut dyn FnMut() -> seam::Result<()>, replay: bool| -> Res<()> {
            for _ in 0..3 {
                step().map_err(err)?;
                dev.synchronize().map_err(err)?;
            }
            let (mut total, mut backend, mut core) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..reps {
                clock.reset();
                let t = Instant::now();
                step().map_err(err)?;
                let all = us(t);
                let ns = if replay {
                    clock.replay_ns.load(Ordering::Relaxed)
                } else {
                    clock.launch_ns.load(Ordering::Relaxed)
                };
                let b = ns as f64 / 1000.0;
                total.push(all);
                backend.push(b);
                core.push(all - b);
                dev.synchronize().map_err(err)?;
            }
            out.row(m.row(mode, "prof_total_us", &total));
            out.row(m.row(mode, "prof_backend_us", &backend));
            out.row(m.row(mode, "prof_core_us", &core));
            Ok(())
        };
    split("eager", &mut || submit(&dev, &calls), false)?;
    if dev.capture_support().is_supported() {
        let scope = dev.capture().map_err(err)?;
        submit(&dev, &calls).map_err(err)?;
        let g = scope.end_graph().map_err(err)?;
        split("graph", &mut || g.replay(), true)?;
    }
    Ok(())
}

/// The device's copy bandwidth, measured in the same run as the decode
/// stack: `ops::copy` of `elems` floats between two buffers,
/// queued back to back (`pipelined`, one wait per batch). Rows (mode and
/// workload `copy`, `elems` floats): `e2e_us` per copy, and `gbps`, the
/// bytes it moves (read + write, 8 bytes per float) per nanosecond, i.e.
/// GB/s, per batch.
pub(super) fn copy_bandwidth(dev: &Device, m: Meta, cfg: &Config, out: &mut dyn Sink) -> Res<()> {
    let n = m.elems as usize;
    let src = dev.buffer_from(&randoms(n, 11, -1.0, 1.0)).map_err(err)?;
    let dst = dev.buffer::<f32>(n).map_err(err)?;
    let call = ops::copy(src.id(), dst.id(), m.elems as u32);
    let mut est = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        dev.launch(&call).map_err(err)?;
        dev.synchronize().map_err(err)?;
        est = est.min(us(t));
    }
    let per_copy = pipelined(dev, est, cfg.budget_us, || dev.launch(&call))?;
    let bytes = 8.0 * m.elems as f64;
    let gbps: Vec<f64> = per_copy.iter().map(|t| bytes / (t * 1e3)).collect();
    out.row(m.row("copy", "e2e_us", &per_copy));
    out.row(m.row("copy", "gbps", &gbps));
    Ok(())
}
