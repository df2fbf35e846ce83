// norm_gemv_silu_add: one layer of the decode stack in one dispatch
// (d0 = h, d1 = quads Q per workgroup (2 or 4), s0 = eps):
//   y = x + silu((x / sqrt(mean(x²) + eps) · wn) · W),  W h × h row-major.
// The norm's scale is one number, applied after the dot products. Workgroup
// b of 256 owns the 4·Q columns from 4·Q·b; invocation t takes the quad
// t % Q and the k-slice s = t / Q of S = 256 / Q, summing k = s, s + S, …
// in order (four adjacent loads of W per k), and the quad-0 invocations
// sum x² alongside; a shared-memory tree halves the S partial sums: the
// CUDA kernel's layout below h = 2048, whose order the CPU implementation
// reproduces (WGSL may or may not fuse each fma, and from h = 2048 CUDA
// splits the rows over blocks: the tolerance covers both). Q is a literal
// in each call of `layer`.
// The grid is the CUDA kernel's, ⌈h / 128⌉ · 32 / Q workgroups: those past
// column h do nothing. Workgroups cannot wait for each other here, so the
// workspace the CUDA kernel reduces through is left alone (zeros in, zeros
// out).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wn: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> ws: array<f32>;

var<workgroup> part: array<vec4<f32>, 256>;
var<workgroup> sq: array<f32, 128>;

// exp_accurate: params.wgsl (the shared prelude).

fn layer(t: u32, blk: u32, qn: u32, whole: bool) {
    let sn = 256u / qn;
    let q = t % qn;
    let s = t / qn;
    let h = p.d0;
    let col = (blk * qn + q) * 4u;
    var acc = vec4<f32>(0.0);
    var ss = 0.0;
    if (col < h) {
        for (var k = s; k < h; k += sn) {
            let xk = x[p.o0 + k];
            let a = xk * wn[p.o1 + k];
            let i = p.o2 + k * h + col;
            var b = vec4<f32>(w[i], 0.0, 0.0, 0.0);
            if (whole) {
                b = vec4<f32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
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
            part[t] += part[t + half * qn];
            if (q == 0u) {
                sq[s] += sq[s + half];
            }
        }
        workgroupBarrier();
    }
    if (s == 0u && col < h) {
        let inv = 1.0 / sqrt(sq[0] / f32(h) + p.s0);
        for (var j = 0u; j < 4u; j++) {
            if (col + j < h) {
                let z = part[q][j] * inv;
                y[p.o3 + col + j] = x[p.o0 + col + j] + z / (1.0 + exp_accurate(-z));
            }
        }
    }
}

@compute @workgroup_size(256)
fn norm_gemv_silu_add_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // Every quad inside its row: h a multiple of 4.
    let whole = (p.d0 & 3u) == 0u;
    if (p.d1 == 4u) {
        layer(lid, wid.x, 4u, whole);
    } else {
        layer(lid, wid.x, 2u, whole);
    }
}
