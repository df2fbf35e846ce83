// add: out[i] = a[i] + b[i]. Integers wrap; i32 and u32 share the u32 kernel
// (two's complement addition gives the same bits).
// Every binding is read_write: add may run in place (out == a), and WebGPU
// only lets one buffer appear in two bindings of a dispatch when both are
// writable storage. Binding k is indexed from its view's offset p.o<k>.
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn add_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        out[p.o2 + i] = bitcast<u32>(bitcast<f32>(a[p.o0 + i]) + bitcast<f32>(b[p.o1 + i]));
    }
}

@compute @workgroup_size(64)
fn add_u32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        out[p.o2 + i] = a[p.o0 + i] + b[p.o1 + i];
    }
}
