//! The kernels that let the decode step run K times in one replay (C14):
//! what changes from token to token is read on the device from a small
//! `u32` state buffer ([`STATE_WORDS`]: the token fed, its position, the
//! loop's condition and the tokens made so far) instead of launch
//! parameters, and [`ADVANCE`] writes the next one. Each has WGSL (wgpu,
//! Vulkan, Metal), CUDA C (the CUDA backend's conditional nodes; in CUDA
//! C a binding's pointer already starts at its view) and a CPU
//! implementation.
//!
//! Every step computes what the one-token step computes, bit for bit: RoPE
//! is the same kernel fed `pos · freq` ([`POS_FREQS`], one rounding, as the
//! kernel's own `f32(pos) * freq`) with position 1 (and `1 · x = x`), the
//! slot writes are copies, [`ATTENTION_AT`] is attention's own code with
//! `n` read from the state.

use crate::attention;
use seam::kernel::{CudaSource, Field, KernelDef, ParamError, MAX_GRID_EDGE};
use seam::ops::{Access, Binding};
use seam::{DType, Params, Tolerance};

/// The state's words: the token fed next, its position, the WHILE's
/// condition (1 while decoding goes on), the tokens made.
pub const TOKEN: usize = 0;
pub const POS: usize = 1;
pub const COND: usize = 2;
pub const MADE: usize = 3;
pub const STATE_WORDS: usize = 4;

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(bytes)
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytemuck::pod_collect_to_vec(bytes)
}

fn store<T: bytemuck::Pod>(dst: &mut [u8], v: &[T]) {
    let bytes: &[u8] = bytemuck::cast_slice(v);
    dst[..bytes.len()].copy_from_slice(bytes);
}

fn groups_of_64(p: &Params) -> [u32; 3] {
    [p.d0.div_ceil(64).clamp(1, MAX_GRID_EDGE), 1, 1]
}

fn one_group(_: &Params) -> [u32; 3] {
    [1, 1, 1]
}

fn positive(name: &'static str, v: u32) -> Result<(), ParamError> {
    match v {
        0 => Err(ParamError {
            name,
            reason: "must be at least 1".into(),
        }),
        _ => Ok(()),
    }
}

// ----- embed_at -----

fn embed_extents(p: &Params, out: &mut [u64]) {
    out[0] = u64::from(p.d0) * u64::from(p.d1);
    out[1] = STATE_WORDS as u64;
    out[2] = u64::from(p.d0);
}

fn embed_check(p: &Params) -> Result<(), ParamError> {
    positive("dim", p.d0)?;
    positive("vocab", p.d1)
}

/// `out = emb[token]`, the token's row (d0 = dim, d1 = vocab; a token past
/// the vocabulary reads the last row).
pub fn embed_at_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let dim = p.d0 as usize;
    let tok = u32s(&b[1])[TOKEN].min(p.d1 - 1) as usize;
    let row = f32s(&b[0])[tok * dim..][..dim].to_vec();
    store(&mut b[2], &row);
}

/// The embedding row of the state's token: bindings `emb` (`vocab × dim`),
/// `state`, `out` (`dim`).
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static EMBED_AT: KernelDef = KernelDef {
    name: "embed_at_f32",
    bindings: &[
        Binding::fixed("emb", Access::Read, DType::F32),
        Binding::fixed("state", Access::Read, DType::U32),
        Binding::fixed("out", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::D1],
    extents: embed_extents,
    workgroup_size: [64, 1, 1],
    grid: groups_of_64,
    check: Some(embed_check),
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: Some(
        "@group(0) @binding(0) var<storage, read> emb: array<f32>;
@group(0) @binding(1) var<storage, read> state: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn embed_at_f32(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.d0) {
        return;
    }
    let tok = min(state[p.o1], p.d1 - 1u);
    out[p.o2 + g.x] = emb[p.o0 + tok * p.d0 + g.x];
}
",
    ),
    // SAFETY: reads state[0] and the row of a token clamped below vocab
    // (d1), so `emb` below vocab × dim; writes `out` below dim (d0); each
    // thread at most one element, none past d0: the extents above.
    cuda: Some(unsafe {
        CudaSource::trusted(
            r#"extern "C" __global__ void embed_at_f32(const float* emb, const unsigned int* state, float* out, Params p) {
    unsigned int x = blockIdx.x * 64u + threadIdx.x;
    if (x >= p.d0) return;
    unsigned int tok = min(state[0], p.d1 - 1u);
    out[x] = emb[(unsigned long long)tok * p.d0 + x];
}
"#,
        )
    }),
    cpu: Some(embed_at_cpu),
    samples: &[Params::dims(1, 1, 0), Params::dims(70, 3, 0)],
};

