// pdl_probe: what programmatic dependent launch gains the decode step.
// L = 32 launches of seam's fused layer kernel (`norm_gemv_silu_add_f32`,
// the committed source with its prelude, included below) over 32 distinct
// weights, each layer reading the one before's output, captured into one
// graph twice: launched plainly, and launched with
// cudaLaunchAttributeProgrammaticStreamSerialization (each layer may start
// once every block of the one before has started; the kernel prefetches
// its first rows of W into L2 and then waits, `griddepcontrol.wait`,
// before it touches anything else). Against the pure read of the same
// weights (32 launches of a float4 sum). Replays back to back, timed with
// CUDA events; rounds alternate the arms; median µs per replay. The two
// graphs' outputs are compared bit for bit.
//
// nvcc -O3 -std=c++17 -arch=sm_90 -DSEAM_LAYER_PREFETCH=4 pdl_probe.cu -o pdl_probe
// ./pdl_probe [rounds [H ...]]   (default 7 rounds, H = 4096 8192)
// -DSEAM_PROBE_QUADS=2u or 4u forces the quads (d1) the layer takes at
// every H (else the committed choice, `layer_quads`).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "read_f32.cuh"

#include "../../kernels/cuda/params.cu"
#include "../../kernels/user/norm_gemv_silu_add.cu"

#define CK(x)                                                                            \
    do {                                                                                 \
        cudaError_t e_ = (x);                                                            \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

enum Arm { PLAIN, PDL, READ, ARMS };
static const char* NAMES[] = {"fused, plain launches", "fused, early start (PDL)", "read_f32 (the read floor)"};

int main(int argc, char** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    std::vector<unsigned> hs;
    for (int i = 2; i < argc; i++) hs.push_back((unsigned)atoi(argv[i]));
    if (hs.empty()) hs = {4096u, 8192u};
    const int L = 32;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# %s, %d SMs, SEAM_LAYER_PREFETCH %u, SEAM_LAYER_ROWS %u\n", prop.name, prop.multiProcessorCount,
           SEAM_LAYER_PREFETCH, SEAM_LAYER_ROWS);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (unsigned h : hs) {
        size_t elems = (size_t)h * h;
#ifdef SEAM_PROBE_QUADS
        unsigned quads = SEAM_PROBE_QUADS;
#else
        unsigned quads = (h + 15) / 16 >= 512 ? 4u : 2u;
#endif
        unsigned tiles = (h + 127) / 128, ks = 32 / quads;
        size_t ws_words = (size_t)tiles * ks * 129 + tiles;
        std::vector<float*> w(L);
        std::vector<float> hw(elems);
        for (int l = 0; l < L; l++) {
            for (size_t i = 0; i < elems; i++)
                hw[i] = (float)(((i + 7919u * l) * 2654435761u) % 1000) / 1000.0f - 0.5f;
            CK(cudaMalloc(&w[l], elems * 4));
            CK(cudaMemcpy(w[l], hw.data(), elems * 4, cudaMemcpyHostToDevice));
        }
        std::vector<float> hx(h), hn(h);
        for (unsigned i = 0; i < h; i++) hx[i] = (float)(i % 17) / 17.0f - 0.4f, hn[i] = 1.0f + (float)(i % 5) / 10.0f;
        float *x[2], *wn, *ws, *part;
        for (auto& b : x) CK(cudaMalloc(&b, h * 4));
        CK(cudaMalloc(&wn, h * 4));
        CK(cudaMalloc(&ws, ws_words * 4));
        CK(cudaMalloc(&part, 1024 * 4));
        CK(cudaMemset(ws, 0, ws_words * 4));
        CK(cudaMemcpy(wn, hn.data(), h * 4, cudaMemcpyHostToDevice));
        Params p = {h, quads, 0, 0, 1e-5f, 0.0f, 0, 0};
        dim3 grid(tiles * ks), block(256);
        cudaGraphExec_t ex[ARMS];
        for (int a = 0; a < ARMS; a++) {
            cudaGraph_t g;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int l = 0; l < L; l++) {
                const float* in = x[l % 2];
                float* out = x[(l + 1) % 2];
                if (a == READ) {
                    read_f32<<<1024, 256, 0, s>>>(w[l], part, (unsigned long long)elems);
                } else if (a == PLAIN) {
                    norm_gemv_silu_add_f32<<<grid, block, 0, s>>>(in, wn, w[l], out, ws, p);
                } else {
                    cudaLaunchAttribute at[1];
                    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                    at[0].val.programmaticStreamSerializationAllowed = 1;
                    cudaLaunchConfig_t cfg = {};
                    cfg.gridDim = grid;
                    cfg.blockDim = block;
                    cfg.stream = s;
                    cfg.attrs = at;
                    cfg.numAttrs = 1;
                    CK(cudaLaunchKernelEx(&cfg, norm_gemv_silu_add_f32, in, (const float*)wn,
                                          (const float*)w[l], out, ws, p));
                }
            }
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ex[a], g, 0));
            CK(cudaGraphUpload(ex[a], s));
            CK(cudaGraphDestroy(g));
        }
        // Outputs: one replay of each fused graph from the same input.
        std::vector<float> got[2];
        for (int a = PLAIN; a <= PDL; a++) {
            CK(cudaMemcpy(x[0], hx.data(), h * 4, cudaMemcpyHostToDevice));
            CK(cudaGraphLaunch(ex[a], s));
            CK(cudaStreamSynchronize(s));
            got[a].resize(h);
            CK(cudaMemcpy(got[a].data(), x[L % 2], h * 4, cudaMemcpyDeviceToHost));
        }
        int differ = 0;
        for (unsigned i = 0; i < h; i++) differ += memcmp(&got[0][i], &got[1][i], 4) != 0;
        printf("H=%u: %d of %u output elements differ between the plain and the early-start graph\n", h, differ, h);
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        const int reps = h >= 8192 ? 20 : 60;
        std::vector<double> us[ARMS];
        for (int a = 0; a < ARMS; a++)
            for (int r = 0; r < 3; r++) CK(cudaGraphLaunch(ex[a], s));
        for (int r = 0; r < rounds; r++) {
            for (int j = 0; j < ARMS; j++) {
                int a = (r % 2) ? ARMS - 1 - j : j;
                CK(cudaEventRecord(e0, s));
                for (int i = 0; i < reps; i++) CK(cudaGraphLaunch(ex[a], s));
                CK(cudaEventRecord(e1, s));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                us[a].push_back(ms * 1000.0 / reps);
            }
        }
        std::vector<double> read = us[READ];
        for (int a = 0; a < ARMS; a++) {
            std::vector<double> v = us[a], ratio;
            for (int r = 0; r < rounds; r++) ratio.push_back(us[a][r] / us[READ][r]);
            std::sort(v.begin(), v.end());
            std::sort(ratio.begin(), ratio.end());
            printf("H=%u L=%d %-28s %9.1f us a replay (%.1f-%.1f); / read %.3f (%.3f-%.3f)\n", h, L, NAMES[a],
                   v[v.size() / 2], v.front(), v.back(), ratio[ratio.size() / 2], ratio.front(), ratio.back());
        }
        for (int a = 0; a < ARMS; a++) CK(cudaGraphExecDestroy(ex[a]));
        for (auto b : w) CK(cudaFree(b));
        for (auto b : x) CK(cudaFree(b));
        CK(cudaFree(wn));
        CK(cudaFree(ws));
        CK(cudaFree(part));
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
    }
    cudaError_t e = cudaGetLastError();
    printf("# %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
