// copy: dst[i] = src[i] (d0 = n). Bits only: copy_32 for 4-byte types,
// copy_16 for f16/bf16, one half-word per element (an odd n needs no tail).
// src may alias dst (elementwise ops may run in place).

extern "C" __global__ void copy_32(const unsigned int* src, unsigned int* dst, Params p) {
    unsigned long long n = p.d0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = src[i];
    }
}

extern "C" __global__ void copy_16(const unsigned short* src, unsigned short* dst, Params p) {
    unsigned long long n = p.d0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = src[i];
    }
}
