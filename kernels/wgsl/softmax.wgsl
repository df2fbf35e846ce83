// softmax: out[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r).
// One workgroup per row (row = workgroup x + y * groups in x); each
// invocation strides over the row, then a shared-memory tree reduction.
// x and out are indexed from their views' offsets p.o0, p.o1.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
var<workgroup> scratch: array<f32, 256>;

// exp_accurate: params.wgsl (the shared prelude).

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
    let base_x = p.o0 + row * cols;
    let base_out = p.o1 + row * cols;

    // Four independent loads in flight per invocation; each invocation
    // still combines c, c + WG, c + 2 WG, ... in order.
    var m = bitcast<f32>(0xFF800000u);
    var c = lid;
    for (; c + 3u * WG < cols; c += 4u * WG) {
        let v0 = x[base_x + c];
        let v1 = x[base_x + c + WG];
        let v2 = x[base_x + c + 2u * WG];
        let v3 = x[base_x + c + 3u * WG];
        m = max(max(max(max(m, v0), v1), v2), v3);
    }
    for (; c < cols; c += WG) {
        m = max(m, x[base_x + c]);
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
    c = lid;
    for (; c + 3u * WG < cols; c += 4u * WG) {
        let v0 = x[base_x + c];
        let v1 = x[base_x + c + WG];
        let v2 = x[base_x + c + 2u * WG];
        let v3 = x[base_x + c + 3u * WG];
        sum += exp_accurate(v0 - row_max);
        sum += exp_accurate(v1 - row_max);
        sum += exp_accurate(v2 - row_max);
        sum += exp_accurate(v3 - row_max);
    }
    for (; c < cols; c += WG) {
        sum += exp_accurate(x[base_x + c] - row_max);
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

    for (c = lid; c < cols; c += WG) {
        out[base_out + c] = exp_accurate(x[base_x + c] - row_max) / total;
    }
}
