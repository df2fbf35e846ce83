// idle_probe: what a replay costs after the host kept the GPU idle for a
// while, and after a switch to another executable of the chain. A graph
// update does host work between two replays (seam's rebind: about 170 µs
// at N = 1000 on an H100), and a replay after it took longer from submit to
// completion than a plain replay; this separates the idle time from the
// switch. The chain: N dependent one-thread kernels adding 1 in place.
//
// For each idle time I (the host spins I µs after the previous replay has
// completed, then launches), three ways of choosing what to launch:
//
//   same      the same executable every time (a plain replay)
//   other     two executables from two graphs captured over two buffers,
//             alternated (the probe's "cache" design)
//   patched   the first executable and one instantiated from the same
//             graph with every kernel node then set to the other buffer
//             (cudaGraphExecKernelNodeSetParams: how the stream backend
//             makes a kept exec), alternated
//   regraph   the first executable and one instantiated from the same
//             graph after its nodes were set to the other buffer in the
//             graph itself (cudaGraphKernelNodeSetParams, then set back),
//             alternated: the same graph instantiated twice, no exec patched
//
// The alternating ways time only the launches of the second executable
// (each right after a launch of the first); `same` times every launch.
//
// Per iteration: the host time from launch to the end of the
// synchronisation (e2e), and the GPU time between events recorded just
// before and after the launch. Medians over the iterations of a round,
// then the median (min–max) over the rounds; rounds interleave the cases.
// Each buffer's final value is checked against the launches that reached it.
//
// nvcc -O3 -std=c++17 -arch=sm_90 idle_probe.cu -o idle_probe
// ./idle_probe [n] [rounds]
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                     \
    do {                                                                          \
        cudaError_t ck_err_ = (x);                                                \
        if (ck_err_ != cudaSuccess) {                                             \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,             \
                    cudaGetErrorString(ck_err_));                                 \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

__global__ void add_one(float* x) { x[0] += 1.0f; }

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static void spin(double us) {
    double end = now_us() + us;
    while (now_us() < end) {
    }
}

static cudaGraph_t capture(int n, cudaStream_t s, float* x) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++) add_one<<<1, 1, 0, s>>>(x);
    CK(cudaStreamEndCapture(s, &g));
    return g;
}

static cudaGraphExec_t instantiate(cudaGraph_t g, cudaStream_t s) {
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaGraphUpload(e, s));
    return e;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

enum Way { SAME, OTHER, PATCHED, REGRAPH, WAYS };
static const char* NAMES[] = {"same", "other", "patched", "regraph"};

// Every kernel node of `g` set, in the graph, to write `x`.
static void point_graph(cudaGraph_t g, float* x) {
    size_t count = 0;
    CK(cudaGraphGetNodes(g, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    CK(cudaGraphGetNodes(g, nodes.data(), &count));
    for (auto node : nodes) {
        cudaKernelNodeParams p;
        CK(cudaGraphKernelNodeGetParams(node, &p));
        void* args[] = {&x};
        p.kernelParams = args;
        p.extra = nullptr;
        CK(cudaGraphKernelNodeSetParams(node, &p));
    }
}

int main(int argc, char** argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    int rounds = argc > 2 ? atoi(argv[2]) : 9;
    const int iters = 40;
    const double idles[] = {0, 200};
    const int NI = sizeof(idles) / sizeof(idles[0]);

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* buf[2];
    for (auto& b : buf) {
        CK(cudaMalloc(&b, sizeof(float)));
        CK(cudaMemset(b, 0, sizeof(float)));
    }
    cudaGraph_t g[2] = {capture(n, s, buf[0]), capture(n, s, buf[1])};
    cudaGraphExec_t e0 = instantiate(g[0], s), e1 = instantiate(g[1], s);
    // g[0] instantiated again, every kernel node set to buf[1].
    cudaGraphExec_t ep;
    CK(cudaGraphInstantiate(&ep, g[0], 0));
    size_t count = 0;
    CK(cudaGraphGetNodes(g[0], nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    CK(cudaGraphGetNodes(g[0], nodes.data(), &count));
    for (auto node : nodes) {
        cudaKernelNodeParams p;
        CK(cudaGraphKernelNodeGetParams(node, &p));
        void* args[] = {&buf[1]};
        p.kernelParams = args;
        p.extra = nullptr;
        CK(cudaGraphExecKernelNodeSetParams(ep, node, &p));
    }
    CK(cudaGraphUpload(ep, s));
    point_graph(g[0], buf[1]);
    cudaGraphExec_t er = instantiate(g[0], s);
    point_graph(g[0], buf[0]);
    cudaEvent_t before, after;
    CK(cudaEventCreate(&before));
    CK(cudaEventCreate(&after));

    // Chain runs that reached each buffer, to check at the end.
    long runs[2] = {0, 0};
    // [way][idle][round]: medians of the round.
    std::vector<double> e2e[WAYS][16], gpu[WAYS][16];
    for (int r = -1; r < rounds; r++) {  // round -1: warm-up, not kept
        for (int w = 0; w < WAYS; w++) {
            for (int i = 0; i < NI; i++) {
                std::vector<double> te, tg;
                int flip = 0;
                for (int k = 0; k < iters; k++) {
                    cudaGraphExec_t ex = e0;
                    int to = 0;
                    if (w == OTHER) {
                        flip ^= 1;
                        ex = flip ? e1 : e0;
                        to = flip;
                    } else if (w == PATCHED) {
                        flip ^= 1;
                        ex = flip ? ep : e0;
                        to = flip;
                    } else if (w == REGRAPH) {
                        flip ^= 1;
                        ex = flip ? er : e0;
                        to = flip;
                    }
                    spin(idles[i]);
                    double t0 = now_us();
                    CK(cudaEventRecord(before, s));
                    CK(cudaGraphLaunch(ex, s));
                    CK(cudaEventRecord(after, s));
                    CK(cudaStreamSynchronize(s));
                    double t1 = now_us();
                    float ms = 0;
                    CK(cudaEventElapsedTime(&ms, before, after));
                    runs[to] += n;
                    if (w == SAME || to == 1) {
                        te.push_back(t1 - t0);
                        tg.push_back(ms * 1000.0);
                    }
                }
                if (r >= 0) {
                    e2e[w][i].push_back(median(te));
                    gpu[w][i].push_back(median(tg));
                }
            }
        }
    }
    float got[2];
    for (int b = 0; b < 2; b++) CK(cudaMemcpy(&got[b], buf[b], sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = got[0] == (float)runs[0] && got[1] == (float)runs[1];
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# idle_probe on %s, n=%d, %d rounds of %d iterations a case; buffers %s (%.0f/%ld, %.0f/%ld)\n",
           prop.name, n, rounds, iters, ok ? "ok" : "WRONG", got[0], runs[0], got[1], runs[1]);
    printf("way,idle_us,e2e_us_median,e2e_min,e2e_max,gpu_us_median,gpu_min,gpu_max\n");
    for (int w = 0; w < WAYS; w++) {
        for (int i = 0; i < NI; i++) {
            auto& a = e2e[w][i];
            auto& b = gpu[w][i];
            printf("%s,%.0f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f\n", NAMES[w], idles[i], median(a),
                   *std::min_element(a.begin(), a.end()), *std::max_element(a.begin(), a.end()),
                   median(b), *std::min_element(b.begin(), b.end()),
                   *std::max_element(b.begin(), b.end()));
        }
    }
    return ok ? 0 : 1;
}
