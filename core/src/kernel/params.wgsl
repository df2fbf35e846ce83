// The shared prelude, prepended to every WGSL kernel source by seam-kernels
// (and the Metal build, and the backends to user kernels); not a kernel itself:
// the launch's immediate block, identical to `seam::Launch::immediates` (64
// bytes: `seam::Params`, then o0..o7, the element offset of binding k's view;
// binding k is indexed `p.o<k> + i`), and helpers more than one kernel uses.
struct Params {
    d0: u32,
    d1: u32,
    d2: u32,
    bits: u32,
    s0: f32,
    s1: f32,
    pad0: u32,
    pad1: u32,
    o0: u32,
    o1: u32,
    o2: u32,
    o3: u32,
    o4: u32,
    o5: u32,
    o6: u32,
    o7: u32,
}

var<immediate> p: Params;

// exp with a few-ulp error independent of the driver: the built-in exp is
// allowed (3 + 2|x|) ulp on Vulkan, more than C11's bound for silu and softmax allows.
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
