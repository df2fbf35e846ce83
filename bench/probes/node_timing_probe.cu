// node_timing_probe: what timing every node of a CUDA graph costs, by
// method, on a chain of N dependent one-thread kernels (the launch-bound
// worst case; seam-bench's "chain"). Each arm is a graph of the same N
// kernels, captured once, replayed and synchronised per replay; µs per
// replay, median over rounds of interleaved arms.
//
//   plain    the N kernels alone
//   events   an event record node before the first kernel and after each
//            (cudaEventRecordWithFlags(..., cudaEventRecordExternal) while
//            capturing): how seam's CUDA backend times nodes today
//   stampk   the N kernels writing %globaltimer at their start and end into
//            a buffer (node timing inside seam's own kernels)
//   stampn   a one-thread stamp kernel writing %globaltimer before the
//            first kernel and after each (for kernels seam cannot change,
//            cuBLAS's)
//   cupti    the plain graph with CUPTI activity records of every kernel
//            (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, each record carrying
//            its graph node id), buffers flushed once per round; the
//            records are counted and checked to carry node ids
//
// nvcc -O3 -std=c++17 -arch=sm_90 node_timing_probe.cu -I$CUPTI/include
//   -L$CUPTI/lib64 -lcupti -o node_timing_probe
#include <cuda_runtime.h>
#include <cupti.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

// The kernel record version of the CUPTI at hand (fields only appended
// from one version to the next; graphNodeId since version 5).
#ifndef KREC
#define KREC CUpti_ActivityKernel9
#endif

#define CK(x)                                                                      \
    do {                                                                           \
        cudaError_t ck_err_ = (x);                                                       \
        if (ck_err_ != cudaSuccess) {                                                  \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,              \
                    cudaGetErrorString(ck_err_));                                        \
            exit(1);                                                               \
        }                                                                          \
    } while (0)
#define CU(x)                                                                      \
    do {                                                                           \
        CUptiResult cu_res_ = (x);                                                       \
        if (cu_res_ != CUPTI_SUCCESS) {                                                  \
            const char* s;                                                         \
            cuptiGetResultString(cu_res_, &s);                                           \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s);          \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void scale_add(float* x) { x[0] = fmaf(0.999f, x[0], 0.001f); }

__global__ void scale_add_stamped(float* x, unsigned long long* stamps, int i) {
    unsigned long long t0 = globaltimer();
    x[0] = fmaf(0.999f, x[0], 0.001f);
    __threadfence();
    stamps[2 * i] = t0;
    stamps[2 * i + 1] = globaltimer();
}

__global__ void stamp(unsigned long long* stamps, int i) { stamps[i] = globaltimer(); }

enum Arm { PLAIN, EVENTS, STAMPK, STAMPN };
static const char* NAMES[] = {"plain", "events", "stampk", "stampn"};

static cudaGraphExec_t capture(Arm arm, int n, cudaStream_t s, float* x,
                               unsigned long long* stamps, std::vector<cudaEvent_t>& evs) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    if (arm == EVENTS) CK(cudaEventRecordWithFlags(evs[0], s, cudaEventRecordExternal));
    if (arm == STAMPN) stamp<<<1, 1, 0, s>>>(stamps, 0);
    for (int i = 0; i < n; i++) {
        if (arm == STAMPK)
            scale_add_stamped<<<1, 1, 0, s>>>(x, stamps, i);
        else
            scale_add<<<1, 1, 0, s>>>(x);
        if (arm == EVENTS) CK(cudaEventRecordWithFlags(evs[i + 1], s, cudaEventRecordExternal));
        if (arm == STAMPN) stamp<<<1, 1, 0, s>>>(stamps, i + 1);
    }
    CK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaGraphUpload(e, s));
    CK(cudaGraphDestroy(g));
    return e;
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Median µs per replay (each replay synchronised) over `reps`.
static double time_replays(cudaGraphExec_t e, cudaStream_t s, int reps) {
    std::vector<double> t(reps);
    for (int r = 0; r < reps; r++) {
        double a = now_us();
        CK(cudaGraphLaunch(e, s));
        CK(cudaStreamSynchronize(s));
        t[r] = now_us() - a;
    }
    std::sort(t.begin(), t.end());
    return t[reps / 2];
}

