//! One decode layer in two launches, for backends whose workgroups cannot
//! wait for each other inside one dispatch (WGSL): [`LAYER_PARTIAL`] splits
//! each 128-column tile's rows over `32 / quads` workgroups, as the CUDA
//! kernel of [`NORM_GEMV_SILU_ADD`](super::NORM_GEMV_SILU_ADD) splits them
//! over blocks, and writes the partial sums; [`LAYER_FINISH`] adds them and
//! applies the norm, silu and the residual. Together: the same layer,
//! `y = x + silu(rms_norm(x) · wn · W)`. [`LAYER_FOLD`] is a finish and
//! the next layer's partial in one launch: a stack of L layers is
//! [`LAYER_PARTIAL`], L − 1 folds and [`LAYER_FINISH`], one dispatch (and
//! one barrier) a layer.

use super::{
    f32s, layer_check, layer_shape_check, layer_splits, store, tree_sum, LAYER_TILE, LAYER_WG,
};
use seam::kernel::{Field, KernelDef};
use seam::ops::{Access, Binding};
use seam::{DType, Params, Tolerance};

/// f32 words of the partial sums at width `h` with `quads`: one row of
/// `h` per range (`32 / quads` ranges, as the CUDA split).
pub fn split_partials(h: u32, quads: u32) -> u64 {
    layer_splits(quads) * h as u64
}

fn partial_extents(p: &Params, out: &mut [u64]) {
    let h = p.d0 as u64;
    out[0] = h;
    out[1] = h;
    out[2] = h * h;
    out[3] = split_partials(p.d0, p.d1);
}

fn partial_grid(p: &Params) -> [u32; 3] {
    let tiles = (p.d0 as u64).div_ceil(LAYER_TILE).max(1);
    [(tiles * layer_splits(p.d1)) as u32, 1, 1]
}

fn finish_extents(p: &Params, out: &mut [u64]) {
    let h = p.d0 as u64;
    out[0] = h;
    out[1] = split_partials(p.d0, p.d1);
    out[2] = h;
}

fn fold_extents(p: &Params, out: &mut [u64]) {
    let h = p.d0 as u64;
    let part = split_partials(p.d0, p.d1);
    out[..6].copy_from_slice(&[h, part, h, h * h, h, part]);
}

/// The samples of the kernels that finish a layer ([`LAYER_FINISH`],
/// [`LAYER_FOLD`]): [`LAYER_PARTIAL`]'s widths and quads, each with an
/// eps (0, a large one and the usual).
const FINISH_SAMPLES: &[Params] = &[
    Params::dims(1, 2, 0).with_scalars(1e-5, 0.0),
    Params::dims(7, 4, 0).with_scalars(0.5, 0.0),
    Params::dims(300, 2, 0).with_scalars(1e-5, 0.0),
    Params::dims(514, 2, 0).with_scalars(0.0, 0.0),
    Params::dims(1000, 4, 0).with_scalars(0.25, 0.0),
    Params::dims(2052, 4, 0).with_scalars(1e-5, 0.0),
];

fn finish_grid(p: &Params) -> [u32; 3] {
    [(p.d0 as u64).div_ceil(LAYER_WG as u64).max(1) as u32, 1, 1]
}

/// What `layer_partial.wgsl` computes, in its order (each range's 8 row
/// groups folded from zero, one fma a product, then added in group order).
fn partials(h: usize, n: usize, x: &[f32], wn: &[f32], w: &[f32]) -> Vec<f32> {
    let a: Vec<f32> = x[..h].iter().zip(wn).map(|(x, w)| x * w).collect();
    let r = h.div_ceil(n);
    let mut part = vec![0f32; n * h];
    for ks in 0..n {
        let (k0, k1) = ((ks * r).min(h), (ks * r + r).min(h));
        for c in 0..h {
            part[ks * h + c] = (0..8)
                .map(|g| {
                    (k0 + g..k1)
                        .step_by(8)
                        .fold(0f32, |acc, k| a[k].mul_add(w[k * h + c], acc))
                })
                .reduce(|s, v| s + v)
                .unwrap_or(0.0);
        }
    }
    part
}

/// What `layer_finish.wgsl` computes, in its order (Σx² as `add_rms_norm`
/// adds it, the ranges from zero in order).
fn finish(h: usize, n: usize, x: &[f32], part: &[f32], eps: f32) -> Vec<f32> {
    let ss = tree_sum(x[..h].iter().map(|v| v * v));
    let inv = 1.0 / (ss / h as f32 + eps).sqrt();
    (0..h)
        .map(|c| {
            let z = (0..n).fold(0f32, |z, i| z + part[i * h + c]) * inv;
            x[c] + z / (1.0 + (-z).exp())
        })
        .collect()
}

/// The CPU implementation of [`LAYER_PARTIAL`]: `layer_partial.wgsl`'s
/// sums in its order.
pub fn layer_partial_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let h = p.d0 as usize;
    let n = layer_splits(p.d1) as usize;
    let part = partials(h, n, &f32s(&b[0]), &f32s(&b[1]), &f32s(&b[2]));
    store(&mut b[3], &part);
}

/// The CPU implementation of [`LAYER_FINISH`]: `layer_finish.wgsl`'s steps
/// in its order.
pub fn layer_finish_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let h = p.d0 as usize;
    let n = layer_splits(p.d1) as usize;
    let y = finish(h, n, &f32s(&b[0]), &f32s(&b[1]), p.s0);
    store(&mut b[2], &y);
}

