// The shared prelude, prepended to every CUDA C kernel source by seam-kernels
// (like wgsl/params.wgsl); not a kernel itself: the launch parameter block
// each kernel takes by value after its buffers, laid out like `seam::Params`
// (eight 32-bit words, 32 bytes; the seam-kernels tests check it field by field).
struct Params {
    unsigned int d0, d1, d2, bits;
    float s0, s1;
    unsigned int pad0, pad1;
};

// Programmatic dependent launch (sm_90 and newer; nothing elsewhere, and
// nothing where the launch did not ask for it). A kernel whose launch may
// start before the launch before it has ended calls `seam_prior_wait()`
// before it reads or writes memory an earlier launch may use (prefetches
// into L2 are safe before it: L2 is where writes land);
// `seam_dependents_may_start()` lets a launch after it that asked for an
// early start be scheduled from then on.
__device__ __forceinline__ void seam_prior_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void seam_dependents_may_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
__device__ __forceinline__ void seam_prefetch_l2(const void* p) {
#if defined(__CUDA_ARCH__)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}
