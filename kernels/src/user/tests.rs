//! The user kernels' CPU implementations against plain f64 math, their
//! parameter checks, and their WGSL against naga.

use super::{
    add_rms_norm_cpu, layer_finish_cpu, layer_fold_cpu, layer_partial_cpu, layer_quads,
    layer_workspace, norm_gemv_silu_add_cpu, rope_cpu, rope_freqs, sincos, sliced_sum,
    split_partials, split_sum, Term, ADD_RMS_NORM, ALL, LAYER_FINISH, LAYER_MAX_H, LAYER_PARTIAL,
    LAYER_SPLIT_FROM, NORM_GEMV_SILU_ADD, ROPE, ROPE_MAX_POS,
};
use seam::kernel::KernelDef;
use seam::Params;

fn bytes(v: &[f32]) -> Vec<u8> {
    bytemuck::cast_slice(v).to_vec()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(b)
}

/// sin/cos within 2e-7 of f64's over the angles RoPE meets.
#[test]
fn sincos_is_accurate() {
    let mut worst = 0f64;
    let mut a = -70_000f32;
    while a < 70_000.0 {
        let (s, c) = sincos(a);
        let (es, ec) = (a as f64).sin_cos();
        worst = worst.max((s as f64 - es).abs()).max((c as f64 - ec).abs());
        a += 0.37;
    }
    for i in 0..20_000 {
        let a = i as f32 * 1e-4;
        let (s, c) = sincos(a);
        let (es, ec) = (a as f64).sin_cos();
        worst = worst.max((s as f64 - es).abs()).max((c as f64 - ec).abs());
    }
    assert!(worst < 2e-7, "max error {worst:e}");
}

/// RoPE against f64 rotation; pos 0 is the identity.
#[test]
fn rope_rotates_each_pair() {
    let (heads, hd, pos) = (3u32, 10u32, 41u32);
    let n = (heads * hd) as usize;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.7).sin()).collect();
    let freq = rope_freqs(hd, 10_000.0);
    for (p, want_identity) in [(pos, false), (0, true)] {
        let mut b = vec![bytes(&x), bytes(&freq), vec![0; n * 4]];
        rope_cpu(&Params::dims(heads, hd, p), &mut b);
        let y = f32s(&b[2]);
        if want_identity {
            assert_eq!(y, x);
            continue;
        }
        for j in 0..n / 2 {
            let i = j % (hd as usize / 2);
            let ang = p as f64 * freq[i] as f64;
            let (s, c) = ang.sin_cos();
            let (x0, x1) = (x[2 * j] as f64, x[2 * j + 1] as f64);
            assert!(
                (y[2 * j] as f64 - (x0 * c - x1 * s)).abs() < 1e-6,
                "pair {j}"
            );
            assert!(
                (y[2 * j + 1] as f64 - (x0 * s + x1 * c)).abs() < 1e-6,
                "pair {j}"
            );
        }
    }
}

/// The fused kernel against f64: the residual written with h = x + r, the
/// output h / sqrt(mean(h²) + eps) · w per row.
#[test]
fn add_rms_norm_adds_then_normalizes() {
    let (rows, cols) = (3usize, 300usize);
    let x: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.3).sin()).collect();
    let r: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.11).cos()).collect();
    let w: Vec<f32> = (0..cols).map(|i| 1.0 + i as f32 / cols as f32).collect();
    let mut b = vec![bytes(&x), bytes(&r), bytes(&w), vec![0; rows * cols * 4]];
    add_rms_norm_cpu(
        &Params::dims(rows as u32, cols as u32, 0).with_scalars(1e-5, 0.0),
        &mut b,
    );
    let (h, out) = (f32s(&b[1]), f32s(&b[3]));
    for row in 0..rows {
        let hr: Vec<f64> = (0..cols)
            .map(|c| (x[row * cols + c] + r[row * cols + c]) as f64)
            .collect();
        let inv = 1.0 / (hr.iter().map(|v| v * v).sum::<f64>() / cols as f64 + 1e-5).sqrt();
        for c in 0..cols {
            assert_eq!(h[row * cols + c] as f64, hr[c]);
            let want = hr[c] * inv * w[c] as f64;
            assert!((out[row * cols + c] as f64 - want).abs() < 1e-5 * (1.0 + want.abs()));
        }
    }
}