/// The CPU implementation of [`LAYER_FOLD`]: [`LAYER_FINISH`]'s steps
/// into `xo`, then [`LAYER_PARTIAL`]'s sums from it, each in its order.
pub fn layer_fold_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let h = p.d0 as usize;
    let n = layer_splits(p.d1) as usize;
    let x = finish(h, n, &f32s(&b[0]), &f32s(&b[1]), p.s0);
    let part = partials(h, n, &x, &f32s(&b[2]), &f32s(&b[3]));
    store(&mut b[4], &x);
    store(&mut b[5], &part);
}

/// The GEMV of one decode layer split over rows (d0 = h ≤
/// [`LAYER_MAX_H`], d1 = quads, 2 or 4: 16 or 8 row ranges): `part[ks][c]
/// = Σ (x[k] · wn[k]) · W[k][c]` over the rows `k` of range `ks` (⌈h /
/// ranges⌉ each); bindings `x`, `wn` (h), `W` (h², row-major) and `part`
/// ([`split_partials`] words), which may alias none of them.
/// [`LAYER_FINISH`] completes the layer.
///
/// Tolerance: that of [`NORM_GEMV_SILU_ADD`](super::NORM_GEMV_SILU_ADD),
/// `1e-4 + 1e-4 · |ref|`: WGSL may round each multiply-add twice, an
/// error that grows with the terms, not the sum.
pub static LAYER_PARTIAL: KernelDef = KernelDef {
    name: "layer_partial_f32",
    bindings: &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("wn", Access::Read, DType::F32),
        Binding::fixed("w", Access::Read, DType::F32),
        Binding::fixed("part", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::D1],
    extents: partial_extents,
    workgroup_size: [LAYER_WG as u32, 1, 1],
    grid: partial_grid,
    check: Some(layer_shape_check),
    allows_aliasing: false,
    tolerance: Tolerance::Relative {
        rel: 1e-4,
        abs: 1e-4,
    },
    wgsl: Some(include_str!("../../user/layer_partial.wgsl")),
    cuda: None,
    cpu: Some(layer_partial_cpu),
    samples: &[
        Params::dims(1, 2, 0),
        Params::dims(7, 4, 0),
        Params::dims(300, 2, 0),
        Params::dims(514, 2, 0),
        Params::dims(1000, 4, 0),
        Params::dims(2052, 4, 0),
    ],
};

/// The rest of one decode layer after [`LAYER_PARTIAL`] (d0 = h, d1 =
/// quads as there, s0 = eps): `y = x + silu(z / sqrt(mean(x²) + eps))`,
/// `z` the sum of the ranges' partial sums of each column; bindings `x`
/// (h), `part` ([`split_partials`] words) and `y` (h), which may alias
/// none of them (every workgroup reads all of `x`).
///
/// Tolerance: `1e-5 + 1e-5 · |ref|`, add_rms_norm's: the same steps in the
/// same order on every device but `sqrt`, `/` and `exp`, which Vulkan
/// allows a few ulp (`exp` is the prelude's `exp_accurate`).
pub static LAYER_FINISH: KernelDef = KernelDef {
    name: "layer_finish_f32",
    bindings: &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("part", Access::Read, DType::F32),
        Binding::fixed("y", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::D1, Field::S0],
    extents: finish_extents,
    workgroup_size: [LAYER_WG as u32, 1, 1],
    grid: finish_grid,
    check: Some(layer_check),
    allows_aliasing: false,
    tolerance: Tolerance::Relative {
        rel: 1e-5,
        abs: 1e-5,
    },
    wgsl: Some(include_str!("../../user/layer_finish.wgsl")),
    cuda: None,
    cpu: Some(layer_finish_cpu),
    samples: FINISH_SAMPLES,
};

/// One layer's [`LAYER_FINISH`] folded into the next layer's
/// [`LAYER_PARTIAL`], so that a stack of L layers is L + 1 launches
/// (partial, L − 1 folds, finish) instead of 2L (d0 = h, d1 = quads, s0 =
/// eps, as both): from the previous layer's input `xp` (h) and partial
/// sums `pp` ([`split_partials`] words) it finishes that layer into `xo`
/// (h) as [`LAYER_FINISH`] would, then writes the partial sums of `xo ·
/// wn` (h) times `W` (h², row-major) into `part` as [`LAYER_PARTIAL`]
/// would. No binding may alias another (every workgroup reads all of
/// `xp`).
///
/// Tolerance: `5e-4 + 5e-4 · |ref|`, five times [`LAYER_PARTIAL`]'s: the
/// few ulp Vulkan allows `sqrt`, `/` and `exp` in the finished rows reach
/// the partial sums multiplied by each row's weights, terms that do not
/// cancel as their sum does. On lavapipe, a chain of four folds (the
/// suite's C11 chain, sample h = 1000) differed from the CPU by 2.7e-4 at
/// a sum of −1.37, over [`LAYER_PARTIAL`]'s bound of 2.4e-4.
pub static LAYER_FOLD: KernelDef = KernelDef {
    name: "layer_fold_f32",
    bindings: &[
        Binding::fixed("xp", Access::Read, DType::F32),
        Binding::fixed("pp", Access::Read, DType::F32),
        Binding::fixed("wn", Access::Read, DType::F32),
        Binding::fixed("w", Access::Read, DType::F32),
        Binding::fixed("xo", Access::Write, DType::F32),
        Binding::fixed("part", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::D1, Field::S0],
    extents: fold_extents,
    workgroup_size: [LAYER_WG as u32, 1, 1],
    grid: partial_grid,
    check: Some(layer_check),
    allows_aliasing: false,
    tolerance: Tolerance::Relative {
        rel: 5e-4,
        abs: 5e-4,
    },
    wgsl: Some(include_str!("../../user/layer_fold.wgsl")),
    cuda: None,
    cpu: Some(layer_fold_cpu),
    samples: FINISH_SAMPLES,
};
