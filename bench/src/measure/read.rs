//! The decode step's read floor: the same weights the step reads, read by a
//! kernel that does nothing else. `read_f32` sums every element of its
//! input into one partial sum per workgroup (1024 workgroups of 256), so
//! each byte is read once and almost nothing is written; a graph of one
//! launch per layer weight, replayed and waited for like the decode step,
//! is the floor that step's replay is held to (workload `read`, mode
//! `graph`, `e2e_us`). A user kernel, so the same definition runs on every
//! backend through seam: CUDA C with 16-byte loads where the view is
//! 16-byte aligned, WGSL with four loads in flight per invocation.
//!
//! [`layer_gemv`] splits the two-launch layer's time between its GEMV and
//! the barriers between layers, on backends that run it (workloads
//! `partial` and `partial-chain`).

use super::arms::{replays, Replays};
use super::update::median;
use super::workloads::Stack;
use super::{err, Config, Meta, Res, Sink};
use seam::kernel::{CudaSource, Field, KernelDef, ParamError};
use seam::ops::{Access, Binding};
use seam::{ops, DType, Device, Graph, OpCall, Params, Tolerance};
use seam_kernels::user::{layer_quads, split_partials};

/// Workgroups of `read_f32` (about eight per SM on the H200's 132).
const GROUPS: u32 = 1024;
/// Invocations per workgroup (both sources declare it).
const THREADS: u32 = 256;

fn extents(p: &Params, out: &mut [u64]) {
    out[0] = p.d0 as u64;
    out[1] = GROUPS as u64;
}

fn grid(_: &Params) -> [u32; 3] {
    [GROUPS, 1, 1]
}

fn check(p: &Params) -> Result<(), ParamError> {
    if p.d0 == 0 {
        return Err(ParamError {
            name: "n",
            reason: "must be at least 1".into(),
        });
    }
    Ok(())
}

/// `partial[g] = Σ w[i]` over the elements workgroup `g` reads (d0 = n,
/// the elements of `w`); the sums only keep the reads from being dropped.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub(super) static READ: KernelDef = KernelDef {
    name: "read_f32",
    bindings: &[
        Binding::fixed("w", Access::Read, DType::F32),
        Binding::fixed("partial", Access::Write, DType::F32),
    ],
    reads: &[Field::D0],
    extents,
    workgroup_size: [THREADS, 1, 1],
    grid,
    check: Some(check),
    allows_aliasing: false,
    tolerance: Tolerance::Relative {
        rel: 1e-3,
        abs: 1e-3,
    },
    wgsl: Some(WGSL),
    // SAFETY: read_f32 reads `w` below d0 elements (its extent) and writes
    // `partial` below gridDim.x = GROUPS (its extent); 16-byte loads only
    // where `w` is 16-byte aligned, and only over whole quads below d0.
    cuda: Some(unsafe { CudaSource::trusted(CUDA) }),
    cpu: None,
    samples: &[Params::dims(4096, 0, 0)],
};

