// norm_gemv_silu_add: one layer of the decode stack in one launch
// (d0 = h, d1 = quads Q (2 or 4), s0 = eps):
//   y = x + silu((x / sqrt(mean(x²) + eps) · wn) · W),  W h × h row-major.
// The norm's scale is one number, so it is applied after the dot products:
// z[c] = inv · Σ_k (x[k] · wn[k]) · W[k][c]. The grid is ⌈h / 128⌉ · 32 / Q
// blocks of 256 threads at every h; how they share the work depends on h.
//
// h ≥ 2048: split-K, finished by the block that arrives last. The columns
// are cut into T = ⌈h / 128⌉ tiles of 128 and the rows into KS = 32 / Q
// ranges of ⌈h / KS⌉; block b takes tile b / KS and range b % KS. Lane l
// of warp w sums columns 128·tile + 4l … + 3 over rows k0 + w, k0 + w + 8,
// … of its range (one fma per product, in row order, four rows' 16-byte
// loads of W in flight: each warp reads 512 contiguous bytes of a row),
// and Σx² over the same rows alongside. The 8 warps' sums are added in
// warp order and stored in the workspace with the range's Σx²; then the
// block counts itself done on its tile's counter. The block that counts
// KS adds the KS partial sums of each column in range order (and the KS
// Σx²), applies the norm, silu and the residual, and returns the tile's
// workspace to zeros, counter included. So the workspace (f32 words:
// T · KS · 128 partial sums, T · KS Σx², T counters) must be zero before a
// launch and is zero after it (`Binding::workspace`).
//
// h < 2048: column slices, no workspace. Block b owns the 4·Q columns from
// 4·Q·b (blocks past column h do nothing); thread t takes the quad t % Q
// and the k-slice s = t / Q of S = 256 / Q, summing k = s, s + S, … in
// order with one fma per product (four rows' loads in flight where the
// quads are 16-byte aligned), the quad-0 threads Σx² alongside; a
// shared-memory tree halves the S partial sums. At these widths the split's
// arrival count and second pass cost more than the few rows each block
// reads (one H100: 3.5 against 4.6 µs at h = 256, 5.6 against 6.3 at
// 1024, even at 2048; `bench/probes/fused_probe.cu`).
//
// Both layouts may start before the launch before them has ended
// (`CudaSource::starts_early`): every block lets the launch after it start
// (`seam_dependents_may_start`), and waits for the launch before it
// (`seam_prior_wait`) before it loads or stores anything; the split layout
// first prefetches its warps' first SEAM_LAYER_PREFETCH rows of W into L2.
// Only L2 is touched before the wait, so a W an earlier launch writes is
// still read as written. On one H100, 32 layers at h = 4096 in one graph:
// 834.5 µs a replay launched plainly, 808.1 launched so (prefetching 4
// rows; none: 823.8, 16: 826.5); no change at 8192
// (`bench/probes/pdl_probe.cu`). Each warp then keeps SEAM_LAYER_ROWS
// rows' loads in flight. The two are chosen on the H200: prefetching 2
// rows with 4 in flight, 602.4 µs at h = 4096 and 2005.6 at 8192 (1.097×
// and 1.012× the read of the same weights), against 609.0 and 2024.0 with
// 4 and 8, 606.6 and 2013.3 with 2 and 8, 613.8 and 2022.1 with 4 and 4
// (the same probe, each build alternated; the H100 chose 4 and 8 there:
// 789.1 µs at 4096, against 808.1 with 4 and 4).
//
// The CPU implementation reproduces both orders and the fmas; only expf
// (2 ulp) differs.

#define SEAM_LAYER_TILE 128u
#define SEAM_LAYER_SPLIT_FROM 2048u
#ifndef SEAM_LAYER_PREFETCH
#define SEAM_LAYER_PREFETCH 2u
#endif
// Rows of W whose loads each warp of the split layout has in flight
// before their products (the order of the products does not depend on it).
#ifndef SEAM_LAYER_ROWS
#define SEAM_LAYER_ROWS 4u
#endif

