// fill: dst[i] = value, from the element's bit pattern in p.bits.
// 32-bit types write the word; 16-bit types write half-words into packed u32 words.
// dst is indexed from its view's offset p.o0 (in elements).
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn fill_32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        dst[p.o0 + i] = p.bits;
    }
}

// One invocation per 32-bit word of the view dst[p.o0 .. p.o0 + n) (n / 2 + 1
// invocations cover it whatever the offset's parity). A word the view only
// half covers (an odd offset, or an odd end) keeps its other half: that
// element lies outside the view, and no other invocation of the dispatch
// writes it.
@compute @workgroup_size(64)
fn fill_16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = gid.x + gid.y * nwg.x * 64u;
    let start = p.o0;
    let end = start + p.d0;
    let w = (start >> 1u) + j;
    let e0 = w * 2u;
    if (p.d0 == 0u || e0 >= end) {
        return;
    }
    // e0 + 1 >= start always: w starts at the word holding element `start`.
    let lo_in = e0 >= start;
    let hi_in = e0 + 1u < end;
    let v = p.bits & 0xFFFFu;
    if (lo_in && hi_in) {
        dst[w] = v | (v << 16u);
    } else if (lo_in) {
        dst[w] = (dst[w] & 0xFFFF0000u) | v;
    } else {
        dst[w] = (dst[w] & 0xFFFFu) | (v << 16u);
    }
}
