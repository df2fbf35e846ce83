//! User kernels an LLM decode step uses, each as WGSL, CUDA C and Rust
//! (the CPU backend runs the Rust, and so it is the oracle every other
//! device is compared with, C11): what the conformance suite certifies by
//! default (`seam_conformance::harness::certify` runs its user-kernel cases
//! over [`ALL`]) and what the examples decode with. They are written
//! against seam's public user-kernel API ([`KernelDef`]) like any user's
//! kernel. The GPU sources live in `kernels/user/`.
//!
//! - [`ROPE`]: rotary position embedding, `x[heads × head_dim]` at position
//!   `pos`, pair `(2i, 2i + 1)` of each head rotated by `pos · freq[i]`
//!   ([`rope_freqs`] makes the usual table `theta^(-2i / head_dim)`).
//! - [`ADD_RMS_NORM`]: the residual add fused with rms_norm: `h = x + r`
//!   written back to `r`, then `out = h / sqrt(mean(h²) + eps) · w`.
//! - [`NORM_GEMV_SILU_ADD`]: a whole layer of the benchmark's decode stack,
//!   `y = x + silu(rms_norm(x) · wn · W)`, in one launch instead of four.
//! - [`LAYER_PARTIAL`] and [`LAYER_FINISH`]: the same layer in two launches,
//!   its rows split over workgroups (WGSL and Rust only: where one launch
//!   cannot split the rows; CUDA's one launch does); [`LAYER_FOLD`] folds
//!   one layer's finish into the next layer's partial sums, so that L
//!   layers take L + 1 launches.

use seam::kernel::{CudaSource, Field, KernelDef, ParamError, MAX_GRID_EDGE};
use seam::ops::{Access, Binding};
use seam::{DType, Params, Tolerance};

/// Invocations per workgroup of [`ROPE`] (one per pair).
const ROPE_WG: u32 = 64;
/// Invocations per workgroup of [`ADD_RMS_NORM`] (one workgroup per row).
const NORM_WG: usize = 256;
/// Largest position [`ROPE`] takes: with `|freq| ≤ 2` the angle stays below
/// 2^16, where the range reduction's products are exact.
pub const ROPE_MAX_POS: u32 = 32_767;

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(bytes)
}

fn store(dst: &mut [u8], v: &[f32]) {
    dst[..v.len() * 4].copy_from_slice(bytemuck::cast_slice(v));
}

fn refuse(name: &'static str, reason: impl Into<String>) -> Result<(), ParamError> {
    Err(ParamError {
        name,
        reason: reason.into(),
    })
}

// ----- rope -----

/// The RoPE frequency table for one head: `freq[i] = theta^(-2i / head_dim)`
/// for `i < head_dim / 2`, computed in f64 and rounded once to f32 (what
/// [`ROPE`]'s `freq` binding holds).
pub fn rope_freqs(head_dim: u32, theta: f64) -> Vec<f32> {
    (0..head_dim / 2)
        .map(|i| theta.powf(-2.0 * i as f64 / head_dim as f64) as f32)
        .collect()
}

