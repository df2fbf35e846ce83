// gemm: c[m×n] = a[m×k] · b[k×n], row-major, f32 accumulation, f32 output.
// m = p.d0, n = p.d1, k = p.d2. One 16×16 workgroup per 16×16 output tile;
// tiles are numbered row-major over the output and the tile index is
// workgroup x + y * groups in x, so any m and n fit the 2D dispatch grid.
// a and b are packed words: f32, or two f16 / bf16 per u32 (bf16 is the
// upper half of an f32). Each output sums its k products in order, as the
// CPU reference does. a, b and c are indexed (in elements) from their
// views' offsets p.o0, p.o1, p.o2: an odd 16-bit offset starts mid-word.
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

const TILE: u32 = 16u;
const KIND_F32: u32 = 0u;
const KIND_F16: u32 = 1u;
const KIND_BF16: u32 = 2u;

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

@compute @workgroup_size(16, 16)
fn gemm_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    if (wid.x + wid.y * nwg.x >= ((p.d0 + TILE - 1u) / TILE) * ((p.d1 + TILE - 1u) / TILE)) {
        return;
    }
    gemm_tile(wid, nwg, lid, KIND_F32);
}

@compute @workgroup_size(16, 16)
fn gemm_f16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    if (wid.x + wid.y * nwg.x >= ((p.d0 + TILE - 1u) / TILE) * ((p.d1 + TILE - 1u) / TILE)) {
        return;
    }
    gemm_tile(wid, nwg, lid, KIND_F16);
}

@compute @workgroup_size(16, 16)
fn gemm_bf16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    if (wid.x + wid.y * nwg.x >= ((p.d0 + TILE - 1u) / TILE) * ((p.d1 + TILE - 1u) / TILE)) {
        return;
    }
    gemm_tile(wid, nwg, lid, KIND_BF16);
}
