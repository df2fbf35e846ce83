// norm_gemv_silu_add: one layer of the decode stack in one dispatch
// (d0 = h, d1 = quads Q (2 or 4), s0 = eps):
//   y = x + silu((x / sqrt(mean(x²) + eps) · wn) · W),  W h × h row-major.
// The norm's scale is one number, applied after the dot products.
// Workgroups cannot wait for each other here, so there is no split over
// rows: workgroup b of 256 owns the 4·Q columns from 4·Q·b over every row,
// in one of two layouts by Q, and a shared-memory tree halves the k-slices'
// partial sums (Σx² alongside, from the slices' first invocations):
// - Q = 4: invocation t takes the quad t % 4 and the k-slice s = t / 4 of
//   64, summing k = s, s + 64, … in order, four adjacent word loads of W
//   per k and four rows' loads in flight before their products: the CUDA
//   kernel's layout below h = 2048, whose order the CPU implementation
//   reproduces.
// - Q = 2: invocation t takes the column t % 8 and the k-slice s = t / 8
//   of 32, sixteen rows' word loads in flight: each load of a subgroup of
//   32 reads 4 rows' 32 contiguous bytes (the quads read 16 rows' at a
//   16-byte stride, four loads over the same lines).
// Measured on one H100 (Vulkan 1.4.312 on the NVIDIA ICD, driver
// 580.159.04, 2026-12-06), 32 layers replayed, µs, Q = 2 at h = 4096 and 4
// at 8192, each twice: one row per k-step in flight 1441–1444 and
// 3797–3798 (wgpu 1414–1423, 4736–4770); these layouts 1098–1100 and
// 3369–3375 (wgpu 1145–1149, 3876–3892); columns with 8 rows in flight
// 1147–1162 at 4096; quads with 8 rows 3677–3698 at 8192. The pure read of
// the same weights: 742–748 and 2811–2816
// (docs/results/bench/wgsl-layer-h100.txt).
// WGSL may or may not fuse each fma, and sums in another order than CUDA
// (which splits the rows over blocks from h = 2048): the tolerance covers
// both. The grid is the CUDA kernel's, ⌈h / 128⌉ · 32 / Q workgroups:
// those past column h do nothing. The workspace the CUDA kernel reduces
// through is left alone (zeros in, zeros out).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wn: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> ws: array<f32>;

var<workgroup> part: array<vec4<f32>, 256>;
var<workgroup> sq: array<f32, 64>;

// exp_accurate: params.wgsl (the shared prelude).

// Words i … i + 3 of W (a quad inside its row).
fn quad(i: u32) -> vec4<f32> {
    return vec4<f32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
}

// The epilogue of column `col`: z = its dot product, sq[0] = Σx².
fn finish(col: u32, dot: f32) {
    let inv = 1.0 / sqrt(sq[0] / f32(p.d0) + p.s0);
    let z = dot * inv;
    y[p.o3 + col] = x[p.o0 + col] + z / (1.0 + exp_accurate(-z));
}

// d1 = 4: 16 columns, invocation t the quad t % 4 over k-slice t / 4 of 64.
fn layer_quads(t: u32, blk: u32, whole: bool) {
    let sn = 64u;
    let q = t % 4u;
    let s = t / 4u;
    let h = p.d0;
    let col = (blk * 4u + q) * 4u;
    var acc = vec4<f32>(0.0);
    var ss = 0.0;
    if (col < h) {
        var k = s;
        if (whole) {
            let row = sn * h;
            for (; k + 3u * sn < h; k += 4u * sn) {
                let i = p.o2 + k * h + col;
                let b0 = quad(i);
                let b1 = quad(i + row);
                let b2 = quad(i + 2u * row);
                let b3 = quad(i + 3u * row);
                let x0 = x[p.o0 + k];
                let x1 = x[p.o0 + k + sn];
                let x2 = x[p.o0 + k + 2u * sn];
                let x3 = x[p.o0 + k + 3u * sn];
                let a0 = x0 * wn[p.o1 + k];
                let a1 = x1 * wn[p.o1 + k + sn];
                let a2 = x2 * wn[p.o1 + k + 2u * sn];
                let a3 = x3 * wn[p.o1 + k + 3u * sn];
                acc = fma(vec4<f32>(a0), b0, acc);
                ss = fma(x0, x0, ss);
                acc = fma(vec4<f32>(a1), b1, acc);
                ss = fma(x1, x1, ss);
                acc = fma(vec4<f32>(a2), b2, acc);
                ss = fma(x2, x2, ss);
                acc = fma(vec4<f32>(a3), b3, acc);
                ss = fma(x3, x3, ss);
            }
        }
        for (; k < h; k += sn) {
            let xk = x[p.o0 + k];
            let a = xk * wn[p.o1 + k];
            let i = p.o2 + k * h + col;
            var b = vec4<f32>(w[i], 0.0, 0.0, 0.0);
            if (whole) {
                b = quad(i);
            } else {
                if (col + 1u < h) {
                    b.y = w[i + 1u];
                }
                if (col + 2u < h) {
                    b.z = w[i + 2u];
                }
                if (col + 3u < h) {
                    b.w = w[i + 3u];
                }
            }
            acc = fma(vec4<f32>(a), b, acc);
            ss = fma(xk, xk, ss);
        }
    }
    part[t] = acc;
    if (q == 0u) {
        sq[s] = ss;
    }
    workgroupBarrier();
    for (var half = sn / 2u; half > 0u; half >>= 1u) {
        if (s < half) {
            part[t] += part[t + half * 4u];
            if (q == 0u) {
                sq[s] += sq[s + half];
            }
        }
        workgroupBarrier();
    }
    if (s == 0u) {
        for (var j = 0u; j < 4u; j++) {
            if (col + j < h) {
                finish(col + j, part[q][j]);
            }
        }
    }
}