/// The fused decode layer against the four ops in f64, at both quad
/// counts, in both layouts (column slices below [`LAYER_SPLIT_FROM`], 8
/// row ranges of more than four rows a warp and a last tile of one quad
/// from it), a width that is no multiple of 4, one below a tile's
/// columns, and an eps large enough that dropping it shows; the workspace
/// comes back as zeros.
#[test]
fn norm_gemv_silu_add_is_the_layer() {
    for (h, quads, eps) in [
        (1usize, 2u32, 1e-5f32),
        (7, 4, 0.5),
        (300, 2, 1e-5),
        (130, 4, 0.25),
        (700, 4, 1e-5),
        (2052, 4, 1e-5),
    ] {
        let x: Vec<f32> = (0..h).map(|i| (i as f32 * 0.37).sin()).collect();
        let wn: Vec<f32> = (0..h).map(|i| 0.5 + (i % 7) as f32 / 7.0).collect();
        let w: Vec<f32> = (0..h * h).map(|i| (i as f32 * 0.013).cos() * 0.2).collect();
        let ws = vec![0; layer_workspace(h as u32, quads) as usize * 4];
        let mut b = vec![bytes(&x), bytes(&wn), bytes(&w), vec![0; h * 4], ws.clone()];
        let p = Params::dims(h as u32, quads, 0).with_scalars(eps, 0.0);
        norm_gemv_silu_add_cpu(&p, &mut b);
        assert_eq!(
            b[4], ws,
            "h {h}: the workspace is not zero after the launch"
        );
        let y = f32s(&b[3]);
        let ms = x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / h as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for c in 0..h {
            let z: f64 = (0..h)
                .map(|k| x[k] as f64 * inv * wn[k] as f64 * w[k * h + c] as f64)
                .sum();
            let want = x[c] as f64 + z / (1.0 + (-z).exp());
            assert!(
                (y[c] as f64 - want).abs() < 1e-5 * (1.0 + want.abs()),
                "h {h} quads {quads} column {c}: {} != {want}",
                y[c]
            );
        }
    }
}

/// The layer in two launches is the layer: [`LAYER_PARTIAL`]'s sums,
/// added in range order, are the CUDA split's dot products bit for bit
/// (the same rows in the same order, [`split_sum`]), the partial sums
/// cover every word of `part`, and [`LAYER_FINISH`] after it agrees with
/// f64 math, at widths with a last tile of a few columns, no multiple of 4,
/// and an eps large enough that dropping it shows.
#[test]
fn layer_partial_and_finish_are_the_layer() {
    for (h, quads, eps) in [
        (1usize, 2u32, 1e-5f32),
        (7, 4, 0.5),
        (130, 2, 0.25),
        (300, 4, 1e-5),
        (2052, 2, 1e-5),
    ] {
        let x: Vec<f32> = (0..h).map(|i| (i as f32 * 0.37).sin()).collect();
        let wn: Vec<f32> = (0..h).map(|i| 0.5 + (i % 7) as f32 / 7.0).collect();
        let w: Vec<f32> = (0..h * h).map(|i| (i as f32 * 0.013).cos() * 0.2).collect();
        let n = 32 / quads as usize;
        assert_eq!(split_partials(h as u32, quads), (n * h) as u64);
        let nan = vec![f32::NAN; n * h];
        let mut b = vec![bytes(&x), bytes(&wn), bytes(&w), bytes(&nan)];
        layer_partial_cpu(&Params::dims(h as u32, quads, 0), &mut b);
        let part = f32s(&b[3]);
        assert!(
            part.iter().all(|v| v.is_finite()),
            "h {h}: a word of part left unwritten"
        );
        let a: Vec<f32> = x.iter().zip(&wn).map(|(x, w)| x * w).collect();
        for c in 0..h {
            let z = (0..n).fold(0f32, |z, i| z + part[i * h + c]);
            let want = split_sum(h, n, &|k, acc| a[k].mul_add(w[k * h + c], acc));
            assert_eq!(
                z.to_bits(),
                want.to_bits(),
                "h {h} column {c}: {z} != {want}"
            );
        }
        let p = Params::dims(h as u32, quads, 0).with_scalars(eps, 0.0);
        let mut f = vec![bytes(&x), b[3].clone(), vec![0; h * 4]];
        layer_finish_cpu(&p, &mut f);
        let y = f32s(&f[2]);
        let ms = x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / h as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for c in 0..h {
            let z: f64 = (0..h)
                .map(|k| x[k] as f64 * inv * wn[k] as f64 * w[k * h + c] as f64)
                .sum();
            let want = x[c] as f64 + z / (1.0 + (-z).exp());
            assert!(
                (y[c] as f64 - want).abs() < 1e-5 * (1.0 + want.abs()),
                "h {h} quads {quads} column {c}: {} != {want}",
                y[c]
            );
        }
    }
}

