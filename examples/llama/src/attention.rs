//! [`ATTENTION`]: grouped-query attention of the new position over a layer's
//! KV cache, as WGSL, CUDA C and Rust (the CPU backend runs the Rust).
//! Scores, softmax and the weighted sum of values are one launch: the
//! catalogue's GEMM and softmax would need one launch per head, since a
//! head's keys are strided in a position-major cache.

use seam::kernel::{CudaSource, Field, KernelDef, ParamError, MAX_GRID_EDGE};
use seam::ops::{Access, Binding};
use seam::{DType, Params, Tolerance};

/// Invocations per workgroup (one workgroup per head).
const WG: usize = 64;

/// The launch's params: `heads` query heads of `head_size` over positions
/// `0..n` of a cache with `kv_heads` heads.
pub fn params(heads: u32, kv_heads: u32, head_size: u32, n: u32) -> Params {
    Params {
        bits: kv_heads,
        ..Params::dims(heads, head_size, n).with_scalars(1.0 / (head_size as f32).sqrt(), 0.0)
    }
}

pub(crate) fn extents(p: &Params, out: &mut [u64]) {
    let (heads, hs, n, kv) = (p.d0 as u64, p.d1 as u64, p.d2 as u64, p.bits as u64);
    out[0] = heads * hs;
    out[1] = n * kv * hs;
    out[2] = n * kv * hs;
    out[3] = heads * n;
    out[4] = heads * hs;
}

fn grid(p: &Params) -> [u32; 3] {
    [p.d0.max(1), 1, 1]
}

fn refuse(name: &'static str, reason: String) -> Result<(), ParamError> {
    Err(ParamError { name, reason })
}

fn check(p: &Params) -> Result<(), ParamError> {
    if p.d0 == 0 || p.d0 > MAX_GRID_EDGE {
        return refuse(
            "heads",
            format!(
                "{} is not in 1..={MAX_GRID_EDGE} (one workgroup per head)",
                p.d0
            ),
        );
    }
    if p.bits == 0 || !p.d0.is_multiple_of(p.bits) {
        return refuse(
            "kv_heads",
            format!("{} does not divide the {} heads", p.bits, p.d0),
        );
    }
    if p.d1 == 0 {
        return refuse("head_size", "must be at least 1".into());
    }
    if p.d2 == 0 {
        return refuse("n", "attends to no position".into());
    }
    if !(p.s0.is_finite() && p.s0 > 0.0) {
        return refuse("scale", format!("{} is not a finite number > 0", p.s0));
    }
    Ok(())
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(bytes)
}

fn store(dst: &mut [u8], v: &[f32]) {
    dst[..v.len() * 4].copy_from_slice(bytemuck::cast_slice(v));
}

/// `lanes[i]` folded by the GPU sources' shared-memory tree.
fn tree(mut lanes: [f32; WG], f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut half = WG / 2;
    while half > 0 {
        for i in 0..half {
            lanes[i] = f(lanes[i], lanes[i + half]);
        }
        half /= 2;
    }
    lanes[0]
}

/// The CPU implementation: what `attention.cu` computes, in its order.
pub fn attention_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let (heads, hs, n, kv) = (p.d0 as usize, p.d1 as usize, p.d2 as usize, p.bits as usize);
    let (q, kc, vc) = (f32s(&b[0]), f32s(&b[1]), f32s(&b[2]));
    let kv_dim = kv * hs;
    let mut att = vec![0f32; heads * n];
    let mut out = vec![0f32; heads * hs];
    for h in 0..heads {
        let g = h / (heads / kv);
        let qh = &q[h * hs..][..hs];
        let a = &mut att[h * n..][..n];
        let mut lanes = [f32::MIN; WG];
        for (t, s) in a.iter_mut().enumerate() {
            let k = &kc[t * kv_dim + g * hs..][..hs];
            let dot = qh.iter().zip(k).fold(0f32, |acc, (x, y)| acc + x * y);
            *s = dot * p.s0;
            lanes[t % WG] = lanes[t % WG].max(*s);
        }
        let mx = tree(lanes, f32::max);
        let mut lanes = [0f32; WG];
        for (t, s) in a.iter_mut().enumerate() {
            *s = (*s - mx).exp();
            lanes[t % WG] += *s;
        }
        let total = tree(lanes, |x, y| x + y);
        // Slices of the positions (t ≡ s mod slices), summed in slice order.
        let slices = if hs <= WG { WG / hs } else { 1 };
        for (d, o) in out[h * hs..][..hs].iter_mut().enumerate() {
            let sum = (0..slices).fold(0f32, |sum, s| {
                let part = (s..a.len())
                    .step_by(slices)
                    .fold(0f32, |acc, t| acc + a[t] * vc[t * kv_dim + g * hs + d]);
                sum + part
            });
            *o = sum / total;
        }
    }
    store(&mut b[3], &att);
    store(&mut b[4], &out);
}

/// Grouped-query attention over positions `0..n` ([`params`]: d0 = heads,
/// d1 = head_size, d2 = n, bits = kv_heads, s0 = scale): bindings `q`
/// (`heads × head_size`), `kc` and `vc` (the layer's cache, position-major:
/// `n × kv_heads × head_size` read), `att` (`heads × n` scratch) and `out`
/// (`heads × head_size`). Query head `h` reads kv head `h / (heads / kv_heads)`.
///
/// Tolerance: the sums run in one order everywhere, but `exp` is each
/// platform's (CUDA's `expf`, the prelude's `exp_accurate`, Rust's), a few
/// ulp apart, and a driver may contract a multiply-add in WGSL.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static ATTENTION: KernelDef = KernelDef {
    name: "attention_f32",
    bindings: &[
        Binding::fixed("q", Access::Read, DType::F32),
        Binding::fixed("kc", Access::Read, DType::F32),
        Binding::fixed("vc", Access::Read, DType::F32),
        Binding::fixed("att", Access::Write, DType::F32),
        Binding::fixed("out", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::D1, Field::D2, Field::Bits, Field::S0],
    extents,
    workgroup_size: [WG as u32, 1, 1],
    grid,
    check: Some(check),
    allows_aliasing: false,
    tolerance: Tolerance::Relative {
        rel: 1e-5,
        abs: 1e-6,
    },
    wgsl: Some(concat!(
        include_str!("../kernels/attend.wgsl"),
        include_str!("../kernels/attention.wgsl")
    )),
    // SAFETY: attend.cu (called by attention.cu with n = d2) reads `q` below heads × head_size, `kc` and `vc`
    // below n × kv_heads × head_size (a kv head below kv_heads, since
    // `check` makes kv_heads divide heads), writes `att` below heads × n and
    // `out` below heads × head_size: the extents of `extents`.
    cuda: Some(unsafe {
        CudaSource::trusted(concat!(
            include_str!("../kernels/attend.cu"),
            include_str!("../kernels/attention.cu")
        ))
    }),
    cpu: Some(attention_cpu),
    samples: &[
        Params {
            bits: 1,
            ..Params::dims(1, 1, 1).with_scalars(1.0, 0.0)
        },
        Params {
            bits: 4,
            ..Params::dims(8, 8, 3).with_scalars(0.353_553_38, 0.0)
        },
        Params {
            bits: 2,
            ..Params::dims(6, 70, 130).with_scalars(0.119_522_86, 0.0)
        },
    ],
};