// d1 = 2: 8 columns, invocation t the column t % 8 over k-slice t / 8 of 32.
fn layer_cols(t: u32, blk: u32) {
    let sn = 32u;
    let c = t % 8u;
    let s = t / 8u;
    let h = p.d0;
    let col = blk * 8u + c;
    var acc = 0.0;
    var ss = 0.0;
    if (col < h) {
        var k = s;
        let row = sn * h;
        for (; k + 15u * sn < h; k += 16u * sn) {
            let i = p.o2 + k * h + col;
            let b0 = w[i];
            let b1 = w[i + row];
            let b2 = w[i + 2u * row];
            let b3 = w[i + 3u * row];
            let b4 = w[i + 4u * row];
            let b5 = w[i + 5u * row];
            let b6 = w[i + 6u * row];
            let b7 = w[i + 7u * row];
            let b8 = w[i + 8u * row];
            let b9 = w[i + 9u * row];
            let b10 = w[i + 10u * row];
            let b11 = w[i + 11u * row];
            let b12 = w[i + 12u * row];
            let b13 = w[i + 13u * row];
            let b14 = w[i + 14u * row];
            let b15 = w[i + 15u * row];
            let x0 = x[p.o0 + k];
            let x1 = x[p.o0 + k + sn];
            let x2 = x[p.o0 + k + 2u * sn];
            let x3 = x[p.o0 + k + 3u * sn];
            let x4 = x[p.o0 + k + 4u * sn];
            let x5 = x[p.o0 + k + 5u * sn];
            let x6 = x[p.o0 + k + 6u * sn];
            let x7 = x[p.o0 + k + 7u * sn];
            let x8 = x[p.o0 + k + 8u * sn];
            let x9 = x[p.o0 + k + 9u * sn];
            let x10 = x[p.o0 + k + 10u * sn];
            let x11 = x[p.o0 + k + 11u * sn];
            let x12 = x[p.o0 + k + 12u * sn];
            let x13 = x[p.o0 + k + 13u * sn];
            let x14 = x[p.o0 + k + 14u * sn];
            let x15 = x[p.o0 + k + 15u * sn];
            let a0 = x0 * wn[p.o1 + k];
            let a1 = x1 * wn[p.o1 + k + sn];
            let a2 = x2 * wn[p.o1 + k + 2u * sn];
            let a3 = x3 * wn[p.o1 + k + 3u * sn];
            let a4 = x4 * wn[p.o1 + k + 4u * sn];
            let a5 = x5 * wn[p.o1 + k + 5u * sn];
            let a6 = x6 * wn[p.o1 + k + 6u * sn];
            let a7 = x7 * wn[p.o1 + k + 7u * sn];
            let a8 = x8 * wn[p.o1 + k + 8u * sn];
            let a9 = x9 * wn[p.o1 + k + 9u * sn];
            let a10 = x10 * wn[p.o1 + k + 10u * sn];
            let a11 = x11 * wn[p.o1 + k + 11u * sn];
            let a12 = x12 * wn[p.o1 + k + 12u * sn];
            let a13 = x13 * wn[p.o1 + k + 13u * sn];
            let a14 = x14 * wn[p.o1 + k + 14u * sn];
            let a15 = x15 * wn[p.o1 + k + 15u * sn];
            acc = fma(a0, b0, acc);
            ss = fma(x0, x0, ss);
            acc = fma(a1, b1, acc);
            ss = fma(x1, x1, ss);
            acc = fma(a2, b2, acc);
            ss = fma(x2, x2, ss);
            acc = fma(a3, b3, acc);
            ss = fma(x3, x3, ss);
            acc = fma(a4, b4, acc);
            ss = fma(x4, x4, ss);
            acc = fma(a5, b5, acc);
            ss = fma(x5, x5, ss);
            acc = fma(a6, b6, acc);
            ss = fma(x6, x6, ss);
            acc = fma(a7, b7, acc);
            ss = fma(x7, x7, ss);
            acc = fma(a8, b8, acc);
            ss = fma(x8, x8, ss);
            acc = fma(a9, b9, acc);
            ss = fma(x9, x9, ss);
            acc = fma(a10, b10, acc);
            ss = fma(x10, x10, ss);
            acc = fma(a11, b11, acc);
            ss = fma(x11, x11, ss);
            acc = fma(a12, b12, acc);
            ss = fma(x12, x12, ss);
            acc = fma(a13, b13, acc);
            ss = fma(x13, x13, ss);
            acc = fma(a14, b14, acc);
            ss = fma(x14, x14, ss);
            acc = fma(a15, b15, acc);
            ss = fma(x15, x15, ss);
        }
        for (; k < h; k += sn) {
            let xk = x[p.o0 + k];
            acc = fma(xk * wn[p.o1 + k], w[p.o2 + k * h + col], acc);
            ss = fma(xk, xk, ss);
        }
    }
    part[t].x = acc;
    if (c == 0u) {
        sq[s] = ss;
    }
    workgroupBarrier();
    for (var half = sn / 2u; half > 0u; half >>= 1u) {
        if (s < half) {
            part[t].x += part[t + half * 8u].x;
            if (c == 0u) {
                sq[s] += sq[s + half];
            }
        }
        workgroupBarrier();
    }
    if (s == 0u && col < h) {
        finish(col, part[c].x);
    }
}

@compute @workgroup_size(256)
fn norm_gemv_silu_add_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if (p.d1 == 4u) {
        // Every quad inside its row: h a multiple of 4.
        layer_quads(lid, wid.x, (p.d0 & 3u) == 0u);
    } else {
        layer_cols(lid, wid.x);
    }
}