// ----- pos_freqs -----

fn freqs_extents(p: &Params, out: &mut [u64]) {
    out[0] = u64::from(p.d0);
    out[1] = STATE_WORDS as u64;
    out[2] = u64::from(p.d0);
}

fn freqs_check(p: &Params) -> Result<(), ParamError> {
    positive("n", p.d0)
}

/// `out[i] = f32(pos) · freq[i]` (d0 = n).
pub fn pos_freqs_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let pos = u32s(&b[1])[POS] as f32;
    let out: Vec<f32> = f32s(&b[0])[..p.d0 as usize]
        .iter()
        .map(|f| pos * f)
        .collect();
    store(&mut b[2], &out);
}

/// RoPE's angles at the state's position: bindings `freq`, `state`, `out`
/// (each `n` = head_size / 2 but the state). RoPE fed them at position 1
/// rotates as at the state's position.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static POS_FREQS: KernelDef = KernelDef {
    name: "pos_freqs_f32",
    bindings: &[
        Binding::fixed("freq", Access::Read, DType::F32),
        Binding::fixed("state", Access::Read, DType::U32),
        Binding::fixed("out", Access::Write, DType::F32),
    ],
    reads: &[Field::D0],
    extents: freqs_extents,
    workgroup_size: [64, 1, 1],
    grid: groups_of_64,
    check: Some(freqs_check),
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: Some(
        "@group(0) @binding(0) var<storage, read> freq: array<f32>;
@group(0) @binding(1) var<storage, read> state: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn pos_freqs_f32(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.d0) {
        return;
    }
    out[p.o2 + g.x] = f32(state[p.o1 + 1u]) * freq[p.o0 + g.x];
}
",
    ),
    // SAFETY: reads state[1] and `freq` below n (d0), writes `out` below
    // n: the extents above.
    cuda: Some(unsafe {
        CudaSource::trusted(
            r#"extern "C" __global__ void pos_freqs_f32(const float* freq, const unsigned int* state, float* out, Params p) {
    unsigned int x = blockIdx.x * 64u + threadIdx.x;
    if (x >= p.d0) return;
    out[x] = __fmul_rn((float)state[1], freq[x]);
}
"#,
        )
    }),
    cpu: Some(pos_freqs_cpu),
    samples: &[Params::dims(1, 0, 0), Params::dims(65, 0, 0)],
};

// ----- store_at -----

fn store_extents(p: &Params, out: &mut [u64]) {
    out[0] = u64::from(p.d0);
    out[1] = STATE_WORDS as u64;
    out[2] = u64::from(p.d0) * u64::from(p.d1);
}

fn store_check(p: &Params) -> Result<(), ParamError> {
    positive("n", p.d0)?;
    positive("slots", p.d1)
}

/// `dst[pos · n ..][..n] = src` (d0 = n, d1 = slots; a position past the
/// slots writes the last).
pub fn store_at_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let n = p.d0 as usize;
    let pos = u32s(&b[1])[POS].min(p.d1 - 1) as usize;
    let src = f32s(&b[0])[..n].to_vec();
    let mut dst = f32s(&b[2]);
    dst[pos * n..][..n].copy_from_slice(&src);
    store(&mut b[2], &dst);
}

