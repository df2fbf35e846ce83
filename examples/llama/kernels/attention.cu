// attention_f32: attend.cu's attention over the d2 positions of its launch.

extern "C" __global__ void attention_f32(const float* q, const float* kc, const float* vc, float* att, float* out, Params p) {
    attend(q, kc, vc, att, out, p, p.d2);
}