/// `(sin a, cos a)` as every [`ROPE`] source computes them: a Cody-Waite
/// reduction by π/2 in three parts (8, 7 and 24 bits: `k · part` is exact
/// for `|k| < 2^16`), then cephes' sinf/cosf polynomials on [-π/4, π/4].
/// Only correctly rounded multiplies and adds (no fused multiply-add) and
/// `floor`, in one fixed order, so CUDA (`_rn` intrinsics) and this agree
/// bit for bit. Within 2e-7 of the true values for `|a| < 2^16` (the
/// tests check a sweep against f64).
pub fn sincos(a: f32) -> (f32, f32) {
    const TWO_OVER_PI: f32 = 0.636_619_75;
    const PIO2_1: f32 = 1.570_312_5;
    const PIO2_2: f32 = 4.844_665_5e-4;
    const PIO2_3: f32 = -6.397_578_4e-7;
    let k = (a * TWO_OVER_PI + 0.5).floor();
    let r = ((a - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
    let z = r * r;
    let s = ((-1.951_529_6e-4 * z + 8.332_161e-3) * z - 1.666_665_5e-1) * z * r + r;
    let c = ((2.443_315_7e-5 * z - 1.388_731_6e-3) * z + 4.166_664_6e-2) * z * z - 0.5 * z + 1.0;
    match (k as i32).rem_euclid(4) {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    }
}

fn rope_extents(p: &Params, out: &mut [u64]) {
    let n = p.d0 as u64 * p.d1 as u64;
    out[0] = n;
    out[1] = p.d1 as u64 / 2;
    out[2] = n;
}

fn rope_pairs(p: &Params) -> u64 {
    p.d0 as u64 * (p.d1 / 2) as u64
}

fn rope_grid(p: &Params) -> [u32; 3] {
    let groups = rope_pairs(p).div_ceil(ROPE_WG as u64).max(1);
    [groups.min(u32::MAX as u64) as u32, 1, 1]
}

fn rope_check(p: &Params) -> Result<(), ParamError> {
    if p.d0 == 0 {
        return refuse("heads", "must be at least 1");
    }
    if p.d1 == 0 || !p.d1.is_multiple_of(2) {
        return refuse(
            "head_dim",
            format!("{} is not a positive even number", p.d1),
        );
    }
    if p.d2 > ROPE_MAX_POS {
        return refuse(
            "pos",
            format!("{} exceeds {ROPE_MAX_POS} (sin/cos range)", p.d2),
        );
    }
    let groups = rope_pairs(p).div_ceil(ROPE_WG as u64);
    if groups > MAX_GRID_EDGE as u64 {
        return refuse(
            "heads",
            format!(
                "{} pairs need {groups} workgroups, more than {MAX_GRID_EDGE}",
                rope_pairs(p)
            ),
        );
    }
    Ok(())
}

/// The CPU implementation: what `rope.cu` computes, step for step.
pub fn rope_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let (heads, head_dim) = (p.d0 as usize, p.d1 as usize);
    let half = head_dim / 2;
    let x = f32s(&b[0]);
    let freq = f32s(&b[1]);
    let mut y = vec![0f32; heads * head_dim];
    for j in 0..heads * half {
        let i = j % half;
        let at = (j / half) * head_dim + 2 * i;
        let (s, c) = sincos(p.d2 as f32 * freq[i]);
        let (x0, x1) = (x[at], x[at + 1]);
        y[at] = x0 * c - x1 * s;
        y[at + 1] = x0 * s + x1 * c;
    }
    store(&mut b[2], &y);
}

/// Rotary position embedding: `y = rope(x, pos)` over `heads × head_dim`
/// (d0 = heads, d1 = head_dim (even), d2 = pos ≤ [`ROPE_MAX_POS`]);
/// bindings `x`, `freq` (`head_dim / 2`, [`rope_freqs`]) and `y`, which may
/// be `x` itself (in place).
///
/// Tolerance: CUDA and the CPU compute the same correctly rounded steps and
/// agree bit for bit; WGSL cannot forbid a driver to contract `a · b + c`
/// into one rounding, which moves a result by a few ulp of the pair's
/// magnitude: within `1e-5 + 1e-5 · |ref|` for inputs up to ~8 in size.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static ROPE: KernelDef = KernelDef {
    name: "rope_f32",
    bindings: &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("freq", Access::Read, DType::F32),
        Binding::fixed("y", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::D1, Field::D2],
    extents: rope_extents,
    workgroup_size: [ROPE_WG, 1, 1],
    grid: rope_grid,
    check: Some(rope_check),
    allows_aliasing: true,
    tolerance: Tolerance::Relative {
        rel: 1e-5,
        abs: 1e-5,
    },
    wgsl: Some(include_str!("../user/rope.wgsl")),
    // SAFETY: rope.cu indexes `x` and `y` below heads × head_dim and `freq`
    // below head_dim / 2 (`rope_extents`), and writes only `y`.
    cuda: Some(unsafe { CudaSource::trusted(include_str!("../user/rope.cu")) }),
    cpu: Some(rope_cpu),
    samples: &[
        Params::dims(1, 2, 0),
        Params::dims(3, 10, 7),
        Params::dims(4, 64, 300),
        Params::dims(5, 6, ROPE_MAX_POS),
    ],
};

