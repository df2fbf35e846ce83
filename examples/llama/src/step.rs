//! The decode step of a Llama-architecture model on one device, as a list
//! of launches: run eagerly, or captured once and moved from position to
//! position (and token to token) by graph updates.

use crate::attention::{self, ATTENTION};
use crate::model::{Config, Model, EPS, THETA};
use crate::Error;
use seam::{ops, Buffer, BufferId, Change, DType, Device, Graph, OpCall, OpKind, View};
use seam_example_decode::kernels::{rope_freqs, ADD_RMS_NORM, ROPE};
use std::time::{Duration, Instant};

/// How a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Launch by launch.
    Eager,
    /// Replay of the one captured graph, updated to the position and token.
    Captured,
}

/// Host time spent per part of the steps run so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    pub steps: u32,
    /// Moving the graph: the launches at the new position and token, their
    /// differences from the graph's, and `Device::update` (0 when eager).
    pub update: Duration,
    /// Eager launches, or the graph's replay: submitting the work.
    pub submit: Duration,
    /// Reading the logits back (the wait for the step's work included).
    pub read: Duration,
}

/// Every buffer of the model on the device.
struct Buffers {
    emb: Buffer<f32>,
    rms_att: Buffer<f32>,
    wq: Buffer<f32>,
    wk: Buffer<f32>,
    wv: Buffer<f32>,
    wo: Buffer<f32>,
    rms_ffn: Buffer<f32>,
    w1: Buffer<f32>,
    w2: Buffer<f32>,
    w3: Buffer<f32>,
    rms_final: Buffer<f32>,
    /// `None`: the classifier is the embedding.
    wcls: Option<Buffer<f32>>,
    freqs: Buffer<f32>,
    /// The residual stream, `dim`.
    resid: Buffer<f32>,
    /// The normed residual, `dim`.
    hn: Buffer<f32>,
    q: Buffer<f32>,
    /// Keys and values, `[layers, max_pos, kv_dim]`.
    kc: Buffer<f32>,
    vc: Buffer<f32>,
    /// Attention's scratch, `[heads, max_pos]`.
    att: Buffer<f32>,
    attn: Buffer<f32>,
    o: Buffer<f32>,
    h1: Buffer<f32>,
    h3: Buffer<f32>,
    silu: Buffer<f32>,
    gate: Buffer<f32>,
    ffn: Buffer<f32>,
    logits: Buffer<f32>,
}

/// A model on one device with its KV cache, and (once a captured step ran)
/// the graph and the position and token its launches are set for.
pub struct Llama {
    dev: Device,
    cfg: Config,
    max_pos: u32,
    b: Buffers,
    graph: Option<(Graph, u32, u32)>,
    pos: u32,
    updates: usize,
    timings: Timings,
}

impl Llama {
    /// Upload `model` to `dev` with a KV cache of `max_pos` positions (at
    /// most the model's `seq_len`) and register its kernels.
    pub fn new(dev: &Device, model: &Model, max_pos: u32) -> Result<Llama, Error> {
        let cfg = model.config;
        if max_pos == 0 || max_pos > cfg.seq_len {
            return Err(Error::Input(format!(
                "{}: a KV cache of {max_pos} positions: the model takes 1 to {}",
                dev.info().id(),
                cfg.seq_len
            )));
        }
        for def in [&ROPE, &ADD_RMS_NORM, &ATTENTION] {
            dev.register_kernel(def)?;
        }
        let w = &model.weights;
        let up = |v: &[f32]| dev.buffer_from(v);
        let zeros = |n: u32| dev.buffer_from(&vec![0f32; n as usize]);
        let cache = cfg.n_layers * max_pos * cfg.kv_dim();
        let b = Buffers {
            emb: up(&w.token_embedding)?,
            rms_att: up(&w.rms_att)?,
            wq: up(&w.wq)?,
            wk: up(&w.wk)?,
            wv: up(&w.wv)?,
            wo: up(&w.wo)?,
            rms_ffn: up(&w.rms_ffn)?,
            w1: up(&w.w1)?,
            w2: up(&w.w2)?,
            w3: up(&w.w3)?,
            rms_final: up(&w.rms_final)?,
            wcls: match cfg.own_classifier {
                true => Some(up(&w.wcls)?),
                false => None,
            },
            freqs: up(&rope_freqs(cfg.head_size(), THETA))?,
            resid: zeros(cfg.dim)?,
            hn: zeros(cfg.dim)?,
            q: zeros(cfg.dim)?,
            kc: zeros(cache)?,
            vc: zeros(cache)?,
            att: zeros(cfg.n_heads * max_pos)?,
            attn: zeros(cfg.dim)?,
            o: zeros(cfg.dim)?,
            h1: zeros(cfg.hidden_dim)?,
            h3: zeros(cfg.hidden_dim)?,
            silu: zeros(cfg.hidden_dim)?,
            gate: zeros(cfg.hidden_dim)?,
            ffn: zeros(cfg.dim)?,
            logits: zeros(cfg.vocab_size)?,
        };
        Ok(Llama {
            dev: dev.clone(),
            cfg,
            max_pos,
            b,
            graph: None,
            pos: 0,
            updates: 0,
            timings: Timings::default(),
        })
    }

