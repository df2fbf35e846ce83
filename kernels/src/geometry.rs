//! Launch geometry of the WGSL kernels, the one copy the Vulkan, wgpu and
//! Metal backends share: how many workgroups a launch needs and how they are
//! laid out on the 2-D dispatch grid. Every kernel flattens its workgroup id
//! as `x + y * groups_x` and bounds-checks the result, so any grid with
//! `x * y >= groups` computes the same bits; the layout only has to fit.

use seam::{ErrorKind, Launch, OpKind};
use std::fmt;

/// Grid edge on both axes: the Vulkan minimum for `maxComputeWorkGroupCount`
/// and wgpu's default `max_compute_workgroups_per_dimension`, so every
/// backend lays a launch out the same way whatever its device allows.
pub const GRID_EDGE: u32 = 65_535;

/// gemm with at most this many rows (m = `d0`) runs as a GEMV: one
/// workgroup per row and strip of [`gemv_cols`] columns (`wgsl/gemm.wgsl`
/// declares the same constants; a test checks them).
pub const GEMV_MAX_M: u32 = 8;
/// Output columns of one gemm GEMV workgroup, unless [`GEMV_WIDE_COLS`]
/// still gives [`GEMV_WIDE_GROUPS`] workgroups.
pub const GEMV_COLS: u32 = 16;
/// The wider strip: 128-byte pieces of each row of b (f32).
pub const GEMV_WIDE_COLS: u32 = 32;
/// Workgroups the wider strip must still give (about two per SM on the
/// H200's 132).
pub const GEMV_WIDE_GROUPS: u32 = 256;

/// Columns of one GEMV workgroup for m rows of n columns, as
/// `wgsl/gemm.wgsl`'s `gemv_cols` computes it.
pub const fn gemv_cols(m: u32, n: u32) -> u32 {
    if m as u64 * (n as u64).div_ceil(GEMV_WIDE_COLS as u64) >= GEMV_WIDE_GROUPS as u64 {
        GEMV_WIDE_COLS
    } else {
        GEMV_COLS
    }
}

/// Words (or, for 16-bit types, destination words) one copy invocation
/// moves (`wgsl/copy.wgsl` declares the same constant; a test checks it).
pub const COPY_PER: u32 = 4;

/// Threads per workgroup of every kernel of `op`, as its WGSL
/// `@workgroup_size` declares (the tests check this against naga's
/// reflection of each entry point).
pub const fn workgroup_size(op: OpKind) -> [u32; 3] {
    match op {
        OpKind::Fill | OpKind::ScaleAdd | OpKind::Add | OpKind::Mul | OpKind::Silu => [64, 1, 1],
        OpKind::Copy => [256, 1, 1],
        OpKind::RmsNorm | OpKind::Softmax => [256, 1, 1],
        OpKind::Gemm => [16, 32, 1],
        OpKind::User(k) => k.def().workgroup_size,
    }
}

/// Workgroups `launch` needs with the kernels' own workgroup size.
pub fn workgroups(launch: &Launch) -> u64 {
    workgroups_of(launch, workgroup_size(launch.op))
}

/// Workgroups `launch` needs when each holds `threads` (the Metal backend
/// passes the size it reflected from the MSL, which naga made from the same
/// WGSL).
pub fn workgroups_of(launch: &Launch, threads: [u32; 3]) -> u64 {
    let p = &launch.params;
    let n = p.d0 as u64;
    let mut per_group: u64 = threads.iter().map(|&t| t.max(1) as u64).product();
    if launch.op == OpKind::Copy {
        per_group *= COPY_PER as u64;
    }
    match launch.op {
        // 16-bit fill/copy: one invocation per packed 32-bit word the
        // destination view touches: n / 2 + 1 words hold n elements from an
        // offset of either parity (so the count does not depend on the
        // offset, which a graph update may change).
        OpKind::Fill | OpKind::Copy if launch.dtype.size() == 2 => {
            if n == 0 {
                0
            } else {
                (n / 2 + 1).div_ceil(per_group)
            }
        }
        OpKind::Fill
        | OpKind::Copy
        | OpKind::ScaleAdd
        | OpKind::Add
        | OpKind::Mul
        | OpKind::Silu => n.div_ceil(per_group),
        // One workgroup per row.
        OpKind::RmsNorm | OpKind::Softmax => n,
        // A GEMV: one workgroup per row and strip of gemv_cols columns.
        OpKind::Gemm if p.d0 <= GEMV_MAX_M => {
            n * (p.d1 as u64).div_ceil(gemv_cols(p.d0, p.d1) as u64)
        }
        // One workgroup per output tile of threads[1] rows × threads[0] columns.
        OpKind::Gemm => {
            let (tx, ty) = (threads[0].max(1) as u64, threads[1].max(1) as u64);
            n.div_ceil(ty) * (p.d1 as u64).div_ceil(tx)
        }
        // A user kernel states its grid (validated by core to fit).
        OpKind::User(k) => (k.def().grid)(p).iter().map(|&g| g as u64).product(),
    }
}