// ----- add_rms_norm -----

fn norm_extents(p: &Params, out: &mut [u64]) {
    let n = p.d0 as u64 * p.d1 as u64;
    out[0] = n;
    out[1] = n;
    out[2] = p.d1 as u64;
    out[3] = n;
}

fn norm_grid(p: &Params) -> [u32; 3] {
    [p.d0.max(1), 1, 1]
}

fn norm_check(p: &Params) -> Result<(), ParamError> {
    if p.d0 == 0 || p.d0 > MAX_GRID_EDGE {
        return refuse(
            "rows",
            format!(
                "{} is not in 1..={MAX_GRID_EDGE} (one workgroup per row)",
                p.d0
            ),
        );
    }
    if p.d1 == 0 {
        return refuse("cols", "must be at least 1");
    }
    eps_check(p)
}

/// `s0`, the norm's eps, is a finite number ≥ 0 (both norm kernels).
fn eps_check(p: &Params) -> Result<(), ParamError> {
    if !(p.s0 >= 0.0 && p.s0.is_finite()) {
        return refuse("eps", format!("{} is not a finite number ≥ 0", p.s0));
    }
    Ok(())
}

/// The sum of `sq` as the GPU sources add it: invocation `t` of
/// [`NORM_WG`] accumulates elements `t, t + 256, …` in order, then a tree
/// halves the 256 partial sums.
fn tree_sum(sq: impl Iterator<Item = f32>) -> f32 {
    let mut lanes = [0f32; NORM_WG];
    for (c, v) in sq.enumerate() {
        lanes[c % NORM_WG] += v;
    }
    let mut half = NORM_WG / 2;
    while half > 0 {
        for t in 0..half {
            lanes[t] += lanes[t + half];
        }
        half /= 2;
    }
    lanes[0]
}

/// The CPU implementation: what `add_rms_norm.cu` computes, step for step
/// (its reduction order included).
pub fn add_rms_norm_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let (rows, cols) = (p.d0 as usize, p.d1 as usize);
    let x = f32s(&b[0]);
    let mut r = f32s(&b[1]);
    let w = f32s(&b[2]);
    let mut out = vec![0f32; rows * cols];
    for row in 0..rows {
        let range = row * cols..(row + 1) * cols;
        for c in range.clone() {
            r[c] += x[c];
        }
        let mean_sq = tree_sum(r[range.clone()].iter().map(|h| h * h)) / cols as f32;
        let inv = 1.0 / (mean_sq + p.s0).sqrt();
        for (c, o) in range.clone().zip(&mut out[range]) {
            *o = r[c] * inv * w[c - row * cols];
        }
    }
    store(&mut b[1], &r[..rows * cols]);
    store(&mut b[3], &out);
}

/// Residual add fused with rms_norm over `rows × cols` (d0 = rows ≤ 65535,
/// d1 = cols, s0 = eps): bindings `x` (read), `r` (the residual: read, and
/// written with `h = x + r`), `w` (`cols` weights) and `out`, which may
/// alias none of them.
///
/// Tolerance: that of the catalogue's f32 rms_norm. The CPU reproduces the
/// GPU's reduction order, so CUDA (`_rn` intrinsics) agrees bit for bit;
/// Vulkan allows `sqrt` and `/` a few ulp, which the bound covers.
/// The residual itself is one add per element, exact everywhere.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static ADD_RMS_NORM: KernelDef = KernelDef {
    name: "add_rms_norm_f32",
    bindings: &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("r", Access::Write, DType::F32),
        Binding::fixed("w", Access::Read, DType::F32),
        Binding::fixed("out", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::D1, Field::S0],
    extents: norm_extents,
    workgroup_size: [NORM_WG as u32, 1, 1],
    grid: norm_grid,
    check: Some(norm_check),
    allows_aliasing: false,
    tolerance: Tolerance::Relative {
        rel: 1e-5,
        abs: 1e-6,
    },
    wgsl: Some(include_str!("../user/add_rms_norm.wgsl")),
    // SAFETY: add_rms_norm.cu indexes each binding below the extents of
    // `norm_extents` (rows × cols, cols for the weight) and writes only the
    // bindings it declares written.
    cuda: Some(unsafe { CudaSource::trusted(include_str!("../user/add_rms_norm.cu")) }),
    cpu: Some(add_rms_norm_cpu),
    samples: &[
        Params::dims(1, 300, 0).with_scalars(1e-5, 0.0),
        Params::dims(3, 1, 0).with_scalars(1e-6, 0.0),
        Params::dims(2, 257, 0).with_scalars(1e-5, 0.0),
        Params::dims(5, 1000, 0).with_scalars(0.0, 0.0),
    ],
};