    /// The step that feeds `token` at position `pos`, in launch order: the
    /// embedding row copied into the residual and normed, then per layer
    /// the Q, K and V projections (K and V straight into the cache slot
    /// `pos`, through views), RoPE on Q and on the cached K, attention over
    /// positions `0..=pos`, the output projection and the residual add fused
    /// with the FFN's norm, the SwiGLU FFN (W1, W3, silu, product, W2), and
    /// the next residual add fused with the next norm; last the classifier.
    ///
    /// What changes with `pos`: per layer the K and V writes' views, both
    /// RoPEs' position (and the cached K's view) and attention's `n`; with
    /// `token`: the embedding copy's view. `5 · layers + 1` launches at most.
    pub fn launches(&self, pos: u32, token: u32) -> Vec<OpCall> {
        let (b, c) = (&self.b, &self.cfg);
        let (d, kv, hid) = (c.dim as usize, c.kv_dim() as usize, c.hidden_dim as usize);
        let slots = self.max_pos as usize;
        let at = |buf: BufferId, first: usize, len: usize| -> View { buf.view(first, len) };
        let whole = |buf: BufferId| -> View { buf.into() };
        let fused = |x: BufferId, w: View| {
            ops::user(
                &ADD_RMS_NORM,
                &[whole(x), whole(b.resid.id()), w, whole(b.hn.id())],
                seam::Params::dims(1, c.dim, 0).with_scalars(EPS, 0.0),
            )
        };
        let rope = |v: View, heads: u32| {
            ops::user(
                &ROPE,
                &[v, whole(b.freqs.id()), v],
                seam::Params::dims(heads, c.head_size(), pos),
            )
        };
        let (dim, kvd, hidden) = (c.dim, c.kv_dim(), c.hidden_dim);
        let mut v = vec![
            ops::copy(at(b.emb.id(), token as usize * d, d), b.resid.id(), dim),
            ops::rms_norm(
                b.resid.id(),
                at(b.rms_att.id(), 0, d),
                b.hn.id(),
                1,
                dim,
                EPS,
            ),
        ];
        for l in 0..c.n_layers as usize {
            if l > 0 {
                v.push(fused(b.ffn.id(), at(b.rms_att.id(), l * d, d)));
            }
            let cache = l * slots * kv;
            let (k_slot, v_slot) = (
                at(b.kc.id(), cache + pos as usize * kv, kv),
                at(b.vc.id(), cache + pos as usize * kv, kv),
            );
            v.extend([
                ops::gemm(
                    at(b.wq.id(), l * d * d, d * d),
                    b.hn.id(),
                    b.q.id(),
                    dim,
                    1,
                    dim,
                ),
                ops::gemm(
                    at(b.wk.id(), l * kv * d, kv * d),
                    b.hn.id(),
                    k_slot,
                    kvd,
                    1,
                    dim,
                ),
                ops::gemm(
                    at(b.wv.id(), l * kv * d, kv * d),
                    b.hn.id(),
                    v_slot,
                    kvd,
                    1,
                    dim,
                ),
                rope(whole(b.q.id()), c.n_heads),
                rope(k_slot, c.n_kv_heads),
                ops::user(
                    &ATTENTION,
                    &[
                        whole(b.q.id()),
                        at(b.kc.id(), cache, slots * kv),
                        at(b.vc.id(), cache, slots * kv),
                        whole(b.att.id()),
                        whole(b.attn.id()),
                    ],
                    attention::params(c.n_heads, c.n_kv_heads, c.head_size(), pos + 1),
                ),
                ops::gemm(
                    at(b.wo.id(), l * d * d, d * d),
                    b.attn.id(),
                    b.o.id(),
                    dim,
                    1,
                    dim,
                ),
                fused(b.o.id(), at(b.rms_ffn.id(), l * d, d)),
                ops::gemm(
                    at(b.w1.id(), l * hid * d, hid * d),
                    b.hn.id(),
                    b.h1.id(),
                    hidden,
                    1,
                    dim,
                ),
                ops::gemm(
                    at(b.w3.id(), l * hid * d, hid * d),
                    b.hn.id(),
                    b.h3.id(),
                    hidden,
                    1,
                    dim,
                ),
                ops::silu(b.h1.id(), b.silu.id(), hidden),
                ops::mul(b.silu.id(), b.h3.id(), b.gate.id(), hidden),
                ops::gemm(
                    at(b.w2.id(), l * d * hid, d * hid),
                    b.gate.id(),
                    b.ffn.id(),
                    dim,
                    1,
                    hidden,
                ),
            ]);
        }
        let cls = b.wcls.as_ref().unwrap_or(&b.emb).id();
        v.push(fused(b.ffn.id(), whole(b.rms_final.id())));
        v.push(ops::gemm(
            cls,
            b.hn.id(),
            b.logits.id(),
            c.vocab_size,
            1,
            dim,
        ));
        v
    }

