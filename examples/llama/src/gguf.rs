//! A Llama-architecture model from a GGUF file (llama.cpp's format), read
//! with the `gguf-rs-lib` crate and dequantised to f32 at load: F32, F16,
//! Q8_0 and Q4_1 tensors (what SmolLM2-135M's Q4_1 file holds).
//!
//! GGUF lists a matrix's shape inner dimension first: `[in, out]` is `out`
//! rows of `in`, the layout of llama2.c's `out × in`. llama.cpp's converter
//! permutes Q and K so that RoPE rotates adjacent pairs `(2i, 2i + 1)`, as
//! this crate's RoPE does.

use crate::model::{Config, LoadError, Model, Weights};
use gguf_rs_lib::reader::GGUFFileReader;
use gguf_rs_lib::tensor::TensorType;
use half::f16;
use std::io::Cursor;

/// GGUF's magic, the file's first four bytes.
pub const MAGIC: &[u8; 4] = b"GGUF";

/// Values per block of the Q8_0 and Q4_1 formats.
const BLOCK: usize = 32;

/// Dequantise `bytes` of type `ty` into `n` f32 values, or say why not.
pub fn dequantize(ty: TensorType, bytes: &[u8], n: usize) -> Result<Vec<f32>, String> {
    let want = |per: usize, size: usize| -> Result<(), String> {
        let need = n.div_ceil(per) * size;
        match n.is_multiple_of(per) && bytes.len() == need {
            true => Ok(()),
            false => Err(format!(
                "{n} values of {ty:?} need {need} bytes in blocks of {per}; the tensor has {}",
                bytes.len()
            )),
        }
    };
    let h = |b: &[u8]| f16::from_le_bytes([b[0], b[1]]).to_f32();
    let out: Vec<f32> = match ty {
        TensorType::F32 => {
            want(1, 4)?;
            bytemuck::pod_collect_to_vec(bytes)
        }
        TensorType::F16 => {
            want(1, 2)?;
            bytes.chunks_exact(2).map(h).collect()
        }
        // 2 bytes of f16 scale d, then 32 i8: x = d · q.
        TensorType::Q8_0 => {
            want(BLOCK, 34)?;
            bytes
                .chunks_exact(34)
                .flat_map(|b| {
                    let d = h(b);
                    b[2..].iter().map(move |q| d * (*q as i8) as f32)
                })
                .collect()
        }
        // f16 scale d and minimum m, then 16 bytes: value j < 16 is the low
        // nibble of byte j, value j + 16 its high nibble; x = d · q + m.
        TensorType::Q4_1 => {
            want(BLOCK, 20)?;
            bytes
                .chunks_exact(20)
                .flat_map(|b| {
                    let (d, m, qs) = (h(b), h(&b[2..]), &b[4..]);
                    let low = qs.iter().map(move |q| d * (q & 0xF) as f32 + m);
                    let high = qs.iter().map(move |q| d * (q >> 4) as f32 + m);
                    low.chain(high).collect::<Vec<f32>>()
                })
                .collect()
        }
        other => {
            return Err(format!(
                "type {other:?} is not one this reader dequantises (F32, F16, Q8_0, Q4_1)"
            ))
        }
    };
    if let Some(i) = out.iter().position(|v| !v.is_finite()) {
        return Err(format!("element {i} is {}, not a finite number", out[i]));
    }
    Ok(out)
}

