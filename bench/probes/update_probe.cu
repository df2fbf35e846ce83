// update_probe: what a rebind of every node of a CUDA graph costs, by
// design, on a chain of N dependent one-thread kernels that each add 1 to
// one float in place (the launch-bound worst case: a rebind of that float's
// buffer moves every node). Each iteration switches the chain to the other
// of two buffers (a, b, a, …), replays it and synchronises; µs per
// iteration, median over rounds of interleaved arms, each round's ratio to
// the plain replay of the same round.
//
//   plain       replay only, pointers in the kernel parameters (today)
//   setparams   cudaGraphExecKernelNodeSetParams on every node, then the
//               replay (how the CUDA backend rebinds today)
//   execupdate  cudaGraphExecUpdate from a graph of the other buffer built
//               beforehand (the whole-graph update's floor: no capture)
//   recapture   capture, instantiate, upload, replay
//   cache       two executables kept, one per buffer: the switch is a choice
//               of executable (a rebind back to a binding set seen before)
//   tplain      replay only, kernels that read their pointer from a device
//               table (one 8-byte load before the work): the indirection's
//               cost to every replay
//   table       the table's slot rewritten by one stream-ordered 8-byte
//               copy from pinned memory, then the replay
//   cplain      replay only, kernels that read their pointer from a
//               __constant__ table at a slot passed as a parameter
//   const       that slot rewritten by cudaMemcpyToSymbolAsync, then the
//               replay
//
// Every iteration's result is checked: each buffer ends holding the number
// of chain runs that reached it (the rebinds must have taken effect).
//
// nvcc -O3 -std=c++17 -arch=sm_90 update_probe.cu -o update_probe
// ./update_probe [rounds]
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

__constant__ float* CTAB[16];

__global__ void add_direct(float* x) { x[0] += 1.0f; }
__global__ void add_table(float* const* table) {
    float* x = table[0];
    x[0] += 1.0f;
}
__global__ void add_const(int slot) {
    float* x = CTAB[slot];
    x[0] += 1.0f;
}

enum Arm { PLAIN, SETPARAMS, EXECUPDATE, RECAPTURE, CACHE, TPLAIN, TABLE, CPLAIN, CONST, ARMS };
static const char* NAMES[] = {"plain", "setparams", "execupdate", "recapture", "cache",
                              "tplain", "table", "cplain", "const"};

enum Kind { DIRECT, VIA_TABLE, VIA_CONST };

static cudaGraph_t capture(Kind k, int n, cudaStream_t s, float* x, float** table) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++) {
        if (k == DIRECT) add_direct<<<1, 1, 0, s>>>(x);
        if (k == VIA_TABLE) add_table<<<1, 1, 0, s>>>(table);
        if (k == VIA_CONST) add_const<<<1, 1, 0, s>>>(0);
    }
    CK(cudaStreamEndCapture(s, &g));
    return g;
}

static cudaGraphExec_t instantiate(cudaGraph_t g, cudaStream_t s) {
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaGraphUpload(e, s));
    return e;
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// One N's graphs and where each design's executable now writes.
struct Probe {
    int n;
    cudaStream_t s;
    float* buf[2];
    float** table;     // device: one slot
    float** pinned;    // host, pinned: the next value of each slot (table, constant)
    cudaGraph_t g[2];  // direct graphs over a and b
    cudaGraphExec_t e;         // from g[0]: plain replays and setparams
    cudaGraphExec_t eu;        // from g[0]: execupdate
    cudaGraphExec_t cache[2];  // from g[0] and g[1], never changed
    cudaGraphExec_t et, ec;    // table and constant-table executables
    std::vector<cudaGraphNode_t> nodes;
    // The buffer each design's replay reaches now: e (moved by setparams),
    // eu (moved by execupdate), the device table, the constant slot, and the
    // last buffer of the cache and recapture arms.
    int direct = 0, updated = 0, tab = 0, con = 0, cached = 0, captured = 0;
};

// One iteration of `arm`: switch (where the arm does), replay, synchronise.
// Returns the buffer the replay added to.
static int iterate(Probe& p, Arm arm) {
    int to = -1;
    switch (arm) {
        case PLAIN:
            CK(cudaGraphLaunch(p.e, p.s));
            to = p.direct;
            break;
        case SETPARAMS: {
            to = 1 - p.direct;
            void* args[] = {&p.buf[to]};
            cudaKernelNodeParams kp = {};
            kp.func = (void*)add_direct;
            kp.gridDim = dim3(1);
            kp.blockDim = dim3(1);
            kp.kernelParams = args;
            for (auto node : p.nodes) CK(cudaGraphExecKernelNodeSetParams(p.e, node, &kp));
            CK(cudaGraphLaunch(p.e, p.s));
            p.direct = to;
            break;
        }
        case EXECUPDATE: {
            to = 1 - p.updated;
            cudaGraphExecUpdateResultInfo info;
            CK(cudaGraphExecUpdate(p.eu, p.g[to], &info));
            CK(cudaGraphLaunch(p.eu, p.s));
            p.updated = to;
            break;
        }
        case RECAPTURE: {
            to = 1 - p.captured;
            cudaGraph_t g = capture(DIRECT, p.n, p.s, p.buf[to], nullptr);
            cudaGraphExec_t e = instantiate(g, p.s);
            CK(cudaGraphLaunch(e, p.s));
            CK(cudaStreamSynchronize(p.s));
            CK(cudaGraphExecDestroy(e));
            CK(cudaGraphDestroy(g));
            p.captured = to;
            break;
        }
        case CACHE:
            to = 1 - p.cached;
            CK(cudaGraphLaunch(p.cache[to], p.s));
            p.cached = to;
            break;
        case TPLAIN:
            CK(cudaGraphLaunch(p.et, p.s));
            to = p.tab;
            break;
        case TABLE:
            to = 1 - p.tab;
            p.pinned[0] = p.buf[to];
            CK(cudaMemcpyAsync(p.table, &p.pinned[0], sizeof(float*), cudaMemcpyHostToDevice,
                               p.s));
            CK(cudaGraphLaunch(p.et, p.s));
            p.tab = to;
            break;
        case CPLAIN:
            CK(cudaGraphLaunch(p.ec, p.s));
            to = p.con;
            break;
        case CONST:
            to = 1 - p.con;
            p.pinned[1] = p.buf[to];
            CK(cudaMemcpyToSymbolAsync(CTAB, &p.pinned[1], sizeof(float*), 0,
                                       cudaMemcpyHostToDevice, p.s));
            CK(cudaGraphLaunch(p.ec, p.s));
            p.con = to;
            break;
        default:
            abort();
    }
    CK(cudaStreamSynchronize(p.s));
    return to;
}

