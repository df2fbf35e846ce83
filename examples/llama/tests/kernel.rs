//! The attention kernel's CPU implementation against plain f64 math, its
//! parameter checks, and its WGSL against naga.

use seam::kernel::{KernelDef, MAX_GRID_EDGE};
use seam::Params;
use seam_example_llama::attention::{attention_cpu, params, ATTENTION};
use seam_example_llama::loop_kernels::{
    ADVANCE, ATTENTION_AT, EMBED_AT, MADE, POS, POS_FREQS, STATE_WORDS, STORE_AT,
};

/// Every kernel of the crate: attention, and the kernels that decode K
/// tokens per replay.
static KERNELS: [&KernelDef; 6] = [
    &ATTENTION,
    &ATTENTION_AT,
    &EMBED_AT,
    &POS_FREQS,
    &STORE_AT,
    &ADVANCE,
];

fn bytes(v: &[f32]) -> Vec<u8> {
    bytemuck::cast_slice(v).to_vec()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(b)
}

fn values(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 + seed) * 0.37).sin() * 2.0)
        .collect()
}

/// Softmax-weighted values per query head, query head `h` reading kv head
/// `h / (heads / kv_heads)`, positions past `n` never read.
#[test]
fn attention_matches_f64() {
    for (heads, kv, hs, n) in [
        (8u32, 4u32, 8u32, 3u32),
        (6, 2, 70, 130),
        (1, 1, 1, 1),
        (4, 4, 5, 65),
    ] {
        let kv_dim = (kv * hs) as usize;
        let slots = n as usize + 2;
        let q = values((heads * hs) as usize, 1.0);
        let mut kc = values(slots * kv_dim, 2.0);
        let mut vc = values(slots * kv_dim, 3.0);
        // Positions past n hold poison: reading them changes the result.
        for x in kc[n as usize * kv_dim..]
            .iter_mut()
            .chain(&mut vc[n as usize * kv_dim..])
        {
            *x = 1e6;
        }
        let p = params(heads, kv, hs, n);
        let mut b = vec![
            bytes(&q),
            bytes(&kc),
            bytes(&vc),
            vec![0; (heads * n) as usize * 4],
            vec![0; (heads * hs) as usize * 4],
        ];
        attention_cpu(&p, &mut b);
        let out = f32s(&b[4]);
        let att = f32s(&b[3]);
        let (hs, n) = (hs as usize, n as usize);
        for h in 0..heads as usize {
            let g = h / (heads / kv) as usize;
            let scores: Vec<f64> = (0..n)
                .map(|t| {
                    (0..hs)
                        .map(|j| q[h * hs + j] as f64 * kc[t * kv_dim + g * hs + j] as f64)
                        .sum::<f64>()
                        / (hs as f64).sqrt()
                })
                .collect();
            let mx = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
            let total: f64 = e.iter().sum();
            // The scratch holds each head's exponentials, in its own row.
            for (t, want) in e.iter().enumerate() {
                let got = att[h * n + t] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 + 1e-5 * want.abs(),
                    "heads {heads}/{kv}, hs {hs}, n {n}: att[{h}, {t}] = {got}, f64 {want}"
                );
            }
            for d in 0..hs {
                let want: f64 = (0..n)
                    .map(|t| e[t] / total * vc[t * kv_dim + g * hs + d] as f64)
                    .sum();
                let got = out[h * hs + d] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 + 1e-5 * want.abs(),
                    "heads {heads}/{kv}, hs {hs}, n {n}: out[{h}, {d}] = {got}, f64 {want}"
                );
            }
        }
    }
}

/// Every kernel of the crate with the state words that make it touch its
/// last elements: the last row, the last slot, the cache's last position,
/// the last place in the list of tokens made.
fn worst(def: &KernelDef, p: &Params) -> Vec<u8> {
    let far = u32::MAX / 2; // clamped by each kernel to its last row or slot
    let mut state = [far, far, 1, 0];
    if def.name == ATTENTION_AT.name {
        state[POS] = p.d2 - 1;
    }
    if def.name == ADVANCE.name {
        state[MADE] = p.d2 - 1;
    }
    bytemuck::cast_slice(&state).to_vec()
}

