//! A Llama-architecture model in the llama2.c checkpoint format: its shape
//! and its f32 weights, read whole and checked field by field.
//!
//! The format: 7 little-endian `i32` (dim, hidden_dim, n_layers, n_heads,
//! n_kv_heads, vocab_size, seq_len), then f32 arrays in this order:
//! token_embedding `[vocab, dim]`, rms_att `[L, dim]`, wq `[L, dim, dim]`,
//! wk `[L, kv_dim, dim]`, wv `[L, kv_dim, dim]`, wo `[L, dim, dim]`, rms_ffn
//! `[L, dim]`, w1 `[L, hidden, dim]`, w2 `[L, dim, hidden]`, w3 `[L, hidden,
//! dim]`, rms_final `[dim]`, the RoPE tables freq_cis_real and freq_cis_imag
//! `[seq_len, head_size / 2]` each (unused: RoPE computes its own), and
//! `[vocab, dim]` classifier weights only when vocab_size is negative (else
//! the classifier is the embedding). Matrices are `out × in`, row-major.

use std::fmt;
use std::path::Path;

/// The model's shape, as its header gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub dim: u32,
    pub hidden_dim: u32,
    pub n_layers: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub vocab_size: u32,
    /// Positions the model was trained for: the KV cache's slots.
    pub seq_len: u32,
    /// Whether the classifier has its own weights (a negative vocab_size in
    /// the header) rather than the embedding's.
    pub own_classifier: bool,
    /// RMSNorm's epsilon.
    pub eps: f32,
    /// RoPE's base: `freq[i] = rope_theta^(-2i / head_size)`.
    pub rope_theta: f64,
}

/// RMSNorm's epsilon in llama2.c's models.
pub const EPS: f32 = 1e-5;
/// RoPE's base in llama2.c's models.
pub const THETA: f64 = 10_000.0;

impl Config {
    pub fn head_size(&self) -> u32 {
        self.dim / self.n_heads
    }

    /// Whether the heads fit the width: `Err((false, why))` where `dim` is
    /// not an even head size times `n_heads`, `Err((true, why))` where
    /// `n_kv_heads` does not divide the heads (the readers name the field).
    pub fn heads_fit(&self) -> Result<(), (bool, String)> {
        let (dim, h, kv) = (self.dim, self.n_heads, self.n_kv_heads);
        if h == 0 || !dim.is_multiple_of(h) || !(dim / h).is_multiple_of(2) {
            return Err((
                false,
                format!("dim {dim} is not an even head size times {h} heads"),
            ));
        }
        // (0 divides no count of heads: `h` is not 0 here.)
        if !h.is_multiple_of(kv) {
            return Err((true, format!("{kv} does not divide the {h} heads")));
        }
        Ok(())
    }

    /// Width of the keys and values of one position: `dim · kv_heads / heads`.
    pub fn kv_dim(&self) -> u32 {
        self.head_size() * self.n_kv_heads
    }

    /// Every f32 array of the file in order: name and element count
    /// (including the RoPE tables this crate skips); `None` where the count
    /// overflows `usize` (a hostile header).
    fn fields(&self) -> Vec<(&'static str, Option<usize>)> {
        let (d, h, l) = (
            self.dim as usize,
            self.hidden_dim as usize,
            self.n_layers as usize,
        );
        let (kv, v, s) = (
            self.kv_dim() as usize,
            self.vocab_size as usize,
            self.seq_len as usize,
        );
        let half = self.head_size() as usize / 2;
        let product = |factors: &[usize]| {
            factors
                .iter()
                .try_fold(1usize, |acc, &k| acc.checked_mul(k))
        };
        let mut f = vec![
            ("token_embedding", product(&[v, d])),
            ("rms_att", product(&[l, d])),
            ("wq", product(&[l, d, d])),
            ("wk", product(&[l, kv, d])),
            ("wv", product(&[l, kv, d])),
            ("wo", product(&[l, d, d])),
            ("rms_ffn", product(&[l, d])),
            ("w1", product(&[l, h, d])),
            ("w2", product(&[l, d, h])),
            ("w3", product(&[l, h, d])),
            ("rms_final", Some(d)),
            ("freq_cis_real", product(&[s, half])),
            ("freq_cis_imag", product(&[s, half])),
        ];
        if self.own_classifier {
            f.push(("wcls", product(&[v, d])));
        }
        f
    }
}

