// silu: out[i] = x[i] / (1 + exp(-x[i])) (d0 = n). IEEE division (the default,
// no fast math); expf is within 2 ulp, inside silu's stated bound (C11).

extern "C" __global__ void silu_f32(const float* x, float* out, Params p) {
    unsigned long long n = p.d0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i];
        out[i] = v / __fadd_rn(1.0f, expf(-v));
    }
}