/// A K or V vector into its cache slot at the state's position: bindings
/// `src` (`n`), `state`, `dst` (`slots × n`).
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static STORE_AT: KernelDef = KernelDef {
    name: "store_at_f32",
    bindings: &[
        Binding::fixed("src", Access::Read, DType::F32),
        Binding::fixed("state", Access::Read, DType::U32),
        Binding::fixed("dst", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::D1],
    extents: store_extents,
    workgroup_size: [64, 1, 1],
    grid: groups_of_64,
    check: Some(store_check),
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: Some(
        "@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> state: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn store_at_f32(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.d0) {
        return;
    }
    let pos = min(state[p.o1 + 1u], p.d1 - 1u);
    dst[p.o2 + pos * p.d0 + g.x] = src[p.o0 + g.x];
}
",
    ),
    // SAFETY: reads state[1] and `src` below n (d0), writes the slot of a
    // position clamped below slots (d1), so `dst` below slots × n: the
    // extents above.
    cuda: Some(unsafe {
        CudaSource::trusted(
            r#"extern "C" __global__ void store_at_f32(const float* src, const unsigned int* state, float* dst, Params p) {
    unsigned int x = blockIdx.x * 64u + threadIdx.x;
    if (x >= p.d0) return;
    unsigned int pos = min(state[1], p.d1 - 1u);
    dst[(unsigned long long)pos * p.d0 + x] = src[x];
}
"#,
        )
    }),
    cpu: Some(store_at_cpu),
    samples: &[Params::dims(1, 1, 0), Params::dims(70, 3, 0)],
};

// ----- attention_at -----

fn attention_at_extents(p: &Params, out: &mut [u64]) {
    attention::extents(p, &mut out[..5]);
    out[5] = STATE_WORDS as u64;
}

/// Attention over positions `0..=pos` (at most d2).
pub fn attention_at_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let pos = u32s(&b[5])[POS];
    let n = (pos + 1).min(p.d2);
    attention::attention_cpu(&Params { d2: n, ..*p }, &mut b[..5]);
}

/// [`attention::ATTENTION`] with `n` = the state's position + 1 (at most
/// d2, the cache's positions, which the views must hold): bindings as
/// attention's, then `state`.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static ATTENTION_AT: KernelDef = KernelDef {
    name: "attention_at_f32",
    bindings: &[
        Binding::fixed("q", Access::Read, DType::F32),
        Binding::fixed("kc", Access::Read, DType::F32),
        Binding::fixed("vc", Access::Read, DType::F32),
        Binding::fixed("att", Access::Write, DType::F32),
        Binding::fixed("out", Access::Write, DType::F32),
        Binding::fixed("state", Access::Read, DType::U32),
    ],
    reads: attention::ATTENTION.reads,
    extents: attention_at_extents,
    workgroup_size: attention::ATTENTION.workgroup_size,
    grid: attention::ATTENTION.grid,
    check: attention::ATTENTION.check,
    allows_aliasing: false,
    tolerance: attention::ATTENTION.tolerance,
    wgsl: Some(concat!(
        include_str!("../kernels/attend.wgsl"),
        include_str!("../kernels/attention_at.wgsl")
    )),
    // SAFETY: attend.cu with n = the state's position + 1, at most d2
    // (state[1] read, nothing else of it): attention's own accesses at
    // n ≤ d2, inside the extents of `attention::extents`.
    cuda: Some(unsafe {
        CudaSource::trusted(concat!(
            include_str!("../kernels/attend.cu"),
            include_str!("../kernels/attention_at.cu")
        ))
    }),
    cpu: Some(attention_at_cpu),
    samples: attention::ATTENTION.samples,
};

// ----- advance -----

fn advance_extents(p: &Params, out: &mut [u64]) {
    out[0] = u64::from(p.d0);
    out[1] = STATE_WORDS as u64;
    out[2] = u64::from(p.d2);
}

fn advance_check(p: &Params) -> Result<(), ParamError> {
    positive("vocab", p.d0)?;
    positive("max_pos", p.d1)?;
    positive("capacity", p.d2)
}

/// The greedy next token (the first of equal largest logits, as
/// `check::argmax`): fed next, one position on, appended to `out` while it
/// has room; the condition stays 1 unless it is `eos` (bits) or the
/// position reaches `max_pos` (d1). d0 = vocab, d2 = `out`'s capacity.
pub fn advance_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let logits = f32s(&b[0]);
    let tok = crate::check::argmax(&logits[..p.d0 as usize]);
    let mut s = u32s(&b[1]);
    let mut out = u32s(&b[2]);
    if s[MADE] < p.d2 {
        out[s[MADE] as usize] = tok;
    }
    s[TOKEN] = tok;
    s[POS] += 1;
    s[MADE] += 1;
    s[COND] = u32::from(tok != p.bits && s[POS] < p.d1);
    store(&mut b[1], &s[..STATE_WORDS]);
    store(&mut b[2], &out);
}