/// Every weight, all layers of a kind in one array (layer `l` of `wq` is
/// `wq[l · dim · dim ..][.. dim · dim]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    pub token_embedding: Vec<f32>,
    pub rms_att: Vec<f32>,
    pub wq: Vec<f32>,
    pub wk: Vec<f32>,
    pub wv: Vec<f32>,
    pub wo: Vec<f32>,
    pub rms_ffn: Vec<f32>,
    pub w1: Vec<f32>,
    pub w2: Vec<f32>,
    pub w3: Vec<f32>,
    pub rms_final: Vec<f32>,
    /// The classifier, `[vocab, dim]` (the embedding's copy when shared).
    pub wcls: Vec<f32>,
}

/// A model read from a checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub config: Config,
    pub weights: Weights,
    /// Each token's text, where the file carries a vocabulary (GGUF does;
    /// a llama2.c checkpoint does not).
    pub vocab: Option<crate::gguf::Vocab>,
}

/// Why a checkpoint could not be read: the file, and the byte offset and
/// field where it went wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadError {
    pub file: String,
    /// Byte offset of the field (or of the first byte past the expected end).
    pub offset: u64,
    /// The header field, array, GGUF key or tensor.
    pub field: String,
    pub reason: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: `{}` at byte offset {}: {}",
            self.file, self.field, self.offset, self.reason
        )
    }
}

impl std::error::Error for LoadError {}

const HEADER: [&str; 7] = [
    "dim",
    "hidden_dim",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "vocab_size",
    "seq_len",
];

