// Fused decode layer probe: y = x + silu((x / sqrt(mean(x²) + eps) · wn) · W),
// W h × h row-major f32, as seam's user kernel `norm_gemv_silu_add_f32`
// computes it (blocks of 256 threads: Q quads of columns × S = 256 / Q
// k-slices, one fma per product in k order, a shared-memory tree), by block
// shape Q and by how many rows' loads each thread issues before using them
// (U; U = 0 is the kernel as committed: `#pragma unroll 4` over the plain
// loop). Against the pure read of the same bytes (seam's `read_f32`: a
// grid-stride float4 sum, 1024 blocks of 256) and cuBLAS's m = 1 GEMV, at
// H = 4096 and 8192, over 8 distinct weights rotated so L2 never holds the
// next one, timed with CUDA events; every variant's y is compared with the
// committed kernel's of the same Q (identical order: bit for bit). Also
// split-K layouts (below: 512 contiguous bytes of a row per warp, the
// k range split over blocks) in two launches or in one, compared with the
// committed kernel within a relative difference; split-K by rows in flight
// per warp (U), and writing the partial sums only (no count, no finish:
// what the finish costs). Rounds alternate the arms;
// the median over rounds is printed.
// nvcc -O3 -std=c++17 -arch=sm_90 -diag-suppress 186 fused_probe.cu -lcublas
// ./a.out [rounds [H ...]] (H multiples of 128; default 4096 8192)
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "read_f32.cuh"

template <unsigned Q, unsigned U>
__global__ void __launch_bounds__(256) fused(const float* x, const float* wn, const float* w, float* y, unsigned h,
                                             float eps) {
    constexpr unsigned S = 256u / Q;
    __shared__ float4 part[256];
    __shared__ float sq[S];
    unsigned t = threadIdx.x, q = t % Q, s = t / Q;
    unsigned long long col = ((unsigned long long)blockIdx.x * Q + q) * 4ull;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ss = 0.0f;
    if (col < h) {
        unsigned k = s;
        if (U > 0) {
            for (; k + (U - 1) * S < h; k += U * S) {
                float4 b[U > 0 ? U : 1];
                float xs[U > 0 ? U : 1], ws[U > 0 ? U : 1];
#pragma unroll
                for (unsigned u = 0; u < U; ++u) {
                    b[u] = *reinterpret_cast<const float4*>(w + (unsigned long long)(k + u * S) * h + col);
                    xs[u] = x[k + u * S];
                    ws[u] = wn[k + u * S];
                }
#pragma unroll
                for (unsigned u = 0; u < U; ++u) {
                    float a = __fmul_rn(xs[u], ws[u]);
                    acc.x = __fmaf_rn(a, b[u].x, acc.x);
                    acc.y = __fmaf_rn(a, b[u].y, acc.y);
                    acc.z = __fmaf_rn(a, b[u].z, acc.z);
                    acc.w = __fmaf_rn(a, b[u].w, acc.w);
                    ss = __fmaf_rn(xs[u], xs[u], ss);
                }
            }
        }
#pragma unroll 4
        for (; k < h; k += S) {
            float xk = x[k];
            float a = __fmul_rn(xk, wn[k]);
            float4 b = *reinterpret_cast<const float4*>(w + (unsigned long long)k * h + col);
            acc.x = __fmaf_rn(a, b.x, acc.x);
            acc.y = __fmaf_rn(a, b.y, acc.y);
            acc.z = __fmaf_rn(a, b.z, acc.z);
            acc.w = __fmaf_rn(a, b.w, acc.w);
            ss = __fmaf_rn(xk, xk, ss);
        }
    }
    part[t] = acc;
    if (q == 0) sq[s] = ss;
    __syncthreads();
    for (unsigned half = S / 2u; half > 0u; half >>= 1) {
        if (s < half) {
            float4 o = part[t + half * Q];
            part[t].x = __fadd_rn(part[t].x, o.x);
            part[t].y = __fadd_rn(part[t].y, o.y);
            part[t].z = __fadd_rn(part[t].z, o.z);
            part[t].w = __fadd_rn(part[t].w, o.w);
            if (q == 0) sq[s] = __fadd_rn(sq[s], sq[s + half]);
        }
        __syncthreads();
    }
    if (s != 0 || col >= h) return;
    float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sq[0], (float)h), eps)));
    float z4[4] = {part[q].x, part[q].y, part[q].z, part[q].w};
    for (unsigned j = 0; j < 4u && col + j < h; ++j) {
        float z = __fmul_rn(z4[j], inv);
        y[col + j] = __fadd_rn(x[col + j], z / __fadd_rn(1.0f, expf(-z)));
    }
}