/// Read a GGUF model of architecture `llama` (`file` names it in errors).
pub fn parse(file: &str, bytes: &[u8]) -> Result<Model, LoadError> {
    let err = |offset: u64, field: &str, reason: String| LoadError {
        file: file.to_string(),
        offset,
        field: field.to_string(),
        reason,
    };
    let mut r = GGUFFileReader::new(Cursor::new(bytes)).map_err(|e| {
        err(
            0,
            "header",
            format!("not a GGUF file this reader takes: {e}"),
        )
    })?;
    let meta = r.metadata().clone();
    let arch = meta.get_string("general.architecture").unwrap_or("");
    if arch != "llama" {
        return Err(err(
            0,
            "general.architecture",
            format!("`{arch}`: only `llama` is read"),
        ));
    }
    // An integer of any of GGUF's integer types (writers differ: the
    // format's own files use u32, others i32); `None` when the key is absent.
    let integer = |full: &str| -> Result<Option<i128>, LoadError> {
        match meta.get(full) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(i128::from)
                .or_else(|| v.as_i64().map(i128::from))
                .map(Some)
                .ok_or_else(|| err(0, full, format!("{v:?} is not an integer"))),
        }
    };
    let int = |key: &str| -> Result<u32, LoadError> {
        let full = format!("llama.{key}");
        let v = integer(&full)?.ok_or_else(|| err(0, &full, "missing".into()))?;
        u32::try_from(v)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| err(0, &full, format!("{v} is not a positive 32-bit integer")))
    };
    let (dim, hidden_dim, n_layers) = (
        int("embedding_length")?,
        int("feed_forward_length")?,
        int("block_count")?,
    );
    let (n_heads, n_kv_heads, seq_len) = (
        int("attention.head_count")?,
        int("attention.head_count_kv")?,
        int("context_length")?,
    );
    let float = |key: &str, default: f64| -> Result<f64, LoadError> {
        let full = format!("llama.{key}");
        match meta.get(&full) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| err(0, &full, "not a finite number > 0".into())),
        }
    };
    let rope_theta = float("rope.freq_base", 10_000.0)?;
    let eps_key = "attention.layer_norm_rms_epsilon";
    let eps = float(eps_key, 1e-5)?;
    // Used as an f32: it must stay finite and non-zero there.
    let eps = Some(eps as f32)
        .filter(|e| e.is_finite() && *e > 0.0)
        .ok_or_else(|| {
            err(
                0,
                &format!("llama.{eps_key}"),
                format!("{eps:e} is not a finite number > 0 as an f32"),
            )
        })?;
    let base = r.tensor_data_offset();
    let vocab_size = r
        .get_tensor_info("token_embd.weight")
        .and_then(|t| t.shape().dims().get(1).copied())
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v > 0)
        .ok_or_else(|| {
            err(
                base,
                "token_embd.weight",
                "missing, or not [dim, vocab]".into(),
            )
        })?;
    let own_classifier = r.get_tensor_info("output.weight").is_some();
    let config = Config {
        dim,
        hidden_dim,
        n_layers,
        n_heads,
        n_kv_heads,
        vocab_size,
        seq_len,
        own_classifier,
        eps,
        rope_theta,
    };
    match config.heads_fit() {
        Err((false, why)) => return Err(err(0, "llama.attention.head_count", why)),
        Err((true, why)) => return Err(err(0, "llama.attention.head_count_kv", why)),
        Ok(()) => {}
    }
    if let Some(rot) = integer("llama.rope.dimension_count")? {
        if rot != i128::from(dim / n_heads) {
            return Err(err(
                0,
                "llama.rope.dimension_count",
                format!(
                    "{rot}: RoPE over part of a head of {} is not supported",
                    dim / n_heads
                ),
            ));
        }
    }
    // One tensor, checked against its expected shape (inner dimension
    // first) and dequantised.
    let mut tensor = |name: &str, shape: &[u32]| -> Result<Vec<f32>, LoadError> {
        let (ty, dims, offset) = match r.get_tensor_info(name) {
            Some(t) => (
                t.tensor_type(),
                t.shape().dims().to_vec(),
                base + t.data_offset(),
            ),
            None => return Err(err(base, name, "missing".into())),
        };
        let want: Vec<u64> = shape.iter().map(|d| *d as u64).collect();
        if dims != want {
            return Err(err(
                offset,
                name,
                format!("shape {dims:?} where {want:?} was expected"),
            ));
        }
        let data = r
            .load_tensor_data(name)
            .map_err(|e| err(offset, name, e.to_string()))?
            .ok_or_else(|| err(offset, name, "no data".into()))?;
        let n = shape.iter().map(|d| *d as usize).product();
        dequantize(ty, data.as_slice(), n).map_err(|why| err(offset, name, why))
    };
    let kv = config.kv_dim();
    let mut layers = |part: &str, shape: &[u32]| -> Result<Vec<f32>, LoadError> {
        let mut all = Vec::new();
        for l in 0..n_layers {
            all.extend(tensor(&format!("blk.{l}.{part}.weight"), shape)?);
        }
        Ok(all)
    };
    let weights = Weights {
        rms_att: layers("attn_norm", &[dim])?,
        wq: layers("attn_q", &[dim, dim])?,
        wk: layers("attn_k", &[dim, kv])?,
        wv: layers("attn_v", &[dim, kv])?,
        wo: layers("attn_output", &[dim, dim])?,
        rms_ffn: layers("ffn_norm", &[dim])?,
        w1: layers("ffn_gate", &[dim, hidden_dim])?,
        w2: layers("ffn_down", &[hidden_dim, dim])?,
        w3: layers("ffn_up", &[dim, hidden_dim])?,
        rms_final: tensor("output_norm.weight", &[dim])?,
        token_embedding: tensor("token_embd.weight", &[dim, vocab_size])?,
        wcls: Vec::new(),
    };
    let wcls = match own_classifier {
        true => tensor("output.weight", &[dim, vocab_size])?,
        false => weights.token_embedding.clone(),
    };
    Ok(Model {
        config,
        weights: Weights { wcls, ..weights },
        vocab: Vocab::from_metadata(&meta),
    })
}