/// A stack folded (partial, a fold for each next layer, finish) is the
/// stack in two launches a layer bit for bit: each fold writes the
/// layer before's output as [`LAYER_FINISH`] does and the next partial
/// sums as [`LAYER_PARTIAL`] does, reading the previous partial sums, not
/// the new ones, and every word of both outputs.
#[test]
fn a_folded_stack_is_the_two_launch_stack() {
    for (h, quads, eps, layers) in [
        (1usize, 2u32, 1e-5f32, 2usize),
        (7, 4, 0.5, 3),
        (130, 2, 0.25, 3),
        (300, 4, 1e-5, 2),
    ] {
        let n = 32 / quads as usize;
        let p = Params::dims(h as u32, quads, 0).with_scalars(eps, 0.0);
        let x0: Vec<f32> = (0..h).map(|i| (i as f32 * 0.37).sin()).collect();
        let wn: Vec<f32> = (0..h).map(|i| 0.5 + (i % 7) as f32 / 7.0).collect();
        let ws: Vec<Vec<f32>> = (0..layers)
            .map(|l| {
                (0..h * h)
                    .map(|i| ((i + 31 * l) as f32 * 0.013).cos() * 0.2)
                    .collect()
            })
            .collect();
        let nan = |len: usize| bytes(&vec![f32::NAN; len]);
        let partial = |x: &[u8], w: &[f32]| {
            let mut b = vec![x.to_vec(), bytes(&wn), bytes(w), nan(n * h)];
            layer_partial_cpu(&p, &mut b);
            b.pop().unwrap()
        };
        let finish = |x: &[u8], part: &[u8]| {
            let mut b = vec![x.to_vec(), part.to_vec(), nan(h)];
            layer_finish_cpu(&p, &mut b);
            b.pop().unwrap()
        };
        let mut two = bytes(&x0);
        for w in &ws {
            let part = partial(&two, w);
            two = finish(&two, &part);
        }
        let (mut x, mut part) = (bytes(&x0), partial(&bytes(&x0), &ws[0]));
        for w in &ws[1..] {
            let mut b = vec![x, part, bytes(&wn), bytes(w), nan(h), nan(n * h)];
            layer_fold_cpu(&p, &mut b);
            part = b.pop().unwrap();
            x = b.pop().unwrap();
        }
        let folded = finish(&x, &part);
        let (a, b) = (f32s(&folded), f32s(&two));
        assert!(a.iter().all(|v| v.is_finite()), "h {h}: {a:?}");
        for c in 0..h {
            assert_eq!(
                a[c].to_bits(),
                b[c].to_bits(),
                "h {h} column {c}: {} != {}",
                a[c],
                b[c]
            );
        }
    }
}

/// Below [`LAYER_SPLIT_FROM`] the CPU implementation adds in the column
/// slices' order, from it in the split's (as the CUDA kernel switches), and
/// the two orders differ for these inputs, so the switch is seen; the CUDA
/// source switches at the same width.
#[test]
fn norm_gemv_silu_add_switches_layout_at_the_split_width() {
    assert!(
        include_str!("../../user/norm_gemv_silu_add.cu").contains(&format!(
            "#define SEAM_LAYER_SPLIT_FROM {LAYER_SPLIT_FROM}u\n"
        ))
    );
    for (h, quads) in [(LAYER_SPLIT_FROM - 1, 2u32), (LAYER_SPLIT_FROM, 4)] {
        let n = h as usize;
        let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let wn: Vec<f32> = (0..n).map(|i| 0.5 + (i % 7) as f32 / 7.0).collect();
        let w: Vec<f32> = (0..n * n).map(|i| (i as f32 * 0.013).cos() * 0.2).collect();
        let ws = vec![0; layer_workspace(h, quads) as usize * 4];
        let mut b = vec![bytes(&x), bytes(&wn), bytes(&w), vec![0; n * 4], ws];
        let p = Params::dims(h, quads, 0).with_scalars(1e-5, 0.0);
        norm_gemv_silu_add_cpu(&p, &mut b);
        let y = f32s(&b[3]);
        let a: Vec<f32> = x.iter().zip(&wn).map(|(x, w)| x * w).collect();
        let layer = |split: bool| -> Vec<f32> {
            let sum = |t: &Term| {
                if split {
                    split_sum(n, 32 / quads as usize, t)
                } else {
                    sliced_sum(n, 256 / quads as usize, t)
                }
            };
            let inv = 1.0 / (sum(&|k, acc| x[k].mul_add(x[k], acc)) / h as f32 + 1e-5).sqrt();
            (0..n)
                .map(|c| {
                    let z = sum(&|k, acc| a[k].mul_add(w[k * n + c], acc)) * inv;
                    x[c] + z / (1.0 + (-z).exp())
                })
                .collect()
        };
        let (sliced, split) = (layer(false), layer(true));
        assert_ne!(
            sliced, split,
            "h {h}: the two orders agree, the test sees nothing"
        );
        let want = if h < LAYER_SPLIT_FROM {
            &sliced
        } else {
            &split
        };
        assert!(
            y == *want,
            "h {h}: not the order of the layout the CUDA kernel runs"
        );
    }
}

