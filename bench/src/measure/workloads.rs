//! The workloads: the chain of N dependent `scale_add` kernels and the
//! decode stack, each checked bit for bit before it is timed, then measured
//! by [`arms::measure`](super::arms::measure) and the update loop.

use super::arms::measure;
use super::paired::{versus_raw, RawChain};
use super::update::{updates, Swap};
use super::{err, randoms, submit, Config, Meta, Res, Sink};
use seam::{ops, BufferId, Device, OpCall, Params};
use seam_kernels::user::{
    layer_quads, layer_workspace, split_partials, LAYER_FINISH, LAYER_FOLD, LAYER_PARTIAL,
    NORM_GEMV_SILU_ADD,
};

/// The chain's call list and a check of one eager step and one replay
/// against the host (scale_add is bit-exact, C11).
/// With `raw`, the same chain also runs on the in-process raw anchor,
/// interleaved with seam ([`versus_raw`]).
pub(super) fn chain(
    dev: &Device,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
    raw: Option<&mut Box<dyn RawChain>>,
) -> Res<()> {
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
    if dev.capture_support().is_supported() {
        dev.write(x.id(), 0, &x0).map_err(err)?;
        let scope = dev.capture().map_err(err)?;
        submit(dev, &calls).map_err(err)?;
        let g = scope.end_graph().map_err(err)?;
        g.replay().map_err(err)?;
        check("replay", dev.read_range(x.id(), 0, k).map_err(err)?)?;
    }
    measure(dev, &calls, m, cfg, out)?;
    if !dev.capture_support().is_supported() {
        return Ok(());
    }
    if let Some(raw) = raw {
        if let Err(e) = versus_raw(dev, &mut **raw, &calls, &x0, m, cfg, out, &check) {
            out.comment(&format!(
                "seam {} chain elems={} N={}: seam vs {} not measured: {e}",
                m.device,
                m.elems,
                m.nodes,
                raw.label()
            ));
        }
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
pub(super) struct Stack {
    x: seam::Buffer<f32>,
    wn: seam::Buffer<f32>,
    t: [seam::Buffer<f32>; 3],
    w: Vec<seam::Buffer<f32>>,
    x0: Vec<f32>,
    /// The residual's other set (rebind) and a fresh input (copy-in).
    xb: seam::Buffer<f32>,
    fresh: seam::Buffer<f32>,
    /// The fused layer's workspace, zeros between launches: one for every
    /// layer, which run one after another.
    ws: seam::Buffer<f32>,
}

impl Stack {
    pub(super) fn new(dev: &Device, h: u64, lmax: u64) -> Res<Stack> {
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
            ws: dev
                .buffer_from(&vec![
                    0f32;
                    layer_workspace(h as u32, layer_quads(h as u32))
                        as usize
                ])
                .map_err(err)?,
        };
        dev.synchronize().map_err(err)?;
        Ok(s)
    }

    /// The layer weights, one H×H matrix each.
    pub(super) fn weights(&self) -> &[seam::Buffer<f32>] {
        &self.w
    }

    pub(super) fn calls(&self, h: u64, layers: u64) -> Vec<OpCall> {
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

impl Stack {
    /// The same layers, each one launch of [`NORM_GEMV_SILU_ADD`]
    /// (`x + silu(rms_norm(x) · W)`): the residual moves between x and the
    /// first temporary, since a layer cannot write the x every workgroup
    /// reads. Returns the calls and the buffer the last layer writes.
    pub(super) fn fused_calls(&self, h: u64, layers: u64) -> (Vec<OpCall>, &seam::Buffer<f32>) {
        let h = h as u32;
        let p = Params::dims(h, layer_quads(h), 0).with_scalars(1e-5, 0.0);
        let (a, b) = (&self.x, &self.t[0]);
        let calls = (0..layers as usize)
            .map(|i| {
                let (src, dst) = if i % 2 == 0 { (a, b) } else { (b, a) };
                ops::user(
                    &NORM_GEMV_SILU_ADD,
                    &[
                        src.id().into(),
                        self.wn.id().into(),
                        self.w[i].id().into(),
                        dst.id().into(),
                        self.ws.id().into(),
                    ],
                    p,
                )
            })
            .collect();
        (calls, if layers % 2 == 1 { b } else { a })
    }
}

impl Stack {
    /// The same layers, each two launches: [`LAYER_PARTIAL`] and
    /// [`LAYER_FINISH`] through the partial sums in `part`, the residual
    /// moving between x and the first temporary as in
    /// [`Stack::fused_calls`].
    pub(super) fn split_calls(
        &self,
        h: u64,
        layers: u64,
        part: &seam::Buffer<f32>,
    ) -> (Vec<OpCall>, &seam::Buffer<f32>) {
        let h = h as u32;
        let p = Params::dims(h, layer_quads(h), 0).with_scalars(1e-5, 0.0);
        let (a, b) = (&self.x, &self.t[0]);
        let calls = (0..layers as usize)
            .flat_map(|i| {
                let (src, dst) = if i % 2 == 0 { (a, b) } else { (b, a) };
                [
                    self.partial_call(h, i, src, part),
                    ops::user(
                        &LAYER_FINISH,
                        &[src.id().into(), part.id().into(), dst.id().into()],
                        p,
                    ),
                ]
            })
            .collect();
        (calls, if layers % 2 == 1 { b } else { a })
    }
}

impl Stack {
    /// The same layers in L + 1 launches: [`LAYER_PARTIAL`] of the first,
    /// a [`LAYER_FOLD`] for each next (the layer before's finish and this
    /// one's partial sums), [`LAYER_FINISH`] of the last. The partial sums
    /// alternate between `parts`, the residual between x and the first
    /// temporary as in [`Stack::fused_calls`]. `layers` ≥ 1.
    pub(super) fn fold_calls(
        &self,
        h: u64,
        layers: u64,
        parts: [&seam::Buffer<f32>; 2],
    ) -> (Vec<OpCall>, &seam::Buffer<f32>) {
        let h = h as u32;
        let p = Params::dims(h, layer_quads(h), 0).with_scalars(1e-5, 0.0);
        let xs = [&self.x, &self.t[0]];
        let n = layers as usize;
        let mut calls = vec![self.partial_call(h, 0, xs[0], parts[0])];
        for i in 1..n {
            calls.push(ops::user(
                &LAYER_FOLD,
                &[
                    xs[(i - 1) % 2].id().into(),
                    parts[(i - 1) % 2].id().into(),
                    self.wn.id().into(),
                    self.w[i].id().into(),
                    xs[i % 2].id().into(),
                    parts[i % 2].id().into(),
                ],
                p,
            ));
        }
        calls.push(ops::user(
            &LAYER_FINISH,
            &[
                xs[(n - 1) % 2].id().into(),
                parts[(n - 1) % 2].id().into(),
                xs[n % 2].id().into(),
            ],
            p,
        ));
        (calls, xs[n % 2])
    }

    /// Layer `i`'s [`LAYER_PARTIAL`] launch (width `h`): the partial sums
    /// of `src` (normed by the stack's weights) times layer `i`'s weight,
    /// into `part`.
    pub(super) fn partial_call(
        &self,
        h: u32,
        i: usize,
        src: &seam::Buffer<f32>,
        part: &seam::Buffer<f32>,
    ) -> OpCall {
        ops::user(
            &LAYER_PARTIAL,
            &[
                src.id().into(),
                self.wn.id().into(),
                self.w[i].id().into(),
                part.id().into(),
            ],
            Params::dims(h, layer_quads(h), 0),
        )
    }

    /// The stack's input buffer.
    pub(super) fn input(&self) -> &seam::Buffer<f32> {
        &self.x
    }
}

/// `calls` run eagerly from the stack's input, read from `result`; where
/// the device captures, the same calls captured and replayed once from the
/// same input must give it bit for bit (C4). Returns the eager result.
fn eager_and_replayed(
    dev: &Device,
    s: &Stack,
    calls: &[OpCall],
    result: &seam::Buffer<f32>,
    what: &str,
) -> Res<Vec<f32>> {
    dev.write(s.x.id(), 0, &s.x0).map_err(err)?;
    submit(dev, calls).map_err(err)?;
    let eager = result.read().map_err(err)?;
    if dev.capture_support().is_supported() {
        dev.write(s.x.id(), 0, &s.x0).map_err(err)?;
        let scope = dev.capture().map_err(err)?;
        submit(dev, calls).map_err(err)?;
        let g = scope.end_graph().map_err(err)?;
        g.replay().map_err(err)?;
        let replayed = result.read().map_err(err)?;
        if let Some(i) = eager
            .iter()
            .zip(&replayed)
            .position(|(a, b)| a.to_bits() != b.to_bits())
        {
            return Err(format!(
                "replayed {what} differs from eager at {i}: {} != {}",
                replayed[i], eager[i]
            ));
        }
    }
    Ok(eager)
}

/// The fused decode step (one launch a layer, [`Stack::fused_calls`]):
/// eager and replayed from the same input agree bit for bit (C4), and
/// both agree with the four-launch step within 1e-3 relative (the fused
/// layer applies the norm's scale after the dot products, so not bit for
/// bit); then timed like the step. No graph update is measured on it.
pub(super) fn decode_fused(
    dev: &Device,
    s: &Stack,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    let (calls, last) = s.fused_calls(m.hidden, m.layers);
    decode_layers(dev, s, &calls, last, m, cfg, out)
}

/// The decode step in two launches a layer ([`Stack::split_calls`]),
/// checked and timed as [`decode_fused`].
pub(super) fn decode_split(
    dev: &Device,
    s: &Stack,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    let h = m.hidden as u32;
    let part = dev
        .buffer::<f32>(split_partials(h, layer_quads(h)) as usize)
        .map_err(err)?;
    let (calls, last) = s.split_calls(m.hidden, m.layers, &part);
    decode_layers(dev, s, &calls, last, m, cfg, out)
}

/// The decode step in L + 1 launches ([`Stack::fold_calls`]), checked and
/// timed as [`decode_fused`].
pub(super) fn decode_fold(
    dev: &Device,
    s: &Stack,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    if m.layers == 0 {
        return Err("no layers: a folded step needs at least one".into());
    }
    let h = m.hidden as u32;
    let words = split_partials(h, layer_quads(h)) as usize;
    let (p0, p1) = (
        dev.buffer::<f32>(words).map_err(err)?,
        dev.buffer::<f32>(words).map_err(err)?,
    );
    let (calls, last) = s.fold_calls(m.hidden, m.layers, [&p0, &p1]);
    decode_layers(dev, s, &calls, last, m, cfg, out)
}

/// A decode step of fused layers (`calls`, the last writing `last`):
/// eager and replayed agree bit for bit, both agree with the four-launch
/// step within 1e-3 relative; then timed like the step.
fn decode_layers(
    dev: &Device,
    s: &Stack,
    calls: &[OpCall],
    last: &seam::Buffer<f32>,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    let unfused = {
        dev.write(s.x.id(), 0, &s.x0).map_err(err)?;
        submit(dev, &s.calls(m.hidden, m.layers)).map_err(err)?;
        s.x.read().map_err(err)?
    };
    let eager = eager_and_replayed(dev, s, calls, last, "fused decode step")?;
    if let Some(i) = eager
        .iter()
        .zip(&unfused)
        .position(|(a, b)| (a - b).abs() > 1e-3 * (1.0 + b.abs()) || a.is_nan())
    {
        return Err(format!(
            "fused decode step differs from the four-launch step at {i}: {} vs {}",
            eager[i], unfused[i]
        ));
    }
    measure(dev, calls, m, cfg, out)
}

/// One decode step eager and one replayed from the same input agree bit for bit (C4).
pub(super) fn decode(
    dev: &Device,
    s: &Stack,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    let calls = s.calls(m.hidden, m.layers);
    let eager = eager_and_replayed(dev, s, &calls, &s.x, "decode step")?;
    if eager.iter().any(|v| !v.is_finite()) {
        return Err("eager decode step gave a non-finite value".into());
    }
    measure(dev, &calls, m, cfg, out)?;
    if !dev.capture_support().is_supported() {
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
