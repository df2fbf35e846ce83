// rms_norm: out[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c]
// over a rows x cols matrix (d0 = rows, d1 = cols, s0 = eps), accumulated in
// f32. One block per row (grid-stride over rows); blockDim.x must be a power
// of two <= 1024. Every rounding step is an explicit _rn intrinsic in the
// reference's order, so no flag or contraction changes the result; only the
// tree order of the row sum differs from the CPU reference (within bound, C11).
// f16 is converted by bits in plain C (no cuda_fp16.h), round-to-nearest-even
// like the `half` crate, so the same source also builds under hipRTC.

#define SEAM_MAX_THREADS 1024

__device__ float seam_h2f(unsigned short h) {
    unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
    unsigned int exp = ((unsigned int)h >> 10) & 0x1Fu;
    unsigned int man = (unsigned int)h & 0x3FFu;
    if (exp == 0u) {
        // Zero or subnormal: man * 2^-24, exact in f32.
        float f = __fmul_rn((float)man, 5.9604644775390625e-8f);
        return sign ? -f : f;
    }
    if (exp == 31u) {
        return __uint_as_float(sign | 0x7F800000u | (man << 13));
    }
    return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

__device__ unsigned short seam_f2h(float value) {
    unsigned int x = __float_as_uint(value);
    unsigned int sign = x & 0x80000000u;
    unsigned int exp = x & 0x7F800000u;
    unsigned int man = x & 0x007FFFFFu;
    unsigned int half_sign = sign >> 16;
    if (exp == 0x7F800000u) {
        unsigned int nan_bit = man == 0u ? 0u : 0x0200u;
        return (unsigned short)(half_sign | 0x7C00u | nan_bit | (man >> 13));
    }
    int half_exp = (int)(exp >> 23) - 127 + 15;
    if (half_exp >= 0x1F) {
        return (unsigned short)(half_sign | 0x7C00u);
    }
    if (half_exp <= 0) {
        if (14 - half_exp > 24) {
            return (unsigned short)half_sign;
        }
        man |= 0x00800000u;
        unsigned int half_man = man >> (14 - half_exp);
        unsigned int round_bit = 1u << (13 - half_exp);
        if ((man & round_bit) != 0u && (man & (3u * round_bit - 1u)) != 0u) {
            half_man += 1u;
        }
        return (unsigned short)(half_sign | half_man);
    }
    unsigned int bits = half_sign | ((unsigned int)half_exp << 10) | (man >> 13);
    unsigned int round_bit = 0x00001000u;
    if ((man & round_bit) != 0u && (man & (3u * round_bit - 1u)) != 0u) {
        bits += 1u;
    }
    return (unsigned short)bits;
}

// Sum over the block, in a fixed tree order (deterministic: eager and
// captured launches give identical bits, C4).
__device__ float seam_block_sum(float v, float* s) {
    unsigned int t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2u; half > 0u; half >>= 1) {
        if (t < half) {
            s[t] = __fadd_rn(s[t], s[t + half]);
        }
        __syncthreads();
    }
    float r = s[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void rms_norm_f32(const float* x, const float* w, float* out, Params p) {
    __shared__ float s[SEAM_MAX_THREADS];
    unsigned long long cols = p.d1;
    for (unsigned long long r = blockIdx.x; r < p.d0; r += gridDim.x) {
        const float* row = x + r * cols;
        const unsigned long long B = blockDim.x;
        // Four independent loads in flight per thread (a decode row of 8192
        // is 32 per thread of 256), summed in the order c, c + B, c + 2B, ...
        // as the one-at-a-time loop would.
        float acc = 0.0f;
        unsigned long long c = threadIdx.x;
        for (; c + 3u * B < cols; c += 4u * B) {
            float v0 = row[c], v1 = row[c + B], v2 = row[c + 2u * B], v3 = row[c + 3u * B];
            acc = __fadd_rn(acc, __fmul_rn(v0, v0));
            acc = __fadd_rn(acc, __fmul_rn(v1, v1));
            acc = __fadd_rn(acc, __fmul_rn(v2, v2));
            acc = __fadd_rn(acc, __fmul_rn(v3, v3));
        }
        for (; c < cols; c += B) {
            float v = row[c];
            acc = __fadd_rn(acc, __fmul_rn(v, v));
        }
        float mean_sq = __fdiv_rn(seam_block_sum(acc, s), (float)p.d1);
        float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean_sq, p.s0)));
        // Loads first, then stores (core refuses `out` overlapping `x` or
        // `w` for rms_norm, so batching the loads changes nothing).
        float* o = out + r * cols;
        c = threadIdx.x;
        for (; c + 3u * B < cols; c += 4u * B) {
            float v0 = row[c], v1 = row[c + B], v2 = row[c + 2u * B], v3 = row[c + 3u * B];
            float w0 = w[c], w1 = w[c + B], w2 = w[c + 2u * B], w3 = w[c + 3u * B];
            o[c] = __fmul_rn(__fmul_rn(v0, inv), w0);
            o[c + B] = __fmul_rn(__fmul_rn(v1, inv), w1);
            o[c + 2u * B] = __fmul_rn(__fmul_rn(v2, inv), w2);
            o[c + 3u * B] = __fmul_rn(__fmul_rn(v3, inv), w3);
        }
        for (; c < cols; c += B) {
            o[c] = __fmul_rn(__fmul_rn(row[c], inv), w[c]);
        }
    }
}

extern "C" __global__ void rms_norm_f16(const unsigned short* x, const unsigned short* w, unsigned short* out, Params p) {
    __shared__ float s[SEAM_MAX_THREADS];
    unsigned long long cols = p.d1;
    for (unsigned long long r = blockIdx.x; r < p.d0; r += gridDim.x) {
        const unsigned short* row = x + r * cols;
        float acc = 0.0f;
        for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) {
            float v = seam_h2f(row[c]);
            acc = __fadd_rn(acc, __fmul_rn(v, v));
        }
        float mean_sq = __fdiv_rn(seam_block_sum(acc, s), (float)p.d1);
        float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean_sq, p.s0)));
        for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) {
            float y = __fmul_rn(__fmul_rn(seam_h2f(row[c]), inv), seam_h2f(w[c]));
            out[r * cols + c] = seam_f2h(y);
        }
    }
}
