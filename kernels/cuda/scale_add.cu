// scale_add: y[i] = fma(a, x[i], b) with a = s0, b = s1 (d0 = n).
// fmaf rounds once, exactly like Rust's f32::mul_add: bit-exact (C11).

extern "C" __global__ void scale_add_f32(const float* x, float* y, Params p) {
    unsigned long long n = p.d0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaf(p.s0, x[i], p.s1);
    }
}
