// gemm: c[m×n] = a[m×k] · b[k×n], row-major, f32 accumulation, f32 output.
// m = p.d0, n = p.d1, k = p.d2. Two mappings of the same 512 invocations
// (16 × 32), chosen by m (seam_kernels::geometry picks the same workgroup
// count):
//
// - m <= GEMV_MAX_M (decode: m = 1): a GEMV. Workgroup t computes row
//   t % m of `cols` adjacent columns, strip t / m (the rows of one strip
//   are neighbours in launch order, so they share b through the cache):
//   cols = GEMV_WIDE_COLS where that still gives at least GEMV_WIDE_GROUPS
//   workgroups (m * ceil(n / 32) >= 256), else GEMV_COLS. Invocation i takes
//   the quad of 4 columns i % (cols / 4) and k-slice s = i / (cols / 4), of
//   S = 512 / (cols / 4): it sums the products kk = s, s + S, ... in order,
//   GEMV_UNROLL independent loads at a time, then the slices' partial sums
//   are added in a shared-memory tree. A quad is one 16-byte load of b where
//   the rows and b's view are 16-byte aligned (f32, n and the view's offset
//   multiples of 4; S is then a literal in each call of `gemv_quads`, which
//   the probe measured ~10 % faster than a computed stride), four word
//   loads otherwise.
//   Measured on the H200's Vulkan driver over 32 distinct weights (the
//   decode stack's 8 GiB at H = 8192; docs/results/bench/probes.md, p4 and
//   p5): this kernel ran a GEMV in 68.9 µs at H = 8192 from dedicated
//   allocations (as the Vulkan backend makes them; 88.3 µs from plain
//   ones) against 74.3 µs (94.4) for the kernel before (256 invocations,
//   16 columns of word loads); the best 256-invocation shape ran 95.7 µs
//   from plain allocations, though over 8 weights (2 GiB) it had measured
//   75.1. At H = 4096, 16 columns (32 would leave 128 workgroups): 24.3 µs
//   against 29.7.
// - otherwise: one 16-column × 32-row tile per workgroup, tiles numbered
//   row-major over the output; each output sums its k products in order, as
//   the CPU reference does.
//
// The tile or strip index is workgroup x + y * groups in x, so any m and n
// fit the 2D dispatch grid. a and b are packed words: f32, or two f16 / bf16
// per u32 (bf16 is the upper half of an f32). a, b and c are indexed (in
// elements) from their views' offsets p.o0, p.o1, p.o2: an odd 16-bit offset
// starts mid-word. b is bound as 16-byte quads of words: the Vulkan, wgpu
// and Metal backends allocate every buffer in multiples of 16 bytes, so the
// quad holding any word of a buffer is inside it. 512 invocations a
// workgroup is above Vulkan's guaranteed minimum (128): the Vulkan backend
// refuses the op, naming the limit, on a device that allows fewer.
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

// Tile columns (and k step) and rows: the workgroup's x and y.
const TILE: u32 = 16u;
const TILE_ROWS: u32 = 32u;
const THREADS: u32 = 512u;
const KIND_F32: u32 = 0u;
const KIND_F16: u32 = 1u;
const KIND_BF16: u32 = 2u;

// Kept equal to the constants of the same names in seam_kernels::geometry
// (tested).
const GEMV_MAX_M: u32 = 8u;
const GEMV_COLS: u32 = 16u;
const GEMV_WIDE_COLS: u32 = 32u;
const GEMV_WIDE_GROUPS: u32 = 256u;
const GEMV_UNROLL: u32 = 4u;

var<workgroup> partial: array<vec4<f32>, 512>;
var<workgroup> tile_a: array<array<f32, 16>, 32>;
var<workgroup> tile_b: array<array<f32, 16>, 16>;

fn unpack(word: u32, i: u32, kind: u32) -> f32 {
    if (kind == KIND_F16) {
        return unpack2x16float(word)[i & 1u];
    }
    let h = (word >> ((i & 1u) * 16u)) & 0xFFFFu;
    return bitcast<f32>(h << 16u);
}

fn a_at(i: u32, kind: u32) -> f32 {
    if (kind == KIND_F32) {
        return bitcast<f32>(a[i]);
    }
    return unpack(a[i >> 1u], i, kind);
}

// Word i of b.
fn b_word(i: u32) -> u32 {
    return b[i >> 2u][i & 3u];
}

fn b_at(i: u32, kind: u32) -> f32 {
    if (kind == KIND_F32) {
        return bitcast<f32>(b_word(i));
    }
    return unpack(b_word(i >> 1u), i, kind);
}

// Columns of one GEMV workgroup (seam_kernels::geometry::gemv_cols).
fn gemv_cols(m: u32, n: u32) -> u32 {
    if (m * ((n + GEMV_WIDE_COLS - 1u) / GEMV_WIDE_COLS) >= GEMV_WIDE_GROUPS) {
        return GEMV_WIDE_COLS;
    }
    return GEMV_COLS;
}

