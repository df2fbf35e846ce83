//! One decode step of a toy single-layer, single-sequence attention block
//! on one device, as a list of launches; run eagerly, or captured once and
//! moved from position to position by graph updates (C13).

use seam::testing::Rng;
use seam::{ops, Buffer, Change, Device, Graph, OpCall, Result};
use seam_kernels::user::{rope_freqs, ADD_RMS_NORM, ROPE};

/// The model's shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub heads: u32,
    /// Even (RoPE rotates pairs).
    pub head_dim: u32,
    /// Slots of the KV cache: the most steps a [`DecodeStep`] runs.
    pub max_pos: u32,
    pub eps: f32,
    /// RoPE base.
    pub theta: f64,
}

impl Config {
    /// 6 heads of 50 (a 300-wide model: rows longer than one workgroup of
    /// 256, no power of two), 12 KV slots.
    pub const DEFAULT: Config = Config {
        heads: 6,
        head_dim: 50,
        max_pos: 12,
        eps: 1e-5,
        theta: 10_000.0,
    };

    /// Model width: `heads × head_dim`.
    pub fn dim(&self) -> u32 {
        self.heads * self.head_dim
    }
}

/// `n` values in [-scale, scale) from `rng`.
pub(crate) fn randoms(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| (rng.next_unit() * 2.0 - 1.0) * scale)
        .collect()
}

/// The model's weights (deterministic from a seed).
#[derive(Clone, Debug)]
pub struct Weights {
    /// rms_norm weight, `dim`.
    pub norm: Vec<f32>,
    /// Projections, `dim × dim` row-major (`k × n` of a GEMM with m = 1).
    pub wq: Vec<f32>,
    pub wk: Vec<f32>,
    pub wo: Vec<f32>,
    /// RoPE frequencies, `head_dim / 2`.
    pub freqs: Vec<f32>,
}

impl Weights {
    pub fn new(cfg: &Config, seed: u64) -> Weights {
        let dim = cfg.dim() as usize;
        let mut rng = Rng::new(seed);
        let scale = 1.0 / (dim as f32).sqrt();
        Weights {
            norm: randoms(&mut rng, dim, 0.25)
                .iter()
                .map(|v| 1.0 + v)
                .collect(),
            wq: randoms(&mut rng, dim * dim, scale),
            wk: randoms(&mut rng, dim * dim, scale),
            wo: randoms(&mut rng, dim * dim, scale),
            freqs: rope_freqs(cfg.head_dim, cfg.theta),
        }
    }
}

/// The token embedding step `step` feeds in (deterministic).
pub fn input(cfg: &Config, step: u32) -> Vec<f32> {
    randoms(
        &mut Rng::new(0xDEC0_0000 + step as u64),
        cfg.dim() as usize,
        1.0,
    )
}

/// What the KV cache holds before any step: element `i` is `4096 + i`
/// (exact in f32), a value no step writes, so untouched slots can be
/// checked bit for bit.
pub fn kv_initial(cfg: &Config) -> Vec<f32> {
    (0..cfg.max_pos * cfg.dim())
        .map(|i| 4096.0 + i as f32)
        .collect()
}

/// Index of the KV-cache write (a `copy` into slot `pos`) in
/// [`DecodeStep::launches`].
pub const KV_WRITE: usize = 5;

/// Every buffer of the step.
struct Buffers {
    x: Buffer<f32>,
    resid: Buffer<f32>,
    norm_w: Buffer<f32>,
    hn: Buffer<f32>,
    wq: Buffer<f32>,
    wk: Buffer<f32>,
    wo: Buffer<f32>,
    freqs: Buffer<f32>,
    q: Buffer<f32>,
    k: Buffer<f32>,
    kv: Buffer<f32>,
    scores: Buffer<f32>,
    probs: Buffer<f32>,
    attn: Buffer<f32>,
    o: Buffer<f32>,
    out: Buffer<f32>,
}

/// One decode step on one device: weights, a KV cache `[max_pos × dim]`,
/// the residual stream and the step's activations, and (once
/// [`DecodeStep::capture`] ran) the captured graph.
pub struct DecodeStep {
    dev: Device,
    cfg: Config,
    b: Buffers,
    /// The graph and the position its launches are set for.
    graph: Option<(Graph, u32)>,
    pos: u32,
    updates: usize,
}

