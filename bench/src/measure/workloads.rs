//! The workloads: the chain of N dependent `scale_add` kernels and the
//! decode stack, each checked bit for bit before it is timed, then measured
//! by [`arms::measure`](super::arms::measure) and the update loop.

use super::arms::measure;
use super::paired::{versus_raw, RawChain};
use super::update::{updates, Swap};
use super::{err, randoms, submit, Config, Meta, Res, Sink};
use seam::{ops, BufferId, Device, OpCall};

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

/// One decode step eager and one replayed from the same input agree bit for bit (C4).
pub(super) fn decode(
    dev: &Device,
    s: &Stack,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    let calls = s.calls(m.hidden, m.layers);
    dev.write(s.x.id(), 0, &s.x0).map_err(err)?;
    submit(dev, &calls).map_err(err)?;
    let eager = s.x.read().map_err(err)?;
    if eager.iter().any(|v| !v.is_finite()) {
        return Err("eager decode step gave a non-finite value".into());
    }
    if dev.capture_support().is_supported() {
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
