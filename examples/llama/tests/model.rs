//! The checkpoint reader and the reference parser on good and bad input,
//! and the decode loop on the CPU reference device with random weights:
//! captured equals eager, bad requests are refused, and the check fails
//! where the logits are wrong.

use seam::Device;
use seam_example_llama::check::argmax;
use seam_example_llama::reference;
use seam_example_llama::{check, Config, Error, Llama, Mode, Model};

fn cpu() -> Device {
    Device::new(Box::new(seam_backends::CpuBackend::new(0)))
}

/// A small model with every shape distinct: 2 layers, dim 24, 6 heads of
/// 4 over 3 kv heads, hidden 40, vocab 30, 9 positions.
fn small(own_classifier: bool) -> Config {
    Config {
        dim: 24,
        hidden_dim: 40,
        n_layers: 2,
        n_heads: 6,
        n_kv_heads: 3,
        vocab_size: 30,
        seq_len: 9,
        own_classifier,
        eps: 1e-5,
        rope_theta: 10_000.0,
    }
}

#[test]
fn a_checkpoint_reads_back_what_was_written() {
    for own in [false, true] {
        let m = Model::random(small(own), 5);
        let back = Model::parse("m.bin", &m.to_bytes()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.weights.wcls == back.weights.token_embedding, !own);
    }
    // As many kv heads as heads (multi-head attention), and one for all.
    for kv in [6, 1] {
        let m = Model::random(
            Config {
                n_kv_heads: kv,
                ..small(false)
            },
            5,
        );
        assert_eq!(Model::parse("m.bin", &m.to_bytes()).unwrap(), m);
    }
}

/// Every malformed file is refused naming the field and its byte offset.
#[test]
fn malformed_checkpoints_name_the_field_and_offset() {
    let good = Model::random(small(false), 5).to_bytes();
    let err = |bytes: &[u8]| Model::parse("m.bin", bytes).unwrap_err();
    let e = err(&good[..10]);
    assert_eq!((e.field.as_str(), e.offset), ("n_layers", 8), "{e}");
    let mut b = good.clone();
    b[12..16].copy_from_slice(&5i32.to_le_bytes());
    assert_eq!(err(&b).field, "n_heads", "dim 24 over 5 heads");
    let mut b = good.clone();
    b[16..20].copy_from_slice(&4i32.to_le_bytes());
    assert_eq!(err(&b).field, "n_kv_heads", "4 does not divide 6");
    let mut b = good.clone();
    b[16..20].copy_from_slice(&12i32.to_le_bytes());
    assert_eq!(err(&b).field, "n_kv_heads", "more kv heads than heads");
    let mut b = good.clone();
    b[12..16].copy_from_slice(&8i32.to_le_bytes());
    let e = err(&b);
    assert_eq!(
        e.field, "n_heads",
        "dim 24 over 8 heads: an odd head size of 3"
    );
    assert!(e.reason.contains("not an even head size"), "{e}");
    // Every header field but vocab_size must be positive, named at its
    // offset; vocab_size (negative: the file has its own classifier) must
    // be a size.
    let fields = ["dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads"];
    for (i, field) in fields.iter().chain(&["", "seq_len"]).enumerate() {
        if field.is_empty() {
            continue;
        }
        for v in [0i32, -3] {
            let mut b = good.clone();
            b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
            let e = err(&b);
            assert_eq!((e.field.as_str(), e.offset), (*field, 4 * i as u64), "{e}");
            assert!(e.reason.contains(&format!("{v} is not positive")), "{e}");
        }
    }
    for v in [0, i32::MIN] {
        let mut b = good.clone();
        b[20..24].copy_from_slice(&v.to_le_bytes());
        let e = err(&b);
        assert_eq!((e.field.as_str(), e.offset), ("vocab_size", 20), "{e}");
    }
    // Cut inside wq: the embedding (30 × 24) and rms_att (2 × 24) precede it.
    let wq = 28 + 4 * (30 * 24 + 2 * 24);
    let e = err(&good[..wq + 100]);
    assert_eq!((e.field.as_str(), e.offset), ("wq", wq as u64), "{e}");
    assert!(e.to_string().contains("m.bin: `wq` at byte offset"), "{e}");
    let mut b = good.clone();
    b.extend_from_slice(&[0; 8]);
    let e = err(&b);
    assert_eq!(
        (e.field.as_str(), e.offset),
        ("end of file", good.len() as u64),
        "{e}"
    );
    let mut b = good.clone();
    b[wq + 8..wq + 12].copy_from_slice(&f32::NAN.to_le_bytes());
    let e = err(&b);
    assert_eq!((e.field.as_str(), e.offset), ("wq", wq as u64 + 8), "{e}");
    // A negative vocab_size promises a classifier the file lacks.
    let mut b = good.clone();
    b[20..24].copy_from_slice(&(-30i32).to_le_bytes());
    assert_eq!(err(&b).field, "wcls");
    // Sizes whose later products overflow (dim 2^30, 2^31 - 1 layers: wq
    // would hold 2^91 values): refused at the first field past the end of
    // the file, not a panic while sizing the others.
    let mut b = vec![0u8; 92];
    for (i, v) in [1 << 30, 1, i32::MAX, 2, 2, 1, 1].iter().enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    let e = err(&b);
    assert_eq!((e.field.as_str(), e.offset), ("token_embedding", 28), "{e}");
}