template <bool VEC>
__device__ void norm_gemv_silu_add(const float* x, const float* wn, const float* w, float* y, float* ws,
                                   unsigned h, unsigned ks_n, float eps) {
    __shared__ float4 red[8][32];
    __shared__ float rss[8];
    __shared__ bool last;
    unsigned lane = threadIdx.x % 32u, wp = threadIdx.x / 32u;
    unsigned tile = blockIdx.x / ks_n, ks = blockIdx.x % ks_n;
    unsigned tiles = (h + SEAM_LAYER_TILE - 1u) / SEAM_LAYER_TILE;
    unsigned long long col = (unsigned long long)tile * SEAM_LAYER_TILE + lane * 4u;
    unsigned r = (h + ks_n - 1u) / ks_n;
    unsigned k0 = ks * r < h ? ks * r : h;
    unsigned k1 = k0 + r < h ? k0 + r : h;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ss = 0.0f;
    unsigned k = k0 + wp;
    // This warp's first rows of W into L2 before waiting for the launch
    // before (where this one may start early): W is no earlier launch's
    // output here, and L2 is where any such write would land anyway.
    if (col < h) {
        for (unsigned j = 0, kk = k; j < SEAM_LAYER_PREFETCH && kk < k1; ++j, kk += 8u)
            seam_prefetch_l2(w + (unsigned long long)kk * h + col);
    }
    seam_prior_wait();
    if (VEC && col < h) {
        // SEAM_LAYER_ROWS rows' loads in flight before their products: the
        // same products in the same order as the loop below.
        for (; k + 8u * (SEAM_LAYER_ROWS - 1u) < k1; k += 8u * SEAM_LAYER_ROWS) {
            float4 b[SEAM_LAYER_ROWS];
            float xs[SEAM_LAYER_ROWS], ns[SEAM_LAYER_ROWS];
#pragma unroll
            for (unsigned u = 0; u < SEAM_LAYER_ROWS; ++u) {
                b[u] = *reinterpret_cast<const float4*>(w + (unsigned long long)(k + 8u * u) * h + col);
                xs[u] = x[k + 8u * u];
                ns[u] = wn[k + 8u * u];
            }
#pragma unroll
            for (unsigned u = 0; u < SEAM_LAYER_ROWS; ++u) {
                float a = __fmul_rn(xs[u], ns[u]);
                acc.x = __fmaf_rn(a, b[u].x, acc.x);
                acc.y = __fmaf_rn(a, b[u].y, acc.y);
                acc.z = __fmaf_rn(a, b[u].z, acc.z);
                acc.w = __fmaf_rn(a, b[u].w, acc.w);
                ss = __fmaf_rn(xs[u], xs[u], ss);
            }
        }
    }
    for (; k < k1; k += 8u) {
        float xk = x[k];
        float a = __fmul_rn(xk, wn[k]);
        const float* row = w + (unsigned long long)k * h + col;
        float4 b = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (VEC) {
            if (col < h) b = *reinterpret_cast<const float4*>(row);
        } else {
            if (col < h) b.x = row[0];
            if (col + 1 < h) b.y = row[1];
            if (col + 2 < h) b.z = row[2];
            if (col + 3 < h) b.w = row[3];
        }
        acc.x = __fmaf_rn(a, b.x, acc.x);
        acc.y = __fmaf_rn(a, b.y, acc.y);
        acc.z = __fmaf_rn(a, b.z, acc.z);
        acc.w = __fmaf_rn(a, b.w, acc.w);
        ss = __fmaf_rn(xk, xk, ss);
    }
    red[wp][lane] = acc;
    if (lane == 0u) rss[wp] = ss;
    __syncthreads();
    float* part = ws + ((unsigned long long)tile * ks_n + ks) * SEAM_LAYER_TILE;
    float* ssp = ws + (unsigned long long)tiles * ks_n * SEAM_LAYER_TILE;
    unsigned* count = reinterpret_cast<unsigned*>(ssp + (unsigned long long)tiles * ks_n);
    if (wp == 0u) {
        float4 z = red[0][lane];
        for (unsigned i = 1; i < 8u; ++i) {
            z.x = __fadd_rn(z.x, red[i][lane].x);
            z.y = __fadd_rn(z.y, red[i][lane].y);
            z.z = __fadd_rn(z.z, red[i][lane].z);
            z.w = __fadd_rn(z.w, red[i][lane].w);
        }
        part[lane * 4u + 0u] = z.x;
        part[lane * 4u + 1u] = z.y;
        part[lane * 4u + 2u] = z.z;
        part[lane * 4u + 3u] = z.w;
        if (lane == 0u) {
            float t = rss[0];
            for (unsigned i = 1; i < 8u; ++i) t = __fadd_rn(t, rss[i]);
            ssp[tile * ks_n + ks] = t;
        }
    }
    // Publish the partial sums, then count this block done.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0u) last = atomicAdd(count + tile, 1u) == ks_n - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    volatile const float* parts = ws + (unsigned long long)tile * ks_n * SEAM_LAYER_TILE;
    volatile const float* sqs = ssp + (unsigned long long)tile * ks_n;
    unsigned long long c = (unsigned long long)tile * SEAM_LAYER_TILE + threadIdx.x;
    float z = 0.0f, sq = 0.0f;
    if (threadIdx.x < SEAM_LAYER_TILE) {
        for (unsigned i = 0; i < ks_n; ++i) {
            z = __fadd_rn(z, parts[i * SEAM_LAYER_TILE + threadIdx.x]);
            sq = __fadd_rn(sq, sqs[i]);
        }
    }
    __syncthreads();  // every read of the tile's workspace before it is zeroed
    if (threadIdx.x < SEAM_LAYER_TILE && c < h) {
        float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sq, (float)h), eps)));
        float zn = __fmul_rn(z, inv);
        y[c] = __fadd_rn(x[c], zn / __fadd_rn(1.0f, expf(-zn)));
    }
    float* mine = ws + (unsigned long long)tile * ks_n * SEAM_LAYER_TILE;
    for (unsigned i = threadIdx.x; i < ks_n * SEAM_LAYER_TILE; i += blockDim.x) mine[i] = 0.0f;
    if (threadIdx.x < ks_n) ssp[tile * ks_n + threadIdx.x] = 0.0f;
    if (threadIdx.x == 0u) count[tile] = 0u;
}