// ----- CUPTI activity buffers -----
static size_t g_records = 0, g_with_node = 0, g_dropped = 0;
static void CUPTIAPI buffer_requested(uint8_t** buf, size_t* size, size_t* max) {
    *size = 8 << 20;
    *buf = (uint8_t*)aligned_alloc(8, *size);
    *max = 0;
}
static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            g_records++;
            auto* k = (KREC*)rec;
            if (k->graphNodeId != 0) g_with_node++;
        }
    }
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
    g_dropped += dropped;
    free(buf);
}

int main(int argc, char** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 9;
    CK(cudaSetDevice(0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* x;
    unsigned long long* stamps;
    CK(cudaMalloc(&x, 4));
    CK(cudaMemset(x, 0, 4));
    CK(cudaMalloc(&stamps, 2 * 1024 * sizeof(unsigned long long)));
    const int ns[] = {1, 100, 1000};
    printf("n,arm,us_per_replay_median,ratio_to_plain_median,ratio_min,ratio_max\n");
    for (int n : ns) {
        std::vector<cudaEvent_t> evs(n + 1);
        for (auto& e : evs) CK(cudaEventCreate(&e));
        cudaGraphExec_t ex[4];
        for (int a = 0; a < 4; a++) ex[a] = capture((Arm)a, n, s, x, stamps, evs);
        int reps = n == 1 ? 2000 : n == 100 ? 400 : 60;
        for (int a = 0; a < 4; a++) time_replays(ex[a], s, reps / 4);  // warm-up
        std::vector<double> per[5], ratio[5];
        for (int r = 0; r < rounds; r++) {
            double base = 0;
            for (int a = 0; a < 4; a++) {
                double t = time_replays(ex[a], s, reps);
                if (a == PLAIN) base = t;
                per[a].push_back(t);
                ratio[a].push_back(t / base);
            }
        }
        // CUPTI: the plain graph with kernel activity records on, then off.
        CU(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
        CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        g_records = g_with_node = g_dropped = 0;
        time_replays(ex[PLAIN], s, reps / 4);
        for (int r = 0; r < rounds; r++) {
            double t = time_replays(ex[PLAIN], s, reps);
            per[4].push_back(t);
            ratio[4].push_back(t / per[PLAIN][r]);
            CU(cuptiActivityFlushAll(0));
        }
        CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        CU(cuptiActivityFlushAll(1));
        size_t expect = (size_t)n * (reps / 4 + (size_t)rounds * reps);
        double after = time_replays(ex[PLAIN], s, reps);
        auto med = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        auto lo = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
        auto hi = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
        for (int a = 0; a < 5; a++)
            printf("%d,%s,%.2f,%.3f,%.3f,%.3f\n", n, a < 4 ? NAMES[a] : "cupti", med(per[a]),
                   med(ratio[a]), lo(ratio[a]), hi(ratio[a]));
        printf("# n=%d cupti: %zu kernel records of %zu launched kernels, %zu with a graph node id, "
               "%zu dropped; plain after CUPTI was disabled: %.2f us\n",
               n, g_records, expect, g_with_node, g_dropped, after);
        for (int a = 0; a < 4; a++) CK(cudaGraphExecDestroy(ex[a]));
        for (auto& e : evs) CK(cudaEventDestroy(e));
    }
    // Stamps of the last stampk replay at n = 1000 are sane: ordered, positive spans.
    std::vector<unsigned long long> h(2 * 1000);
    cudaGraphExec_t e;
    std::vector<cudaEvent_t> none(1001);
    e = capture(STAMPK, 1000, s, x, stamps, none);
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost));
    int bad = 0;
    std::vector<unsigned long long> spans;
    for (int i = 0; i < 1000; i++) {
        if (h[2 * i + 1] < h[2 * i] || (i > 0 && h[2 * i] < h[2 * i - 1])) bad++;
        spans.push_back(h[2 * i + 1] - h[2 * i]);
    }
    std::sort(spans.begin(), spans.end());
    printf("# stampk n=1000: %d out-of-order stamps; span within a kernel: median %llu ns, "
           "max %llu ns; replay %llu ns first start to last end\n",
           bad, spans[500], spans.back(), h[1999] - h[0]);
    return 0;
}
