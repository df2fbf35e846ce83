// copy: dst[i] = src[i], by bits. 32-bit types copy words; 16-bit types copy
// packed words, and a trailing odd element keeps its neighbour half.
// Both bindings are read_write: copy may run in place (src == dst), and
// WebGPU only lets one buffer appear in two bindings of a dispatch when both
// are writable storage.
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn copy_32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        dst[i] = src[i];
    }
}

// One invocation per 32-bit word.
@compute @workgroup_size(64)
fn copy_16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = gid.x + gid.y * nwg.x * 64u;
    let first = w * 2u;
    if (first >= p.d0) {
        return;
    }
    if (first + 1u < p.d0) {
        dst[w] = src[w];
    } else {
        dst[w] = (dst[w] & 0xFFFF0000u) | (src[w] & 0xFFFFu);
    }
}
