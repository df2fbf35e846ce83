// copy: dst[i] = src[i], by bits. 32-bit types copy words; 16-bit types
// compose each destination word from its two source halves. src and dst are
// indexed from their views' offsets p.o0, p.o1 (in elements).
// Both bindings are read_write: copy may run in place (src == dst), and
// WebGPU only lets one buffer appear in two bindings of a dispatch when both
// are writable storage.
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn copy_32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        dst[p.o1 + i] = src[p.o0 + i];
    }
}

// Element s of src (a packed 16-bit buffer), in the low half of a word.
fn src_half(s: u32) -> u32 {
    return (src[s >> 1u] >> ((s & 1u) * 16u)) & 0xFFFFu;
}

// One invocation per 32-bit word of the destination view dst[p.o1 .. p.o1 + n)
// (n / 2 + 1 invocations cover it whatever the offset's parity), composed from
// the two source elements that land in it, so src and dst offsets of any
// parity work. A word the view only half covers keeps its other half: that
// element lies outside the view, and no other invocation of the dispatch
// writes it.
@compute @workgroup_size(64)
fn copy_16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = gid.x + gid.y * nwg.x * 64u;
    let start = p.o1;
    let end = start + p.d0;
    let w = (start >> 1u) + j;
    let e0 = w * 2u;
    if (p.d0 == 0u || e0 >= end) {
        return;
    }
    // e0 + 1 >= start always: w starts at the word holding element `start`.
    let lo_in = e0 >= start;
    let hi_in = e0 + 1u < end;
    // Destination element e is source element p.o0 + (e - start).
    if (lo_in && hi_in) {
        let s = p.o0 + (e0 - start);
        dst[w] = src_half(s) | (src_half(s + 1u) << 16u);
    } else if (lo_in) {
        dst[w] = (dst[w] & 0xFFFF0000u) | src_half(p.o0 + (e0 - start));
    } else {
        dst[w] = (dst[w] & 0xFFFFu) | (src_half(p.o0 + (e0 + 1u - start)) << 16u);
    }
}