/// Each token's bytes, as a GGUF tokenizer spells them: byte-level BPE
/// (`gpt2`: every byte written as one printable character, GPT-2's
/// `bytes_to_unicode`) or SentencePiece (`llama`: `▁` for a space, `<0xAB>`
/// for a raw byte).
#[derive(Clone, Debug, PartialEq)]
pub struct Vocab {
    tokens: Vec<Vec<u8>>,
}

impl Vocab {
    /// The vocabulary of `tokenizer.ggml.tokens`, where the tokenizer
    /// model is one this reader spells (`gpt2`, `llama`).
    pub fn from_metadata(meta: &gguf_rs_lib::format::metadata::Metadata) -> Option<Vocab> {
        use gguf_rs_lib::format::metadata::MetadataValue;
        let model = meta.get_string("tokenizer.ggml.model")?;
        let Some(MetadataValue::Array(list)) = meta.get("tokenizer.ggml.tokens") else {
            return None;
        };
        let words: Vec<&str> = list.iter().map(|v| v.as_str()).collect::<Option<_>>()?;
        Vocab::new(model, &words)
    }

    /// The vocabulary of `words` spelled by tokenizer `model`.
    pub fn new(model: &str, words: &[&str]) -> Option<Vocab> {
        let tokens = match model {
            "gpt2" => {
                let back = byte_of_char();
                words
                    .iter()
                    .map(|w| w.chars().map(|c| back(c).unwrap_or(b'?')).collect())
                    .collect()
            }
            "llama" => words.iter().map(|w| sentencepiece(w)).collect(),
            _ => return None,
        };
        Some(Vocab { tokens })
    }

    /// The text of `ids` (bytes that are not UTF-8 shown as U+FFFD; an id
    /// past the vocabulary as `<id>`).
    pub fn text(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            match self.tokens.get(id as usize) {
                Some(t) => bytes.extend_from_slice(t),
                None => bytes.extend(format!("<{id}>").bytes()),
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// GPT-2's `bytes_to_unicode`, inverted: the printable bytes `!`..=`~`,
/// `¡`..=`¬` and `®`..=`ÿ` stand for themselves; the other bytes, in
/// order, for U+0100 onwards.
fn byte_of_char() -> impl Fn(char) -> Option<u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = std::collections::HashMap::new();
    let mut next = 0u32;
    for b in 0..=255u8 {
        let c = match printable(b) {
            true => char::from(b),
            false => {
                next += 1;
                char::from_u32(255 + next).expect("U+0100 onwards")
            }
        };
        table.insert(c, b);
    }
    move |c| table.get(&c).copied()
}

/// A SentencePiece piece's bytes.
fn sentencepiece(piece: &str) -> Vec<u8> {
    let hex = piece
        .strip_prefix("<0x")
        .and_then(|h| h.strip_suffix('>'))
        .filter(|h| h.len() == 2)
        .and_then(|h| u8::from_str_radix(h, 16).ok());
    match hex {
        Some(b) => vec![b],
        None => piece.replace('\u{2581}', " ").into_bytes(),
    }
}
