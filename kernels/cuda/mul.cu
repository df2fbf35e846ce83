// mul: out[i] = a[i] * b[i] (d0 = n). f32 uses __fmul_rn (never contracted,
// bit-exact, C11); integers wrap, the same bits for i32 and u32.

extern "C" __global__ void mul_f32(const float* a, const float* b, float* out, Params p) {
    unsigned long long n = p.d0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = __fmul_rn(a[i], b[i]);
    }
}

extern "C" __global__ void mul_u32(const unsigned int* a, const unsigned int* b, unsigned int* out, Params p) {
    unsigned long long n = p.d0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = a[i] * b[i];
    }
}