template <unsigned Q, bool VEC>
__device__ void norm_gemv_silu_add_sliced(const float* x, const float* wn, const float* w, float* y,
                                          unsigned h, float eps) {
    constexpr unsigned S = 256u / Q;
    __shared__ float4 part[256];
    __shared__ float sq[S];
    unsigned t = threadIdx.x, q = t % Q, s = t / Q;
    unsigned long long col = ((unsigned long long)blockIdx.x * Q + q) * 4ull;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ss = 0.0f;
    seam_prior_wait();
    if (col < h) {
        unsigned k = s;
        if (VEC) {
            // Four rows' loads in flight before their products: the same
            // products in the same order as the loop below.
            for (; k + 3u * S < h; k += 4u * S) {
                float4 b[4];
                float xs[4], ns[4];
#pragma unroll
                for (unsigned u = 0; u < 4u; ++u) {
                    b[u] = *reinterpret_cast<const float4*>(w + (unsigned long long)(k + u * S) * h + col);
                    xs[u] = x[k + u * S];
                    ns[u] = wn[k + u * S];
                }
#pragma unroll
                for (unsigned u = 0; u < 4u; ++u) {
                    float a = __fmul_rn(xs[u], ns[u]);
                    acc.x = __fmaf_rn(a, b[u].x, acc.x);
                    acc.y = __fmaf_rn(a, b[u].y, acc.y);
                    acc.z = __fmaf_rn(a, b[u].z, acc.z);
                    acc.w = __fmaf_rn(a, b[u].w, acc.w);
                    ss = __fmaf_rn(xs[u], xs[u], ss);
                }
            }
        }
        for (; k < h; k += S) {
            float xk = x[k];
            float a = __fmul_rn(xk, wn[k]);
            const float* row = w + (unsigned long long)k * h + col;
            float4 b;
            if (VEC) {
                b = *reinterpret_cast<const float4*>(row);
            } else {
                b.x = row[0];
                b.y = col + 1 < h ? row[1] : 0.0f;
                b.z = col + 2 < h ? row[2] : 0.0f;
                b.w = col + 3 < h ? row[3] : 0.0f;
            }
            acc.x = __fmaf_rn(a, b.x, acc.x);
            acc.y = __fmaf_rn(a, b.y, acc.y);
            acc.z = __fmaf_rn(a, b.z, acc.z);
            acc.w = __fmaf_rn(a, b.w, acc.w);
            ss = __fmaf_rn(xk, xk, ss);
        }
    }
    part[t] = acc;
    if (q == 0u) sq[s] = ss;
    __syncthreads();
    for (unsigned half = S / 2u; half > 0u; half >>= 1) {
        if (s < half) {
            float4 o = part[t + half * Q];
            part[t].x = __fadd_rn(part[t].x, o.x);
            part[t].y = __fadd_rn(part[t].y, o.y);
            part[t].z = __fadd_rn(part[t].z, o.z);
            part[t].w = __fadd_rn(part[t].w, o.w);
            if (q == 0u) sq[s] = __fadd_rn(sq[s], sq[s + half]);
        }
        __syncthreads();
    }
    if (s != 0u || col >= h) return;
    float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sq[0], (float)h), eps)));
    float z4[4] = {part[q].x, part[q].y, part[q].z, part[q].w};
    for (unsigned j = 0; j < 4u && col + j < h; ++j) {
        float z = __fmul_rn(z4[j], inv);
        y[col + j] = __fadd_rn(x[col + j], z / __fadd_rn(1.0f, expf(-z)));
    }
}

extern "C" __global__ void norm_gemv_silu_add_f32(const float* x, const float* wn, const float* w, float* y,
                                                  float* ws, Params p) {
    seam_dependents_may_start();
    bool vec = (p.d0 & 3u) == 0u && ((unsigned long long)w & 15ull) == 0ull;
    if (p.d0 < SEAM_LAYER_SPLIT_FROM) {
        if (p.d1 == 4u) {
            if (vec) norm_gemv_silu_add_sliced<4u, true>(x, wn, w, y, p.d0, p.s0);
            else norm_gemv_silu_add_sliced<4u, false>(x, wn, w, y, p.d0, p.s0);
        } else {
            if (vec) norm_gemv_silu_add_sliced<2u, true>(x, wn, w, y, p.d0, p.s0);
            else norm_gemv_silu_add_sliced<2u, false>(x, wn, w, y, p.d0, p.s0);
        }
        return;
    }
    unsigned ks_n = 32u / p.d1;
    if (vec) norm_gemv_silu_add<true>(x, wn, w, y, ws, p.d0, ks_n, p.s0);
    else norm_gemv_silu_add<false>(x, wn, w, y, ws, p.d0, ks_n, p.s0);
}
