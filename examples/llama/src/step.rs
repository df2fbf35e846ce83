//! The decode step of a Llama-architecture model on one device, as a list
//! of launches: run eagerly, or captured once and moved from position to
//! position (and token to token) by graph updates.

use crate::attention::{self, ATTENTION};
use crate::model::{Config, Model};
use crate::Error;
use seam::{ops, Buffer, BufferId, Change, DType, Device, Graph, OpCall, OpKind, View};
use seam_kernels::user::{rope_freqs, ADD_RMS_NORM, ROPE};
use std::time::{Duration, Instant};

mod on_device;

/// Where the parts of a step that move with the position and token come
/// from: launch parameters and views (`Host`), or the state buffer on the
/// device, with `advance` at the end (`Device`: its token list, K, and the
/// stop token).
#[derive(Clone, Copy)]
enum At {
    Host { pos: u32, token: u32 },
    Device { out: BufferId, k: u32, stop: u32 },
}

/// How a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Launch by launch.
    Eager,
    /// Replay of the one captured graph, updated to the position and token.
    Captured,
    /// Up to `per_replay` tokens a replay, the device choosing each next
    /// token in a loop of its own (C14, [`Llama::decode_on_device`]); a
    /// single [`Llama::step`] is refused in it.
    OnDevice { per_replay: u32 },
}

impl Mode {
    /// The mode's name in CSV rows and reports.
    pub fn name(&self) -> String {
        match self {
            Mode::Eager => "eager".into(),
            Mode::Captured => "captured".into(),
            Mode::OnDevice { per_replay } => format!("on-device-{per_replay}"),
        }
    }
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

/// Every buffer of the model on the device. The projections are held
/// transposed, `in × out` per layer (the file's are `out × in`), so that
/// each is a GEMM with m = 1, `x[1 × in] · w[in × out]`: the catalogue's
/// GEMV shape.
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
    /// The classifier, `[dim, vocab]`.
    wcls: Buffer<f32>,
    freqs: Buffer<f32>,
    /// The residual stream, `dim`.
    resid: Buffer<f32>,
    /// The normed residual, `dim`.
    hn: Buffer<f32>,
    q: Buffer<f32>,
    /// The new position's key and value, `kv_dim`.
    k: Buffer<f32>,
    v: Buffer<f32>,
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
    /// The decode state K tokens per replay read and advance
    /// (`loop_kernels::STATE_WORDS`), and RoPE's angles at its position.
    state: Buffer<u32>,
    freq_pos: Buffer<f32>,
}

