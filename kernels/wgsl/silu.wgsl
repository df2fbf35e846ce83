// silu: out[i] = x[i] / (1 + exp(-x[i])).
// Both bindings are read_write: silu may run in place (out == x), and WebGPU
// only lets one buffer appear in two bindings of a dispatch when both are
// writable storage. Binding k is indexed from its view's offset p.o<k>.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

// exp_accurate: params.wgsl (the shared prelude).

@compute @workgroup_size(64)
fn silu_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        let v = x[p.o0 + i];
        out[p.o1 + i] = v / (1.0 + exp_accurate(-v));
    }
}
