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
//   stampb   the stamp kernels of stampn as side branches: stamp i + 1
//            depends on kernel i, kernel i + 1 on kernel i alone (captured
//            with cuStreamUpdateCaptureDependencies setting the stream's
//            dependencies back to kernel i after each stamp), so no kernel
//            waits for a stamp
//   stampbp  stampb with the stamps launched at the device's highest
//            priority (cudaLaunchAttributePriority, the graph instantiated
//            with cudaGraphInstantiateFlagUseNodePriority)
//   stampj   stampb with each stamp joined one launch later: kernel i + 1
//            also depends on the stamp that ran beside kernel i, so no
//            more than two stamps are ever outstanding
//   cupti    the plain graph with CUPTI activity records of every kernel
//            (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, each record carrying
//            its graph node id), buffers flushed once per round; the
//            records are counted and checked to carry node ids
//
// A second part times stamps around kernels that write their start (block
// 0's): 100 wide ones (1056 blocks of 256 threads spinning about 3 us) and
// 1000 of one thread that spin nothing: how late a stamp runs after the
// next kernel started, in the last of 110 replays.
//
// nvcc -O3 -std=c++17 -arch=sm_90 node_timing_probe.cu -I$CUPTI/include
//   -L$CUPTI/lib64 -lcupti -ldl -o node_timing_probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
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

// A wide kernel: every thread spins `ns` of %globaltimer; block 0 writes
// its start into starts[i].
__global__ void wide(float* x, unsigned long long* starts, int i, unsigned ns) {
    unsigned long long t0 = globaltimer();
    if (blockIdx.x == 0 && threadIdx.x == 0) starts[i] = t0;
    while (globaltimer() - t0 < ns) {
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) x[0] += 1.0f;
}

enum Arm { PLAIN, EVENTS, STAMPK, STAMPN, STAMPB, STAMPBP, STAMPJ, ARMS };
static const char* NAMES[] = {"plain", "events", "stampk", "stampn", "stampb", "stampbp", "stampj"};

#define CD(x)                                                                      \
    do {                                                                           \
        CUresult cd_res_ = (x);                                                    \
        if (cd_res_ != CUDA_SUCCESS) {                                             \
            fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, #x,     \
                    (int)cd_res_);                                                 \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

// Launch stamp `i` as a side branch of the capture on `s`: it depends on
// what the stream's next work would, and the stream's dependencies are set
// back to those afterwards, so the next work does not depend on it.
// The driver's entry points by their versioned names, looked up in
// libcuda (as seam's CUDA backend does), whatever the header declares.
typedef CUresult (*GetInfo)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                            const CUgraphNode**, const void**, size_t*);
typedef CUresult (*UpdateDeps)(CUstream, CUgraphNode*, const void*, size_t, unsigned);
static void* driver_symbol(const char* name) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    void* f = lib ? dlsym(lib, name) : nullptr;
    if (!f) {
        fprintf(stderr, "no %s in libcuda.so.1\n", name);
        exit(1);
    }
    return f;
}

// `join` (stampj): the work captured next also depends on the stamp
// before this one (`*join`, which ran beside the launch just captured), so
// a stamp is waited for one launch later; `*join` becomes this stamp.
static void side_stamp(cudaStream_t s, unsigned long long* stamps, int i, bool high,
                       CUgraphNode* join = nullptr) {
    static GetInfo get_info = (GetInfo)driver_symbol("cuStreamGetCaptureInfo_v3");
    static UpdateDeps update_deps = (UpdateDeps)driver_symbol("cuStreamUpdateCaptureDependencies_v2");
    CUstreamCaptureStatus st;
    const CUgraphNode* deps = nullptr;
    size_t n = 0;
    CD(get_info((CUstream)s, &st, nullptr, nullptr, &deps, nullptr, &n));
    std::vector<CUgraphNode> saved(deps, deps + n);
    if (high) {
        int lo, hi;
        CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributePriority;
        at[0].val.priority = hi;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(1);
        cfg.blockDim = dim3(1);
        cfg.stream = s;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        CK(cudaLaunchKernelEx(&cfg, stamp, stamps, i));
    } else {
        stamp<<<1, 1, 0, s>>>(stamps, i);
    }
    if (join) {
        CD(get_info((CUstream)s, &st, nullptr, nullptr, &deps, nullptr, &n));
        CUgraphNode mine = deps[0];
        if (*join) saved.push_back(*join);
        *join = mine;
    }
    CD(update_deps((CUstream)s, saved.data(), nullptr, saved.size(),
                   CU_STREAM_SET_CAPTURE_DEPENDENCIES));
}

