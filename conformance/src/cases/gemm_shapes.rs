//! GEMM at the shapes where implementations switch paths (C11): a GEMV for
//! a few rows, vector loads where a row of `b` is a whole number of 16-byte
//! words, unrolled k loops with tails. The rows are generated from those
//! rules, not from one backend's constants, so any backend's switch points
//! fall between rows of the table.

use crate::workloads::{compare, Rng};
use crate::{Case, Failure, Rule, Tag, BOTH};
use seam::{ops, DType, Device, OpKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Rows: 1 (decode), a few, 8 and 9 (either side of a GEMV cut-off of 8),
/// and 65: more rows than two tiles of any power-of-two height up to 32
/// hold (tiles numbered with the wrong height overlap and still cover the
/// first two tiles' rows; from the third on they leave rows out).
const MS: [u32; 5] = [1, 3, 8, 9, 65];
/// Shapes with more outputs than this are left out of the table (m = 65
/// with n = 1028), so the case's CPU time stays bounded.
const MAX_OUTPUTS: u32 = 16 * 1024;
/// n = 1028 exists for a GEMV's strip width, so it runs only with rows of
/// GEMV size (m ≤ 8, the cut-off `MS` straddles); the tile path's column
/// tiles are covered by 33 and 64. (m = 9 with n = 1028 was 30 % of the
/// table's products.)
const WIDE_N_MAX_M: u32 = 8;
/// Columns: a multiple of 4 (rows of f32 on 16-byte boundaries, for vector
/// loads), 2 mod 4 (on 8 bytes only), odd, 64 (whole tiles and strips), and
/// 1028 = 4 · 257: enough columns that a GEMV of 8 rows has over 256 strips
/// even 32 wide (where an implementation may switch to wider strips once
/// the device stays full), with a partial last strip at any power-of-two
/// width above 4.
const NS: [u32; 5] = [4, 6, 33, 64, 1028];
/// k: fewer products than any k-split has slices, and 515 = 8 · 64 + 3 (an
/// unrolled loop of 8 over 64 slices runs once, then a tail of 3).
const KS: [u32; 2] = [3, 515];
/// Element offset of `b`'s view: 0 (aligned), 2 (f32 rows off 16 bytes;
/// 16-bit rows off a 32-bit word), 4 (f32 rows on 16 bytes, but not at the
/// buffer's start: a vector path that drops the offset reads other data).
const B_OFFSETS: [usize; 3] = [0, 2, 4];

type Shape = (u32, u32, u32);
type Key = (DType, Shape, u64);
/// The bytes of `a` and of `b`.
type Inputs = (Vec<u8>, Vec<u8>);
/// Values made once per process, by key.
type Memo<V> = OnceLock<Mutex<HashMap<Key, Arc<V>>>>;

/// `f(key)`, computed once per process and kept in `memo`.
fn once<V>(
    memo: &'static Memo<V>,
    key: Key,
    f: impl FnOnce() -> Result<V, Failure>,
) -> Result<Arc<V>, Failure> {
    let memo = memo.get_or_init(Default::default);
    if let Some(hit) = memo.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(hit.clone());
    }
    let v = Arc::new(f()?);
    memo.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, v.clone());
    Ok(v)
}

/// The bytes of `a` and `b` for one row of the table (from its seed), made
/// once per process: every trial of the case (both modes, every device of
/// an in-process run) multiplies the same values.
fn inputs((dtype, (m, n, k), seed): Key) -> Result<Arc<Inputs>, Failure> {
    static MEMO: Memo<Inputs> = OnceLock::new();
    once(&MEMO, (dtype, (m, n, k), seed), || {
        let mut rng = Rng::new(seed);
        let a = rng.bytes(dtype, (m * k) as usize, 1.0);
        let b = rng.bytes(dtype, (k * n) as usize, 1.0);
        Ok((a, b))
    })
}

/// The output of `a[m×k] · b[k×n]` for `dtype` on `d`, with `b` a view
/// `b_off` elements into its buffer, in the case's mode (eager or captured
/// and replayed).
fn gemm_on(
    cx: Option<&crate::Ctx>,
    d: &Device,
    key: Key,
    b_off: usize,
) -> Result<Vec<u8>, Failure> {
    let (dtype, (m, n, k), _) = key;
    let ab = inputs(key)?;
    let (la, lb) = ((m * k) as usize, (k * n) as usize);
    let a = d.alloc(dtype, la)?;
    let b = d.alloc(dtype, b_off + lb)?;
    let c = d.alloc(DType::F32, (m * n) as usize)?;
    d.write_bytes(a, 0, &ab.0)?;
    let mut bb = vec![0xA5; b_off * dtype.size()];
    bb.extend_from_slice(&ab.1);
    d.write_bytes(b, 0, &bb)?;
    d.write_bytes(c, 0, &vec![0x5A; (m * n) as usize * 4])?;
    let call = ops::gemm(
        a.view(0, la),
        b.view(b_off, lb),
        c.view(0, (m * n) as usize),
        m,
        n,
        k,
    );
    match cx {
        Some(cx) => cx.run(|d| d.launch(&call))?,
        None => d.launch(&call)?,
    }
    let out = d.read_bytes(c)?;
    [a, b, c].into_iter().try_for_each(|x| d.free(x))?;
    Ok(out)
}

