// scale_add: y[i] = fma(a, x[i], b), fused so every backend rounds once (C11 bit-exact).
// Both bindings are read_write: scale_add may run in place (x == y), and
// WebGPU only lets one buffer appear in two bindings of a dispatch when both
// are writable storage.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn scale_add_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        y[i] = fma(p.s0, x[i], p.s1);
    }
}