/// A model on one device with its KV cache, and (once a captured step ran)
/// the graph and the position and token its launches are set for.
pub struct Llama {
    dev: Device,
    cfg: Config,
    max_pos: u32,
    b: Buffers,
    graph: Option<(Graph, u32, u32)>,
    /// The graph that decodes K tokens per replay, once made (`on_device.rs`).
    looped: Option<on_device::Looped>,
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
        // The cache and the scores are single buffers: their element
        // counts must fit a u32 (a buffer's largest), checked before any
        // upload.
        let elements = |what: &str, factors: &[u32]| {
            factors
                .iter()
                .try_fold(1u32, |acc, &k| acc.checked_mul(k))
                .ok_or_else(|| {
                    Error::Input(format!(
                        "{}: a KV cache of {max_pos} positions: the {what} would hold {} elements, more than a buffer's {}",
                        dev.info().id(),
                        factors.iter().map(|&k| u128::from(k)).product::<u128>(),
                        u32::MAX
                    ))
                })
        };
        let cache = elements("cache", &[cfg.n_layers, max_pos, cfg.kv_dim()])?;
        let scores = elements("attention scores", &[cfg.n_heads, max_pos])?;
        for def in [&ROPE, &ADD_RMS_NORM, &ATTENTION] {
            dev.register_kernel(def)?;
        }
        let w = &model.weights;
        let up = |v: &[f32]| dev.buffer_from(v);
        let (d, kv, hid) = (cfg.dim, cfg.kv_dim(), cfg.hidden_dim);
        let up_t = |v: &[f32], layers: u32, rows: u32, cols: u32| {
            dev.buffer_from(&transposed(v, layers, rows as usize, cols as usize))
        };
        let zeros = |n: u32| dev.buffer_from(&vec![0f32; n as usize]);
        let b = Buffers {
            emb: up(&w.token_embedding)?,
            rms_att: up(&w.rms_att)?,
            wq: up_t(&w.wq, cfg.n_layers, d, d)?,
            wk: up_t(&w.wk, cfg.n_layers, kv, d)?,
            wv: up_t(&w.wv, cfg.n_layers, kv, d)?,
            wo: up_t(&w.wo, cfg.n_layers, d, d)?,
            rms_ffn: up(&w.rms_ffn)?,
            w1: up_t(&w.w1, cfg.n_layers, hid, d)?,
            w2: up_t(&w.w2, cfg.n_layers, d, hid)?,
            w3: up_t(&w.w3, cfg.n_layers, hid, d)?,
            rms_final: up(&w.rms_final)?,
            wcls: up_t(&w.wcls, 1, cfg.vocab_size, d)?,
            freqs: up(&rope_freqs(cfg.head_size(), cfg.rope_theta))?,
            resid: zeros(cfg.dim)?,
            hn: zeros(cfg.dim)?,
            q: zeros(cfg.dim)?,
            k: zeros(kv)?,
            v: zeros(kv)?,
            kc: zeros(cache)?,
            vc: zeros(cache)?,
            att: zeros(scores)?,
            attn: zeros(cfg.dim)?,
            o: zeros(cfg.dim)?,
            h1: zeros(cfg.hidden_dim)?,
            h3: zeros(cfg.hidden_dim)?,
            silu: zeros(cfg.hidden_dim)?,
            gate: zeros(cfg.hidden_dim)?,
            ffn: zeros(cfg.dim)?,
            logits: zeros(cfg.vocab_size)?,
            state: dev.buffer_from(&[0u32; crate::loop_kernels::STATE_WORDS])?,
            freq_pos: zeros(cfg.head_size() / 2)?,
        };
        Ok(Llama {
            dev: dev.clone(),
            cfg,
            max_pos,
            b,
            graph: None,
            looped: None,
            pos: 0,
            updates: 0,
            timings: Timings::default(),
        })
    }

    /// The step that feeds `token` at position `pos`, in launch order: the
    /// embedding row copied into the residual and normed, then per layer
    /// the Q, K and V projections, RoPE on Q (in place) and on K written
    /// into the cache slot `pos` through a view, V copied into its slot,
    /// attention over positions `0..=pos`, the output projection and the
    /// residual add fused with the FFN's norm, the SwiGLU FFN (W1, W3, silu,
    /// product, W2), and the next residual add fused with the next norm;
    /// last the classifier.
    ///
    /// What changes with `pos`: per layer both RoPEs' position, the K
    /// RoPE's and the V copy's slot views, and attention's `n`; with
    /// `token`: the embedding copy's view. `4 · layers + 1` launches at
    /// most, none of them a GEMM: a backend that cannot patch a vendor
    /// library's node in place (cuBLAS on CUDA) would otherwise record the
    /// graph anew on every token.
    pub fn launches(&self, pos: u32, token: u32) -> Vec<OpCall> {
        self.build(At::Host { pos, token })
    }

    /// The step with the moving parts (`at`) as [`Llama::launches`] or
    /// `launches_on_device` (`on_device.rs`) make them.
    fn build(&self, at_: At) -> Vec<OpCall> {
        let (b, c) = (&self.b, &self.cfg);
        let (d, kv, hid) = (c.dim as usize, c.kv_dim() as usize, c.hidden_dim as usize);
        let slots = self.max_pos as usize;
        let at = |buf: BufferId, first: usize, len: usize| -> View { buf.view(first, len) };
        let whole = |buf: BufferId| -> View { buf.into() };
        let fused = |x: BufferId, w: View| {
            ops::user(
                &ADD_RMS_NORM,
                &[whole(x), whole(b.resid.id()), w, whole(b.hn.id())],
                seam::Params::dims(1, c.dim, 0).with_scalars(c.eps, 0.0),
            )
        };
        let rope = |x: View, freqs: BufferId, y: View, heads: u32, pos: u32| {
            ops::user(
                &ROPE,
                &[x, whole(freqs), y],
                seam::Params::dims(heads, c.head_size(), pos),
            )
        };
        // `y[1 × n] = x[1 × k] · w[k × n]`.
        let proj = |x: BufferId, w: View, y: View, n: u32, k: u32| ops::gemm(x, w, y, 1, n, k);
        let (dim, kvd, hidden) = (c.dim, c.kv_dim(), c.hidden_dim);
        let mut v = vec![
            match at_ {
                At::Host { token, .. } => {
                    ops::copy(at(b.emb.id(), token as usize * d, d), b.resid.id(), dim)
                }
                At::Device { .. } => on_device::embed(b),
            },
            ops::rms_norm(
                b.resid.id(),
                at(b.rms_att.id(), 0, d),
                b.hn.id(),
                1,
                dim,
                c.eps,
            ),
        ];
        if let At::Device { .. } = at_ {
            v.push(on_device::pos_freqs(b, c));
        }
        for l in 0..c.n_layers as usize {
            if l > 0 {
                v.push(fused(b.ffn.id(), at(b.rms_att.id(), l * d, d)));
            }
            let cache = l * slots * kv;
            let (kc, vc) = (
                at(b.kc.id(), cache, slots * kv),
                at(b.vc.id(), cache, slots * kv),
            );
            v.extend([
                proj(
                    b.hn.id(),
                    at(b.wq.id(), l * d * d, d * d),
                    whole(b.q.id()),
                    dim,
                    dim,
                ),
                proj(
                    b.hn.id(),
                    at(b.wk.id(), l * kv * d, kv * d),
                    whole(b.k.id()),
                    kvd,
                    dim,
                ),
                proj(
                    b.hn.id(),
                    at(b.wv.id(), l * kv * d, kv * d),
                    whole(b.v.id()),
                    kvd,
                    dim,
                ),
            ]);
            let (q, k) = (whole(b.q.id()), whole(b.k.id()));
            match at_ {
                At::Host { pos, .. } => {
                    let slot = cache + pos as usize * kv;
                    v.extend([
                        rope(q, b.freqs.id(), q, c.n_heads, pos),
                        rope(k, b.freqs.id(), at(b.kc.id(), slot, kv), c.n_kv_heads, pos),
                        ops::copy(b.v.id(), at(b.vc.id(), slot, kv), kvd),
                        ops::user(
                            &ATTENTION,
                            &[q, kc, vc, whole(b.att.id()), whole(b.attn.id())],
                            attention::params(c.n_heads, c.n_kv_heads, c.head_size(), pos + 1),
                        ),
                    ]);
                }
                // RoPE at position 1 on angles already at the state's
                // position; K rotated in place, then stored to its slot.
                At::Device { .. } => v.extend([
                    rope(q, b.freq_pos.id(), q, c.n_heads, 1),
                    rope(k, b.freq_pos.id(), k, c.n_kv_heads, 1),
                    on_device::store(b, b.k.id(), kc, self.max_pos, kvd),
                    on_device::store(b, b.v.id(), vc, self.max_pos, kvd),
                    on_device::attention(b, c, kc, vc, self.max_pos),
                ]),
            }
            v.extend([
                proj(
                    b.attn.id(),
                    at(b.wo.id(), l * d * d, d * d),
                    whole(b.o.id()),
                    dim,
                    dim,
                ),
                fused(b.o.id(), at(b.rms_ffn.id(), l * d, d)),
                proj(
                    b.hn.id(),
                    at(b.w1.id(), l * hid * d, hid * d),
                    whole(b.h1.id()),
                    hidden,
                    dim,
                ),
                proj(
                    b.hn.id(),
                    at(b.w3.id(), l * hid * d, hid * d),
                    whole(b.h3.id()),
                    hidden,
                    dim,
                ),
                ops::silu(b.h1.id(), b.silu.id(), hidden),
                ops::mul(b.silu.id(), b.h3.id(), b.gate.id(), hidden),
                proj(
                    b.gate.id(),
                    at(b.w2.id(), l * d * hid, d * hid),
                    whole(b.ffn.id()),
                    dim,
                    hidden,
                ),
            ]);
        }
        v.push(fused(b.ffn.id(), whole(b.rms_final.id())));
        v.push(proj(
            b.hn.id(),
            whole(b.wcls.id()),
            whole(b.logits.id()),
            c.vocab_size,
            dim,
        ));
        if let At::Device { out, k, stop } = at_ {
            v.push(on_device::advance(b, c, out, k, stop, self.max_pos));
        }
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

    /// Refused by name: feeding `token` at the next position, where the
    /// KV cache is full or the token is past the vocabulary.
    fn check_feed(&self, token: u32) -> Result<(), Error> {
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
        Ok(())
    }

    /// Feed `token` at the next position and return the logits.
    pub fn step(&mut self, token: u32, mode: Mode) -> Result<Vec<f32>, Error> {
        let id = self.dev.info().id();
        self.check_feed(token)?;
        match mode {
            Mode::Eager => {
                let t = Instant::now();
                for call in self.launches(self.pos, token) {
                    self.dev.launch(&call)?;
                }
                self.timings.submit += t.elapsed();
            }
            Mode::Captured => self.replay(token)?,
            Mode::OnDevice { .. } => {
                return Err(Error::Input(format!(
                    "{id}: a step feeds one token and returns its logits; decode_on_device decodes on the device"
                )))
            }
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
        self.prepare(&launches)?;
        let scope = self.dev.capture()?;
        for call in &launches {
            self.dev.launch(call)?;
        }
        Ok(scope.end_graph()?)
    }
}

impl Llama {
    /// Prepare every op of `launches` (vendor resources and pipelines are
    /// made outside a capture, which may allocate nothing).
    fn prepare(&self, launches: &[OpCall]) -> Result<(), Error> {
        let mut kinds: Vec<(OpKind, DType)> = Vec::new();
        for call in launches {
            if !kinds.iter().any(|(op, _)| *op == call.op) {
                kinds.push((call.op, DType::F32));
            }
        }
        Ok(self.dev.prepare(&kinds)?)
    }
}

/// `layers` matrices of `rows × cols`, each transposed to `cols × rows`.
fn transposed(w: &[f32], layers: u32, rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; w.len()];
    for (src, dst) in w
        .chunks_exact(rows * cols)
        .zip(out.chunks_exact_mut(rows * cols))
        .take(layers as usize)
    {
        for r in 0..rows {
            for (c, v) in src[r * cols..][..cols].iter().enumerate() {
                dst[c * rows + r] = *v;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Mode;

    #[test]
    fn modes_are_named_as_the_reports_name_them() {
        assert_eq!(Mode::Eager.name(), "eager");
        assert_eq!(Mode::Captured.name(), "captured");
        assert_eq!(Mode::OnDevice { per_replay: 8 }.name(), "on-device-8");
    }
}
