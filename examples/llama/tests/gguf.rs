//! GGUF reading: each tensor type's dequantisation on blocks worked by hand,
//! a model written as GGUF (by gguf-rs-lib's builder) read back exactly, and
//! malformed files refused naming the key or tensor.

use gguf_rs_lib::builder::GGUFBuilder;
use gguf_rs_lib::format::metadata::MetadataValue;
use gguf_rs_lib::tensor::TensorType;
use half::f16;
use seam_example_llama::gguf::{dequantize, parse};
use seam_example_llama::{Config, Model};

fn h(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

#[test]
fn each_type_dequantises_as_its_block_says() {
    // Q8_0: d = 0.5, q = -16..16.
    let mut b = h(0.5).to_vec();
    b.extend((-16i8..16).map(|q| q as u8));
    let want: Vec<f32> = (-16..16).map(|q| 0.5 * q as f32).collect();
    assert_eq!(dequantize(TensorType::Q8_0, &b, 32).unwrap(), want);
    // Q4_1: d = 0.25, m = -1; byte j holds j % 16 low and 15 - j % 16 high.
    let mut b = h(0.25).to_vec();
    b.extend(h(-1.0));
    b.extend((0u8..16).map(|j| j | ((15 - j) << 4)));
    let mut want: Vec<f32> = (0..16).map(|q| 0.25 * q as f32 - 1.0).collect();
    want.extend((0..16).map(|j| 0.25 * (15 - j) as f32 - 1.0));
    assert_eq!(dequantize(TensorType::Q4_1, &b, 32).unwrap(), want);
    let b: Vec<u8> = [1.0f32, -2.5].iter().flat_map(|v| h(*v)).collect();
    assert_eq!(dequantize(TensorType::F16, &b, 2).unwrap(), vec![1.0, -2.5]);
    assert_eq!(
        dequantize(TensorType::F32, &7.5f32.to_le_bytes(), 1).unwrap(),
        vec![7.5]
    );
    // Refused: a short block, a count off the block size, an unread type,
    // a non-finite value.
    assert!(dequantize(TensorType::Q4_1, &b, 32)
        .unwrap_err()
        .contains("need 20 bytes"));
    assert!(dequantize(TensorType::Q8_0, &[0; 34], 31).is_err());
    assert!(dequantize(TensorType::Q4_0, &[0; 18], 32)
        .unwrap_err()
        .contains("not one this reader"));
    let nan = [0x00, 0x7E];
    assert!(dequantize(TensorType::F16, &nan, 1)
        .unwrap_err()
        .contains("element 0 is NaN"));
}

fn small(own_classifier: bool) -> Config {
    Config {
        dim: 16,
        hidden_dim: 24,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        vocab_size: 20,
        seq_len: 32,
        own_classifier,
        eps: 1e-6,
        rope_theta: 100_000.0,
    }
}

/// `m` as llama.cpp writes a llama GGUF, all tensors F32, less the tensors
/// named in `skip`, with `arch` as the architecture.
fn gguf(m: &Model, arch: &str, skip: &[&str]) -> Vec<u8> {
    gguf_with(m, arch, skip, Vec::new())
}

/// [`gguf`] with the metadata keys of `over` set to their values (added,
/// or in place of the model's).
fn gguf_with(m: &Model, arch: &str, skip: &[&str], over: Vec<(&str, MetadataValue)>) -> Vec<u8> {
    let c = &m.config;
    let w = &m.weights;
    let mut b = GGUFBuilder::new()
        .add_metadata("general.architecture", MetadataValue::String(arch.into()))
        .add_metadata("llama.embedding_length", MetadataValue::U32(c.dim))
        .add_metadata(
            "llama.feed_forward_length",
            MetadataValue::U32(c.hidden_dim),
        )
        .add_metadata("llama.block_count", MetadataValue::U32(c.n_layers))
        .add_metadata("llama.attention.head_count", MetadataValue::U32(c.n_heads))
        .add_metadata(
            "llama.attention.head_count_kv",
            MetadataValue::U32(c.n_kv_heads),
        )
        .add_metadata("llama.context_length", MetadataValue::U32(c.seq_len))
        .add_metadata(
            "llama.rope.freq_base",
            MetadataValue::F32(c.rope_theta as f32),
        )
        .add_metadata(
            "llama.attention.layer_norm_rms_epsilon",
            MetadataValue::F32(c.eps),
        )
        .add_metadata(
            "llama.rope.dimension_count",
            MetadataValue::U32(c.head_size()),
        );
    for (key, value) in over {
        b = b.add_metadata(key, value);
    }
    let (d, kv, h, v) = (
        c.dim as u64,
        c.kv_dim() as u64,
        c.hidden_dim as u64,
        c.vocab_size as u64,
    );
    let mut tensors: Vec<(String, Vec<u64>, Vec<f32>)> = vec![
        (
            "token_embd.weight".into(),
            vec![d, v],
            w.token_embedding.clone(),
        ),
        ("output_norm.weight".into(), vec![d], w.rms_final.clone()),
    ];
    if c.own_classifier {
        tensors.push(("output.weight".into(), vec![d, v], w.wcls.clone()));
    }
    let per = |all: &[f32], l: usize, n: u64| all[l * n as usize..][..n as usize].to_vec();
    for l in 0..c.n_layers as usize {
        for (part, shape, all) in [
            ("attn_norm", vec![d], &w.rms_att),
            ("attn_q", vec![d, d], &w.wq),
            ("attn_k", vec![d, kv], &w.wk),
            ("attn_v", vec![d, kv], &w.wv),
            ("attn_output", vec![d, d], &w.wo),
            ("ffn_norm", vec![d], &w.rms_ffn),
            ("ffn_gate", vec![d, h], &w.w1),
            ("ffn_down", vec![h, d], &w.w2),
            ("ffn_up", vec![d, h], &w.w3),
        ] {
            let n = shape.iter().product();
            tensors.push((format!("blk.{l}.{part}.weight"), shape, per(all, l, n)));
        }
    }
    for (name, shape, data) in tensors {
        if !skip.contains(&name.as_str()) {
            b = b.add_f32_tensor(name, shape, data).unwrap();
        }
    }
    b.build_to_bytes().unwrap().0
}

#[test]
fn a_model_written_as_gguf_reads_back_exactly() {
    for own in [false, true] {
        let m = Model::random(small(own), 9);
        let back = parse("m.gguf", &gguf(&m, "llama", &[])).unwrap();
        assert_eq!(back.config, m.config);
        assert_eq!(back.weights, m.weights);
    }
}

#[test]
fn malformed_gguf_files_name_the_key_or_tensor() {
    let m = Model::random(small(false), 9);
    let e = parse("m.gguf", &gguf(&m, "gpt2", &[])).unwrap_err();
    assert_eq!(e.field, "general.architecture", "{e}");
    let e = parse("m.gguf", &gguf(&m, "llama", &["blk.1.ffn_up.weight"])).unwrap_err();
    assert_eq!(e.field, "blk.1.ffn_up.weight", "{e}");
    assert!(
        e.to_string().contains("m.gguf: `blk.1.ffn_up.weight`") && e.reason == "missing",
        "{e}"
    );
    // Cut inside the tensor data, and inside the header: refused, no panic.
    let good = gguf(&m, "llama", &[]);
    for cut in [good.len() - 100, 40, 5] {
        let e = parse("m.gguf", &good[..cut]).unwrap_err();
        assert!(!e.reason.is_empty(), "{e}");
    }
}

/// Metadata a model cannot have is refused naming its key: a size of 0, a
/// RoPE base or epsilon that is 0, negative, infinite or NaN.
#[test]
fn impossible_metadata_is_refused_by_key() {
    let m = Model::random(small(false), 9);
    let refused = |key: &'static str, value: MetadataValue| {
        let e = parse("m.gguf", &gguf_with(&m, "llama", &[], vec![(key, value)]))
            .err()
            .unwrap_or_else(|| panic!("`{key}` of that value is refused"));
        assert_eq!(e.field, key, "{e}");
    };
    for key in [
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.block_count",
        "llama.context_length",
    ] {
        refused(key, MetadataValue::U32(0));
    }
    // A vocabulary of no token: the embedding is [dim, 0].
    let none = Model::random(
        Config {
            vocab_size: 0,
            ..small(false)
        },
        9,
    );
    let Err(e) = parse("m.gguf", &gguf(&none, "llama", &[])) else {
        panic!("a vocabulary of no token was read");
    };
    assert_eq!(e.field, "token_embd.weight", "{e}");
    for key in [
        "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon",
    ] {
        for v in [0.0, -1.0, f32::INFINITY, f32::NAN] {
            refused(key, MetadataValue::F32(v));
        }
    }
    // An f64 epsilon that an f32 cannot hold: 0 or infinite where it is used.
    for v in [1e-300, 1e300] {
        refused(
            "llama.attention.layer_norm_rms_epsilon",
            MetadataValue::F64(v),
        );
    }
    // Integers of any GGUF integer type are read as integers: a signed
    // block count of the model's layers loads, a negative one is refused,
    // and RoPE over part of a head (dimension 1 of a head of 4) is refused
    // whatever the type it is written in.
    let signed = gguf_with(
        &m,
        "llama",
        &[],
        vec![("llama.block_count", MetadataValue::I32(2))],
    );
    assert_eq!(parse("m.gguf", &signed).unwrap().config, m.config);
    refused("llama.block_count", MetadataValue::I32(-1));
    refused("llama.block_count", MetadataValue::String("2".into()));
    for v in [
        MetadataValue::U32(1),
        MetadataValue::I32(1),
        MetadataValue::U64(1),
    ] {
        refused("llama.rope.dimension_count", v);
    }
    refused(
        "llama.rope.dimension_count",
        MetadataValue::String("4".into()),
    );
}

