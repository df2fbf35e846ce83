// silu: out[i] = x[i] / (1 + exp(-x[i])).
// Both bindings are read_write: silu may run in place (out == x), and WebGPU
// only lets one buffer appear in two bindings of a dispatch when both are
// writable storage.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

// exp with a few-ulp error independent of the driver: the built-in exp is
// allowed (3 + 2|x|) ulp on Vulkan, more than C11's bound for silu allows.
// Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, then a degree-7 Taylor
// polynomial (truncation error < 1e-8 relative) and a split ldexp.
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

@compute @workgroup_size(64)
fn silu_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        let v = x[i];
        out[i] = v / (1.0 + exp_accurate(-v));
    }
}
