// fill: dst[i] = value, from the element's bit pattern in p.bits (d0 = n).
// Only the element width matters: fill_32 serves f32/i32/u32, fill_16 f16/bf16.
// 16-bit elements are written one half-word each, so an odd n needs no
// special tail: the neighbour of the last element is never touched.

extern "C" __global__ void fill_32(unsigned int* dst, Params p) {
    unsigned long long n = p.d0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = p.bits;
    }
}

extern "C" __global__ void fill_16(unsigned short* dst, Params p) {
    unsigned long long n = p.d0;
    unsigned short v = (unsigned short)(p.bits & 0xFFFFu);
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = v;
    }
}
