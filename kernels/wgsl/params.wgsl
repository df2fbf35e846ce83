// The launch parameter block, identical to `seam::Params` (32 bytes).
// Prepended to every WGSL kernel source by seam-kernels; not a kernel itself.
struct Params {
    d0: u32,
    d1: u32,
    d2: u32,
    bits: u32,
    s0: f32,
    s1: f32,
    pad0: u32,
    pad1: u32,
}

var<immediate> p: Params;