int main(int argc, char** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 9;
    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    printf("# %s, driver API %d, runtime %d\n", prop.name, drv, rt);
    printf("n,arm,us_per_iteration_median,ratio_to_plain_median,ratio_min,ratio_max\n");
    const int ns[] = {1, 100, 1000};
    for (int n : ns) {
        Probe p;
        p.n = n;
        CK(cudaStreamCreateWithFlags(&p.s, cudaStreamNonBlocking));
        for (auto& b : p.buf) {
            CK(cudaMalloc(&b, sizeof(float)));
            CK(cudaMemset(b, 0, sizeof(float)));
        }
        CK(cudaMalloc(&p.table, sizeof(float*)));
        CK(cudaMallocHost(&p.pinned, 2 * sizeof(float*)));
        p.pinned[0] = p.pinned[1] = p.buf[0];
        CK(cudaMemcpyAsync(p.table, &p.pinned[0], sizeof(float*), cudaMemcpyHostToDevice, p.s));
        CK(cudaMemcpyToSymbolAsync(CTAB, &p.pinned[1], sizeof(float*), 0, cudaMemcpyHostToDevice,
                                   p.s));
        CK(cudaStreamSynchronize(p.s));
        for (int i = 0; i < 2; i++) p.g[i] = capture(DIRECT, n, p.s, p.buf[i], nullptr);
        p.e = instantiate(p.g[0], p.s);
        p.eu = instantiate(p.g[0], p.s);
        for (int i = 0; i < 2; i++) p.cache[i] = instantiate(p.g[i], p.s);
        cudaGraph_t gt = capture(VIA_TABLE, n, p.s, nullptr, p.table);
        cudaGraph_t gc = capture(VIA_CONST, n, p.s, nullptr, nullptr);
        p.et = instantiate(gt, p.s);
        p.ec = instantiate(gc, p.s);
        size_t count = 0;
        CK(cudaGraphGetNodes(p.g[0], nullptr, &count));
        p.nodes.resize(count);
        CK(cudaGraphGetNodes(p.g[0], p.nodes.data(), &count));
        CK(cudaStreamSynchronize(p.s));

        long expect[2] = {0, 0};
        int reps = n == 1 ? 2000 : n == 100 ? 400 : 60;
        std::vector<double> per[ARMS], ratio[ARMS];
        for (int r = -1; r < rounds; r++) {  // round -1: warm-up, not kept
            double base = 0;
            for (int a = 0; a < ARMS; a++) {
                int k = (a == RECAPTURE && n == 1000) ? reps / 4 : reps;
                std::vector<double> t(k);
                for (int i = 0; i < k; i++) {
                    double t0 = now_us();
                    int to = iterate(p, (Arm)a);
                    t[i] = now_us() - t0;
                    expect[to] += n;
                }
                std::sort(t.begin(), t.end());
                double m = t[k / 2];
                if (a == PLAIN) base = m;
                if (r >= 0) {
                    per[a].push_back(m);
                    ratio[a].push_back(m / base);
                }
            }
        }
        float got[2];
        for (int i = 0; i < 2; i++)
            CK(cudaMemcpy(&got[i], p.buf[i], sizeof(float), cudaMemcpyDeviceToHost));
        auto med = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        auto lo = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
        auto hi = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
        for (int a = 0; a < ARMS; a++)
            printf("%d,%s,%.2f,%.3f,%.3f,%.3f\n", n, NAMES[a], med(per[a]), med(ratio[a]),
                   lo(ratio[a]), hi(ratio[a]));
        // Floats hold integers exactly up to 2^24; past that the check says so.
        bool exact = expect[0] < (1 << 24) && expect[1] < (1 << 24);
        printf("# n=%d check: a holds %.0f (expected %ld), b holds %.0f (expected %ld)%s\n", n,
               got[0], expect[0], got[1], expect[1],
               !exact ? " (past 2^24: not exact)"
               : (got[0] == (float)expect[0] && got[1] == (float)expect[1]) ? ": ok" : ": WRONG");
        for (auto e : {p.e, p.eu, p.cache[0], p.cache[1], p.et, p.ec}) CK(cudaGraphExecDestroy(e));
        for (auto g : p.g) CK(cudaGraphDestroy(g));
        CK(cudaGraphDestroy(gt));
        CK(cudaGraphDestroy(gc));
        for (auto b : p.buf) CK(cudaFree(b));
        CK(cudaFree(p.table));
        CK(cudaFreeHost(p.pinned));
        CK(cudaStreamDestroy(p.s));
    }
    return 0;
}
