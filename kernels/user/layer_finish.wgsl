// layer_finish: the rest of one decode layer after [`layer_partial`]
// (d0 = h, d1 = quads Q (2 or 4), s0 = eps):
//   y[c] = x[c] + silu(z · inv),  z = Σ over ks < 32 / Q of part[ks][c],
//   inv = 1 / sqrt(Σx² / h + eps).
// Every workgroup of 256 adds Σx² itself (invocation t takes x[t],
// x[t + 256], …, then a tree halves the 256 sums: add_rms_norm's order),
// then invocation t of workgroup b finishes column 256·b + t, adding the
// ranges in order from zero. Both sums issue eight loads before adding
// them, in the same order (32 / Q, the ranges, is 8 or 16): a load a step
// left each sum a chain of dependent reads.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

var<workgroup> sums: array<f32, 256>;

// exp_accurate: params.wgsl (the shared prelude).

@compute @workgroup_size(256)
fn layer_finish_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let h = p.d0;
    let ksn = 32u / p.d1;
    var s = 0.0;
    var k = li;
    for (; k + 1792u < h; k += 2048u) {
        let v0 = x[p.o0 + k];
        let v1 = x[p.o0 + k + 256u];
        let v2 = x[p.o0 + k + 512u];
        let v3 = x[p.o0 + k + 768u];
        let v4 = x[p.o0 + k + 1024u];
        let v5 = x[p.o0 + k + 1280u];
        let v6 = x[p.o0 + k + 1536u];
        let v7 = x[p.o0 + k + 1792u];
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
        let v = x[p.o0 + k];
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
    let c = wid.x * 256u + li;
    if (c < h) {
        var z = 0.0;
        for (var i = 0u; i < ksn; i += 8u) {
            let q0 = part[p.o1 + (i + 0u) * h + c];
            let q1 = part[p.o1 + (i + 1u) * h + c];
            let q2 = part[p.o1 + (i + 2u) * h + c];
            let q3 = part[p.o1 + (i + 3u) * h + c];
            let q4 = part[p.o1 + (i + 4u) * h + c];
            let q5 = part[p.o1 + (i + 5u) * h + c];
            let q6 = part[p.o1 + (i + 6u) * h + c];
            let q7 = part[p.o1 + (i + 7u) * h + c];
            z += q0;
            z += q1;
            z += q2;
            z += q3;
            z += q4;
            z += q5;
            z += q6;
            z += q7;
        }
        let inv = 1.0 / sqrt(sums[0] / f32(h) + p.s0);
        let zn = z * inv;
        y[p.o2 + c] = x[p.o0 + c] + zn / (1.0 + exp_accurate(-zn));
    }
}