/// A tensor's error names the byte offset of its data in the file: the
/// first element's bytes are there, and the bad element's where the
/// reason says.
#[test]
fn a_bad_tensor_is_named_at_its_offset_in_the_file() {
    let m = Model::random(small(false), 9);
    let layer = (m.config.dim * m.config.dim) as usize;
    for (l, field) in [(0, "blk.0.attn_q.weight"), (1, "blk.1.attn_q.weight")] {
        let mut bad = m.clone();
        bad.weights.wq[l * layer + 3] = f32::NAN;
        let file = gguf(&bad, "llama", &[]);
        let e = parse("m.gguf", &file).unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.reason.contains("element 3 is NaN"), "{e}");
        let at = |i: usize| {
            let o = e.offset as usize + 4 * i;
            f32::from_le_bytes(file[o..o + 4].try_into().unwrap())
        };
        assert_eq!(at(0), m.weights.wq[l * layer], "{e}");
        assert!(at(3).is_nan(), "{e}");
    }
}

/// A file's vocabulary comes with its model.
#[test]
fn a_files_vocabulary_spells_its_tokens() {
    use gguf_rs_lib::format::metadata::MetadataArray;
    use gguf_rs_lib::format::types::GGUFValueType;
    let m = Model::random(small(false), 9);
    let words: Vec<MetadataValue> = (0..20)
        .map(|i| MetadataValue::String(format!("\u{2581}w{i}")))
        .collect();
    let tokens = MetadataArray::new(GGUFValueType::String, words).unwrap();
    let file = gguf_with(
        &m,
        "llama",
        &[],
        vec![
            (
                "tokenizer.ggml.model",
                MetadataValue::String("llama".into()),
            ),
            (
                "tokenizer.ggml.tokens",
                MetadataValue::Array(Box::new(tokens)),
            ),
        ],
    );
    let vocab = parse("m.gguf", &file).unwrap().vocab.unwrap();
    assert_eq!(vocab.text(&[3, 19]), " w3 w19");
    assert!(parse("m.gguf", &gguf(&m, "llama", &[]))
        .unwrap()
        .vocab
        .is_none());
}

/// Token text as each tokenizer spells it: GPT-2's byte-level characters
/// (`Ġ` a space, `Ċ` a newline) and SentencePiece's `▁` and `<0xAB>`.
#[test]
fn a_vocabulary_spells_its_tokens() {
    use seam_example_llama::gguf::Vocab;
    let gpt2 = Vocab::new("gpt2", &["Hello", "Ġworld", "Ċ", "Ã©"]).unwrap();
    assert_eq!(gpt2.text(&[0, 1, 2, 3]), "Hello world\né");
    assert_eq!(gpt2.text(&[9]), "<9>");
    let sp = Vocab::new("llama", &["▁Hello", "<0x0A>", "é", "<0xZZ>"]).unwrap();
    assert_eq!(sp.text(&[0, 1, 2, 3]), " Hello\né<0xZZ>");
    assert!(Vocab::new("bert", &["x"]).is_none());
}
