// softmax: row-wise, max-subtracted, over a rows x cols matrix (d0 = rows,
// d1 = cols): out[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r).
// One block per row (grid-stride over rows); blockDim.x must be a power of two
// <= 1024. Reductions use a fixed tree order (deterministic, C4); expf is
// within 2 ulp and the division is IEEE, inside softmax's bound (C11).

#define SEAM_MAX_THREADS 1024

__device__ float seam_block_max(float v, float* s) {
    unsigned int t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2u; half > 0u; half >>= 1) {
        if (t < half) {
            s[t] = fmaxf(s[t], s[t + half]);
        }
        __syncthreads();
    }
    float r = s[0];
    __syncthreads();
    return r;
}

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

extern "C" __global__ void softmax_f32(const float* x, float* out, Params p) {
    __shared__ float s[SEAM_MAX_THREADS];
    unsigned long long cols = p.d1;
    for (unsigned long long r = blockIdx.x; r < p.d0; r += gridDim.x) {
        const float* row = x + r * cols;
        float m = __int_as_float(0xFF800000); // -inf
        for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) {
            m = fmaxf(m, row[c]);
        }
        m = seam_block_max(m, s);
        float acc = 0.0f;
        for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) {
            acc = __fadd_rn(acc, expf(__fsub_rn(row[c], m)));
        }
        float sum = seam_block_sum(acc, s);
        for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) {
            out[r * cols + c] = __fdiv_rn(expf(__fsub_rn(row[c], m)), sum);
        }
    }
}
