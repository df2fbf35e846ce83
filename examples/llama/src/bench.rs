//! `seam-llama bench`: greedy decoding timed per device, eager and
//! captured in alternating rounds, with where each token's host time goes.

use crate::check::argmax;
use crate::model::Config;
use crate::step::{Llama, Mode, Timings};
use crate::{Error, Model};
use seam::Device;
use std::time::Instant;

/// BOS in llama2.c's tokenizer: every run starts from it.
pub const BOS: u32 = 1;

/// Model shapes known by name, for timing with random weights where the
/// file is not at hand.
pub fn shape(name: &str) -> Option<Config> {
    match name {
        // SmolLM2-135M: 30 layers of 576, 9 heads of 64 over 3 kv heads,
        // SwiGLU of 1536, vocabulary 49152, tied embeddings, RoPE base 1e5.
        "smollm2-135m" => Some(Config {
            dim: 576,
            hidden_dim: 1536,
            n_layers: 30,
            n_heads: 9,
            n_kv_heads: 3,
            vocab_size: 49152,
            seq_len: 2048,
            own_classifier: false,
            eps: 1e-5,
            rope_theta: 100_000.0,
        }),
        // stories260K's shape.
        "stories260k" => Some(Config {
            dim: 64,
            hidden_dim: 172,
            n_layers: 5,
            n_heads: 8,
            n_kv_heads: 4,
            vocab_size: 512,
            seq_len: 512,
            own_classifier: false,
            eps: crate::model::EPS,
            rope_theta: crate::model::THETA,
        }),
        _ => None,
    }
}

/// The names [`shape`] knows.
pub const SHAPES: &[&str] = &["smollm2-135m", "stories260k"];

/// One timed round: `tokens` greedy steps from BOS.
#[derive(Clone, Debug, PartialEq)]
pub struct Round {
    pub mode: Mode,
    pub tokens_per_s: f64,
    /// Per token, in µs.
    pub update_us: f64,
    pub submit_us: f64,
    pub read_us: f64,
}

/// Greedy decoding of `tokens` steps from BOS, from position 0.
pub fn generate(llama: &mut Llama, mode: Mode, tokens: u32) -> Result<Vec<u32>, Error> {
    llama.reset();
    let mut token = BOS;
    let mut out = Vec::with_capacity(tokens as usize);
    if let Mode::OnDevice { per_replay } = mode {
        while out.len() < tokens as usize {
            let k = per_replay.min(tokens - out.len() as u32);
            let made = llama.decode_on_device(token, k, None)?;
            token = *made.last().ok_or_else(|| {
                Error::Input(format!(
                    "{}: a replay made no token",
                    llama.device().info().id()
                ))
            })?;
            out.extend(made);
        }
        return Ok(out);
    }
    for _ in 0..tokens {
        token = argmax(&llama.step(token, mode)?);
        out.push(token);
    }
    Ok(out)
}

/// On `dev`: one untimed round of each mode in `modes` (kernels
/// compiled, the graphs captured), then `rounds` rounds of each,
/// alternating. Every round must produce the same tokens (else the run is
/// an error: a captured graph that drifted from eager would otherwise be
/// timed as if correct).
pub fn bench(
    dev: &Device,
    model: &Model,
    tokens: u32,
    rounds: u32,
    modes: &[Mode],
) -> Result<Vec<Round>, Error> {
    let mut llama = Llama::new(dev, model, tokens)?;
    let want = generate(&mut llama, Mode::Eager, tokens)?;
    let mut out = Vec::new();
    for round in 0..=rounds {
        for &mode in modes {
            let before = llama.timings();
            let t = Instant::now();
            let got = generate(&mut llama, mode, tokens)?;
            let secs = t.elapsed().as_secs_f64();
            if got != want {
                let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                return Err(Error::Input(format!(
                    "{}: {mode:?} round {round} chose token {} at position {at} where the first eager run chose {}",
                    dev.info().id(),
                    got[at],
                    want[at]
                )));
            }
            if round == 0 {
                continue;
            }
            let after = llama.timings();
            let per = |f: fn(&Timings) -> std::time::Duration| {
                (f(&after) - f(&before)).as_secs_f64() * 1e6 / tokens as f64
            };
            out.push(Round {
                mode,
                tokens_per_s: tokens as f64 / secs,
                update_us: per(|t| t.update),
                submit_us: per(|t| t.submit),
                read_us: per(|t| t.read),
            });
        }
    }
    Ok(out)
}

/// Median and range of `v`.
pub fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let med = match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    };
    (
        med,
        s.first().copied().unwrap_or(f64::NAN),
        s.last().copied().unwrap_or(f64::NAN),
    )
}