// ----- norm_gemv_silu_add -----

/// Invocations per workgroup of [`NORM_GEMV_SILU_ADD`].
const LAYER_WG: usize = 256;
/// Largest `h` [`NORM_GEMV_SILU_ADD`] takes: `W` (h² f32) stays within
/// 1 GiB and every index within u32.
pub const LAYER_MAX_H: u32 = 16_384;

/// Columns a CUDA block of [`NORM_GEMV_SILU_ADD`] owns (32 lanes × 4).
const LAYER_TILE: u64 = 128;

/// The width from which the CUDA kernel splits rows over blocks
/// (`SEAM_LAYER_SPLIT_FROM` in `norm_gemv_silu_add.cu`); below it, each
/// block sums every row of its columns.
pub const LAYER_SPLIT_FROM: u32 = 2048;

/// Row ranges the CUDA kernel splits `h` into for `quads` (2 → 16, 4 →
/// 8): the workgroup count is then the same for the CUDA split and the
/// WGSL columns, ⌈h / 128⌉ · 32 / quads.
fn layer_splits(quads: u32) -> u64 {
    32 / quads.max(1) as u64
}

/// f32 words of [`NORM_GEMV_SILU_ADD`]'s workspace at width `h` with
/// `quads` (d1): per tile of 128 columns and per row range, 128 partial
/// sums and one Σx², and one counter per tile.
pub fn layer_workspace(h: u32, quads: u32) -> u64 {
    let (tiles, splits) = ((h as u64).div_ceil(LAYER_TILE), layer_splits(quads));
    tiles * splits * (LAYER_TILE + 1) + tiles
}

fn layer_extents(p: &Params, out: &mut [u64]) {
    let h = p.d0 as u64;
    out[0] = h;
    out[1] = h;
    out[2] = h * h;
    out[3] = h;
    out[4] = layer_workspace(p.d0, p.d1);
}

fn layer_grid(p: &Params) -> [u32; 3] {
    let tiles = (p.d0 as u64).div_ceil(LAYER_TILE).max(1);
    [(tiles * layer_splits(p.d1)) as u32, 1, 1]
}

fn layer_check(p: &Params) -> Result<(), ParamError> {
    layer_shape_check(p)?;
    eps_check(p)
}

/// `h` (d0) within [`LAYER_MAX_H`] and `quads` (d1) 2 or 4: what every
/// form of the layer takes.
fn layer_shape_check(p: &Params) -> Result<(), ParamError> {
    if p.d0 == 0 || p.d0 > LAYER_MAX_H {
        return refuse("h", format!("{} is not in 1..={LAYER_MAX_H}", p.d0));
    }
    if p.d1 != 2 && p.d1 != 4 {
        return refuse(
            "quads",
            format!("{} is neither 2 nor 4 (column quads a workgroup)", p.d1),
        );
    }
    Ok(())
}

/// The quads [`NORM_GEMV_SILU_ADD`] should take at width `h`: 4 (8 row
/// ranges in CUDA, 16 columns a workgroup in WGSL) where that still gives
/// at least 512 workgroups, else 2 (16 ranges; 8 columns). At h = 4096 and
/// 8192 these are the split-K layouts that ran fastest on an H200
/// (`bench/probes/fused_probe.cu`, 2026-12-06: 21.4 and 65.3 µs, the pure
/// read of the same weights 18.8 and 63.7 µs).
pub fn layer_quads(h: u32) -> u32 {
    if h.div_ceil(16) >= 512 {
        4
    } else {
        2
    }
}