/// The dispatch size (workgroups on x, y, z) of `launch` on a device whose
/// grid allows `max` (x, y): the catalogue's workgroups laid out by
/// [`grid`], or a user kernel's own grid ([`seam::KernelDef::grid`], which
/// core checked against [`GRID_EDGE`]).
pub fn dispatch(launch: &Launch, max: [u32; 2]) -> Result<[u32; 3], GridTooLarge> {
    dispatch_of(launch, workgroup_size(launch.op), max)
}

/// [`dispatch`] with workgroups of `threads` (Metal's reflected size).
pub fn dispatch_of(
    launch: &Launch,
    threads: [u32; 3],
    max: [u32; 2],
) -> Result<[u32; 3], GridTooLarge> {
    if let OpKind::User(k) = launch.op {
        let g = (k.def().grid)(&launch.params);
        let max = max.map(|m| m.clamp(1, GRID_EDGE));
        if g[0] > max[0] || g[1] > max[1] {
            return Err(GridTooLarge {
                groups: g.iter().map(|&v| v as u64).product(),
                max,
            });
        }
        return Ok(g);
    }
    let (x, y) = grid(workgroups_of(launch, threads), max)?;
    Ok([x, y, 1])
}

/// A launch needs more workgroups than the grid holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GridTooLarge {
    pub groups: u64,
    /// The grid's edges after clamping to [`GRID_EDGE`].
    pub max: [u32; 2],
}

impl fmt::Display for GridTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} workgroups exceed the device's {}×{} grid",
            self.groups, self.max[0], self.max[1]
        )
    }
}

impl std::error::Error for GridTooLarge {}

impl From<GridTooLarge> for ErrorKind {
    fn from(e: GridTooLarge) -> ErrorKind {
        ErrorKind::TooLarge {
            what: "dispatch",
            detail: e.to_string(),
        }
    }
}

