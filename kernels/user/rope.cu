// rope: rotary position embedding over x[heads x head_dim] at position pos
// (d0 = heads, d1 = head_dim, even; d2 = pos), pair (2i, 2i + 1) of each
// head rotated by pos * freq[i]. One thread per pair. The same sin/cos as
// rope.wgsl and the Rust implementation, every step an explicit _rn
// intrinsic in their order (no contraction), so it agrees with the CPU
// bit for bit. x and y may be the same buffer (in place).

__device__ void rope_sincos(float a, float* sin_out, float* cos_out) {
    const float TWO_OVER_PI = 0.63661975f;
    const float PIO2_1 = 1.5703125f;
    const float PIO2_2 = 4.8446655e-4f;
    const float PIO2_3 = -6.3975784e-7f;
    float k = floorf(__fadd_rn(__fmul_rn(a, TWO_OVER_PI), 0.5f));
    float r = __fsub_rn(__fsub_rn(__fsub_rn(a, __fmul_rn(k, PIO2_1)), __fmul_rn(k, PIO2_2)), __fmul_rn(k, PIO2_3));
    float z = __fmul_rn(r, r);
    float s = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(__fmul_rn(__fadd_rn(__fmul_rn(-1.9515296e-4f, z), 8.332161e-3f), z), 1.6666655e-1f), z), r), r);
    float c = __fadd_rn(__fsub_rn(__fmul_rn(__fmul_rn(__fadd_rn(__fmul_rn(__fsub_rn(__fmul_rn(2.4433157e-5f, z), 1.3887316e-3f), z), 4.1666646e-2f), z), z), __fmul_rn(0.5f, z)), 1.0f);
    int q = (((int)k % 4) + 4) % 4;
    if (q == 0) { *sin_out = s; *cos_out = c; }
    else if (q == 1) { *sin_out = c; *cos_out = -s; }
    else if (q == 2) { *sin_out = -s; *cos_out = -c; }
    else { *sin_out = -c; *cos_out = s; }
}

extern "C" __global__ void rope_f32(const float* x, const float* freq, float* y, Params p) {
    unsigned int half = p.d1 / 2u;
    unsigned long long j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (unsigned long long)p.d0 * half) return;
    unsigned int i = (unsigned int)(j % half);
    unsigned long long at = (j / half) * p.d1 + 2u * i;
    float s, c;
    rope_sincos(__fmul_rn((float)p.d2, freq[i]), &s, &c);
    float x0 = x[at];
    float x1 = x[at + 1];
    y[at] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    y[at + 1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}