impl DecodeStep {
    /// Allocate and fill every buffer on `dev` and register both kernels.
    /// The residual starts at zero, the KV cache at [`kv_initial`].
    pub fn new(dev: &Device, cfg: Config, w: &Weights) -> Result<DecodeStep> {
        dev.register_kernel(&ROPE)?;
        dev.register_kernel(&ADD_RMS_NORM)?;
        let dim = cfg.dim() as usize;
        let slots = cfg.max_pos as usize;
        let zeros = |n: usize| dev.buffer_from(&vec![0f32; n]);
        let b = Buffers {
            x: zeros(dim)?,
            resid: zeros(dim)?,
            norm_w: dev.buffer_from(&w.norm)?,
            hn: zeros(dim)?,
            wq: dev.buffer_from(&w.wq)?,
            wk: dev.buffer_from(&w.wk)?,
            wo: dev.buffer_from(&w.wo)?,
            freqs: dev.buffer_from(&w.freqs)?,
            q: zeros(dim)?,
            k: zeros(dim)?,
            kv: dev.buffer_from(&kv_initial(&cfg))?,
            scores: zeros(slots)?,
            probs: zeros(slots)?,
            attn: zeros(dim)?,
            o: zeros(dim)?,
            out: zeros(dim)?,
        };
        Ok(DecodeStep {
            dev: dev.clone(),
            cfg,
            b,
            graph: None,
            pos: 0,
            updates: 0,
        })
    }

    /// The step at position `pos`, in launch order:
    ///
    /// | # | launch | changes with `pos` |
    /// |---|---|---|
    /// | 0 | `resid += x; hn = rms_norm(resid) · w` (ADD_RMS_NORM) | |
    /// | 1 | `q = hn · wq` (gemm, m = 1) | |
    /// | 2 | `k = hn · wk` (gemm, m = 1) | |
    /// | 3 | `q = rope(q, pos)` in place (ROPE) | params |
    /// | 4 | `k = rope(k, pos)` in place (ROPE) | params |
    /// | 5 | `kv[pos] = k` (copy into the view `kv.view(pos · dim, dim)`) | view |
    /// | 6 | `scores = kv[0..=pos] · q` (gemm, m = pos + 1, n = 1) | params |
    /// | 7 | `scores *= 1 / sqrt(dim)` (scale_add, in place) | params |
    /// | 8 | `probs = softmax(scores)` (1 × (pos + 1)) | params |
    /// | 9 | `attn = probs · kv[0..=pos]` (gemm, k = pos + 1; K doubles as V) | params |
    /// | 10 | `o = attn · wo` (gemm, m = 1) | |
    /// | 11 | `out = silu(o)` | |
    pub fn launches(&self, pos: u32) -> Vec<OpCall> {
        let b = &self.b;
        let (dim, n) = (self.cfg.dim(), pos + 1);
        let rope = |v: &Buffer<f32>| {
            let p = seam::Params::dims(self.cfg.heads, self.cfg.head_dim, pos);
            ops::user(
                &ROPE,
                &[v.id().into(), b.freqs.id().into(), v.id().into()],
                p,
            )
        };
        let norm = seam::Params::dims(1, dim, 0).with_scalars(self.cfg.eps, 0.0);
        let scale = 1.0 / (dim as f32).sqrt();
        vec![
            ops::user(
                &ADD_RMS_NORM,
                &[
                    b.x.id().into(),
                    b.resid.id().into(),
                    b.norm_w.id().into(),
                    b.hn.id().into(),
                ],
                norm,
            ),
            ops::gemm(b.hn.id(), b.wq.id(), b.q.id(), 1, dim, dim),
            ops::gemm(b.hn.id(), b.wk.id(), b.k.id(), 1, dim, dim),
            rope(&b.q),
            rope(&b.k),
            ops::copy(
                b.k.id(),
                b.kv.id().view((pos * dim) as usize, dim as usize),
                dim,
            ),
            ops::gemm(b.kv.id(), b.q.id(), b.scores.id(), n, 1, dim),
            ops::scale_add(b.scores.id(), b.scores.id(), n, scale, 0.0),
            ops::softmax(b.scores.id(), b.probs.id(), 1, n),
            ops::gemm(b.probs.id(), b.kv.id(), b.attn.id(), 1, dim, n),
            ops::gemm(b.attn.id(), b.wo.id(), b.o.id(), 1, dim, dim),
            ops::silu(b.o.id(), b.out.id(), dim),
        ]
    }

