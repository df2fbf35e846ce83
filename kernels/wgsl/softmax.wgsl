// softmax: out[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r).
// One workgroup per row (row = workgroup x + y * groups in x); each
// invocation strides over the row, then a shared-memory tree reduction.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
var<workgroup> scratch: array<f32, 256>;

// exp with a few-ulp error independent of the driver (see silu.wgsl).
fn exp_accurate(v: f32) -> f32 {
    if (v > 88.72284) {
        return bitcast<f32>(0x7F800000u);
    }
    if (v < -103.97208) {
        return 0.0;
    }
    let k = round(v * 1.4426950);
    let r = fma(k, -6.9314575e-1, v);
    let r2 = fma(k, -1.4286068e-6, r);
    var q = 1.0 / 5040.0;
    q = fma(q, r2, 1.0 / 720.0);
    q = fma(q, r2, 1.0 / 120.0);
    q = fma(q, r2, 1.0 / 24.0);
    q = fma(q, r2, 1.0 / 6.0);
    q = fma(q, r2, 0.5);
    q = fma(q, r2, 1.0);
    q = fma(q, r2, 1.0);
    let ki = i32(k);
    let half_k = ki / 2;
    return ldexp(ldexp(q, half_k), ki - half_k);
}

@compute @workgroup_size(256)
fn softmax_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.d0) {
        return;
    }
    let cols = p.d1;
    let base = row * cols;

    var m = bitcast<f32>(0xFF800000u);
    for (var c = lid; c < cols; c += WG) {
        m = max(m, x[base + c]);
    }
    scratch[lid] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            scratch[lid] = max(scratch[lid], scratch[lid + s]);
        }
        workgroupBarrier();
    }
    let row_max = scratch[0];
    workgroupBarrier();

    var sum = 0.0;
    for (var c = lid; c < cols; c += WG) {
        sum += exp_accurate(x[base + c] - row_max);
    }
    scratch[lid] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            scratch[lid] += scratch[lid + s];
        }
        workgroupBarrier();
    }
    let total = scratch[0];

    for (var c = lid; c < cols; c += WG) {
        out[base + c] = exp_accurate(x[base + c] - row_max) / total;
    }
}
