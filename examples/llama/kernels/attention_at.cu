// attention_at_f32: attend.cu's attention over positions 0..=pos, pos read
// on the device from the decode state (token, pos, …; loop_kernels.rs), at
// most d2 (the cache's positions).

extern "C" __global__ void attention_at_f32(const float* q, const float* kc, const float* vc, float* att, float* out, const unsigned int* state, Params p) {
    attend(q, kc, vc, att, out, p, min(state[1] + 1u, p.d2));
}