/// The CPU reference's output for one row of the table, over whole buffers
/// (`b` at element 0), computed once per process: recomputing it per trial
/// was most of a suite pass on cpu:0.
fn oracle_output(oracle: &Device, key: Key) -> Result<Arc<Vec<u8>>, Failure> {
    static MEMO: Memo<Vec<u8>> = OnceLock::new();
    once(&MEMO, key, || gemm_on(None, oracle, key, 0))
}

/// gemm for every input type at every (m, n, k, offset of `b`) of the
/// table above agrees, within gemm's tolerance, eager and captured, with
/// the CPU reference over the same values in whole buffers (so a device
/// that misplaces a view is caught on the CPU device too).
///
/// Mutations (tried on vulkan:0 and wgpu:0, lavapipe), in
/// `kernels/wgsl/gemm.wgsl`'s GEMV: `b`'s view offset left out of the
/// scalar path (`let at = p.o1 + kk * n + col` → `kk * n + col`) → red at
/// "f32 m=1 n=4 k=3, b at element 2", and the rest of the suite stays green
/// (every other gemm workload has m = 17, where the GEMV does not run); the
/// same in the vec4 path (`let bq = (p.o1 >> 2u) + (col >> 2u)` → `col >>
/// 2u`) → red only at "b at element 4"; the partial-sum tree adding the
/// wrong neighbour (`li + h * quads` → `li + h`) → red at "f32 m=1 n=4
/// k=515, b at element 0"; the vec4 k loop's tail left out (`for (; kk <
/// k; …)` → `kk < 0u`) → red at "f32 m=1 n=4 k=3, b at element 0"; the
/// scalar path dropping a quad's last column (`col + 3u < n` → `col + 3u <
/// n - 1u`) → red at "f32 m=1 n=4 k=3, b at element 2"; the kernel's
/// wide-strip rule disagreeing with the geometry's (`>= GEMV_WIDE_GROUPS`
/// → `>= 2u * GEMV_WIDE_GROUPS`) → red only at "f32 m=8 n=1028"; the wide
/// strip summed with the narrow strip's stride (`THREADS / (GEMV_WIDE_COLS
/// / 4u)` → `THREADS / (GEMV_COLS / 4u)` in its `gemv_quads` call) → red
/// at "f32 m=8 n=1028 k=515". In the tile path (m > 8): row tiles numbered
/// 16 high in 32-row workgroups (`* TILE_ROWS` → `* TILE`) → red only at
/// "f32 m=65" (at m ≤ 64 the overlapping tiles still cover every row);
/// half of b's tile left unloaded (`lid.y < TILE` → `lid.y < TILE / 2u`)
/// → red at "f32 m=9 n=4 k=515". On cpu:0
/// (`cargo xtask mutations`): the CPU backend reading every binding from
/// byte 0 → red at the first row with `b` at element 2.
pub const C11_GEMM_SHAPES_AGREE_WITH_CPU: Case = Case {
    name: "c11_gemm_shapes_agree_with_cpu",
    rule: Rule::C11,
    tags: &[Tag::NeedsHalf],
    modes: BOTH,
    body: |cx| {
        let d = &cx.dev;
        let oracle = (cx.reference)();
        let pairs: Vec<_> = OpKind::Gemm
            .dtypes()
            .iter()
            .map(|&t| (OpKind::Gemm, t))
            .collect();
        d.prepare(&pairs)?;
        let mut seed = 0;
        for &dtype in OpKind::Gemm.dtypes() {
            for m in MS {
                let shapes = NS
                    .into_iter()
                    .filter(|&n| m * n <= MAX_OUTPUTS && (n < 1028 || m <= WIDE_N_MAX_M));
                for n in shapes {
                    for k in KS {
                        // One set of values per shape; each offset of b's
                        // view multiplies the same values.
                        seed += 1;
                        for b_off in B_OFFSETS {
                            let what = format!("{dtype} m={m} n={n} k={k}, b at element {b_off}");
                            let key = (dtype, (m, n, k), seed);
                            let got = gemm_on(Some(cx), d, key, b_off)
                                .map_err(|f| Failure(format!("{what}: {f}")))?;
                            // The oracle over whole buffers: the same values, b at element 0.
                            let want = oracle_output(&oracle, key)?;
                            compare(DType::F32, OpKind::Gemm.tolerance(dtype), &got, &want)
                                .map_err(|e| Failure(format!("{what}: {e}")))?;
                            cx.digest_bytes(&got);
                        }
                    }
                }
            }
        }
        Ok(())
    },
};