// Split-K: block (tile, ks) of 8 warps owns the 128 columns of `tile` (one
// float4 per lane: each warp reads 512 contiguous bytes of a row) and the
// rows ks·R … (ks + 1)·R − 1 (R = h / KS; warp w takes every 8th), four
// rows' loads in flight; it writes its 128 partial sums to part[ks][col]
// and its rows' Σx² to ssp[tile][ks]. LAST = 0: a second launch (`splitk_epilogue`)
// sums the KS partials of each column in ks order and applies norm, silu
// and the residual. LAST = 1: one launch; each block counts itself done
// on cnt[tile] after a fence, and the block that counts last does the
// epilogue for its tile and resets the count.
template <unsigned KS, unsigned LAST, unsigned U = 4>
__global__ void __launch_bounds__(256) splitk(const float* x, const float* wn, const float* w, float* y, float* part,
                                              float* ssp, unsigned* cnt, unsigned h, float eps) {
    __shared__ float4 red[8][32];
    __shared__ float rss[8];
    __shared__ bool last;
    unsigned lane = threadIdx.x % 32u, wp = threadIdx.x / 32u, tile = blockIdx.x, ks = blockIdx.y;
    unsigned long long col = (unsigned long long)tile * 128u + lane * 4u;
    unsigned r = h / KS, k0 = ks * r, k1 = k0 + r;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ss = 0.0f;
    unsigned k = k0 + wp;
    for (; k + 8u * (U - 1u) < k1; k += 8u * U) {
        float4 b[U];
        float xs[U], ws[U];
#pragma unroll
        for (unsigned u = 0; u < U; ++u) {
            b[u] = *reinterpret_cast<const float4*>(w + (unsigned long long)(k + u * 8u) * h + col);
            xs[u] = x[k + u * 8u];
            ws[u] = wn[k + u * 8u];
        }
#pragma unroll
        for (unsigned u = 0; u < U; ++u) {
            float a = __fmul_rn(xs[u], ws[u]);
            acc.x = __fmaf_rn(a, b[u].x, acc.x);
            acc.y = __fmaf_rn(a, b[u].y, acc.y);
            acc.z = __fmaf_rn(a, b[u].z, acc.z);
            acc.w = __fmaf_rn(a, b[u].w, acc.w);
            ss = __fmaf_rn(xs[u], xs[u], ss);
        }
    }
    for (; k < k1; k += 8u) {
        float4 b = *reinterpret_cast<const float4*>(w + (unsigned long long)k * h + col);
        float xk = x[k], a = __fmul_rn(xk, wn[k]);
        acc.x = __fmaf_rn(a, b.x, acc.x);
        acc.y = __fmaf_rn(a, b.y, acc.y);
        acc.z = __fmaf_rn(a, b.z, acc.z);
        acc.w = __fmaf_rn(a, b.w, acc.w);
        ss = __fmaf_rn(xk, xk, ss);
    }
    red[wp][lane] = acc;
    if (lane == 0) rss[wp] = ss;
    __syncthreads();
    if (wp == 0) {
        float4 z = red[0][lane];
        for (unsigned i = 1; i < 8u; ++i) {
            z.x = __fadd_rn(z.x, red[i][lane].x);
            z.y = __fadd_rn(z.y, red[i][lane].y);
            z.z = __fadd_rn(z.z, red[i][lane].z);
            z.w = __fadd_rn(z.w, red[i][lane].w);
        }
        *reinterpret_cast<float4*>(part + (unsigned long long)ks * h + col) = z;
        if (lane == 0) {
            float t = rss[0];
            for (unsigned i = 1; i < 8u; ++i) t = __fadd_rn(t, rss[i]);
            ssp[tile * KS + ks] = t;
        }
    }
    if (LAST != 1u) return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&cnt[tile], 1u) == KS - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (threadIdx.x < 128u) {
        unsigned long long c = (unsigned long long)tile * 128u + threadIdx.x;
        float z = 0.0f, sq = 0.0f;
        for (unsigned i = 0; i < KS; ++i) {
            z = __fadd_rn(z, __ldcg(part + (unsigned long long)i * h + c));
            sq = __fadd_rn(sq, __ldcg(ssp + tile * KS + i));
        }
        float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sq, (float)h), eps)));
        z = __fmul_rn(z, inv);
        y[c] = __fadd_rn(x[c], z / __fadd_rn(1.0f, expf(-z)));
    }
    if (threadIdx.x == 0) cnt[tile] = 0u;
}

