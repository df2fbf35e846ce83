// attend: grouped-query attention of one new position over a KV cache
// (d0 = heads, d1 = head_size, d2 = cache positions, bits = kv_heads, s0 = the
// score scale) over n positions. The same order as attention.wgsl and the Rust
// implementation: one block of 64 per head, a shared-memory tree for the max
// and the sum, then each output element summed over 64 / head_size slices of
// the positions and the slices added in order (head_size ≤ 64), or over
// every position in order (larger heads).

__device__ void attend(const float* q, const float* kc, const float* vc, float* att, float* out, const Params& p, unsigned long long n) {
    __shared__ float red[64];
    unsigned int h = blockIdx.x;
    unsigned int i = threadIdx.x;
    if (h >= p.d0) return;
    unsigned long long hs = p.d1;
    unsigned long long kv_dim = (unsigned long long)p.bits * hs;
    unsigned long long g = h / (p.d0 / p.bits);
    const float* qh = q + h * hs;
    float* a = att + h * n;
    float m = -3.4028235e38f;
    for (unsigned long long t = i; t < n; t += 64) {
        const float* k = kc + t * kv_dim + g * hs;
        float s = 0.0f;
        for (unsigned long long j = 0; j < hs; ++j) s = __fadd_rn(s, __fmul_rn(qh[j], k[j]));
        s = __fmul_rn(s, p.s0);
        a[t] = s;
        m = fmaxf(m, s);
    }
    red[i] = m;
    __syncthreads();
    for (unsigned int half = 32; half > 0; half >>= 1) {
        if (i < half) red[i] = fmaxf(red[i], red[i + half]);
        __syncthreads();
    }
    float mx = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (unsigned long long t = i; t < n; t += 64) {
        float e = expf(__fsub_rn(a[t], mx));
        a[t] = e;
        sum = __fadd_rn(sum, e);
    }
    red[i] = sum;
    __syncthreads();
    for (unsigned int half = 32; half > 0; half >>= 1) {
        if (i < half) red[i] = __fadd_rn(red[i], red[i + half]);
        __syncthreads();
    }
    float total = red[0];
    __syncthreads();
    if (hs <= 64) {
        unsigned long long slices = 64 / hs;
        float acc = 0.0f;
        if (i < slices * hs) {
            unsigned long long d = i % hs;
            for (unsigned long long t = i / hs; t < n; t += slices) acc = __fadd_rn(acc, __fmul_rn(a[t], vc[t * kv_dim + g * hs + d]));
        }
        red[i] = acc;
        __syncthreads();
        if (i < hs) {
            float sum = 0.0f;
            for (unsigned long long s = 0; s < slices; ++s) sum = __fadd_rn(sum, red[s * hs + i]);
            out[h * hs + i] = __fdiv_rn(sum, total);
        }
    } else {
        for (unsigned long long d = i; d < hs; d += 64) {
            float acc = 0.0f;
            for (unsigned long long t = 0; t < n; ++t) acc = __fadd_rn(acc, __fmul_rn(a[t], vc[t * kv_dim + g * hs + d]));
            out[h * hs + d] = __fdiv_rn(acc, total);
        }
    }
}
