// add_rms_norm: the residual add fused with rms_norm over rows × cols
// (d0 = rows, d1 = cols, s0 = eps): h = x + r is written back to r, then
// out = h / sqrt(mean(h²) + eps) · w[c]. One workgroup of 256 per row;
// each invocation strides over the row, then a shared-memory tree sums the
// squares (the order the CPU implementation reproduces).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> r: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
var<workgroup> scratch: array<f32, 256>;

@compute @workgroup_size(256)
fn add_rms_norm_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x;
    if (row >= p.d0) {
        return;
    }
    let cols = p.d1;
    let base = row * cols;
    var acc = 0.0;
    for (var c = lid; c < cols; c += WG) {
        let h = x[p.o0 + base + c] + r[p.o1 + base + c];
        r[p.o1 + base + c] = h;
        acc += h * h;
    }
    scratch[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            scratch[lid] += scratch[lid + s];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / sqrt(scratch[0] / f32(cols) + p.s0);
    for (var c = lid; c < cols; c += WG) {
        out[p.o3 + base + c] = r[p.o1 + base + c] * inv * w[p.o2 + c];
    }
}
