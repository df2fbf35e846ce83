// layer_partial: the GEMV of one decode layer split over rows, for
// backends whose workgroups cannot wait for each other in one dispatch
// (d0 = h, d1 = quads Q (2 or 4): KS = 32 / Q row ranges of ⌈h / KS⌉):
//   part[ks][c] = Σ over rows k of range ks of (x[k] · wn[k]) · W[k][c].
// [`layer_finish`] adds the ranges and applies the norm, silu and the
// residual. Workgroup b takes the 128-column tile b / KS and the range
// b % KS. Invocation (lane l = i % 32, group g = i / 32) sums columns
// 128·tile + l + 32·j (j < 4: every load of 32 invocations reads 128
// contiguous bytes of a row) over rows k0 + g, k0 + g + 8, … of its range,
// one fma per product in row order, eight rows' loads in flight; the 8
// groups' sums are added in group order. The same order as the CUDA
// kernel's split (`norm_gemv_silu_add.cu`) up to the ranges' sum.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wn: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;

var<workgroup> red: array<vec4<f32>, 256>;

// Row word i's four columns of an invocation (32 apart).
fn cols(i: u32) -> vec4<f32> {
    return vec4<f32>(w[i], w[i + 32u], w[i + 64u], w[i + 96u]);
}

@compute @workgroup_size(256)
fn layer_partial_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let h = p.d0;
    let ksn = 32u / p.d1;
    let tile = wid.x / ksn;
    let ks = wid.x % ksn;
    let lane = li % 32u;
    let grp = li / 32u;
    let c0 = tile * 128u + lane;
    let r = (h + ksn - 1u) / ksn;
    let k0 = min(ks * r, h);
    let k1 = min(k0 + r, h);
    var acc = vec4<f32>(0.0);
    var k = k0 + grp;
    if (c0 + 96u < h) {
        for (; k + 56u < k1; k += 64u) {
            let i0 = p.o2 + k * h + c0;
            let b0 = cols(i0);
            let b1 = cols(i0 + 8u * h);
            let b2 = cols(i0 + 16u * h);
            let b3 = cols(i0 + 24u * h);
            let b4 = cols(i0 + 32u * h);
            let b5 = cols(i0 + 40u * h);
            let b6 = cols(i0 + 48u * h);
            let b7 = cols(i0 + 56u * h);
            acc = fma(vec4<f32>(x[p.o0 + k] * wn[p.o1 + k]), b0, acc);
            acc = fma(vec4<f32>(x[p.o0 + k + 8u] * wn[p.o1 + k + 8u]), b1, acc);
            acc = fma(vec4<f32>(x[p.o0 + k + 16u] * wn[p.o1 + k + 16u]), b2, acc);
            acc = fma(vec4<f32>(x[p.o0 + k + 24u] * wn[p.o1 + k + 24u]), b3, acc);
            acc = fma(vec4<f32>(x[p.o0 + k + 32u] * wn[p.o1 + k + 32u]), b4, acc);
            acc = fma(vec4<f32>(x[p.o0 + k + 40u] * wn[p.o1 + k + 40u]), b5, acc);
            acc = fma(vec4<f32>(x[p.o0 + k + 48u] * wn[p.o1 + k + 48u]), b6, acc);
            acc = fma(vec4<f32>(x[p.o0 + k + 56u] * wn[p.o1 + k + 56u]), b7, acc);
        }
    }
    for (; k < k1; k += 8u) {
        let a = x[p.o0 + k] * wn[p.o1 + k];
        let i = p.o2 + k * h + c0;
        var b = vec4<f32>(0.0);
        if (c0 < h) {
            b.x = w[i];
        }
        if (c0 + 32u < h) {
            b.y = w[i + 32u];
        }
        if (c0 + 64u < h) {
            b.z = w[i + 64u];
        }
        if (c0 + 96u < h) {
            b.w = w[i + 96u];
        }
        acc = fma(vec4<f32>(a), b, acc);
    }
    red[li] = acc;
    workgroupBarrier();
    if (grp == 0u) {
        var z = red[lane];
        for (var g = 1u; g < 8u; g++) {
            z += red[g * 32u + lane];
        }
        let o = p.o3 + ks * h + c0;
        if (c0 < h) {
            part[o] = z.x;
        }
        if (c0 + 32u < h) {
            part[o + 32u] = z.y;
        }
        if (c0 + 64u < h) {
            part[o + 64u] = z.z;
        }
        if (c0 + 96u < h) {
            part[o + 96u] = z.w;
        }
    }
}
