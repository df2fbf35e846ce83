// The shared prelude, prepended to every CUDA C kernel source by seam-kernels
// (like wgsl/params.wgsl); not a kernel itself: the launch parameter block
// each kernel takes by value after its buffers, laid out like `seam::Params`
// (eight 32-bit words, 32 bytes; the seam-kernels tests check it field by field).
struct Params {
    unsigned int d0, d1, d2, bits;
    float s0, s1;
    unsigned int pad0, pad1;
};