    pub fn device(&self) -> &Device {
        &self.dev
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The position the next step writes.
    pub fn pos(&self) -> u32 {
        self.pos
    }

    /// Launches changed by graph updates so far.
    pub fn updates(&self) -> usize {
        self.updates
    }

    /// The next position, or the error a launch past the cache gets.
    fn next_pos(&self) -> Result<u32> {
        if self.pos < self.cfg.max_pos {
            return Ok(self.pos);
        }
        let info = self.dev.info();
        Err(seam::Error {
            site: std::sync::Arc::new(seam::Site {
                backend: info.backend.clone(),
                device: info.id(),
                device_name: info.name.clone(),
            }),
            call: "decode step",
            kind: seam::ErrorKind::TooLarge {
                what: "decode position",
                detail: format!("the KV cache holds {} slots", self.cfg.max_pos),
            },
        })
    }

    fn finish(&mut self) -> Result<Vec<f32>> {
        self.pos += 1;
        self.b.out.read()
    }

    /// Run the step at the next position eagerly (launch by launch) on
    /// `input`, and return its output.
    pub fn eager(&mut self, input: &[f32]) -> Result<Vec<f32>> {
        let pos = self.next_pos()?;
        self.b.x.write(input)?;
        for call in self.launches(pos) {
            self.dev.launch(&call)?;
        }
        self.finish()
    }

    /// Prepare its ops, then capture the step, set for the next position,
    /// into a graph (once: [`DecodeStep::replay`] moves it along). Nothing
    /// runs.
    pub fn capture(&mut self) -> Result<()> {
        let pos = self.next_pos()?;
        let launches = self.launches(pos);
        // Vendor resources (cuBLAS handles, compiled modules) are made
        // before the capture, which may allocate nothing (C7).
        let mut ops: Vec<(seam::OpKind, seam::DType)> = Vec::new();
        for call in &launches {
            if !ops.iter().any(|(op, _)| *op == call.op) {
                ops.push((call.op, seam::DType::F32));
            }
        }
        self.dev.prepare(&ops)?;
        let scope = self.dev.capture()?;
        for call in launches {
            self.dev.launch(&call)?;
        }
        self.graph = Some((scope.end_graph()?, pos));
        Ok(())
    }

    /// Run the step at the next position by replaying the captured graph
    /// (capturing it first if need be) on `input`, and return its output.
    /// Before the replay, every launch that differs at the new position is
    /// updated in the graph, all in one `update_launches`: RoPE's position,
    /// the attention sizes and the KV write's view.
    pub fn replay(&mut self, input: &[f32]) -> Result<Vec<f32>> {
        if self.graph.is_none() {
            self.capture()?;
        }
        let pos = self.next_pos()?;
        if let Err(e) = self.move_graph(pos) {
            // Partly updated: capture afresh next time.
            self.graph = None;
            return Err(e);
        }
        let (graph, _) = self.graph.as_ref().expect("captured above");
        self.b.x.write(input)?;
        graph.replay()?;
        self.finish()
    }

    /// Update every launch of the graph that differs at `pos` from the
    /// position it is set for.
    fn move_graph(&mut self, pos: u32) -> Result<()> {
        let Some((graph, at)) = &self.graph else {
            return Ok(());
        };
        let (was, now) = (self.launches(*at), self.launches(pos));
        // Every launch that differs (the KV write's view, RoPE's position,
        // the attention sizes), replaced as one update: validated together
        // and, where the backend re-records (Emulated), recorded once.
        let changes: Vec<(usize, OpCall)> = was
            .iter()
            .zip(now)
            .enumerate()
            .filter(|(_, (old, new))| *old != new)
            .map(|(i, (_, new))| (i, new))
            .collect();
        graph.device().update(graph, &Change::launches(&changes))?;
        self.updates += changes.len();
        if let Some((_, at)) = &mut self.graph {
            *at = pos;
        }
        Ok(())
    }

    /// The whole KV cache, `max_pos × dim`.
    pub fn kv_cache(&self) -> Result<Vec<f32>> {
        self.b.kv.read()
    }

    /// The residual stream, `dim`.
    pub fn residual(&self) -> Result<Vec<f32>> {
        self.b.resid.read()
    }
}