/// Lay `groups` workgroups out as `(x, y)` with `x * y >= groups` and the
/// least overshoot, within the device's per-dimension limits `max` (x, y),
/// each clamped to [`GRID_EDGE`].
pub fn grid(groups: u64, max: [u32; 2]) -> Result<(u32, u32), GridTooLarge> {
    let max = max.map(|m| m.clamp(1, GRID_EDGE));
    let (max_x, max_y) = (max[0] as u64, max[1] as u64);
    let groups = groups.max(1);
    let y = groups.div_ceil(max_x);
    if y > max_y {
        return Err(GridTooLarge { groups, max });
    }
    let x = groups.div_ceil(y);
    Ok((x as u32, y as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use seam::{DType, Params};

    include!(concat!(env!("OUT_DIR"), "/workgroup_sizes.rs"));

    #[allow(unsafe_code)] // a launch built by hand, read for its geometry only
    fn launch(op: OpKind, dtype: DType, d0: u32, d1: u32) -> Launch {
        let params = Params {
            d0,
            d1,
            ..Params::default()
        };
        // SAFETY: never given to a backend: only its geometry is read.
        unsafe { Launch::new_unchecked(op, dtype, Default::default(), params) }
    }

    #[test]
    fn workgroup_size_is_what_every_wgsl_entry_point_declares() {
        for op in OpKind::ALL {
            for &dtype in op.dtypes() {
                let ep = crate::entry_point(op, dtype);
                let declared = WORKGROUP_SIZES
                    .iter()
                    .find(|(name, _)| *name == ep)
                    .unwrap_or_else(|| panic!("{ep}: not reflected by naga"))
                    .1;
                assert_eq!(workgroup_size(op), declared, "{ep}");
            }
        }
    }

    #[test]
    fn workgroups_follow_the_kernels_workgroup_sizes() {
        assert_eq!(workgroups(&launch(OpKind::Add, DType::F32, 64, 0)), 1);
        assert_eq!(workgroups(&launch(OpKind::Add, DType::F32, 65, 0)), 2);
        // 16-bit fill/copy: one invocation per word, n / 2 + 1 words (an
        // odd offset spreads n elements over one word more).
        assert_eq!(workgroups(&launch(OpKind::Fill, DType::F16, 126, 0)), 1);
        assert_eq!(workgroups(&launch(OpKind::Fill, DType::F16, 127, 0)), 1);
        assert_eq!(workgroups(&launch(OpKind::Fill, DType::F16, 128, 0)), 2);
        // copy: 256 invocations of COPY_PER words (16-bit: destination words).
        assert_eq!(workgroups(&launch(OpKind::Copy, DType::Bf16, 1, 0)), 1);
        assert_eq!(workgroups(&launch(OpKind::Copy, DType::F16, 0, 0)), 0);
        assert_eq!(workgroups(&launch(OpKind::Copy, DType::I32, 1024, 0)), 1);
        assert_eq!(workgroups(&launch(OpKind::Copy, DType::I32, 1025, 0)), 2);
        assert_eq!(workgroups(&launch(OpKind::Copy, DType::F16, 2046, 0)), 1);
        assert_eq!(workgroups(&launch(OpKind::Copy, DType::F16, 2048, 0)), 2);
        assert_eq!(workgroups(&launch(OpKind::Softmax, DType::F32, 7, 3)), 7);
        assert_eq!(workgroups(&launch(OpKind::RmsNorm, DType::F16, 5, 900)), 5);
        // gemm: tiles of 32 rows × 16 columns: m = 17 rows (1 tile) × n = 33
        // columns (3 tiles), m = 33 (2) × n = 16 (1).
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 17, 33)), 3);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 33, 16)), 2);
        // A GEMV (m <= GEMV_MAX_M): one workgroup per row per 16 columns,
        // or per 32 where that still makes 256 workgroups.
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 1, 8192)), 256);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 1, 8160)), 510);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 1, 4096)), 256);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 2, 4096)), 256);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F16, 3, 33)), 9);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 8, 32)), 16);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 9, 32)), 2);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 9, 33)), 3);
        assert_eq!(workgroups(&launch(OpKind::Gemm, DType::F32, 0, 32)), 0);
        assert_eq!(workgroups(&launch(OpKind::Add, DType::F32, 0, 0)), 0);
    }

    #[test]
    fn workgroups_of_uses_the_given_tile_shape() {
        let gemm = launch(OpKind::Gemm, DType::F32, 17, 33);
        // 17 rows in tiles of 8 (3) × 33 columns in tiles of 32 (2).
        assert_eq!(workgroups_of(&gemm, [32, 8, 1]), 6);
        assert_eq!(workgroups_of(&gemm, [16, 32, 1]), workgroups(&gemm));
        let add = launch(OpKind::Add, DType::F32, 1000, 0);
        assert_eq!(workgroups_of(&add, [32, 2, 1]), 16);
    }

    #[test]
    fn copy_per_is_the_wgsl_kernels() {
        let src = crate::source(OpKind::Copy, crate::Language::Wgsl).unwrap();
        let decl = format!("const COPY_PER: u32 = {COPY_PER}u;");
        assert!(src.contains(&decl), "copy.wgsl does not declare `{decl}`");
        let wg = format!("const COPY_WG: u32 = {}u;", workgroup_size(OpKind::Copy)[0]);
        assert!(src.contains(&wg), "copy.wgsl does not declare `{wg}`");
    }

    #[test]
    fn gemv_constants_are_the_wgsl_kernels() {
        let src = crate::source(OpKind::Gemm, crate::Language::Wgsl).unwrap();
        for (name, value) in [
            ("GEMV_MAX_M", GEMV_MAX_M),
            ("GEMV_COLS", GEMV_COLS),
            ("GEMV_WIDE_COLS", GEMV_WIDE_COLS),
            ("GEMV_WIDE_GROUPS", GEMV_WIDE_GROUPS),
        ] {
            let decl = format!("const {name}: u32 = {value}u;");
            assert!(src.contains(&decl), "gemm.wgsl does not declare `{decl}`");
        }
        // Quads of 4 columns × k-slices fill the workgroup, and the slices
        // are a power of two (the shared-memory tree halves them).
        let threads: u32 = workgroup_size(OpKind::Gemm).iter().product();
        for cols in [GEMV_COLS, GEMV_WIDE_COLS] {
            assert_eq!(cols % 4, 0);
            assert_eq!(threads % (cols / 4), 0);
            assert!((threads / (cols / 4)).is_power_of_two());
        }
    }

    #[test]
    fn grid_covers_every_group_with_little_overshoot() {
        for groups in [1u64, 63, 64, 65_535, 65_536, 1_000_000, 67_108_864] {
            let (x, y) = grid(groups, [GRID_EDGE; 2]).unwrap();
            let total = x as u64 * y as u64;
            assert!(total >= groups, "{groups}: {x}×{y}");
            assert!(total - groups < y as u64, "{groups}: {x}×{y} overshoots");
        }
        assert_eq!(grid(0, [GRID_EDGE; 2]).unwrap(), (1, 1));
    }

    #[test]
    fn grid_refuses_what_does_not_fit() {
        let edge = GRID_EDGE as u64;
        assert_eq!(
            grid(edge * edge, [GRID_EDGE; 2]).unwrap(),
            (GRID_EDGE, GRID_EDGE)
        );
        let e = grid(edge * edge + 1, [GRID_EDGE; 2]).unwrap_err();
        assert_eq!(
            ErrorKind::from(e).to_string(),
            "dispatch is too large: 4294836226 workgroups exceed the device's 65535×65535 grid"
        );
        assert_eq!(grid(10, [4, 4]).unwrap(), (4, 3));
        assert!(grid(17, [4, 4]).is_err());
    }

    /// A user kernel's grid is its definition's, refused where either
    /// edge passes the device's (exactly the limit is taken), and never
    /// laid out again. Mutations: the x or y check dropped, or refusing
    /// exactly the limit → red.
    #[test]
    fn a_user_kernels_grid_is_its_own_within_the_limits() {
        let op = OpKind::User(seam::kernel::Kernel::new(&crate::tests::user::ZERO));
        let at = |d0, d1| dispatch_of(&launch(op, DType::F32, d0, d1), [64, 1, 1], [4, 4]);
        assert_eq!(at(4, 4), Ok([4, 4, 1]));
        assert_eq!(at(3, 1), Ok([3, 1, 1]));
        for (d0, d1) in [(5, 1), (1, 5), (5, 5)] {
            let e = at(d0, d1).unwrap_err();
            assert_eq!(e.max, [4, 4], "{d0}×{d1}");
            assert_eq!(e.groups, u64::from(d0 * d1), "{d0}×{d1}");
        }
        let e = GridTooLarge {
            groups: 25,
            max: [4, 4],
        };
        assert_eq!(e.to_string(), "25 workgroups exceed the device's 4×4 grid");
    }

    #[test]
    fn grid_keeps_within_each_axis_and_the_edge() {
        // A device limit above the edge is clamped to it; each axis has its own.
        assert_eq!(grid(70_000, [u32::MAX; 2]).unwrap(), (35_000, 2));
        assert_eq!(grid(10, [2, 5]).unwrap(), (2, 5));
        assert!(grid(11, [2, 5]).is_err());
        // A zero limit (a device that reports none) still lays out one group.
        assert_eq!(grid(1, [0, 0]).unwrap(), (1, 1));
    }
}
