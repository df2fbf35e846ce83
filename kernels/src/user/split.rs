//! One decode layer in two launches, for backends whose workgroups cannot
//! wait for each other inside one dispatch (WGSL): [`LAYER_PARTIAL`] splits
//! each 128-column tile's rows over `32 / quads` workgroups, as the CUDA
//! kernel of [`NORM_GEMV_SILU_ADD`](super::NORM_GEMV_SILU_ADD) splits them
//! over blocks, and writes the partial sums; [`LAYER_FINISH`] adds them and
//! applies the norm, silu and the residual. Together: the same layer,
//! `y = x + silu(rms_norm(x) · wn · W)`.

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

fn finish_grid(p: &Params) -> [u32; 3] {
    [(p.d0 as u64).div_ceil(LAYER_WG as u64).max(1) as u32, 1, 1]
}

/// The CPU implementation: what `layer_partial.wgsl` computes, in its
/// order (each range's 8 row groups folded from zero, one fma a product,
/// then added in group order).
pub fn layer_partial_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let h = p.d0 as usize;
    let n = layer_splits(p.d1) as usize;
    let x = f32s(&b[0]);
    let wn = f32s(&b[1]);
    let w = f32s(&b[2]);
    let a: Vec<f32> = x[..h].iter().zip(&wn).map(|(x, w)| x * w).collect();
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
    store(&mut b[3], &part);
}

/// The CPU implementation: what `layer_finish.wgsl` computes, in its
/// order (Σx² as `add_rms_norm` adds it, the ranges from zero in order).
pub fn layer_finish_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let h = p.d0 as usize;
    let n = layer_splits(p.d1) as usize;
    let x = f32s(&b[0]);
    let part = f32s(&b[1]);
    let ss = tree_sum(x[..h].iter().map(|v| v * v));
    let inv = 1.0 / (ss / h as f32 + p.s0).sqrt();
    let y: Vec<f32> = (0..h)
        .map(|c| {
            let z = (0..n).fold(0f32, |z, i| z + part[i * h + c]) * inv;
            x[c] + z / (1.0 + (-z).exp())
        })
        .collect();
    store(&mut b[2], &y);
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
    samples: &[
        Params::dims(1, 2, 0).with_scalars(1e-5, 0.0),
        Params::dims(7, 4, 0).with_scalars(0.5, 0.0),
        Params::dims(300, 2, 0).with_scalars(1e-5, 0.0),
        Params::dims(514, 2, 0).with_scalars(0.0, 0.0),
        Params::dims(1000, 4, 0).with_scalars(0.25, 0.0),
        Params::dims(2052, 4, 0).with_scalars(1e-5, 0.0),
    ],
};
