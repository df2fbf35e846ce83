//! The seam arms: every backend found, eager and replay, through the public
//! API only (`seam::Device`, `seam::ops`, capture scopes, `Graph::replay`).

use crate::csv::Row;
use crate::stats::{reps_for, summarize};
use crate::timed::timed;
use seam::{ops, BufferId, DType, Device, Graph, GraphRef, OpCall, OpKind, UpdateSupport};
use seam_backends::DeviceSlot;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What to measure, and for how long.
#[derive(Clone, Debug)]
pub struct Config {
    /// Time budget of one measurement (one metric of one mode of one case), µs.
    pub budget_us: f64,
    /// Chain lengths.
    pub ns: Vec<u64>,
    /// Chain element counts.
    pub elems: Vec<u64>,
    /// Decode hidden sizes.
    pub hiddens: Vec<u64>,
    /// Decode layer counts.
    pub layers: Vec<u64>,
    /// Backends to measure (empty: every GPU backend found).
    pub backends: Vec<String>,
    /// Largest decode hidden size on backends other than cuda.
    pub other_hidden_max: u64,
    /// Longest chain measured in `rerecord` and `recapture` modes.
    pub rerecord_max_nodes: u64,
    /// Interleaved rounds of the graph-update modes (per-round ratios).
    pub rounds: usize,
    /// Split seam calls into core and backend time (a second device per backend).
    pub profile: bool,
    /// The `arm` column (`seam`; another name for a variant build).
    pub arm: String,
}

/// Where rows and comments go (stdout in the binary, a Vec in tests).
pub trait Sink {
    fn row(&mut self, row: Row);
    fn comment(&mut self, text: &str);
}

type Res<T> = std::result::Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[derive(Clone, Copy, Debug)]
struct Meta {
    arm: &'static str,
    device: &'static str,
    workload: &'static str,
    elems: u64,
    hidden: u64,
    layers: u64,
    nodes: u64,
}

impl Meta {
    fn row(&self, mode: &str, metric: &str, samples: &[f64]) -> Row {
        let s = summarize(samples);
        Row {
            arm: self.arm.into(),
            device: self.device.into(),
            mode: mode.into(),
            workload: self.workload.into(),
            elems: self.elems,
            hidden: self.hidden,
            layers: self.layers,
            nodes: self.nodes,
            metric: metric.into(),
            median_us: s.median,
            p99_us: s.p99,
            reps: s.reps as u64,
        }
    }
}

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

fn submit(dev: &Device, calls: &[OpCall]) -> seam::Result<()> {
    for c in calls {
        dev.launch(c)?;
    }
    Ok(())
}

/// Deterministic pseudo-random floats in [lo, hi) (xorshift; never zeros).
pub fn randoms(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            lo + (hi - lo) * ((x >> 40) & 0xFF_FFFF) as f32 / 16_777_216.0
        })
        .collect()
}

