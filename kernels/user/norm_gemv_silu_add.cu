// norm_gemv_silu_add: one layer of the decode stack in one launch
// (d0 = h, d1 = quads Q per block (2 or 4), s0 = eps):
//   y = x + silu((x / sqrt(mean(x²) + eps) · wn) · W),  W h × h row-major.
// The norm's scale is one number, so it is applied after the dot products:
// z[c] = inv · Σ_k (x[k] · wn[k]) · W[k][c]. Block b of 256 threads owns the
// 4·Q columns from 4·Q·b; thread t takes the quad t % Q and the k-slice
// s = t / Q of S = 256 / Q, summing k = s, s + S, … in order with one fma
// per product (one float4 load of W per k where W and h are 16-byte
// aligned, issued four rows at a time before any is used), and the quad-0
// threads sum x² over their slice alongside. A shared-memory tree then
// halves the S partial sums. The CPU implementation reproduces the order
// and the fmas; only expf (2 ulp) differs.

template <unsigned Q, bool VEC>
__device__ void norm_gemv_silu_add(const float* x, const float* wn, const float* w, float* y,
                                   unsigned h, float eps) {
    constexpr unsigned S = 256u / Q;
    __shared__ float4 part[256];
    __shared__ float sq[S];
    unsigned t = threadIdx.x, q = t % Q, s = t / Q;
    unsigned long long col = ((unsigned long long)blockIdx.x * Q + q) * 4ull;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ss = 0.0f;
    if (col < h) {
        unsigned k = s;
        if (VEC) {
            // Four rows' loads in flight before their products: the same
            // products in the same order as the loop below.
            for (; k + 3u * S < h; k += 4u * S) {
                float4 b[4];
                float xs[4], ws[4];
#pragma unroll
                for (unsigned u = 0; u < 4u; ++u) {
                    b[u] = *reinterpret_cast<const float4*>(w + (unsigned long long)(k + u * S) * h + col);
                    xs[u] = x[k + u * S];
                    ws[u] = wn[k + u * S];
                }
#pragma unroll
                for (unsigned u = 0; u < 4u; ++u) {
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

extern "C" __global__ void norm_gemv_silu_add_f32(const float* x, const float* wn, const float* w, float* y,
                                                  Params p) {
    bool vec = (p.d0 & 3u) == 0u && ((unsigned long long)w & 15ull) == 0ull;
    if (p.d1 == 4u) {
        if (vec) norm_gemv_silu_add<4u, true>(x, wn, w, y, p.d0, p.s0);
        else norm_gemv_silu_add<4u, false>(x, wn, w, y, p.d0, p.s0);
    } else {
        if (vec) norm_gemv_silu_add<2u, true>(x, wn, w, y, p.d0, p.s0);
        else norm_gemv_silu_add<2u, false>(x, wn, w, y, p.d0, p.s0);
    }
}
