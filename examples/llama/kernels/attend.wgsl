// attention: grouped-query attention of one new position over a KV cache
// (shared by attention_f32 and attention_at_f32, which prepend it).
// d0 = heads, d1 = head_size, d2 = n (positions attended: 0..n),
// bits = kv_heads (dividing heads), s0 = the score scale (1/sqrt(head_size)).
// Bindings: q [heads × head_size]; kc and vc, the layer's caches, position
// t's key (value) of kv head g at t · kv_heads · head_size + g · head_size;
// att [heads × n], scratch (the scores, then the unnormalised weights);
// out [heads × head_size].
// One workgroup of 64 per head: invocation i takes positions i, i + 64, …,
// a shared-memory tree reduces the max and then the sum of exponentials.
// Then, where head_size ≤ 64, the positions are cut into S = 64 / head_size
// slices (t ≡ s mod S), invocation s · head_size + d sums element d over
// slice s in order, and the S sums are added in slice order; a larger head
// has invocation i sum elements i, i + 64, … over every position in order.
// The Rust implementation reproduces this order.
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<f32>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read_write> att: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> red: array<f32, 64>;

// Head `h`'s attention over positions 0..n, invocation `i` of its
// workgroup (every invocation calls it with the same `h` and `n`).
fn attend(h: u32, i: u32, n: u32) {
    let hs = p.d1;
    let kv_dim = p.bits * hs;
    let g = h / (p.d0 / p.bits);
    let qo = p.o0 + h * hs;
    let ao = p.o3 + h * n;
    var m = -3.4028235e38;
    for (var t = i; t < n; t = t + 64u) {
        let ko = p.o1 + t * kv_dim + g * hs;
        var s = 0.0;
        for (var j = 0u; j < hs; j = j + 1u) {
            s = s + q[qo + j] * kc[ko + j];
        }
        s = s * p.s0;
        att[ao + t] = s;
        m = max(m, s);
    }
    red[i] = m;
    workgroupBarrier();
    for (var half = 32u; half > 0u; half = half >> 1u) {
        if (i < half) {
            red[i] = max(red[i], red[i + half]);
        }
        workgroupBarrier();
    }
    let mx = red[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var t = i; t < n; t = t + 64u) {
        let e = exp_accurate(att[ao + t] - mx);
        att[ao + t] = e;
        sum = sum + e;
    }
    red[i] = sum;
    workgroupBarrier();
    for (var half = 32u; half > 0u; half = half >> 1u) {
        if (i < half) {
            red[i] = red[i] + red[i + half];
        }
        workgroupBarrier();
    }
    let total = red[0];
    // Every invocation has read the total and its weights in `att` are
    // visible to the others before `red` is used again.
    storageBarrier();
    if (hs <= 64u) {
        // 64 / hs slices of the positions, one output element per
        // invocation of a slice; then the slices' sums added in order.
        let slices = 64u / hs;
        var acc = 0.0;
        if (i < slices * hs) {
            let d = i % hs;
            for (var t = i / hs; t < n; t = t + slices) {
                acc = acc + att[ao + t] * vc[p.o2 + t * kv_dim + g * hs + d];
            }
        }
        red[i] = acc;
        workgroupBarrier();
        if (i < hs) {
            var sum = 0.0;
            for (var s = 0u; s < slices; s = s + 1u) {
                sum = sum + red[s * hs + i];
            }
            out[p.o4 + h * hs + i] = sum / total;
        }
    } else {
        for (var d = i; d < hs; d = d + 64u) {
            var acc = 0.0;
            for (var t = 0u; t < n; t = t + 1u) {
                acc = acc + att[ao + t] * vc[p.o2 + t * kv_dim + g * hs + d];
            }
            out[p.o4 + h * hs + d] = acc / total;
        }
    }
}
