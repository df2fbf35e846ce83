//! K tokens per replay (C14): the decode step captured once inside a WHILE
//! of K iterations, everything that moves from token to token read on the
//! device from the state buffer, and the greedy next token, the position
//! and the condition written there by `advance` (`loop_kernels`). One
//! replay feeds a token and makes up to K, stopping on the device at the
//! stop token or the end of the KV cache.

use super::{At, Buffers, Llama};
use crate::attention;
use crate::loop_kernels::{
    ADVANCE, ATTENTION_AT, COND, EMBED_AT, MADE, POS_FREQS, STATE_WORDS, STORE_AT,
};
use crate::model::Config;
use crate::Error;
use std::time::Instant;

use seam::{ops, Buffer, BufferId, ConditionalSupport, Graph, OpCall, Params, View};

/// The looping graph: its K, stop token and the list the tokens go to.
pub(super) struct Looped {
    graph: Graph,
    k: u32,
    stop: u32,
    out: Buffer<u32>,
}

impl Llama {
    /// Feed `token` at the next position and decode up to `k` greedy
    /// tokens in one replay, stopping after `stop` (where given) or at the
    /// end of the KV cache; the tokens made, and the position moved past
    /// them. Where the device runs no conditional bodies, refused by name.
    pub fn decode_on_device(
        &mut self,
        token: u32,
        k: u32,
        stop: Option<u32>,
    ) -> Result<Vec<u32>, Error> {
        let id = self.dev.info().id();
        if let ConditionalSupport::Unsupported(why) = self.dev.conditional_support() {
            return Err(Error::Input(format!(
                "{id}: decoding on the device needs conditional bodies: {why}"
            )));
        }
        if k == 0 {
            return Err(Error::Input(format!("{id}: decoding 0 tokens")));
        }
        self.check_feed(token)?;
        // No vocabulary index is u32::MAX: never stops.
        let stop = stop.unwrap_or(u32::MAX);
        if !self
            .looped
            .as_ref()
            .is_some_and(|l| l.k == k && l.stop == stop)
        {
            self.looped = None;
            self.looped = Some(self.capture_loop(k, stop)?);
        }
        let looped = self.looped.as_ref().expect("made above");
        let mut state = [0u32; STATE_WORDS];
        state[..3].copy_from_slice(&[token, self.pos, 1]);
        let t = Instant::now();
        self.dev.write(self.b.state.id(), 0, &state)?;
        looped.graph.replay()?;
        let t = {
            let now = Instant::now();
            self.timings.submit += now - t;
            now
        };
        let state = self.b.state.read()?;
        let made = state[MADE].min(k);
        let tokens = looped.out.read()?[..made as usize].to_vec();
        self.timings.read += t.elapsed();
        self.timings.steps += made;
        self.pos += made;
        Ok(tokens)
    }

    /// The logits of the last step run (eager, replayed or on the device).
    pub fn logits(&self) -> Result<Vec<f32>, Error> {
        Ok(self.b.logits.read()?)
    }

    /// Register the loop's kernels, prepare every op and capture the step
    /// inside a WHILE of `k` iterations over the state's condition.
    fn capture_loop(&self, k: u32, stop: u32) -> Result<Looped, Error> {
        for def in [&EMBED_AT, &POS_FREQS, &STORE_AT, &ATTENTION_AT, &ADVANCE] {
            self.dev.register_kernel(def)?;
        }
        let out = self.dev.buffer_from(&vec![0u32; k as usize])?;
        let launches = self.launches_on_device(out.id(), k, stop);
        self.prepare(&launches)?;
        let scope = self.dev.capture()?;
        scope.run_while(self.b.state.id().view(COND, 1), k, || {
            for call in &launches {
                self.dev.launch(call)?;
            }
            Ok(())
        })?;
        Ok(Looped {
            graph: scope.end_graph()?,
            k,
            stop,
            out,
        })
    }

    /// The step of [`Llama::launches`] with nothing that moves with the
    /// position or token in a launch: the embedding row, RoPE's angles,
    /// the K and V slots and attention's length come from the state, and
    /// `advance` ends the step.
    pub fn launches_on_device(&self, out: BufferId, k: u32, stop: u32) -> Vec<OpCall> {
        self.build(At::Device { out, k, stop })
    }
}

fn whole(buf: BufferId) -> View {
    buf.into()
}

/// The state's token's embedding row into the residual.
pub(super) fn embed(b: &Buffers) -> OpCall {
    ops::user(
        &EMBED_AT,
        &[whole(b.emb.id()), whole(b.state.id()), whole(b.resid.id())],
        Params::dims(
            b.resid.len() as u32,
            (b.emb.len() / b.resid.len()) as u32,
            0,
        ),
    )
}

/// RoPE's angles at the state's position.
pub(super) fn pos_freqs(b: &Buffers, c: &Config) -> OpCall {
    ops::user(
        &POS_FREQS,
        &[
            whole(b.freqs.id()),
            whole(b.state.id()),
            whole(b.freq_pos.id()),
        ],
        Params::dims(c.head_size() / 2, 0, 0),
    )
}

/// `src` into its slot of a layer's `cache` at the state's position.
pub(super) fn store(b: &Buffers, src: BufferId, cache: View, slots: u32, n: u32) -> OpCall {
    ops::user(
        &STORE_AT,
        &[whole(src), whole(b.state.id()), cache],
        Params::dims(n, slots, 0),
    )
}

/// Attention over the state's positions so far (at most `slots`).
pub(super) fn attention(b: &Buffers, c: &Config, kc: View, vc: View, slots: u32) -> OpCall {
    ops::user(
        &ATTENTION_AT,
        &[
            whole(b.q.id()),
            kc,
            vc,
            whole(b.att.id()),
            whole(b.attn.id()),
            whole(b.state.id()),
        ],
        attention::params(c.n_heads, c.n_kv_heads, c.head_size(), slots),
    )
}

/// The greedy next token into the state and `out`; the condition cleared
/// at `stop` or at the cache's end.
pub(super) fn advance(
    b: &Buffers,
    c: &Config,
    out: BufferId,
    k: u32,
    stop: u32,
    slots: u32,
) -> OpCall {
    ops::user(
        &ADVANCE,
        &[whole(b.logits.id()), whole(b.state.id()), whole(out)],
        Params {
            bits: stop,
            ..Params::dims(c.vocab_size, slots, k)
        },
    )
}