/// The CPU implementation: what `norm_gemv_silu_add.cu` computes, step for
/// step, in the order of its layout at `h` ([`LAYER_SPLIT_FROM`]). The
/// workspace is left as it came (zeros).
pub fn norm_gemv_silu_add_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let h = p.d0 as usize;
    let x = f32s(&b[0]);
    let wn = f32s(&b[1]);
    let w = f32s(&b[2]);
    let a: Vec<f32> = x[..h].iter().zip(&wn).map(|(x, w)| x * w).collect();
    let sum = |term: &Term| {
        if p.d0 < LAYER_SPLIT_FROM {
            sliced_sum(h, LAYER_WG / p.d1 as usize, term)
        } else {
            split_sum(h, layer_splits(p.d1) as usize, term)
        }
    };
    let ss = sum(&|k, acc| x[k].mul_add(x[k], acc));
    let inv = 1.0 / (ss / h as f32 + p.s0).sqrt();
    let y: Vec<f32> = (0..h)
        .map(|c| {
            let z = sum(&|k, acc| a[k].mul_add(w[k * h + c], acc)) * inv;
            x[c] + z / (1.0 + (-z).exp())
        })
        .collect();
    store(&mut b[3], &y);
}

/// One step of a sum over rows: the running sum after row k.
type Term<'a> = dyn Fn(usize, f32) -> f32 + 'a;

/// Σ over k < h of `term` as the column-slice layout adds it: slice `s`
/// of `slices` folds k = s, s + slices, … in order from zero, then a tree
/// halves the slices' sums (slice s gets s + half, half = slices / 2 … 1).
fn sliced_sum(h: usize, slices: usize, term: &Term) -> f32 {
    let mut lanes: Vec<f32> = (0..slices)
        .map(|s| (s..h).step_by(slices).fold(0f32, |acc, k| term(k, acc)))
        .collect();
    let mut half = slices / 2;
    while half > 0 {
        for s in 0..half {
            lanes[s] += lanes[s + half];
        }
        half /= 2;
    }
    lanes[0]
}

/// Σ over k < h of `term` as the split-K layout adds it: for each of
/// `splits` row ranges of ⌈h / splits⌉, warp `w` (of 8) folds rows
/// `k0 + w, k0 + w + 8, …` of the range from zero, the 8 warps' sums are
/// added in warp order, and the ranges' sums in range order after a zero.
fn split_sum(h: usize, splits: usize, term: &Term) -> f32 {
    let r = h.div_ceil(splits);
    (0..splits).fold(0f32, |total, ks| {
        let (k0, k1) = ((ks * r).min(h), (ks * r + r).min(h));
        let range = (0..8)
            .map(|wp| (k0 + wp..k1).step_by(8).fold(0f32, |acc, k| term(k, acc)))
            .reduce(|s, v| s + v)
            .unwrap_or(0.0);
        total + range
    })
}

