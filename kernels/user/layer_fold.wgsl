// layer_fold: one decode layer's finish folded into the next layer's GEMV,
// so that a stack of layers costs one dispatch a layer where workgroups
// cannot wait for each other (d0 = h, d1 = quads Q (2 or 4), s0 = eps):
//   x[k] = xp[k] + silu(zp[k] · inv),  zp[k] = Σ over ks < 32 / Q of
//          pp[ks][k],  inv = 1 / sqrt(Σxp² / h + eps)
//          (what `layer_finish` writes, for the rows of this range),
//   part[ks][c] = Σ over rows k of range ks of (x[k] · wn[k]) · W[k][c]
//          (what `layer_partial` writes from that x).
// Workgroup b takes the 128-column tile b / KS and the range b % KS, as
// `layer_partial`. Each workgroup first adds Σxp² itself in
// `layer_finish`'s order (invocation t takes xp[t], xp[t + 256], …, then a
// tree halves the 256 sums) and finishes the rows of its range, in
// `layer_finish`'s steps, into workgroup memory; the workgroups of tile 0
// also store them to `xo` (the ranges cover every row once). Then the GEMV
// over the range in `layer_partial`'s layout and order (eight rows' loads
// in flight). Both sums of the first part issue eight loads before adding
// them, in the same order.
@group(0) @binding(0) var<storage, read> xp: array<f32>;
@group(0) @binding(1) var<storage, read> pp: array<f32>;
@group(0) @binding(2) var<storage, read> wn: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read_write> xo: array<f32>;
@group(0) @binding(5) var<storage, read_write> part: array<f32>;

var<workgroup> red: array<vec4<f32>, 256>;
var<workgroup> sums: array<f32, 256>;
// (x[k] · wn[k]) for the range's rows: at most ⌈16384 / 8⌉.
var<workgroup> a: array<f32, 2048>;

// exp_accurate: params.wgsl (the shared prelude).

// Row word i's four columns of an invocation (32 apart).
fn cols(i: u32) -> vec4<f32> {
    return vec4<f32>(w[i], w[i + 32u], w[i + 64u], w[i + 96u]);
}

@compute @workgroup_size(256)
fn layer_fold_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let h = p.d0;
    let ksn = 32u / p.d1;
    let tile = wid.x / ksn;
    let ks = wid.x % ksn;
    let lane = li % 32u;
    let grp = li / 32u;
    let c0 = tile * 128u + lane;
    let r = (h + ksn - 1u) / ksn;
    let k0 = min(ks * r, h);
    let k1 = min(k0 + r, h);

    var s = 0.0;
    var k = li;
    for (; k + 1792u < h; k += 2048u) {
        let v0 = xp[p.o0 + k];
        let v1 = xp[p.o0 + k + 256u];
        let v2 = xp[p.o0 + k + 512u];
        let v3 = xp[p.o0 + k + 768u];
        let v4 = xp[p.o0 + k + 1024u];
        let v5 = xp[p.o0 + k + 1280u];
        let v6 = xp[p.o0 + k + 1536u];
        let v7 = xp[p.o0 + k + 1792u];
        s += v0 * v0;
        s += v1 * v1;
        s += v2 * v2;
        s += v3 * v3;
        s += v4 * v4;
        s += v5 * v5;
        s += v6 * v6;
        s += v7 * v7;
    }
    for (; k < h; k += 256u) {
        let v = xp[p.o0 + k];
        s += v * v;
    }
    sums[li] = s;
    workgroupBarrier();
    for (var half = 128u; half > 0u; half >>= 1u) {
        if (li < half) {
            sums[li] += sums[li + half];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / sqrt(sums[0] / f32(h) + p.s0);
    for (var kr = k0 + li; kr < k1; kr += 256u) {
        var z = 0.0;
        for (var i = 0u; i < ksn; i += 8u) {
            let q0 = pp[p.o1 + (i + 0u) * h + kr];
            let q1 = pp[p.o1 + (i + 1u) * h + kr];
            let q2 = pp[p.o1 + (i + 2u) * h + kr];
            let q3 = pp[p.o1 + (i + 3u) * h + kr];
            let q4 = pp[p.o1 + (i + 4u) * h + kr];
            let q5 = pp[p.o1 + (i + 5u) * h + kr];
            let q6 = pp[p.o1 + (i + 6u) * h + kr];
            let q7 = pp[p.o1 + (i + 7u) * h + kr];
            z += q0;
            z += q1;
            z += q2;
            z += q3;
            z += q4;
            z += q5;
            z += q6;
            z += q7;
        }
        let zn = z * inv;
        let xk = xp[p.o0 + kr] + zn / (1.0 + exp_accurate(-zn));
        if (tile == 0u) {
            xo[p.o4 + kr] = xk;
        }
        a[kr - k0] = xk * wn[p.o2 + kr];
    }
    workgroupBarrier();

    var acc = vec4<f32>(0.0);
    k = k0 + grp;
    if (c0 + 96u < h) {
        for (; k + 56u < k1; k += 64u) {
            let i0 = p.o3 + k * h + c0;
            let b0 = cols(i0);
            let b1 = cols(i0 + 8u * h);
            let b2 = cols(i0 + 16u * h);
            let b3 = cols(i0 + 24u * h);
            let b4 = cols(i0 + 32u * h);
            let b5 = cols(i0 + 40u * h);
            let b6 = cols(i0 + 48u * h);
            let b7 = cols(i0 + 56u * h);
            let j = k - k0;
            acc = fma(vec4<f32>(a[j]), b0, acc);
            acc = fma(vec4<f32>(a[j + 8u]), b1, acc);
            acc = fma(vec4<f32>(a[j + 16u]), b2, acc);
            acc = fma(vec4<f32>(a[j + 24u]), b3, acc);
            acc = fma(vec4<f32>(a[j + 32u]), b4, acc);
            acc = fma(vec4<f32>(a[j + 40u]), b5, acc);
            acc = fma(vec4<f32>(a[j + 48u]), b6, acc);
            acc = fma(vec4<f32>(a[j + 56u]), b7, acc);
        }
    }
    for (; k < k1; k += 8u) {
        let i = p.o3 + k * h + c0;
        var b = vec4<f32>(0.0);
        if (c0 < h) {
            b.x = w[i];
        }
        if (c0 + 32u < h) {
            b.y = w[i + 32u];
        }
        if (c0 + 64u < h) {
            b.z = w[i + 64u];
        }
        if (c0 + 96u < h) {
            b.w = w[i + 96u];
        }
        acc = fma(vec4<f32>(a[k - k0]), b, acc);
    }
    red[li] = acc;
    workgroupBarrier();
    if (grp == 0u) {
        var z = red[lane];
        for (var g = 1u; g < 8u; g++) {
            z += red[g * 32u + lane];
        }
        let o = p.o5 + ks * h + c0;
        if (c0 < h) {
            part[o] = z.x;
        }
        if (c0 + 32u < h) {
            part[o + 32u] = z.y;
        }
        if (c0 + 64u < h) {
            part[o + 64u] = z.z;
        }
        if (c0 + 96u < h) {
            part[o + 96u] = z.w;
        }
    }
}
