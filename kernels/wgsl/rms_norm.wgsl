// rms_norm: out[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c],
// accumulated in f32. One workgroup per row (row = workgroup x + y * groups
// in x); each invocation strides over the row, then a shared-memory tree
// reduction of the sum of squares.
//
// f16 buffers hold two elements per u32 word. A row of odd length shares a
// word with its neighbour row, which another workgroup writes, so outputs
// are stored with atomic and/or on the element's own half-word (so a view
// from an odd offset, which shares its edge words with its neighbours, keeps
// them). x, w and out are indexed from their views' offsets p.o0, p.o1, p.o2.
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;

const WG: u32 = 256u;
var<workgroup> scratch: array<f32, 256>;

fn load_f32(word: u32) -> f32 {
    return bitcast<f32>(word);
}

fn load_f16(words_x: u32, i: u32) -> f32 {
    return unpack2x16float(words_x)[i & 1u];
}

fn x_at(i: u32, half: bool) -> f32 {
    if (half) {
        return load_f16(x[i >> 1u], i);
    }
    return load_f32(x[i]);
}

fn w_at(i: u32, half: bool) -> f32 {
    if (half) {
        return load_f16(w[i >> 1u], i);
    }
    return load_f32(w[i]);
}

fn store(i: u32, v: f32, half: bool) {
    if (half) {
        let shift = (i & 1u) * 16u;
        let bits = pack2x16float(vec2<f32>(v, 0.0)) & 0xFFFFu;
        atomicAnd(&out[i >> 1u], ~(0xFFFFu << shift));
        atomicOr(&out[i >> 1u], bits << shift);
    } else {
        atomicStore(&out[i], bitcast<u32>(v));
    }
}

fn rms_norm_row(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, half: bool) {
    let row = wid.x + wid.y * nwg.x;
    let cols = p.d1;
    let base = row * cols;
    let xs = p.o0 + base;
    let outs = p.o2 + base;
    // Four independent loads in flight per invocation (a decode row of 8192
    // is 32 per invocation); the sum keeps the order c, c + WG, c + 2 WG, ...
    var acc = 0.0;
    var c = lid;
    for (; c + 3u * WG < cols; c += 4u * WG) {
        let v0 = x_at(xs + c, half);
        let v1 = x_at(xs + c + WG, half);
        let v2 = x_at(xs + c + 2u * WG, half);
        let v3 = x_at(xs + c + 3u * WG, half);
        acc += v0 * v0;
        acc += v1 * v1;
        acc += v2 * v2;
        acc += v3 * v3;
    }
    for (; c < cols; c += WG) {
        let v = x_at(xs + c, half);
        acc += v * v;
    }
    scratch[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            scratch[lid] += scratch[lid + s];
        }
        workgroupBarrier();
    }
    let mean_sq = scratch[0] / f32(cols);
    let inv = 1.0 / sqrt(mean_sq + p.s0);
    c = lid;
    for (; c + 3u * WG < cols; c += 4u * WG) {
        let v0 = x_at(xs + c, half) * inv * w_at(p.o1 + c, half);
        let v1 = x_at(xs + c + WG, half) * inv * w_at(p.o1 + c + WG, half);
        let v2 = x_at(xs + c + 2u * WG, half) * inv * w_at(p.o1 + c + 2u * WG, half);
        let v3 = x_at(xs + c + 3u * WG, half) * inv * w_at(p.o1 + c + 3u * WG, half);
        store(outs + c, v0, half);
        store(outs + c + WG, v1, half);
        store(outs + c + 2u * WG, v2, half);
        store(outs + c + 3u * WG, v3, half);
    }
    for (; c < cols; c += WG) {
        store(outs + c, x_at(xs + c, half) * inv * w_at(p.o1 + c, half), half);
    }
}

@compute @workgroup_size(256)
fn rms_norm_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if (wid.x + wid.y * nwg.x >= p.d0) {
        return;
    }
    rms_norm_row(wid, nwg, lid, false);
}

@compute @workgroup_size(256)
fn rms_norm_f16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if (wid.x + wid.y * nwg.x >= p.d0) {
        return;
    }
    rms_norm_row(wid, nwg, lid, true);
}