#[test]
fn malformed_references_name_the_line() {
    let line = |s: &str| reference::parse("r.txt", s).unwrap_err().to_string();
    assert!(line("0 1 5 5:2.0 3:1.0\n1 5 x 3:1.0").contains("r.txt: line 2: `next_token` is `x`"));
    assert!(line("0 1 5 5:1.0 3:2.0").contains("not listed largest first"));
    assert!(line("0 1 5 3:2.0").contains("next_token 5 is not the largest"));
    assert!(line("1 1 5 5:2.0").contains("position 1 where 0 was expected"));
    assert!(line("0 1 5").contains("no logits listed"));
    assert!(line("0 1 5 5:nan").contains("`5:nan` is not `id:logit`"));
    assert!(line("").contains("no steps"));
    let ok = reference::parse("r.txt", "0 1 5 5:2.5 3:1.0\n\n1 5 3 3:1.0\n").unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[0].margin(), 1.5);
    assert_eq!(ok[1].margin(), f32::INFINITY);
}

/// Replayed steps (one capture, then updates) equal eager steps bit for
/// bit on the CPU, with and without a classifier of its own, and a second
/// pass over the same positions (the cache overwritten) repeats the first.
#[test]
fn captured_steps_equal_eager_steps() {
    for own in [false, true] {
        let m = Model::random(small(own), 11);
        let (a, b) = (cpu(), cpu());
        let mut eager = Llama::new(&a, &m, 9).unwrap();
        let mut replayed = Llama::new(&b, &m, 9).unwrap();
        let tokens = [1u32, 7, 7, 29, 0, 13, 2, 2, 21];
        let mut first = Vec::new();
        for &t in &tokens {
            let e = eager.step(t, Mode::Eager).unwrap();
            assert_eq!(e, replayed.step(t, Mode::Captured).unwrap(), "token {t}");
            first.push(e);
        }
        // 8 moves of 4 launches a layer, the embedding copy on 6 of them.
        assert_eq!(replayed.updates(), 8 * 4 * 2 + 6);
        replayed.reset();
        for (i, &t) in tokens.iter().enumerate() {
            assert_eq!(
                replayed.step(t, Mode::Captured).unwrap(),
                first[i],
                "again {i}"
            );
        }
        // A different history gives different logits at the same position.
        eager.reset();
        eager.step(3, Mode::Eager).unwrap();
        assert_ne!(eager.step(7, Mode::Eager).unwrap(), first[1]);
    }
}

/// What a move to the next position and token changes: 4 launches a layer
/// and the embedding copy, never a GEMM (cuBLAS nodes cannot be patched in
/// place: the graph would be recorded anew every token).
#[test]
fn a_move_changes_no_gemm() {
    let m = Model::random(small(false), 3);
    let dev = cpu();
    let l = Llama::new(&dev, &m, 9).unwrap();
    for (pos, token) in [(0u32, 1u32), (1, 1), (4, 7), (7, 29)] {
        let (was, now) = (l.launches(pos, token), l.launches(pos + 1, token + 1));
        // 15 a layer (the norm fused with the residual add included), and
        // the embedding copy, the first norm and the classifier.
        assert_eq!((was.len(), now.len()), (15 * 2 + 3, 15 * 2 + 3));
        let changed: Vec<_> = was
            .iter()
            .zip(&now)
            .filter(|(a, b)| a != b)
            .map(|(a, _)| a.op)
            .collect();
        assert_eq!(changed.len(), 4 * 2 + 1, "at {pos}");
        assert!(
            !changed.contains(&seam::OpKind::Gemm),
            "at {pos}: {changed:?}"
        );
    }
}

#[test]
fn requests_past_the_model_are_refused() {
    let m = Model::random(small(false), 3);
    let dev = cpu();
    let mut l = Llama::new(&dev, &m, 2).unwrap();
    let e = l.step(30, Mode::Captured).unwrap_err();
    assert!(
        e.to_string()
            .contains("cpu:0: token 30 is past the vocabulary (30 tokens)"),
        "{e}"
    );
    l.step(1, Mode::Captured).unwrap();
    l.step(1, Mode::Eager).unwrap();
    let e = l.step(1, Mode::Captured).unwrap_err();
    assert!(
        e.to_string()
            .contains("position 2 is past the KV cache's 2 slots"),
        "{e}"
    );
    for slots in [0, 10] {
        assert!(matches!(Llama::new(&dev, &m, slots), Err(Error::Input(_))));
    }
    // A cache past a buffer's u32 elements: 1024 layers × 2^21 positions ×
    // a kv width of 2 is 2^32, refused before anything is uploaded.
    let tall = Config {
        dim: 2,
        hidden_dim: 1,
        n_layers: 1024,
        n_heads: 1,
        n_kv_heads: 1,
        vocab_size: 4,
        seq_len: 1 << 21,
        ..small(false)
    };
    let m = Model::random(tall, 3);
    let dev = cpu();
    let e = Llama::new(&dev, &m, 1 << 21).err().expect("refused");
    assert!(
        matches!(&e, Error::Input(why) if why.contains("the cache would hold 4294967296 elements")),
        "{e}"
    );
    assert_eq!(dev.live().buffers, 0, "nothing uploaded");
}