impl Model {
    /// Read a model file: GGUF ([`crate::gguf`]) where it starts with
    /// `GGUF`, else a llama2.c checkpoint.
    pub fn load(path: &Path) -> Result<Model, LoadError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| LoadError {
            file: file.clone(),
            offset: 0,
            field: "file".into(),
            reason: format!("cannot be read: {e}"),
        })?;
        match bytes.starts_with(crate::gguf::MAGIC) {
            true => crate::gguf::parse(&file, &bytes),
            false => Model::parse(&file, &bytes),
        }
    }

    /// Parse a llama2.c checkpoint's bytes (`file` names it in errors).
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Model, LoadError> {
        let err = |offset: usize, field: &str, reason: String| LoadError {
            file: file.to_string(),
            offset: offset as u64,
            field: field.to_string(),
            reason,
        };
        let mut h = [0i32; 7];
        for (i, name) in HEADER.iter().enumerate() {
            let at = 4 * i;
            let Some(word) = bytes.get(at..at + 4) else {
                return Err(err(
                    at,
                    name,
                    format!(
                        "the file ends after {} bytes, inside the 28-byte header",
                        bytes.len()
                    ),
                ));
            };
            h[i] = i32::from_le_bytes(word.try_into().expect("4 bytes"));
        }
        let positive = |i: usize| -> Result<u32, LoadError> {
            u32::try_from(h[i])
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| err(4 * i, HEADER[i], format!("{} is not positive", h[i])))
        };
        let (dim, hidden_dim, n_layers) = (positive(0)?, positive(1)?, positive(2)?);
        let (n_heads, n_kv_heads, seq_len) = (positive(3)?, positive(4)?, positive(6)?);
        if h[5] == 0 || h[5] == i32::MIN {
            return Err(err(20, "vocab_size", format!("{} is not a size", h[5])));
        }
        let config = Config {
            dim,
            hidden_dim,
            n_layers,
            n_heads,
            n_kv_heads,
            vocab_size: h[5].unsigned_abs(),
            seq_len,
            own_classifier: h[5].is_negative(),
            eps: EPS,
            rope_theta: THETA,
        };
        match config.heads_fit() {
            Err((false, why)) => return Err(err(12, "n_heads", why)),
            Err((true, why)) => return Err(err(16, "n_kv_heads", why)),
            Ok(()) => {}
        }
        let mut arrays: Vec<Vec<f32>> = Vec::new();
        let mut at = 28usize;
        for (field, count) in config.fields() {
            let Some(count) = count else {
                return Err(err(
                    at,
                    field,
                    "its element count, from the header's sizes, overflows".into(),
                ));
            };
            let end = count
                .checked_mul(4)
                .and_then(|n| n.checked_add(at))
                .filter(|end| *end <= bytes.len())
                .ok_or_else(|| {
                    err(
                        at,
                        field,
                        format!(
                            "{count} f32 values run past the end of the file ({} bytes)",
                            bytes.len()
                        ),
                    )
                })?;
            let values: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[at..end]);
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(err(
                    at + 4 * i,
                    field,
                    format!("element {i} is {}, not a finite number", values[i]),
                ));
            }
            arrays.push(values);
            at = end;
        }
        if at != bytes.len() {
            return Err(err(
                at,
                "end of file",
                format!(
                    "{} bytes follow the last field; the header describes a {at}-byte file",
                    bytes.len() - at
                ),
            ));
        }
        let mut next = arrays.into_iter();
        let mut take = || next.next().expect("one array per field");
        let token_embedding = take();
        let weights = Weights {
            rms_att: take(),
            wq: take(),
            wk: take(),
            wv: take(),
            wo: take(),
            rms_ffn: take(),
            w1: take(),
            w2: take(),
            w3: take(),
            rms_final: take(),
            wcls: {
                let (_real, _imag) = (take(), take());
                if config.own_classifier {
                    take()
                } else {
                    token_embedding.clone()
                }
            },
            token_embedding,
        };
        Ok(Model {
            config,
            weights,
            vocab: None,
        })
    }

    /// The checkpoint's bytes (the inverse of [`Model::parse`]; the RoPE
    /// tables are written as zeros).
    pub fn to_bytes(&self) -> Vec<u8> {
        let c = &self.config;
        let vocab = if c.own_classifier {
            -(c.vocab_size as i32)
        } else {
            c.vocab_size as i32
        };
        let header = [
            c.dim as i32,
            c.hidden_dim as i32,
            c.n_layers as i32,
            c.n_heads as i32,
            c.n_kv_heads as i32,
            vocab,
            c.seq_len as i32,
        ];
        let w = &self.weights;
        let table = vec![0f32; c.seq_len as usize * c.head_size() as usize / 2];
        let mut parts: Vec<&[f32]> = vec![
            &w.token_embedding,
            &w.rms_att,
            &w.wq,
            &w.wk,
            &w.wv,
            &w.wo,
            &w.rms_ffn,
            &w.w1,
            &w.w2,
            &w.w3,
            &w.rms_final,
            &table,
            &table,
        ];
        if c.own_classifier {
            parts.push(&w.wcls);
        }
        let mut out: Vec<u8> = bytemuck::cast_slice(&header).to_vec();
        for p in parts {
            out.extend_from_slice(bytemuck::cast_slice(p));
        }
        out
    }

    /// A model of shape `config` with random weights (deterministic from
    /// `seed`): for tests and for timing a shape whose file is not at hand.
    pub fn random(config: Config, seed: u64) -> Model {
        let mut rng = seam::testing::Rng::new(seed);
        let mut next = move || rng.next_unit() * 2.0 - 1.0;
        let mut vec = |n: u32, scale: f32, base: f32| -> Vec<f32> {
            (0..n).map(|_| base + scale * next()).collect()
        };
        let c = &config;
        let (d, h, l, kv, v) = (c.dim, c.hidden_dim, c.n_layers, c.kv_dim(), c.vocab_size);
        let (sd, sh) = (1.0 / (d as f32).sqrt(), 1.0 / (h as f32).sqrt());
        let token_embedding = vec(v * d, 1.0, 0.0);
        let weights = Weights {
            rms_att: vec(l * d, 0.25, 1.0),
            wq: vec(l * d * d, sd, 0.0),
            wk: vec(l * kv * d, sd, 0.0),
            wv: vec(l * kv * d, sd, 0.0),
            wo: vec(l * d * d, sd, 0.0),
            rms_ffn: vec(l * d, 0.25, 1.0),
            w1: vec(l * h * d, sd, 0.0),
            w2: vec(l * d * h, sh, 0.0),
            w3: vec(l * h * d, sd, 0.0),
            rms_final: vec(d, 0.25, 1.0),
            wcls: if c.own_classifier {
                vec(v * d, sd, 0.0)
            } else {
                token_embedding.clone()
            },
            token_embedding,
        };
        Model {
            config,
            weights,
            vocab: None,
        }
    }
}