/// 4 quads (8 row ranges; 16 columns a WGSL workgroup) only where that
/// keeps 512 workgroups; the workspace holds 129 words per tile and range
/// and a counter per tile, and the grid is tiles × ranges.
#[test]
fn layer_quads_keep_the_device_full() {
    assert_eq!(layer_workspace(4096, 2), 32 * 16 * 129 + 32);
    assert_eq!(layer_workspace(8192, 4), 64 * 8 * 129 + 64);
    assert_eq!(layer_workspace(129, 4), 2 * 8 * 129 + 2);
    let grid = NORM_GEMV_SILU_ADD.grid;
    assert_eq!(grid(&Params::dims(4096, 2, 0)), [512, 1, 1]);
    assert_eq!(grid(&Params::dims(8192, 4, 0)), [512, 1, 1]);
    assert_eq!(grid(&Params::dims(1, 2, 0)), [16, 1, 1]);
    assert_eq!(layer_quads(4096), 2);
    assert_eq!(layer_quads(8176), 2);
    assert_eq!(layer_quads(8177), 4);
    assert_eq!(layer_quads(8192), 4);
    assert_eq!(layer_quads(1), 2);
}

#[test]
fn checks_refuse_what_the_kernels_cannot_run() {
    let rope = ROPE.check.unwrap();
    assert!(rope(&Params::dims(2, 8, 5)).is_ok());
    assert_eq!(rope(&Params::dims(2, 7, 5)).unwrap_err().name, "head_dim");
    assert_eq!(rope(&Params::dims(0, 8, 5)).unwrap_err().name, "heads");
    assert_eq!(
        rope(&Params::dims(2, 8, ROPE_MAX_POS + 1))
            .unwrap_err()
            .name,
        "pos"
    );
    let norm = ADD_RMS_NORM.check.unwrap();
    assert!(norm(&Params::dims(1, 300, 0).with_scalars(1e-5, 0.0)).is_ok());
    assert_eq!(norm(&Params::dims(1, 0, 0)).unwrap_err().name, "cols");
    assert_eq!(norm(&Params::dims(70_000, 4, 0)).unwrap_err().name, "rows");
    let layer = NORM_GEMV_SILU_ADD.check.unwrap();
    let eps = |h, q, e| Params::dims(h, q, 0).with_scalars(e, 0.0);
    assert!(layer(&eps(LAYER_MAX_H, 4, 0.0)).is_ok());
    assert_eq!(layer(&eps(0, 4, 0.0)).unwrap_err().name, "h");
    assert_eq!(layer(&eps(LAYER_MAX_H + 1, 4, 0.0)).unwrap_err().name, "h");
    for q in [0, 1, 3, 8] {
        assert_eq!(layer(&eps(64, q, 0.0)).unwrap_err().name, "quads");
    }
    for e in [-1e-5, f32::NAN, f32::INFINITY] {
        assert_eq!(layer(&eps(64, 4, e)).unwrap_err().name, "eps");
    }
    // The two launches of the same layer take the same widths and quads,
    // and the finish the same eps.
    let (partial, finish) = (LAYER_PARTIAL.check.unwrap(), LAYER_FINISH.check.unwrap());
    for check in [partial, finish] {
        assert!(check(&eps(LAYER_MAX_H, 2, 0.0)).is_ok());
        assert_eq!(check(&eps(0, 4, 0.0)).unwrap_err().name, "h");
        assert_eq!(check(&eps(LAYER_MAX_H + 1, 4, 0.0)).unwrap_err().name, "h");
        for q in [0, 1, 3, 8] {
            assert_eq!(check(&eps(64, q, 0.0)).unwrap_err().name, "quads");
        }
    }
    for e in [-1e-5, f32::NAN, f32::INFINITY] {
        assert_eq!(finish(&eps(64, 4, e)).unwrap_err().name, "eps");
    }
    for def in ALL {
        def.well_formed().unwrap();
        for p in def.samples {
            (def.check.unwrap())(p).unwrap();
        }
    }
}

/// The shared WGSL prelude.
fn prelude() -> String {
    seam::kernel::WGSL_PRELUDE.to_string()
}

/// Each WGSL source parses and validates with the prelude, and declares
/// its entry point with the definition's workgroup size.
#[test]
fn wgsl_sources_validate() {
    for def in ALL {
        validate(def);
    }
}

fn validate(def: &KernelDef) {
    let src = format!("{}\n{}", prelude(), def.wgsl.unwrap());
    let module = naga::front::wgsl::parse_str(&src)
        .unwrap_or_else(|e| panic!("{}: {}", def.name, e.emit_to_string(&src)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}: {}", def.name, e.emit_to_string(&src)));
    let ep = module
        .entry_points
        .iter()
        .find(|e| e.name == def.name)
        .unwrap_or_else(|| panic!("{}: no entry point of that name", def.name));
    assert_eq!(ep.workgroup_size, def.workgroup_size, "{}", def.name);
}