/// The check passes its own logits and fails a logit moved past the
/// tolerance, a wrong argmax, and a reference fed another token.
#[test]
fn the_check_fails_wrong_logits() {
    let m = Model::random(small(false), 21);
    let tokens = [1u32, 4, 9, 9, 16, 25];
    let refs = reference::own(&m, &tokens, 4).unwrap();
    // Written and read back, at 6 decimals: still within the tolerance.
    let text = reference::format(&refs);
    let back = reference::parse("own.txt", &text).unwrap();
    assert_eq!(back.len(), refs.len());
    let r = check(&cpu(), &m, &back, |_, _| {}).unwrap();
    assert!(r.passed() && r.max_rel < 1e-6, "{}", r.describe());
    let r = check(&cpu(), &m, &refs, |_, _| {}).unwrap();
    assert!(r.passed(), "{}", r.describe());
    assert_eq!(
        (r.steps, r.logits, r.max_rel, r.eager_vs_captured),
        (6, 24, 0.0, 0.0)
    );
    let mut moved = refs.clone();
    let (tok, v) = moved[3].top[2];
    moved[3].top[2] = (tok, v + 3e-4 * v.abs().max(1.0));
    let r = check(&cpu(), &m, &moved, |_, _| {}).unwrap();
    assert!(
        !r.passed() && r.failures[0].contains("position 3"),
        "{:?}",
        r.failures
    );
    let mut fed = refs.clone();
    fed[2].input = 10;
    let r = check(&cpu(), &m, &fed, |_, _| {}).unwrap();
    assert!(!r.passed(), "{}", r.describe());
    // A token past the vocabulary (30) anywhere in a step is the
    // reference's fault: fed, chosen or listed.
    let past: [fn(&mut reference::Step); 3] =
        [|s| s.input = 30, |s| s.next = 30, |s| s.top[3].0 = 30];
    for move_past in past {
        let mut refs = refs.clone();
        move_past(&mut refs[1]);
        assert!(matches!(
            check(&cpu(), &m, &refs, |_, _| {}),
            Err(Error::Reference(e)) if e.contains("step 1 names a token past")
        ));
    }
}

/// The greedy tokens of one replay per token (captured steps, argmax on
/// the host) and of K tokens per replay (the loop on the device) are the
/// same, and so are the last step's logits, bit for bit: from a first
/// token, again from where the first replay stopped, to the stop token,
/// and to the end of the KV cache.
#[test]
fn k_tokens_per_replay_equal_one_per_replay() {
    let m = Model::random(small(true), 21);
    let (a, b) = (cpu(), cpu());
    let mut host = Llama::new(&a, &m, 9).unwrap();
    let mut device = Llama::new(&b, &m, 9).unwrap();
    let mut last = Vec::new();
    let mut greedy = |llama: &mut Llama, token: u32, n: usize| {
        let mut out = vec![token];
        for _ in 0..n {
            let t = *out.last().unwrap();
            last = llama.step(t, Mode::Captured).unwrap();
            out.push(argmax(&last));
        }
        out.split_off(1)
    };
    let want = greedy(&mut host, 5, 8);
    assert_eq!(last.len(), 30, "the last step's logits, one per token");
    assert_eq!(host.timings().steps, 8, "every step counted");
    // A classifier of its own: the tokens are not the input repeated (a
    // tied one echoes the input token with these random weights).
    assert_eq!(want, [26, 4, 20, 19, 14, 27, 23, 23]);
    let got = device.decode_on_device(5, 3, None).unwrap();
    assert_eq!(got, want[..3]);
    assert_eq!(device.pos(), 3);
    assert_eq!(device.timings().steps, 3, "the tokens the device made");
    let rest = device.decode_on_device(want[2], 5, None).unwrap();
    assert_eq!(rest, want[3..]);
    assert_eq!(
        device.logits().unwrap(),
        last,
        "the last step's, bit for bit"
    );
    assert_eq!(host.logits().unwrap(), last);
    // The cache ends after 9 positions: one more token, then none.
    assert_eq!(device.pos(), 8);
    assert_eq!(device.decode_on_device(want[7], 4, None).unwrap().len(), 1);
    assert!(device.decode_on_device(0, 4, None).is_err());
    // Stopping at a token: the loop ends after it, on the device; the
    // same K with another stop is another loop, not the one captured.
    device.reset();
    assert_eq!(device.decode_on_device(5, 8, None).unwrap(), want);
    device.reset();
    let stop = want[1];
    let until = device.decode_on_device(5, 8, Some(stop)).unwrap();
    let end = want.iter().position(|&t| t == stop).unwrap();
    assert_eq!(until, want[..=end]);
    assert!(device.decode_on_device(5, 0, None).is_err());
}
