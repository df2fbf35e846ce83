// gemm: c[m x n] = a[m x k] . b[k x n], row-major, f32 accumulation, f32
// output (d0 = m, d1 = n, d2 = k). A plain 16x16 shared-memory tile kernel:
// the CUDA backend routes gemm through cuBLAS and keeps this one for HIP and
// as a cross-check. Launch with blockDim (16, 16) and grid
// (ceil(n / 16), ceil(m / 16)). Each output is summed in the reference's
// order (l = 0..k-1, no fma), so f32 agrees with the CPU bit for bit.
// f16 and bf16 are widened by bits in plain C (no cuda_fp16.h / cuda_bf16.h).

#define SEAM_TILE 16u

__device__ float seam_h2f(unsigned short h) {
    unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
    unsigned int exp = ((unsigned int)h >> 10) & 0x1Fu;
    unsigned int man = (unsigned int)h & 0x3FFu;
    if (exp == 0u) {
        float f = __fmul_rn((float)man, 5.9604644775390625e-8f);
        return sign ? -f : f;
    }
    if (exp == 31u) {
        return __uint_as_float(sign | 0x7F800000u | (man << 13));
    }
    return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

__device__ float seam_load_f32(const float* p, unsigned long long i) { return p[i]; }
__device__ float seam_load_f16(const unsigned short* p, unsigned long long i) { return seam_h2f(p[i]); }
__device__ float seam_load_bf16(const unsigned short* p, unsigned long long i) {
    return __uint_as_float(((unsigned int)p[i]) << 16);
}

#define SEAM_GEMM(NAME, T, LOAD)                                                          \
    extern "C" __global__ void NAME(const T* a, const T* b, float* c, Params p) {         \
        __shared__ float ta[SEAM_TILE][SEAM_TILE];                                        \
        __shared__ float tb[SEAM_TILE][SEAM_TILE];                                        \
        unsigned int m = p.d0, n = p.d1, k = p.d2;                                        \
        unsigned int row = blockIdx.y * SEAM_TILE + threadIdx.y;                          \
        unsigned int col = blockIdx.x * SEAM_TILE + threadIdx.x;                          \
        float acc = 0.0f;                                                                 \
        for (unsigned int t0 = 0; t0 < k; t0 += SEAM_TILE) {                              \
            unsigned int ka = t0 + threadIdx.x, kb = t0 + threadIdx.y;                    \
            ta[threadIdx.y][threadIdx.x] =                                                \
                (row < m && ka < k) ? LOAD(a, (unsigned long long)row * k + ka) : 0.0f;   \
            tb[threadIdx.y][threadIdx.x] =                                                \
                (kb < k && col < n) ? LOAD(b, (unsigned long long)kb * n + col) : 0.0f;   \
            __syncthreads();                                                              \
            unsigned int lim = (k - t0 < SEAM_TILE) ? (k - t0) : SEAM_TILE;               \
            for (unsigned int l = 0; l < lim; ++l) {                                      \
                acc = __fadd_rn(acc, __fmul_rn(ta[threadIdx.y][l], tb[l][threadIdx.x]));  \
            }                                                                             \
            __syncthreads();                                                              \
        }                                                                                 \
        if (row < m && col < n) {                                                         \
            c[(unsigned long long)row * n + col] = acc;                                   \
        }                                                                                 \
    }

SEAM_GEMM(gemm_f32, float, seam_load_f32)
SEAM_GEMM(gemm_f16, unsigned short, seam_load_f16)
SEAM_GEMM(gemm_bf16, unsigned short, seam_load_bf16)
