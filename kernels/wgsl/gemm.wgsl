// gemm: c[m×n] = a[m×k] · b[k×n], row-major, f32 accumulation, f32 output.
// m = p.d0, n = p.d1, k = p.d2. Two mappings of the same 256 invocations,
// chosen by m (seam_kernels::geometry picks the same workgroup count):
//
// - m <= GEMV_MAX_M (decode: m = 1): a GEMV. Workgroup t computes row
//   t % m of GEMV_COLS adjacent columns, strip t / m (the rows of one strip
//   are neighbours in launch order, so they share b through the cache).
//   Invocation i takes column i % GEMV_COLS and k-slice s = i / GEMV_COLS:
//   it sums the products kk = s, s + GEMV_SLICES, ... in order, GEMV_UNROLL
//   independent loads at a time, then the GEMV_SLICES partial sums are added
//   in a shared-memory tree. Adjacent invocations read adjacent words of b.
//   16 columns × 16 slices (not 32 × 8, nor 8 × 32), measured on the H200 at
//   L = 32, H = 8192: 3.42 ms a step on Vulkan, against 4.28 ms with 32
//   columns (half the workgroups, too few loads in flight) and 7.17 ms with
//   8 (32-byte pieces of rows 32 KiB apart).
// - otherwise: one 16×16 workgroup per 16×16 output tile, tiles numbered
//   row-major over the output; each output sums its k products in order, as
//   the CPU reference does.
//
// The tile or strip index is workgroup x + y * groups in x, so any m and n
// fit the 2D dispatch grid. a and b are packed words: f32, or two f16 / bf16
// per u32 (bf16 is the upper half of an f32). a, b and c are indexed (in
// elements) from their views' offsets p.o0, p.o1, p.o2: an odd 16-bit offset
// starts mid-word. Loads are scalar words: a wider (vec4) binding would need
// every buffer's bound size to be a multiple of 16 bytes.
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

const TILE: u32 = 16u;
const KIND_F32: u32 = 0u;
const KIND_F16: u32 = 1u;
const KIND_BF16: u32 = 2u;

// Kept equal to GEMV_MAX_M and GEMV_COLS in seam_kernels::geometry (tested).
const GEMV_MAX_M: u32 = 8u;
const GEMV_COLS: u32 = 16u;
const GEMV_SLICES: u32 = 16u; // 256 / GEMV_COLS
const GEMV_UNROLL: u32 = 8u;

var<workgroup> partial: array<f32, 256>;
var<workgroup> tile_a: array<array<f32, 16>, 16>;
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

fn b_at(i: u32, kind: u32) -> f32 {
    if (kind == KIND_F32) {
        return bitcast<f32>(b[i]);
    }
    return unpack(b[i >> 1u], i, kind);
}

fn gemm_tile(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>, kind: u32) {
    let m = p.d0;
    let n = p.d1;
    let k = p.d2;
    let tiles_n = (n + TILE - 1u) / TILE;
    let t = wid.x + wid.y * nwg.x;
    let row = (t / tiles_n) * TILE + lid.y;
    let col = (t % tiles_n) * TILE + lid.x;
    var acc = 0.0;
    for (var k0 = 0u; k0 < k; k0 += TILE) {
        let ka = k0 + lid.x;
        var va = 0.0;
        if (row < m && ka < k) {
            va = a_at(p.o0 + row * k + ka, kind);
        }
        tile_a[lid.y][lid.x] = va;
        let kb = k0 + lid.y;
        var vb = 0.0;
        if (kb < k && col < n) {
            vb = b_at(p.o1 + kb * n + col, kind);
        }
        tile_b[lid.y][lid.x] = vb;
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

// Row t % m, columns (t / m) * GEMV_COLS + 0..GEMV_COLS of c; li is the
// invocation's local index (0..256).
fn gemv_strip(t: u32, li: u32, kind: u32) {
    let m = p.d0;
    let n = p.d1;
    let k = p.d2;
    let row = t % m;
    let col = (t / m) * GEMV_COLS + li % GEMV_COLS;
    let s = li / GEMV_COLS;
    var acc = 0.0;
    if (col < n) {
        let ar = p.o0 + row * k;
        let bc = p.o1 + col;
        let S = GEMV_SLICES;
        var kk = s;
        for (; kk + (GEMV_UNROLL - 1u) * S < k; kk += GEMV_UNROLL * S) {
            let b0 = b_at(bc + kk * n, kind);
            let b1 = b_at(bc + (kk + S) * n, kind);
            let b2 = b_at(bc + (kk + 2u * S) * n, kind);
            let b3 = b_at(bc + (kk + 3u * S) * n, kind);
            let b4 = b_at(bc + (kk + 4u * S) * n, kind);
            let b5 = b_at(bc + (kk + 5u * S) * n, kind);
            let b6 = b_at(bc + (kk + 6u * S) * n, kind);
            let b7 = b_at(bc + (kk + 7u * S) * n, kind);
            acc += a_at(ar + kk, kind) * b0;
            acc += a_at(ar + kk + S, kind) * b1;
            acc += a_at(ar + kk + 2u * S, kind) * b2;
            acc += a_at(ar + kk + 3u * S, kind) * b3;
            acc += a_at(ar + kk + 4u * S, kind) * b4;
            acc += a_at(ar + kk + 5u * S, kind) * b5;
            acc += a_at(ar + kk + 6u * S, kind) * b6;
            acc += a_at(ar + kk + 7u * S, kind) * b7;
        }
        for (; kk < k; kk += S) {
            acc += a_at(ar + kk, kind) * b_at(bc + kk * n, kind);
        }
    }
    partial[li] = acc;
    workgroupBarrier();
    for (var h = GEMV_SLICES / 2u; h > 0u; h >>= 1u) {
        if (s < h) {
            partial[li] += partial[li + h * GEMV_COLS];
        }
        workgroupBarrier();
    }
    if (s == 0u && col < n) {
        c[p.o2 + row * n + col] = partial[li];
    }
}

// Runs workgroup t's part of the launch: a GEMV strip when m is small, else
// an output tile; a workgroup past the last one returns.
fn gemm_run(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>, kind: u32) {
    let t = wid.x + wid.y * nwg.x;
    if (p.d0 <= GEMV_MAX_M) {
        if (t < p.d0 * ((p.d1 + GEMV_COLS - 1u) / GEMV_COLS)) {
            gemv_strip(t, lid.x + lid.y * TILE, kind);
        }
        return;
    }
    if (t < ((p.d0 + TILE - 1u) / TILE) * ((p.d1 + TILE - 1u) / TILE)) {
        gemm_tile(wid, nwg, lid, kind);
    }
}

@compute @workgroup_size(16, 16)
fn gemm_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    gemm_run(wid, nwg, lid, KIND_F32);
}

@compute @workgroup_size(16, 16)
fn gemm_f16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    gemm_run(wid, nwg, lid, KIND_F16);
}

@compute @workgroup_size(16, 16)
fn gemm_bf16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    gemm_run(wid, nwg, lid, KIND_BF16);
}