static cudaGraphExec_t instantiate(cudaGraph_t g, cudaStream_t s, bool priority) {
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, priority ? cudaGraphInstantiateFlagUseNodePriority : 0));
    CK(cudaGraphUpload(e, s));
    CK(cudaGraphDestroy(g));
    return e;
}

static cudaGraphExec_t capture(Arm arm, int n, cudaStream_t s, float* x,
                               unsigned long long* stamps, std::vector<cudaEvent_t>& evs) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    if (arm == EVENTS) CK(cudaEventRecordWithFlags(evs[0], s, cudaEventRecordExternal));
    if (arm == STAMPN) stamp<<<1, 1, 0, s>>>(stamps, 0);
    CUgraphNode join = nullptr;
    CUgraphNode* j = arm == STAMPJ ? &join : nullptr;
    if (arm == STAMPB || arm == STAMPBP || arm == STAMPJ) side_stamp(s, stamps, 0, arm == STAMPBP, j);
    for (int i = 0; i < n; i++) {
        if (arm == STAMPK)
            scale_add_stamped<<<1, 1, 0, s>>>(x, stamps, i);
        else
            scale_add<<<1, 1, 0, s>>>(x);
        if (arm == EVENTS) CK(cudaEventRecordWithFlags(evs[i + 1], s, cudaEventRecordExternal));
        if (arm == STAMPN) stamp<<<1, 1, 0, s>>>(stamps, i + 1);
        if (arm == STAMPB || arm == STAMPBP || arm == STAMPJ)
            side_stamp(s, stamps, i + 1, arm == STAMPBP, j);
    }
    CK(cudaStreamEndCapture(s, &g));
    return instantiate(g, s, arm == STAMPBP);
}