/// Argmax of the logits into the state (the next token and position, the
/// condition) and the list of tokens made: bindings `logits` (`vocab`),
/// `state`, `out` (`capacity`). One workgroup: each invocation the first
/// largest of its strided share, then a tree that keeps the lower index
/// of equals.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static ADVANCE: KernelDef = KernelDef {
    name: "advance_u32",
    bindings: &[
        Binding::fixed("logits", Access::Read, DType::F32),
        Binding::fixed("state", Access::Write, DType::U32),
        Binding::fixed("out", Access::Write, DType::U32),
    ],
    reads: &[Field::D0, Field::D1, Field::D2, Field::Bits],
    extents: advance_extents,
    workgroup_size: [64, 1, 1],
    grid: one_group,
    check: Some(advance_check),
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: Some(
        "@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> state: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;

const NONE: u32 = 0xffffffffu;

@compute @workgroup_size(64)
fn advance_u32(@builtin(local_invocation_id) li: vec3<u32>) {
    let i = li.x;
    var bv = 0.0;
    var bi = NONE;
    for (var t = i; t < p.d0; t = t + 64u) {
        let v = logits[p.o0 + t];
        if (bi == NONE || v > bv) {
            bv = v;
            bi = t;
        }
    }
    best_v[i] = bv;
    best_i[i] = bi;
    workgroupBarrier();
    for (var half = 32u; half > 0u; half = half >> 1u) {
        if (i < half) {
            let ov = best_v[i + half];
            let oi = best_i[i + half];
            let mine = best_i[i];
            if (oi != NONE && (mine == NONE || ov > best_v[i] || (ov == best_v[i] && oi < mine))) {
                best_v[i] = ov;
                best_i[i] = oi;
            }
        }
        workgroupBarrier();
    }
    if (i == 0u) {
        let tok = select(best_i[0], 0u, best_i[0] == NONE);
        let made = state[p.o1 + 3u];
        if (made < p.d2) {
            out[p.o2 + made] = tok;
        }
        let pos = state[p.o1 + 1u] + 1u;
        state[p.o1] = tok;
        state[p.o1 + 1u] = pos;
        state[p.o1 + 3u] = made + 1u;
        state[p.o1 + 2u] = select(0u, 1u, tok != p.bits && pos < p.d1);
    }
}
",
    ),
    // SAFETY: one block of 64 (the grid above): reads `logits` below
    // vocab (d0) and the state's four words, writes the state's words and
    // `out` below its capacity (d2) only: the extents above.
    cuda: Some(unsafe {
        CudaSource::trusted(
            r#"#define SEAM_NONE 0xffffffffu

extern "C" __global__ void advance_u32(const float* logits, unsigned int* state, unsigned int* out, Params p) {
    __shared__ float best_v[64];
    __shared__ unsigned int best_i[64];
    unsigned int i = threadIdx.x;
    float bv = 0.0f;
    unsigned int bi = SEAM_NONE;
    for (unsigned int t = i; t < p.d0; t += 64u) {
        float v = logits[t];
        if (bi == SEAM_NONE || v > bv) {
            bv = v;
            bi = t;
        }
    }
    best_v[i] = bv;
    best_i[i] = bi;
    __syncthreads();
    for (unsigned int half = 32u; half > 0u; half >>= 1) {
        if (i < half) {
            float ov = best_v[i + half];
            unsigned int oi = best_i[i + half];
            unsigned int mine = best_i[i];
            if (oi != SEAM_NONE && (mine == SEAM_NONE || ov > best_v[i] || (ov == best_v[i] && oi < mine))) {
                best_v[i] = ov;
                best_i[i] = oi;
            }
        }
        __syncthreads();
    }
    if (i == 0u) {
        unsigned int tok = best_i[0] == SEAM_NONE ? 0u : best_i[0];
        unsigned int made = state[3];
        if (made < p.d2) out[made] = tok;
        unsigned int pos = state[1] + 1u;
        state[0] = tok;
        state[1] = pos;
        state[3] = made + 1u;
        state[2] = (tok != p.bits && pos < p.d1) ? 1u : 0u;
    }
}
"#,
        )
    }),
    cpu: Some(advance_cpu),
    samples: &[
        Params::dims(1, 1, 1),
        Params {
            bits: 2,
            ..Params::dims(300, 8, 4)
        },
    ],
};
