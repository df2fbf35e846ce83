// copy: dst[i] = src[i], by bits. 32-bit types copy words; 16-bit types
// compose each destination word from its two source halves. src and dst are
// indexed from their views' offsets p.o0, p.o1 (in elements).
// Both bindings are read_write: copy may run in place (src == dst), and
// WebGPU only lets one buffer appear in two bindings of a dispatch when both
// are writable storage.
// Each invocation copies COPY_PER words (or destination words, 16-bit)
// COPY_WG apart, so a workgroup covers COPY_WG * COPY_PER adjacent ones:
// one word each from workgroups of 64 kept too few loads in flight (830
// GB/s on the H200, against 2911 this way; docs/results/bench/probes.md).
// Kept equal to seam_kernels::geometry::COPY_PER (tested).
const COPY_WG: u32 = 256u;
const COPY_PER: u32 = 4u;

@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(256)
fn copy_32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let first = (wid.x + wid.y * nwg.x) * COPY_WG * COPY_PER + li;
    for (var j = 0u; j < COPY_PER; j++) {
        let i = first + j * COPY_WG;
        if (i < p.d0) {
            dst[p.o1 + i] = src[p.o0 + i];
        }
    }
}

// Element s of src (a packed 16-bit buffer), in the low half of a word.
fn src_half(s: u32) -> u32 {
    return (src[s >> 1u] >> ((s & 1u) * 16u)) & 0xFFFFu;
}

// One 32-bit word of the destination view dst[p.o1 .. p.o1 + n) per
// copy_word (n / 2 + 1 words cover it whatever the offset's parity; each
// invocation takes COPY_PER of them), composed from
// the two source elements that land in it, so src and dst offsets of any
// parity work. A word the view only half covers keeps its other half: that
// element lies outside the view, and no other invocation of the dispatch
// writes it.
@compute @workgroup_size(256)
fn copy_16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let first = (wid.x + wid.y * nwg.x) * COPY_WG * COPY_PER + li;
    for (var r = 0u; r < COPY_PER; r++) {
        copy_word(first + r * COPY_WG);
    }
}

// Destination word j of the view (see copy_16).
fn copy_word(j: u32) {
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