template <unsigned KS>
__global__ void splitk_epilogue(const float* x, float* y, const float* part, const float* ssp, unsigned h, float eps) {
    unsigned long long c = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= h) return;
    float z = 0.0f, sq = 0.0f;
    for (unsigned i = 0; i < KS; ++i) {
        z = __fadd_rn(z, part[(unsigned long long)i * h + c]);
        sq = __fadd_rn(sq, ssp[i]);  // tile 0's Σx² of each ks: every tile's is the same
    }
    float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sq, (float)h), eps)));
    z = __fmul_rn(z, inv);
    y[c] = __fadd_rn(x[c], z / __fadd_rn(1.0f, expf(-z)));
}

static float *W[8], *X, *WN, *Y, *P, *PART, *SSP;
static unsigned* CNT;

template <class F>
static double time_us(F f, int reps) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 8; i++) f(i);
    cudaEventRecord(a);
    for (int i = 0; i < reps; i++) f(i);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms * 1000.0 / reps;
}

struct Arm {
    char name[48];
    unsigned q;
    void (*launch)(int i, unsigned h);
    std::vector<double> us;
};

template <unsigned Q, unsigned U>
static void launch_fused(int i, unsigned h) {
    unsigned blocks = (h + 4 * Q - 1) / (4 * Q);
    fused<Q, U><<<blocks, 256>>>(X, WN, W[i % 8], Y, h, 1e-5f);
}
static void launch_read(int i, unsigned h) { read_f32<<<1024, 256>>>(W[i % 8], P, (unsigned long long)h * h); }
static cublasHandle_t HB;
static void launch_cublas(int i, unsigned h) {
    float one = 1, zero = 0;
    cublasGemmEx(HB, CUBLAS_OP_N, CUBLAS_OP_N, h, 1, h, &one, W[i % 8], CUDA_R_32F, h, X, CUDA_R_32F, h, &zero, Y,
                 CUDA_R_32F, h, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}


template <unsigned KS, unsigned LAST, unsigned U = 4>
static void launch_splitk(int i, unsigned h) {
    dim3 grid(h / 128u, KS);
    splitk<KS, LAST, U><<<grid, 256>>>(X, WN, W[i % 8], Y, PART, SSP, CNT, h, 1e-5f);
    if (LAST == 0u) splitk_epilogue<KS><<<(h + 255u) / 256u, 256>>>(X, Y, PART, SSP, h, 1e-5f);
}
#define SPLITK2(KS) Arm{"split-K " #KS ", 2 launches", 0, launch_splitk<KS, 0u>, {}}
#define SPLITK1(KS) Arm{"split-K " #KS ", last block", 0, launch_splitk<KS, 1u>, {}}
// The same, U rows' loads in flight per warp instead of four.
#define SPLITKU(KS, U) Arm{"split-K " #KS ", last block, U=" #U, 0, launch_splitk<KS, 1u, U>, {}}
// Partial sums only (no count, no epilogue): the GEMV part of the layer,
// so the difference to SPLITK1 is what finishing in the last block costs.
#define SPLITK0(KS) Arm{"split-K " #KS ", partials only", 0, launch_splitk<KS, 2u>, {}}
#define FUSED(Q, U) Arm{#Q " quads, U=" #U, Q, launch_fused<Q, U>, {}}

int main(int argc, char** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    cublasCreate(&HB);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("# %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    std::vector<unsigned> hs;
    for (int i = 2; i < argc; i++) hs.push_back((unsigned)atoi(argv[i]));
    if (hs.empty()) hs = {4096u, 8192u};
    for (unsigned h : hs) {
        size_t elems = (size_t)h * h;
        double bytes = elems * 4.0;
        std::vector<float> hw(elems), hx(h), hn(h);
        for (size_t i = 0; i < elems; i++) hw[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (unsigned i = 0; i < h; i++) hx[i] = (float)(i % 17) / 17.0f - 0.4f, hn[i] = 1.0f + (float)(i % 5) / 10.0f;
        for (int i = 0; i < 8; i++) {
            cudaMalloc(&W[i], elems * 4);
            cudaMemcpy(W[i], hw.data(), elems * 4, cudaMemcpyHostToDevice);
        }
        cudaMalloc(&X, h * 4);
        cudaMalloc(&WN, h * 4);
        cudaMalloc(&Y, h * 4);
        cudaMalloc(&P, 1024 * 4);
        cudaMalloc(&PART, 32 * h * 4);
        cudaMalloc(&SSP, 4096 * 4);
        cudaMalloc(&CNT, 1024 * 4);
        cudaMemset(CNT, 0, 1024 * 4);
        cudaMemcpy(X, hx.data(), h * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(WN, hn.data(), h * 4, cudaMemcpyHostToDevice);
        std::vector<Arm> arms = {
            Arm{"read_f32 (the read floor)", 0, launch_read, {}},
            Arm{"cublasGemmEx m=1 (GEMV only)", 0, launch_cublas, {}},
            FUSED(2, 0), FUSED(2, 4), FUSED(2, 8),
            FUSED(4, 0), FUSED(4, 4), FUSED(4, 8),
            FUSED(8, 0), FUSED(8, 4), FUSED(8, 8),
            FUSED(16, 0), FUSED(16, 4), FUSED(16, 8),
            FUSED(32, 4), FUSED(32, 8),
            SPLITK2(4), SPLITK2(8), SPLITK2(16),
            SPLITK1(4), SPLITK1(8), SPLITK1(16),
            SPLITKU(8, 2), SPLITKU(8, 8), SPLITKU(16, 8), SPLITKU(32, 4),
            SPLITK0(8), SPLITK0(16),
        };
        // Outputs: every U of one Q bit for bit like U = 0.
        std::vector<float> ref(h), got(h), ref0(h);
        unsigned ref_q = 0;
        for (auto& a : arms) {
            if (a.q == 0) {
                if (strncmp(a.name, "split", 5) != 0 || strstr(a.name, "partials")) continue;
                a.launch(0, h);
                a.launch(0, h);  // twice: the count must have been reset
                cudaMemcpy(got.data(), Y, h * 4, cudaMemcpyDeviceToHost);
                double e = 0;
                for (unsigned j = 0; j < h; j++) e = std::max(e, (double)fabsf(got[j] - ref0[j]) / (fabsf(ref0[j]) + 1e-3));
                printf("H=%u %s: max rel diff to the committed kernel %.2e\n", h, a.name, e);
                continue;
            }
            a.launch(0, h);
            cudaMemcpy(got.data(), Y, h * 4, cudaMemcpyDeviceToHost);
            if (strstr(a.name, "U=0")) {
                ref = got;
                ref_q = a.q;
                if (a.q == (h >= 8177 ? 4u : 2u)) ref0 = got;
                continue;
            }
            if (a.q == ref_q && memcmp(ref.data(), got.data(), h * 4) != 0)
                printf("H=%u %s: differs from U=0\n", h, a.name);
        }
        for (int r = 0; r < rounds; r++) {
            for (size_t j = 0; j < arms.size(); j++) {
                auto& a = arms[(r % 2) ? arms.size() - 1 - j : j];
                a.us.push_back(time_us([&](int i) { a.launch(i, h); }, 200));
            }
        }
        for (auto& a : arms) {
            std::sort(a.us.begin(), a.us.end());
            double med = a.us[a.us.size() / 2];
            printf("H=%u %-30s %8.2f us (%.2f-%.2f) %6.0f GB/s\n", h, a.name, med, a.us.front(), a.us.back(),
                   bytes / med / 1e3);
        }
        for (int i = 0; i < 8; i++) cudaFree(W[i]);
        cudaFree(X);
        cudaFree(WN);
        cudaFree(Y);
        cudaFree(P);
        cudaFree(PART);
        cudaFree(SSP);
        cudaFree(CNT);
    }
    cudaError_t e = cudaGetLastError();
    printf("# %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