/// `step` queued back to back `per` times between two waits, in batches.
fn pipelined(
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

/// Eager, one-time capture costs, replay, pipelined and re-recorded runs of `calls`.
fn measure(dev: &Device, calls: &[OpCall], m: Meta, cfg: &Config, out: &mut dyn Sink) -> Res<()> {
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
    if !dev.supports_capture() {
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

/// The buffers a graph update swaps: `a`, what the graph was captured over
/// (the workload's input and output); `b`, the other set a rebind switches
/// to; `fresh`, a new input copied into `a` before a replay (PyTorch's
/// static-buffer pattern). Each holds `len` floats; `x0` is the
/// workload's input, from which the update paths are checked.
#[derive(Clone, Copy, Debug)]
struct Swap<'a> {
    a: BufferId,
    b: BufferId,
    fresh: BufferId,
    len: u32,
    x0: &'a [f32],
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
fn median(v: &[f64]) -> f64 {
    summarize(v).median
}

/// A per-round ratio: its median and p99 over the rounds (`metric`), and
/// its smallest and largest round (`metric_range`: min in the median
/// column, max in the p99 column). Dimensionless, not µs.
fn ratio_rows(m: &Meta, mode: &str, metric: &str, per_round: &[f64], out: &mut dyn Sink) {
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
fn updates(
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
        moving.rebind(&[(sw.a, sw.b)]).map_err(err)?;
        moving.replay().map_err(err)?;
        check("rebind + replay", sw.b)?;
        moving.rebind(&[(sw.b, sw.a)]).map_err(err)?;
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
                moving.rebind(&[(cur, next)])?;
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

/// The chain's call list and a check of one eager step and one replay
/// against the host (scale_add is bit-exact, C11).
fn chain(dev: &Device, m: Meta, cfg: &Config, out: &mut dyn Sink) -> Res<()> {
    let elems = m.elems as usize;
    let x0 = randoms(elems, 7, 0.5, 1.5);
    let x = dev.buffer_from(&x0).map_err(err)?;
    let calls =
        vec![ops::scale_add(x.id(), x.id(), m.elems as u32, 0.999, 0.001); m.nodes as usize];
    let k = elems.min(256);
    let want: Vec<f32> = x0[..k]
        .iter()
        .map(|&v| (0..m.nodes).fold(v, |acc, _| 0.999f32.mul_add(acc, 0.001)))
        .collect();
    let check = |what: &str, got: Vec<f32>| -> Res<()> {
        match got
            .iter()
            .zip(&want)
            .position(|(g, w)| g.to_bits() != w.to_bits())
        {
            None => Ok(()),
            Some(i) => Err(format!(
                "{what} check failed at {i}: {} != {}",
                got[i], want[i]
            )),
        }
    };
    submit(dev, &calls).map_err(err)?;
    check("eager", dev.read_range(x.id(), 0, k).map_err(err)?)?;
    if dev.supports_capture() {
        dev.write(x.id(), 0, &x0).map_err(err)?;
        let scope = dev.capture().map_err(err)?;
        submit(dev, &calls).map_err(err)?;
        let g = scope.end_graph().map_err(err)?;
        g.replay().map_err(err)?;
        check("replay", dev.read_range(x.id(), 0, k).map_err(err)?)?;
    }
    measure(dev, &calls, m, cfg, out)?;
    if !dev.supports_capture() {
        return Ok(());
    }
    let (xb, fresh) = (
        dev.buffer::<f32>(elems).map_err(err)?,
        dev.buffer::<f32>(elems).map_err(err)?,
    );
    let sw = Swap {
        a: x.id(),
        b: xb.id(),
        fresh: fresh.id(),
        len: m.elems as u32,
        x0: &x0,
    };
    let read = |what: &str, id: BufferId| check(what, dev.read_range(id, 0, k).map_err(err)?);
    updates(dev, &calls, sw, m, cfg, out, &read)
}

/// Decode-stack buffers: the residual x, the norm weight, three temporaries,
/// and one H×H weight per layer.
struct Stack {
    x: seam::Buffer<f32>,
    wn: seam::Buffer<f32>,
    t: [seam::Buffer<f32>; 3],
    w: Vec<seam::Buffer<f32>>,
    x0: Vec<f32>,
    /// The residual's other set (rebind) and a fresh input (copy-in).
    xb: seam::Buffer<f32>,
    fresh: seam::Buffer<f32>,
}

impl Stack {
    fn new(dev: &Device, h: u64, lmax: u64) -> Res<Stack> {
        let hu = h as usize;
        let scale = 1.7 / (h as f32).sqrt();
        let w0 = randoms(hu * hu, 3, -scale, scale);
        let mut w = vec![dev.buffer_from(&w0).map_err(err)?];
        drop(w0);
        for _ in 1..lmax {
            let wi = dev.buffer::<f32>(hu * hu).map_err(err)?;
            dev.launch(&ops::copy(w[0].id(), wi.id(), (h * h) as u32))
                .map_err(err)?;
            w.push(wi);
        }
        let x0 = randoms(hu, 5, -1.0, 1.0);
        let s = Stack {
            x: dev.buffer_from(&x0).map_err(err)?,
            wn: dev.buffer_from(&randoms(hu, 6, 0.5, 1.5)).map_err(err)?,
            t: [
                dev.buffer(hu).map_err(err)?,
                dev.buffer(hu).map_err(err)?,
                dev.buffer(hu).map_err(err)?,
            ],
            w,
            x0,
            xb: dev.buffer(hu).map_err(err)?,
            fresh: dev.buffer(hu).map_err(err)?,
        };
        dev.synchronize().map_err(err)?;
        Ok(s)
    }

    fn calls(&self, h: u64, layers: u64) -> Vec<OpCall> {
        let h = h as u32;
        let (x, [t1, t2, t3]) = (self.x.id(), self.t.each_ref().map(|b| b.id()));
        (0..layers as usize)
            .flat_map(|i| {
                [
                    ops::rms_norm(x, self.wn.id(), t1, 1, h, 1e-5),
                    ops::gemm(t1, self.w[i].id(), t2, 1, h, h),
                    ops::silu(t2, t3, h),
                    ops::add(x, t3, x, h),
                ]
            })
            .collect()
    }
}

/// One decode step eager and one replayed from the same input agree bit for bit (C4).
fn decode(dev: &Device, s: &Stack, m: Meta, cfg: &Config, out: &mut dyn Sink) -> Res<()> {
    let calls = s.calls(m.hidden, m.layers);
    dev.write(s.x.id(), 0, &s.x0).map_err(err)?;
    submit(dev, &calls).map_err(err)?;
    let eager = s.x.read().map_err(err)?;
    if eager.iter().any(|v| !v.is_finite()) {
        return Err("eager decode step gave a non-finite value".into());
    }
    if dev.supports_capture() {
        dev.write(s.x.id(), 0, &s.x0).map_err(err)?;
        let scope = dev.capture().map_err(err)?;
        submit(dev, &calls).map_err(err)?;
        let g = scope.end_graph().map_err(err)?;
        g.replay().map_err(err)?;
        let replayed = s.x.read().map_err(err)?;
        if let Some(i) = eager
            .iter()
            .zip(&replayed)
            .position(|(a, b)| a.to_bits() != b.to_bits())
        {
            return Err(format!(
                "replayed decode step differs from eager at {i}: {} != {}",
                replayed[i], eager[i]
            ));
        }
    }
    measure(dev, &calls, m, cfg, out)?;
    if !dev.supports_capture() {
        return Ok(());
    }
    let sw = Swap {
        a: s.x.id(),
        b: s.xb.id(),
        fresh: s.fresh.id(),
        len: m.hidden as u32,
        x0: &s.x0,
    };
    let same = |what: &str, id: BufferId| -> Res<()> {
        let got: Vec<f32> = dev.read_range(id, 0, eager.len()).map_err(err)?;
        match got
            .iter()
            .zip(&eager)
            .position(|(a, b)| a.to_bits() != b.to_bits())
        {
            None => Ok(()),
            Some(i) => Err(format!(
                "{what}: decode step differs from eager at {i}: {} != {}",
                got[i], eager[i]
            )),
        }
    };
    updates(dev, &calls, sw, m, cfg, out, &same)
}

/// Split the host time of seam calls into core's share and the backend's,
/// on a second device of the same backend wrapped in [`Timed`].
fn profile(slot: &DeviceSlot, m: Meta, cfg: &Config, out: &mut dyn Sink) -> Res<()> {
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
    if dev.supports_capture() {
        let scope = dev.capture().map_err(err)?;
        submit(&dev, &calls).map_err(err)?;
        let g = scope.end_graph().map_err(err)?;
        split("graph", &mut || g.replay(), true)?;
    }
    Ok(())
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// Run every seam arm this machine has.
pub fn run(cfg: &Config, out: &mut dyn Sink) {
    let found = seam_backends::discover();
    for miss in &found.missing {
        out.comment(&format!(
            "seam {}: not measured: {}",
            miss.backend, miss.reason
        ));
    }
    let mut seen = Vec::new();
    for slot in &found.devices {
        let wanted = if cfg.backends.is_empty() {
            slot.backend != "cpu"
        } else {
            cfg.backends.iter().any(|b| b == slot.backend)
        };
        if !wanted {
            continue;
        }
        if seen.contains(&slot.backend) {
            out.comment(&format!(
                "seam {}: not measured (first device of each backend only)",
                slot.id
            ));
            continue;
        }
        seen.push(slot.backend);
        if let Err(e) = backend(slot, cfg, out) {
            out.comment(&format!("seam {}: stopped: {e}", slot.id));
        }
    }
    out.comment(&format!(
        "{} loaded: {}",
        cfg.arm,
        loaded_libraries().join(" ")
    ));
}

/// The GPU runtime libraries this process has mapped (which cuBLAS, which
/// Vulkan loader): arms that load different builds are not comparable.
pub fn loaded_libraries() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut libs: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            ["libcuda.", "libcublas", "libnvrtc", "libvulkan", "nvidia"]
                .iter()
                .any(|k| p.contains(k))
        })
        .map(str::to_string)
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

fn backend(slot: &DeviceSlot, cfg: &Config, out: &mut dyn Sink) -> Res<()> {
    let device = leak(slot.backend);
    let arm = leak(&cfg.arm);
    let t = Instant::now();
    let dev = slot.device().map_err(err)?;
    let info = dev.info();
    out.comment(&format!(
        "seam {}: {} ({}), capture {:?}, update {:?}, opened in {:.0} us",
        slot.id,
        info.name,
        info.driver,
        dev.capture_support(),
        dev.update_support(),
        us(t)
    ));
    dev.prepare(&[
        (OpKind::ScaleAdd, DType::F32),
        (OpKind::RmsNorm, DType::F32),
        (OpKind::Gemm, DType::F32),
        (OpKind::Silu, DType::F32),
        (OpKind::Add, DType::F32),
        (OpKind::Copy, DType::F32),
    ])
    .map_err(err)?;
    for &elems in &cfg.elems {
        for &n in &cfg.ns {
            let m = Meta {
                arm,
                device,
                workload: "chain",
                elems,
                hidden: 0,
                layers: 0,
                nodes: n,
            };
            if let Err(e) = chain(&dev, m, cfg, out) {
                out.comment(&format!(
                    "seam {device} chain elems={elems} N={n}: skipped: {e}"
                ));
            }
        }
    }
    let lmax = cfg.layers.iter().copied().max().unwrap_or(0);
    for &h in &cfg.hiddens {
        if device != "cuda" && h > cfg.other_hidden_max {
            out.comment(&format!(
                "seam {device} decode H={h}: not measured (above --other-hidden-max {})",
                cfg.other_hidden_max
            ));
            continue;
        }
        let stack = match Stack::new(&dev, h, lmax) {
            Ok(s) => s,
            Err(e) => {
                out.comment(&format!("seam {device} decode H={h}: skipped: {e}"));
                continue;
            }
        };
        for &l in &cfg.layers {
            let m = Meta {
                arm,
                device,
                workload: "decode",
                elems: h,
                hidden: h,
                layers: l,
                nodes: 4 * l,
            };
            if let Err(e) = decode(&dev, &stack, m, cfg, out) {
                out.comment(&format!("seam {device} decode H={h} L={l}: skipped: {e}"));
            }
        }
    }
    drop(dev);
    if cfg.profile {
        for &n in &cfg.ns {
            let m = Meta {
                arm,
                device,
                workload: "chain",
                elems: 1,
                hidden: 0,
                layers: 0,
                nodes: n,
            };
            if let Err(e) = profile(slot, m, cfg, out) {
                out.comment(&format!("seam {device} profile N={n}: skipped: {e}"));
            }
        }
    }
    Ok(())
}