    pub fn device(&self) -> &Device {
        &self.dev
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The position the next step feeds.
    pub fn pos(&self) -> u32 {
        self.pos
    }

    /// Launches changed by graph updates so far.
    pub fn updates(&self) -> usize {
        self.updates
    }

    /// Where the host time of the steps so far went.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// Forget every position: the next step feeds position 0 (the cache's
    /// old slots are overwritten before they are read).
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// Feed `token` at the next position and return the logits.
    pub fn step(&mut self, token: u32, mode: Mode) -> Result<Vec<f32>, Error> {
        let id = self.dev.info().id();
        if self.pos >= self.max_pos {
            return Err(Error::Input(format!(
                "{id}: position {} is past the KV cache's {} slots",
                self.pos, self.max_pos
            )));
        }
        if token >= self.cfg.vocab_size {
            return Err(Error::Input(format!(
                "{id}: token {token} is past the vocabulary ({} tokens)",
                self.cfg.vocab_size
            )));
        }
        match mode {
            Mode::Eager => {
                let t = Instant::now();
                for call in self.launches(self.pos, token) {
                    self.dev.launch(&call)?;
                }
                self.timings.submit += t.elapsed();
            }
            Mode::Captured => self.replay(token)?,
        }
        self.pos += 1;
        let t = Instant::now();
        let logits = self.b.logits.read()?;
        self.timings.read += t.elapsed();
        self.timings.steps += 1;
        Ok(logits)
    }

    /// Capture the step (once) and replay it, updated to the position and
    /// token: every launch that differs from what the graph holds is
    /// replaced in one `update_launches`.
    fn replay(&mut self, token: u32) -> Result<(), Error> {
        let pos = self.pos;
        let t = Instant::now();
        let (graph, at_pos, at_token) = match self.graph.take() {
            Some(g) => g,
            None => (self.capture(pos, token)?, pos, token),
        };
        let (was, now) = (self.launches(at_pos, at_token), self.launches(pos, token));
        let changes: Vec<(usize, OpCall)> = was
            .iter()
            .zip(now)
            .enumerate()
            .filter(|(_, (old, new))| *old != new)
            .map(|(i, (_, new))| (i, new))
            .collect();
        // A failed update may leave the graph partly changed: it is dropped
        // and the next step captures afresh.
        if !changes.is_empty() {
            self.dev.update(&graph, &Change::launches(&changes))?;
            self.updates += changes.len();
        }
        let t = {
            let now = Instant::now();
            self.timings.update += now - t;
            now
        };
        graph.replay()?;
        self.timings.submit += t.elapsed();
        self.graph = Some((graph, pos, token));
        Ok(())
    }

    /// Prepare the ops (vendor resources are made outside the capture,
    /// which may allocate nothing) and capture the step at `pos`, `token`.
    fn capture(&self, pos: u32, token: u32) -> Result<Graph, Error> {
        let launches = self.launches(pos, token);
        let mut kinds: Vec<(OpKind, DType)> = Vec::new();
        for call in &launches {
            if !kinds.iter().any(|(op, _)| *op == call.op) {
                kinds.push((call.op, DType::F32));
            }
        }
        self.dev.prepare(&kinds)?;
        let scope = self.dev.capture()?;
        for call in &launches {
            self.dev.launch(call)?;
        }
        Ok(scope.end_graph()?)
    }
}