// The wide chain of n kernels with stamps as `arm` (STAMPN, STAMPB or
// STAMPBP) places them.
static cudaGraphExec_t capture_wide(Arm arm, int n, cudaStream_t s, float* x,
                                    unsigned long long* stamps, unsigned long long* starts,
                                    unsigned blocks, unsigned threads, unsigned ns) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CUgraphNode join = nullptr;
    for (int i = 0; i <= n; i++) {
        if (arm == STAMPN)
            stamp<<<1, 1, 0, s>>>(stamps, i);
        else if (arm != PLAIN)
            side_stamp(s, stamps, i, arm == STAMPBP, arm == STAMPJ ? &join : nullptr);
        if (i < n) wide<<<blocks, threads, 0, s>>>(x, starts, i, ns);
    }
    CK(cudaStreamEndCapture(s, &g));
    return instantiate(g, s, arm == STAMPBP);
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
        cudaGraphExec_t ex[ARMS];
        for (int a = 0; a < ARMS; a++) ex[a] = capture((Arm)a, n, s, x, stamps, evs);
        int reps = n == 1 ? 2000 : n == 100 ? 400 : 60;
        for (int a = 0; a < ARMS; a++) time_replays(ex[a], s, reps / 4);  // warm-up
        std::vector<double> per[ARMS + 1], ratio[ARMS + 1];
        for (int r = 0; r < rounds; r++) {
            double base = 0;
            for (int a = 0; a < ARMS; a++) {
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
            per[ARMS].push_back(t);
            ratio[ARMS].push_back(t / per[PLAIN][r]);
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
        for (int a = 0; a <= ARMS; a++)
            printf("%d,%s,%.2f,%.3f,%.3f,%.3f\n", n, a < ARMS ? NAMES[a] : "cupti", med(per[a]),
                   med(ratio[a]), lo(ratio[a]), hi(ratio[a]));
        printf("# n=%d cupti: %zu kernel records of %zu launched kernels, %zu with a graph node id, "
               "%zu dropped; plain after CUPTI was disabled: %.2f us\n",
               n, g_records, expect, g_with_node, g_dropped, after);
        for (int a = 0; a < ARMS; a++) CK(cudaGraphExecDestroy(ex[a]));
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
    // Side-branch stamps at N = 1000: in order, in the second replay of a
    // fresh exec (the first may load what it uses).
    for (Arm arm : {STAMPB, STAMPBP, STAMPJ}) {
        std::vector<unsigned long long> st(1001);
        e = capture(arm, 1000, s, x, stamps, none);
        for (int r = 0; r < 2; r++) CK(cudaGraphLaunch(e, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(st.data(), stamps, st.size() * 8, cudaMemcpyDeviceToHost));
        int back = 0;
        std::vector<long long> sp;
        for (int i = 0; i < 1000; i++) {
            if (st[i + 1] < st[i]) back++;
            sp.push_back((long long)(st[i + 1] - st[i]));
        }
        std::sort(sp.begin(), sp.end());
        printf("# %s n=1000: %d stamps before the one before them; span median %lld ns, min %lld, "
               "max %lld; first to last %llu ns\n",
               NAMES[arm], back, sp[500], sp.front(), sp.back(), st[1000] - st[0]);
        CK(cudaGraphExecDestroy(e));
    }
    unsigned long long* starts;
    CK(cudaMalloc(&starts, 1024 * 8));
    printf("kernels,blocks,arm,us_per_replay_median,stamp_lag_after_next_start_ns_median,min,max,"
           "span_median_ns,span_max_ns,longest_span_at\n");
    struct Shape {
        int n;
        unsigned blocks, threads, ns;
    };
    for (Shape sh : {Shape{100, 1056, 256, 3000}, Shape{1000, 1, 1, 0}}) {
        for (Arm arm : {PLAIN, STAMPN, STAMPB, STAMPBP, STAMPJ}) {
            e = capture_wide(arm, sh.n, s, x, stamps, starts, sh.blocks, sh.threads, sh.ns);
            time_replays(e, s, 10);
            double us = time_replays(e, s, 100);
            if (arm == PLAIN) {
                printf("%d,%u,%s,%.2f,,,,,,\n", sh.n, sh.blocks, NAMES[arm], us);
                CK(cudaGraphExecDestroy(e));
                continue;
            }
            std::vector<unsigned long long> st(sh.n + 1), go(sh.n);
            CK(cudaMemcpy(st.data(), stamps, st.size() * 8, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(go.data(), starts, go.size() * 8, cudaMemcpyDeviceToHost));
            // stamp i (i >= 1) follows kernel i - 1; kernel i (i < n) starts then
            std::vector<long long> lag, sp;
            int at = 0;
            for (int i = 1; i < sh.n; i++) lag.push_back((long long)st[i] - (long long)go[i]);
            for (int i = 0; i < sh.n; i++) {
                sp.push_back((long long)st[i + 1] - (long long)st[i]);
                if (sp.back() > sp[at]) at = i;
            }
            std::sort(lag.begin(), lag.end());
            std::sort(sp.begin(), sp.end());
            printf("%d,%u,%s,%.2f,%lld,%lld,%lld,%lld,%lld,%d\n", sh.n, sh.blocks, NAMES[arm], us,
                   lag[lag.size() / 2], lag.front(), lag.back(), sp[sp.size() / 2], sp.back(), at);
            CK(cudaGraphExecDestroy(e));
        }
    }
    return 0;
}