const CUDA: &str = r#"
extern "C" __global__ void read_f32(const float* w, float* partial, Params p) {
    __shared__ float sums[256];
    unsigned long long n = p.d0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    unsigned long long done = 0;
    if ((((unsigned long long)w) & 15ull) == 0ull) {
        const float4* q = (const float4*)w;
        unsigned long long nq = n / 4;
        for (unsigned long long i = t; i < nq; i += stride) {
            float4 v = q[i];
            acc += (v.x + v.y) + (v.z + v.w);
        }
        done = nq * 4;
    }
    for (unsigned long long i = done + t; i < n; i += stride) acc += w[i];
    sums[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int h = 128; h > 0; h >>= 1) {
        if (threadIdx.x < h) sums[threadIdx.x] += sums[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}
"#;

const WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> w: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
var<workgroup> sums: array<f32, 256>;

@compute @workgroup_size(256)
fn read_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = p.d0;
    let stride = nwg.x * 256u;
    var acc = vec4<f32>(0.0);
    var i = wid.x * 256u + li;
    for (; i + 3u * stride < n; i += 4u * stride) {
        acc += vec4<f32>(w[p.o0 + i], w[p.o0 + i + stride], w[p.o0 + i + 2u * stride], w[p.o0 + i + 3u * stride]);
    }
    for (; i < n; i += stride) {
        acc.x += w[p.o0 + i];
    }
    sums[li] = (acc.x + acc.y) + (acc.z + acc.w);
    workgroupBarrier();
    for (var h = 128u; h > 0u; h >>= 1u) {
        if (li < h) {
            sums[li] += sums[li + h];
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        partial[p.o1 + wid.x] = sums[0];
    }
}
"#;

/// The read floor of the decode step `m` describes (`m.hidden`,
/// `m.layers`): the stack's first `m.layers` weights, each read by one
/// `read_f32` launch, captured as one graph; replay + wait per iteration,
/// as many as fit the budget (rows: workload `read`, mode `graph`,
/// `e2e_us`). The partial sums are checked to be finite.
pub(super) fn read_floor(
    dev: &Device,
    s: &Stack,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    if !dev.capture_support().is_supported() {
        return Err(format!(
            "no capture ({:?}): the read floor is a replay",
            dev.capture_support()
        ));
    }
    dev.register_kernel(&READ).map_err(err)?;
    let n = (m.hidden * m.hidden) as u32;
    let partials = (0..m.layers)
        .map(|_| dev.buffer::<f32>(GROUPS as usize))
        .collect::<seam::Result<Vec<_>>>()
        .map_err(err)?;
    let calls: Vec<_> = s
        .weights()
        .iter()
        .zip(&partials)
        .map(|(w, p)| {
            ops::user(
                &READ,
                &[w.id().into(), p.id().into()],
                Params::dims(n, 0, 0),
            )
        })
        .collect();
    let scope = dev.capture().map_err(err)?;
    for c in &calls {
        dev.launch(c).map_err(err)?;
    }
    let g = scope.end_graph().map_err(err)?;
    let Replays { e2e, .. } = replays(dev, &g, cfg.budget_us)?;
    let sums = partials[0].read().map_err(err)?;
    if sums.iter().any(|v| !v.is_finite()) {
        return Err("read_f32 gave a non-finite partial sum".into());
    }
    out.row(m.row("graph", "e2e_us", &e2e));
    Ok(())
}

/// Rounds of [`layer_gemv`]: each replays both graphs, in alternating order.
const ROUNDS: usize = 6;

/// The two-launch layer's GEMV alone (`layer_partial_f32`, the first of its
/// two launches), `m.layers` launches over the stack's weights from the
/// same input, as two graphs replayed in alternating rounds (ABBA):
/// - workload `partial`: each launch writes its own partial sums, so no
///   launch touches what another wrote: no barrier between them where the
///   backend records barriers only at hazards (Vulkan), and the launches
///   may overlap;
/// - workload `partial-chain`: every launch writes the same partial sums,
///   so each waits for the one before (a barrier each on Vulkan), as the
///   decode step's layers do.
///
/// Rows: `graph`/`e2e_us` for each, and `partial-chain`/`x_free`, the
/// per-round ratio chain ÷ free of the rounds' medians. The last layer's
/// partial sums must be the same bits in both graphs.
pub(super) fn layer_gemv(
    dev: &Device,
    s: &Stack,
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
) -> Res<()> {
    if m.layers == 0 {
        return Err("no layers: the GEMV launches need at least one".into());
    }
    let h = m.hidden as u32;
    let words = split_partials(h, layer_quads(h)) as usize;
    let parts = (0..m.layers)
        .map(|_| dev.buffer::<f32>(words))
        .collect::<seam::Result<Vec<_>>>()
        .map_err(err)?;
    let shared = &parts[0];
    let capture = |calls: Vec<OpCall>| -> Res<Graph> {
        let scope = dev.capture().map_err(err)?;
        for c in &calls {
            dev.launch(c).map_err(err)?;
        }
        scope.end_graph().map_err(err)
    };
    let layers = 0..m.layers as usize;
    let free = capture(
        layers
            .clone()
            .map(|i| s.partial_call(h, i, s.input(), &parts[i]))
            .collect(),
    )?;
    let chain = capture(
        layers
            .map(|i| s.partial_call(h, i, s.input(), shared))
            .collect(),
    )?;
    let last = &parts[parts.len() - 1];
    free.replay().map_err(err)?;
    let want = last.read().map_err(err)?;
    chain.replay().map_err(err)?;
    let got = shared.read().map_err(err)?;
    if let Some(i) = want
        .iter()
        .zip(&got)
        .position(|(a, b)| a.to_bits() != b.to_bits() || !a.is_finite())
    {
        return Err(format!(
            "layer_partial_f32: the chained graph's last partial sums differ from the free one's at {i}: {} vs {}",
            got[i], want[i]
        ));
    }
    let budget = cfg.budget_us / (2 * ROUNDS) as f64;
    let (mut a, mut b, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let (fa, ca) = if r % 2 == 0 {
            let fa = replays(dev, &free, budget)?.e2e;
            (fa, replays(dev, &chain, budget)?.e2e)
        } else {
            let ca = replays(dev, &chain, budget)?.e2e;
            (replays(dev, &free, budget)?.e2e, ca)
        };
        ratio.push(median(&ca) / median(&fa));
        a.extend(fa);
        b.extend(ca);
    }
    out.row(m.row("graph", "e2e_us", &a));
    let chained = Meta {
        workload: "partial-chain",
        ..m
    };
    out.row(chained.row("graph", "e2e_us", &b));
    out.row(chained.row("graph", "x_free", &ratio));
    Ok(())
}