fn gemm_tile(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>, kind: u32) {
    let m = p.d0;
    let n = p.d1;
    let k = p.d2;
    let tiles_n = (n + TILE - 1u) / TILE;
    let t = wid.x + wid.y * nwg.x;
    let row = (t / tiles_n) * TILE_ROWS + lid.y;
    let col = (t % tiles_n) * TILE + lid.x;
    var acc = 0.0;
    for (var k0 = 0u; k0 < k; k0 += TILE) {
        let ka = k0 + lid.x;
        var va = 0.0;
        if (row < m && ka < k) {
            va = a_at(p.o0 + row * k + ka, kind);
        }
        tile_a[lid.y][lid.x] = va;
        if (lid.y < TILE) {
            let kb = k0 + lid.y;
            var vb = 0.0;
            if (kb < k && col < n) {
                vb = b_at(p.o1 + kb * n + col, kind);
            }
            tile_b[lid.y][lid.x] = vb;
        }
        workgroupBarrier();
        let steps = min(TILE, k - k0);
        for (var l = 0u; l < steps; l++) {
            acc += tile_a[lid.y][l] * tile_b[l][lid.x];
        }
        workgroupBarrier();
    }
    if (row < m && col < n) {
        c[p.o2 + row * n + col] = acc;
    }
}

// The vec4 path's sum for k-slice s of S (a constant at each call, so the
// driver folds the strides): quads bq + kk * nq of b, kk = s, s + S, ...
fn gemv_quads(bq: u32, nq: u32, ar: u32, s: u32, k: u32, S: u32) -> vec4<f32> {
    var acc = vec4<f32>(0.0);
    var kk = s;
    for (; kk + (GEMV_UNROLL - 1u) * S < k; kk += GEMV_UNROLL * S) {
        let b0 = bitcast<vec4<f32>>(b[bq + kk * nq]);
        let b1 = bitcast<vec4<f32>>(b[bq + (kk + S) * nq]);
        let b2 = bitcast<vec4<f32>>(b[bq + (kk + 2u * S) * nq]);
        let b3 = bitcast<vec4<f32>>(b[bq + (kk + 3u * S) * nq]);
        acc += bitcast<f32>(a[ar + kk]) * b0;
        acc += bitcast<f32>(a[ar + kk + S]) * b1;
        acc += bitcast<f32>(a[ar + kk + 2u * S]) * b2;
        acc += bitcast<f32>(a[ar + kk + 3u * S]) * b3;
    }
    for (; kk < k; kk += S) {
        acc += bitcast<f32>(a[ar + kk]) * bitcast<vec4<f32>>(b[bq + kk * nq]);
    }
    return acc;
}

// Row t % m, columns (t / m) * cols + 0..cols of c; li is the invocation's
// local index (0..512).
fn gemv_strip(t: u32, li: u32, kind: u32) {
    let m = p.d0;
    let n = p.d1;
    let k = p.d2;
    let quads = gemv_cols(m, n) / 4u;
    let S = THREADS / quads;
    let row = t % m;
    let col = (t / m) * quads * 4u + (li % quads) * 4u;
    let s = li / quads;
    var acc = vec4<f32>(0.0);
    if (col < n) {
        let ar = p.o0 + row * k;
        if (kind == KIND_F32 && (n & 3u) == 0u && (p.o1 & 3u) == 0u) {
            // Whole quads: col + 3 < n, and quad (o1 + kk * n + col) / 4.
            let nq = n >> 2u;
            let bq = (p.o1 >> 2u) + (col >> 2u);
            if (quads == GEMV_WIDE_COLS / 4u) {
                acc = gemv_quads(bq, nq, ar, s, k, THREADS / (GEMV_WIDE_COLS / 4u));
            } else {
                acc = gemv_quads(bq, nq, ar, s, k, THREADS / (GEMV_COLS / 4u));
            }
        } else {
            // Any type and offset: the quad's columns one element at a
            // time, those past n left at zero.
            for (var kk = s; kk < k; kk += S) {
                let at = p.o1 + kk * n + col;
                var v = vec4<f32>(b_at(at, kind), 0.0, 0.0, 0.0);
                if (col + 1u < n) {
                    v.y = b_at(at + 1u, kind);
                }
                if (col + 2u < n) {
                    v.z = b_at(at + 2u, kind);
                }
                if (col + 3u < n) {
                    v.w = b_at(at + 3u, kind);
                }
                acc += a_at(ar + kk, kind) * v;
            }
        }
    }
    partial[li] = acc;
    workgroupBarrier();
    for (var h = S / 2u; h > 0u; h >>= 1u) {
        if (s < h) {
            partial[li] += partial[li + h * quads];
        }
        workgroupBarrier();
    }
    if (s == 0u && col < n) {
        let sum = partial[li];
        let at = p.o2 + row * n + col;
        c[at] = sum.x;
        if (col + 1u < n) {
            c[at + 1u] = sum.y;
        }
        if (col + 2u < n) {
            c[at + 2u] = sum.z;
        }
        if (col + 3u < n) {
            c[at + 3u] = sum.w;
        }
    }
}

// Runs workgroup t's part of the launch: a GEMV strip when m is small, else
// an output tile; a workgroup past the last one returns.
fn gemm_run(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>, kind: u32) {
    let t = wid.x + wid.y * nwg.x;
    if (p.d0 <= GEMV_MAX_M) {
        let cols = gemv_cols(p.d0, p.d1);
        if (t < p.d0 * ((p.d1 + cols - 1u) / cols)) {
            gemv_strip(t, lid.x + lid.y * TILE, kind);
        }
        return;
    }
    if (t < ((p.d0 + TILE_ROWS - 1u) / TILE_ROWS) * ((p.d1 + TILE - 1u) / TILE)) {
        gemm_tile(wid, nwg, lid, kind);
    }
}

@compute @workgroup_size(16, 32)
fn gemm_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    gemm_run(wid, nwg, lid, KIND_F32);
}

@compute @workgroup_size(16, 32)
fn gemm_f16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    gemm_run(wid, nwg, lid, KIND_F16);
}

@compute @workgroup_size(16, 32)
fn gemm_bf16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    gemm_run(wid, nwg, lid, KIND_BF16);
}