/// Each binding's declared extent is what the kernel touches (core checks
/// every view against it, so a smaller one would let a launch read past
/// its buffers): sized by the extents, every kernel runs on each of its
/// samples; one element short in any binding but the state (whose extent
/// is the whole state, whatever words a kernel reads), it reads or writes
/// past the end.
#[test]
fn extents_are_what_each_kernel_touches() {
    for def in KERNELS {
        let run = def.cpu.unwrap();
        for p in def.samples {
            let mut ext = vec![0u64; def.bindings.len()];
            (def.extents)(p, &mut ext);
            let sized = |short: Option<usize>| -> Vec<Vec<u8>> {
                ext.iter()
                    .enumerate()
                    .map(|(b, &e)| match def.bindings[b].name {
                        "state" => worst(def, p),
                        _ => vec![0u8; 4 * (e as usize - usize::from(short == Some(b)))],
                    })
                    .collect()
            };
            assert!(
                std::panic::catch_unwind(|| run(p, &mut sized(None))).is_ok(),
                "{} {p:?}: sized by its extents {ext:?}, it failed",
                def.name
            );
            for (b, binding) in def.bindings.iter().enumerate() {
                if binding.name == "state" {
                    assert_eq!(ext[b], STATE_WORDS as u64, "{}", def.name);
                    continue;
                }
                let ran = std::panic::catch_unwind(|| run(p, &mut sized(Some(b))));
                assert!(
                    ran.is_err(),
                    "{} {p:?}: `{}` one element short of {} ran",
                    def.name,
                    binding.name,
                    ext[b]
                );
            }
        }
    }
}

/// The token list's capacity holds: full, `advance` appends nothing and
/// still moves the state on; the end-of-sequence token (the sample's
/// `bits`) clears the condition.
#[test]
fn advance_appends_only_while_the_list_has_room() {
    let p = ADVANCE.samples[1];
    let run = |best: u32, state: [u32; 4]| {
        let logits: Vec<f32> = (0..p.d0)
            .map(|i| if i == best { 9.0 } else { 0.0 })
            .collect();
        let mut b = vec![
            bytes(&logits),
            bytemuck::cast_slice(&state).to_vec(),
            vec![0xAB; 4 * p.d2 as usize],
        ];
        (ADVANCE.cpu.unwrap())(&p, &mut b);
        let s: Vec<u32> = bytemuck::pod_collect_to_vec(&b[1]);
        let out: Vec<u32> = bytemuck::pod_collect_to_vec(&b[2]);
        (s, out)
    };
    let full = p.d2;
    let (s, out) = run(7, [3, 5, 1, full]);
    assert_eq!(
        out,
        vec![0xABAB_ABAB; full as usize],
        "a full list is left as it was"
    );
    assert_eq!(s, [7, 6, 1, full + 1]);
    let (s, out) = run(7, [3, 5, 1, full - 1]);
    assert_eq!(out[full as usize - 1], 7, "the last place taken");
    assert_eq!(s, [7, 6, 1, full]);
    assert_eq!(p.bits, 2, "the sample's end-of-sequence token");
    let (s, _) = run(p.bits, [3, 5, 1, 0]);
    assert_eq!(s, [p.bits, 6, 0, 1], "stopped at the end-of-sequence token");
    // At the last position the loop stops whatever the token.
    let (s, _) = run(7, [3, p.d1 - 1, 1, 0]);
    assert_eq!(s, [7, p.d1, 0, 1], "stopped at max_pos");
}

/// The grid: a workgroup of 64 per 64 elements, at most a grid edge; one
/// for `advance`.
#[test]
fn grids_cover_their_elements() {
    for (d0, groups) in [(1, 1), (64, 1), (65, 2), (u32::MAX, MAX_GRID_EDGE)] {
        let p = Params::dims(d0, 1, 1);
        for def in [&EMBED_AT, &POS_FREQS, &STORE_AT] {
            assert_eq!((def.grid)(&p), [groups, 1, 1], "{} over {d0}", def.name);
        }
    }
    assert_eq!((ADVANCE.grid)(&ADVANCE.samples[1]), [1, 1, 1]);
}

