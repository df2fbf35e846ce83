// fill: dst[i] = value, from the element's bit pattern in p.bits.
// 32-bit types write the word; 16-bit types write half-words into packed u32 words.
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn fill_32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        dst[i] = p.bits;
    }
}

// One invocation per 32-bit word; a trailing odd element keeps its neighbour half.
@compute @workgroup_size(64)
fn fill_16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = gid.x + gid.y * nwg.x * 64u;
    let first = w * 2u;
    if (first >= p.d0) {
        return;
    }
    let v = p.bits & 0xFFFFu;
    if (first + 1u < p.d0) {
        dst[w] = v | (v << 16u);
    } else {
        dst[w] = (dst[w] & 0xFFFF0000u) | v;
    }
}
