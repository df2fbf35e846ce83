//! One deterministic workload per (op, dtype): inputs, the launch, and which
//! buffer holds the result. Shared by C4 (eager vs captured) and C11 (every
//! device vs the CPU reference), so both compare exactly the same work.

use seam::{ops, BufferId, DType, Device, OpCall, OpKind};

/// Every (op, dtype) pair of the catalogue.
pub fn all_pairs() -> Vec<(OpKind, DType)> {
    OpKind::ALL
        .into_iter()
        .flat_map(|op| op.dtypes().iter().map(move |d| (op, *d)))
        .collect()
}

pub use seam::testing::{compare, decode, element, Rng};

/// Buffers allocated and filled for one workload, and its launch.
pub struct Prepared {
    pub buffers: Vec<BufferId>,
    pub call: OpCall,
    /// Index (into `buffers`) of the output.
    pub output: usize,
    pub output_dtype: DType,
}

/// Sizes chosen to hit odd tails (16-bit packing, partial workgroups, rows
/// that are not a power of two). N = 4 Ki + 3: odd, and more than 4 Ki
/// elements, so an elementwise kernel that takes up to 4 elements (or
/// 16-bit pairs) per invocation in workgroups of up to 256 runs more than
/// one workgroup and a partial one, in every round of its loop.
const N: u32 = 4099;
const ROWS: u32 = 5;
const COLS: u32 = 257;
const M: u32 = 17;
const GN: u32 = 33;
const K: u32 = 65;

/// Allocate and initialise the buffers for `(op, dtype)` on `dev`. The output
/// buffer starts as a 0x5A pattern, so an op that writes nothing is caught.
pub fn prepare(dev: &Device, op: OpKind, dtype: DType, seed: u64) -> seam::Result<Prepared> {
    prepare_at(dev, op, dtype, seed, 0)
}

/// [`prepare`] with binding `k` a view `guard + k` elements into a buffer
/// with `guard` more elements after it (so neighbouring bindings start at
/// offsets of different parity: a 16-bit copy reads halves its output
/// word does not line up with); the elements around each view hold a
/// pattern (0xA5) of their own. With `guard = 0` the views are whole
/// buffers.
pub fn prepare_at(
    dev: &Device,
    op: OpKind,
    dtype: DType,
    seed: u64,
    guard: usize,
) -> seam::Result<Prepared> {
    // The op's place in the catalogue (its old discriminant), so seeds and
    // digests stay what earlier runs recorded.
    let index = OpKind::ALL
        .iter()
        .position(|o| *o == op)
        .unwrap_or(OpKind::ALL.len());
    let mut rng = Rng::new(seed ^ (index as u64) << 8 ^ dtype.size() as u64);
    let sig = op.signature();
    let lens: Vec<u32> = match op {
        OpKind::RmsNorm => vec![ROWS * COLS, COLS, ROWS * COLS],
        OpKind::Softmax => vec![ROWS * COLS; 2],
        OpKind::Gemm => vec![M * K, K * GN, M * GN],
        _ => vec![N; sig.len()],
    };
    let offset = |k: usize| if guard == 0 { 0 } else { guard + k };
    let mut buffers = Vec::new();
    for (k, (b, &len)) in sig.iter().zip(&lens).enumerate() {
        let bd = match b.role {
            seam::ops::Role::Input => dtype,
            seam::ops::Role::Fixed(d) => d,
        };
        let id = dev.alloc(bd, offset(k) + len as usize + guard)?;
        let bytes = match b.access {
            seam::ops::Access::Read => rng.bytes(bd, len as usize, 2.0),
            seam::ops::Access::Write => vec![0x5A; len as usize * bd.size()],
        };
        let (before, after) = (
            vec![0xA5; offset(k) * bd.size()],
            vec![0xA5; guard * bd.size()],
        );
        dev.write_bytes(id, 0, &[before, bytes, after].concat())?;
        buffers.push(id);
    }
    let b: Vec<seam::View> = buffers
        .iter()
        .zip(&lens)
        .enumerate()
        .map(|(k, (id, &len))| id.view(offset(k), len as usize))
        .collect();
    let b = &b;
    let call = match op {
        OpKind::Fill => {
            let bits = rng.next_u32() & if dtype.size() == 2 { 0xFFFF } else { !0 };
            ops::fill(b[0], N, bits)
        }
        OpKind::Copy => ops::copy(b[0], b[1], N),
        OpKind::ScaleAdd => ops::scale_add(b[0], b[1], N, 1.75, -0.3),
        OpKind::Add => ops::add(b[0], b[1], b[2], N),
        OpKind::Mul => ops::mul(b[0], b[1], b[2], N),
        OpKind::Silu => ops::silu(b[0], b[1], N),
        // eps is large against mean(x²) ≈ 4/3 of inputs in [-2, 2], so a
        // backend that ignores it (or adds it after the sqrt) misses the
        // tolerance by orders of magnitude (C11), not by a rounding.
        OpKind::RmsNorm => ops::rms_norm(b[0], b[1], b[2], ROWS, COLS, 0.25),
        OpKind::Softmax => ops::softmax(b[0], b[1], ROWS, COLS),
        OpKind::Gemm => ops::gemm(b[0], b[1], b[2], M, GN, K),
        OpKind::User(k) => unreachable!(
            "workloads::prepare is the catalogue's ({}: see cases/kernels.rs)",
            k.name()
        ),
    };
    let output = sig
        .iter()
        .position(|b| b.access == seam::ops::Access::Write)
        .expect("every op writes one buffer");
    let output_dtype = if op == OpKind::Gemm {
        DType::F32
    } else {
        dtype
    };
    Ok(Prepared {
        buffers,
        call,
        output,
        output_dtype,
    })
}