/// A zero size is refused by its name, on every kernel with a size.
#[test]
fn zero_sizes_are_refused_by_name() {
    let refused = |def: &KernelDef, p: Params| def.check.unwrap()(&p).unwrap_err().name;
    let p = EMBED_AT.samples[1];
    assert_eq!(refused(&EMBED_AT, Params { d0: 0, ..p }), "dim");
    assert_eq!(refused(&EMBED_AT, Params { d1: 0, ..p }), "vocab");
    let p = STORE_AT.samples[1];
    assert_eq!(refused(&STORE_AT, Params { d0: 0, ..p }), "n");
    assert_eq!(refused(&STORE_AT, Params { d1: 0, ..p }), "slots");
    let p = POS_FREQS.samples[1];
    assert_eq!(refused(&POS_FREQS, Params { d0: 0, ..p }), "n");
    let p = ADVANCE.samples[1];
    assert_eq!(refused(&ADVANCE, Params { d0: 0, ..p }), "vocab");
    assert_eq!(refused(&ADVANCE, Params { d1: 0, ..p }), "max_pos");
    assert_eq!(refused(&ADVANCE, Params { d2: 0, ..p }), "capacity");
    for def in [&EMBED_AT, &STORE_AT, &ADVANCE, &POS_FREQS] {
        for p in def.samples {
            if let Some(check) = def.check {
                check(p).unwrap();
            }
        }
    }
}

#[test]
fn bad_params_are_refused_by_name() {
    let check = ATTENTION.check.unwrap();
    assert!(check(&params(8, 4, 8, 1)).is_ok());
    assert_eq!(check(&params(0, 1, 8, 1)).unwrap_err().name, "heads");
    assert_eq!(check(&params(70_000, 1, 8, 1)).unwrap_err().name, "heads");
    assert_eq!(check(&params(8, 3, 8, 1)).unwrap_err().name, "kv_heads");
    assert_eq!(check(&params(8, 0, 8, 1)).unwrap_err().name, "kv_heads");
    assert_eq!(check(&params(8, 4, 0, 1)).unwrap_err().name, "head_size");
    assert_eq!(check(&params(8, 4, 8, 0)).unwrap_err().name, "n");
    let nan = Params {
        s0: f32::NAN,
        ..params(8, 4, 8, 1)
    };
    assert_eq!(check(&nan).unwrap_err().name, "scale");
    for s0 in [0.0, -0.5, f32::INFINITY] {
        let p = Params {
            s0,
            ..params(8, 4, 8, 1)
        };
        assert_eq!(check(&p).unwrap_err().name, "scale", "{s0}");
    }
    // As many heads as a grid edge holds (one workgroup each), not one more.
    check(&params(MAX_GRID_EDGE, 1, 8, 1)).unwrap();
    let e = check(&params(MAX_GRID_EDGE + 1, 1, 8, 1)).unwrap_err();
    assert_eq!(e.name, "heads");
    assert_eq!(
        (ATTENTION.grid)(&params(6, 2, 8, 3)),
        [6, 1, 1],
        "a workgroup per head"
    );
    ATTENTION.well_formed().unwrap();
    for p in ATTENTION.samples {
        check(p).unwrap();
    }
}

/// Every WGSL source of the crate (attention, and the kernels that decode
/// K tokens per replay) passes core's checks of a user kernel (naga's
/// validation with the prelude, bindings and fields against the
/// definition) and declares its entry point with the definition's
/// workgroup size.
#[test]
fn wgsl_source_validates() {
    for def in KERNELS {
        let m = seam::wgsl::compile(seam::Kernel::new(def))
            .unwrap_or_else(|e| panic!("{}: {e}", def.name));
        let ep = m
            .module
            .entry_points
            .iter()
            .find(|e| e.name == def.name)
            .unwrap_or_else(|| panic!("{}: no entry point", def.name));
        assert_eq!(ep.workgroup_size, def.workgroup_size, "{}", def.name);
    }
}