/// One layer of the benchmark's decode stack in one launch (d0 = h ≤
/// [`LAYER_MAX_H`], d1 = quads, 2 or 4 ([`layer_quads`] picks), s0 = eps):
/// `y = x + silu(n · W)` with `n = x / sqrt(mean(x²) + eps) · wn`, `W`
/// h × h row-major; bindings `x`, `wn` (h), `W` (h²), `y` (h), which may
/// alias none of them (every workgroup reads all of `x`), and the
/// workspace `ws` ([`layer_workspace`] f32 words, zero before the launch
/// and after it: one zeroed buffer serves every layer of a stack). The
/// rms_norm, GEMV, silu and residual add of the catalogue, fused: the
/// norm's scale is applied to each dot product instead of each input, so
/// the result is not the four ops' bit for bit.
///
/// On CUDA a launch may start before the one before it ends
/// ([`CudaSource::starts_early`]): its blocks prefetch their first rows of
/// `W` into L2, then wait for the launch before.
///
/// How it runs: from h = [`LAYER_SPLIT_FROM`], CUDA splits the rows over
/// `32 / quads` blocks per 128 columns, each warp reading 512 contiguous
/// bytes of a row, and the block that finishes a tile last adds the
/// partial sums (in the workspace) and applies the epilogue. Below it, and
/// in WGSL at every width (its workgroups cannot wait for each other),
/// each workgroup takes `4 · quads` columns over every row (k-slices of
/// `256 / quads` invocations a quad each; in WGSL at quads = 2, 32 of one
/// column each; a shared-memory tree) and leaves the workspace alone.
///
/// Tolerance: the catalogue's f32 GEMM bound, `1e-4 + 1e-4 · |ref|`. CUDA
/// and the CPU compute the same correctly rounded steps and fused
/// multiply-adds in the same order, all but `exp` (2 ulp); WGSL may round
/// each multiply-add twice, and from [`LAYER_SPLIT_FROM`] sums in another
/// order, so its error grows with h and does not shrink with the result:
/// at h = 2052 (a sample) the NVIDIA Vulkan driver's output differed from
/// the CPU's by up to 1.9e-5 where the result was 0.29 (one H100, driver
/// 580.159.04, 2026-12-06), beyond `1e-5 + 1e-5 · |ref|`.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static NORM_GEMV_SILU_ADD: KernelDef = KernelDef {
    name: "norm_gemv_silu_add_f32",
    bindings: &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("wn", Access::Read, DType::F32),
        Binding::fixed("w", Access::Read, DType::F32),
        Binding::fixed("y", Access::Write, DType::F32),
        Binding::workspace("ws", DType::F32),
    ],
    reads: &[Field::D0, Field::D1, Field::S0],
    extents: layer_extents,
    workgroup_size: [LAYER_WG as u32, 1, 1],
    grid: layer_grid,
    check: Some(layer_check),
    allows_aliasing: false,
    tolerance: Tolerance::Relative {
        rel: 1e-4,
        abs: 1e-4,
    },
    wgsl: Some(include_str!("../user/norm_gemv_silu_add.wgsl")),
    // SAFETY: norm_gemv_silu_add.cu indexes `x`, `wn` and `y` below h, `w`
    // below h² (`layer_extents`; a float4 load only where h is a multiple
    // of 4, `w` 16-byte aligned and the quad's first column below h, so
    // the quad ends inside its row; its L2 prefetches at rows below h of
    // columns below h) and `ws` below `layer_workspace` (its grid is
    // `layer_grid`'s, the tiles and ranges that layout counts), and writes
    // only `y` and `ws`. Starting early: both layouts call
    // `seam_prior_wait()` before any load or store but the prefetches of
    // `w` into L2, on every path (no return comes before it).
    cuda: Some(unsafe {
        CudaSource::trusted(include_str!("../user/norm_gemv_silu_add.cu")).starts_early()
    }),
    cpu: Some(norm_gemv_silu_add_cpu),
    samples: &[
        Params::dims(1, 2, 0).with_scalars(1e-5, 0.0),
        Params::dims(7, 4, 0).with_scalars(0.5, 0.0),
        Params::dims(300, 2, 0).with_scalars(1e-5, 0.0),
        Params::dims(514, 2, 0).with_scalars(0.25, 0.0),
        Params::dims(1000, 4, 0).with_scalars(0.25, 0.0),
        Params::dims(2052, 4, 0).with_scalars(1e-5, 0.0),
    ],
};

/// Every kernel here, as `seam_conformance::harness::certify_with` takes
/// them (seam's own suite certifies these by default).
pub static ALL: &[&KernelDef] = &[
    &ROPE,
    &ADD_RMS_NORM,
    &NORM_GEMV_SILU_ADD,
    &LAYER_PARTIAL,
    &LAYER_FINISH,
    &LAYER_FOLD,
];

mod split;
pub use split::{
    layer_finish_cpu, layer_fold_cpu, layer_partial_cpu, split_partials, LAYER_FINISH, LAYER_FOLD,
    LAYER_PARTIAL,
};

#[cfg(test)]
mod tests;
