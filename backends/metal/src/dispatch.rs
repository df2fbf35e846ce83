//! How many threadgroups each launch needs, and how they are laid out on the
//! 2D dispatch grid. Must agree with the kernels in `kernels/wgsl/`: every
//! kernel flattens its workgroup id as `x + y * groups_x` and bounds-checks
//! the result, so any `x * y >= groups` is correct. Threads per group come
//! from the kernel's `@workgroup_size` (recorded in [`crate::msl`]).
#![cfg_attr(not(target_vendor = "apple"), allow(dead_code))]

use crate::msl::EntryPoint;
use seam::{ErrorKind, Launch, OpKind};

/// Grid edge; Metal allows far more, this keeps the layout identical to the
/// Vulkan backend's (and inside every API's minimum).
const GRID_EDGE: u64 = 65_535;

/// Threadgroups a launch needs (before laying them out on the grid).
pub fn threadgroups(launch: &Launch, ep: &EntryPoint) -> u64 {
    let p = &launch.params;
    let n = p.d0 as u64;
    let per_group = ep.threads_per_group().max(1);
    match launch.op {
        // 16-bit fill/copy: one thread per packed 32-bit word.
        OpKind::Fill | OpKind::Copy if launch.dtype.size() == 2 => {
            n.div_ceil(2).div_ceil(per_group)
        }
        OpKind::Fill
        | OpKind::Copy
        | OpKind::ScaleAdd
        | OpKind::Add
        | OpKind::Mul
        | OpKind::Silu => n.div_ceil(per_group),
        // One threadgroup per row.
        OpKind::RmsNorm | OpKind::Softmax => n,
        // One threadgroup per output tile of threads[0] × threads[1].
        OpKind::Gemm => {
            let (tx, ty) = (ep.threads[0].max(1) as u64, ep.threads[1].max(1) as u64);
            (p.d0 as u64).div_ceil(ty) * (p.d1 as u64).div_ceil(tx)
        }
    }
}

/// Lay `groups` threadgroups out as `(x, y)` with `x * y >= groups` and the
/// least overshoot.
pub fn grid(groups: u64) -> Result<(u32, u32), ErrorKind> {
    let groups = groups.max(1);
    let y = groups.div_ceil(GRID_EDGE);
    if y > GRID_EDGE {
        return Err(ErrorKind::TooLarge {
            what: "dispatch",
            detail: format!("{groups} threadgroups exceed the {GRID_EDGE}×{GRID_EDGE} grid"),
        });
    }
    let x = groups.div_ceil(y);
    Ok((x as u32, y as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msl;
    use seam::{DType, Params};

    fn launch(op: OpKind, dtype: DType, d0: u32, d1: u32) -> Launch {
        Launch {
            op,
            dtype,
            buffers: Vec::new(),
            params: Params {
                d0,
                d1,
                ..Params::default()
            },
        }
    }

    #[test]
    fn grid_covers_every_group_with_little_overshoot() {
        for groups in [1u64, 63, 64, 65_535, 65_536, 1_000_000, 67_108_864] {
            let (x, y) = grid(groups).unwrap();
            let total = x as u64 * y as u64;
            assert!(total >= groups, "{groups}: {x}×{y}");
            assert!(total - groups < y as u64, "{groups}: {x}×{y} overshoots");
        }
        assert!(grid(GRID_EDGE * GRID_EDGE + 1).is_err());
    }

    #[test]
    fn threadgroups_follow_the_kernels_workgroup_sizes() {
        let (_, ep) = msl::kernel(OpKind::Add, DType::F32).unwrap();
        assert_eq!(ep.threads, [64, 1, 1]);
        assert_eq!(threadgroups(&launch(OpKind::Add, DType::F32, 65, 0), ep), 2);
        let (_, ep) = msl::kernel(OpKind::Fill, DType::F16).unwrap();
        assert_eq!(
            threadgroups(&launch(OpKind::Fill, DType::F16, 129, 0), ep),
            2
        );
        let (_, ep) = msl::kernel(OpKind::Softmax, DType::F32).unwrap();
        assert_eq!(
            threadgroups(&launch(OpKind::Softmax, DType::F32, 7, 3), ep),
            7
        );
        let (_, ep) = msl::kernel(OpKind::Gemm, DType::F32).unwrap();
        assert_eq!(ep.threads, [16, 16, 1]);
        assert_eq!(
            threadgroups(&launch(OpKind::Gemm, DType::F32, 17, 33), ep),
            6
        );
    }
}
