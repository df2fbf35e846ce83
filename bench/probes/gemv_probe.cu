// GEMV probe: y[1 x n] = x[1 x k] . B[k x n], B row-major, f32.
// Custom kernels (float4 quads x k-slices, each block owns its columns, fixed
// summation order) against cuBLAS as seam calls it (cublasGemmEx, m = 1) and
// cublasSgemv, at H = 4096 and 8192, over 8 distinct matrices rotated so L2
// never holds the next one. Prints microseconds per GEMV and GB/s.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <cublas_v2.h>

template <int QUADS, int SLICES, int UNROLL>
__global__ void gemv(const float* __restrict__ x, const float4* __restrict__ B, float* y, int n, int k) {
    __shared__ float4 part[QUADS * SLICES];
    int li = threadIdx.x;
    int q = li % QUADS, s = li / QUADS;
    int col = blockIdx.x * QUADS * 4 + q * 4;
    int n4 = n / 4;
    float4 acc = make_float4(0, 0, 0, 0);
    int kk = s;
    const float4* bp = B + col / 4;
    for (; kk + (UNROLL - 1) * SLICES < k; kk += UNROLL * SLICES) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = bp[(size_t)(kk + u * SLICES) * n4];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            float a = x[kk + u * SLICES];
            acc.x += a * v[u].x; acc.y += a * v[u].y; acc.z += a * v[u].z; acc.w += a * v[u].w;
        }
    }
    for (; kk < k; kk += SLICES) {
        float4 v = bp[(size_t)kk * n4];
        float a = x[kk];
        acc.x += a * v.x; acc.y += a * v.y; acc.z += a * v.z; acc.w += a * v.w;
    }
    part[li] = acc;
    __syncthreads();
    for (int h = SLICES / 2; h > 0; h >>= 1) {
        if (s < h) {
            float4 o = part[li + h * QUADS];
            part[li].x += o.x; part[li].y += o.y; part[li].z += o.z; part[li].w += o.w;
        }
        __syncthreads();
    }
    if (s == 0) *(float4*)(y + col) = part[li];
}

static float* W[8];
static float *X, *Y;

template <class F>
double time_us(F f, int reps) {
    for (int i = 0; i < 16; i++) f(i);
    cudaEvent_t a, b;
    cudaEventCreate(&a); cudaEventCreate(&b);
    cudaEventRecord(a);
    for (int i = 0; i < reps; i++) f(i);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    return ms * 1000.0 / reps;
}

template <int Q, int S, int U>
void run_custom(int h, double bytes, const char* name, std::vector<float>& ref) {
    int blocks = h / (Q * 4);
    double us = time_us([&](int i) { gemv<Q, S, U><<<blocks, Q * S>>>(X, (const float4*)W[i % 8], Y, h, h); }, 200);
    std::vector<float> y(h);
    gemv<Q, S, U><<<blocks, Q * S>>>(X, (const float4*)W[0], Y, h, h);
    cudaMemcpy(y.data(), Y, h * 4, cudaMemcpyDeviceToHost);
    double err = 0;
    for (int j = 0; j < h; j++) err = fmax(err, fabs(y[j] - ref[j]));
    printf("H=%d %-26s %8.2f us %7.0f GB/s  max|diff| %.2e  (%d blocks x %d threads)\n", h, name, us, bytes / us / 1e3, err, blocks, Q * S);
}

int main() {
    cublasHandle_t hb; cublasCreate(&hb);
    for (int h : {4096, 8192}) {
        size_t elems = (size_t)h * h;
        double bytes = elems * 4.0;
        std::vector<float> hw(elems), hx(h);
        for (size_t i = 0; i < elems; i++) hw[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (int i = 0; i < h; i++) hx[i] = (float)(i % 17) / 17.0f;
        for (int i = 0; i < 8; i++) { cudaMalloc(&W[i], elems * 4); cudaMemcpy(W[i], hw.data(), elems * 4, cudaMemcpyHostToDevice); }
        cudaMalloc(&X, h * 4); cudaMalloc(&Y, h * 4);
        cudaMemcpy(X, hx.data(), h * 4, cudaMemcpyHostToDevice);
        std::vector<float> ref(h, 0.0f);
        for (int kk = 0; kk < h; kk++) for (int j = 0; j < h; j++) ref[j] += hx[kk] * hw[(size_t)kk * h + j];
        float one = 1, zero = 0;
        double us = time_us([&](int i) {
            cublasGemmEx(hb, CUBLAS_OP_N, CUBLAS_OP_N, h, 1, h, &one, W[i % 8], CUDA_R_32F, h, X, CUDA_R_32F, h, &zero, Y, CUDA_R_32F, h, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        }, 200);
        printf("H=%d %-26s %8.2f us %7.0f GB/s\n", h, "cublasGemmEx m=1", us, bytes / us / 1e3);
        us = time_us([&](int i) { cublasSgemv(hb, CUBLAS_OP_N, h, h, &one, W[i % 8], h, X, 1, &zero, Y, 1); }, 200);
        printf("H=%d %-26s %8.2f us %7.0f GB/s\n", h, "cublasSgemv", us, bytes / us / 1e3);
        us = time_us([&](int i) { cudaMemcpyAsync(W[(i + 1) % 8], W[i % 8], elems * 4, cudaMemcpyDeviceToDevice); }, 50);
        printf("H=%d %-26s %8.2f us %7.0f GB/s (read+write)\n", h, "cudaMemcpy D2D", us, 2 * bytes / us / 1e3);
        for (size_t i = 0; i < 8; i++) cudaMemcpy(W[i], hw.data(), elems * 4, cudaMemcpyHostToDevice);
        run_custom<4, 64, 8>(h, bytes, "quads4 slices64 unroll8", ref);
        run_custom<4, 64, 4>(h, bytes, "quads4 slices64 unroll4", ref);
        run_custom<8, 32, 8>(h, bytes, "quads8 slices32 unroll8", ref);
        run_custom<8, 64, 8>(h, bytes, "quads8 slices64 unroll8", ref);
        run_custom<2, 128, 8>(h, bytes, "quads2 slices128 unroll8", ref);
        run_custom<4, 128, 8>(h, bytes, "quads4 slices128 unroll8", ref);
        run_custom<4, 64, 16>(h, bytes, "quads4 slices64 unroll16", ref);
        for (int i = 0; i < 8; i++) cudaFree(W[i]);
        cudaFree(X); cudaFree(Y);
    }
    return 0;
}
