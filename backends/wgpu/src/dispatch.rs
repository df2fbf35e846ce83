//! How many workgroups each launch needs, and how they are laid out on the
//! 2D dispatch grid. Must agree with the kernels in `kernels/wgsl/` (the same
//! geometry the Vulkan backend uses): every kernel flattens its workgroup id
//! as `x + y * groups_x` and bounds-checks the result, so any grid with
//! `x * y >= groups` is correct.

use seam::{ErrorKind, Launch, OpKind};

/// Invocations per workgroup of the elementwise kernels (`@workgroup_size(64)`).
const ELEMENTWISE_WG: u64 = 64;
/// Output tile edge of the GEMM kernel (`@workgroup_size(16, 16)`).
const GEMM_TILE: u64 = 16;

/// Workgroups a launch needs (before laying them out on the grid).
pub fn workgroups(launch: &Launch) -> u64 {
    let p = &launch.params;
    let n = p.d0 as u64;
    match launch.op {
        // 16-bit fill/copy: one invocation per packed 32-bit word.
        OpKind::Fill | OpKind::Copy if launch.dtype.size() == 2 => {
            n.div_ceil(2).div_ceil(ELEMENTWISE_WG)
        }
        OpKind::Fill
        | OpKind::Copy
        | OpKind::ScaleAdd
        | OpKind::Add
        | OpKind::Mul
        | OpKind::Silu => n.div_ceil(ELEMENTWISE_WG),
        // One workgroup per row.
        OpKind::RmsNorm | OpKind::Softmax => n,
        OpKind::Gemm => n.div_ceil(GEMM_TILE) * (p.d1 as u64).div_ceil(GEMM_TILE),
    }
}

/// Lay `groups` workgroups out as `(x, y)` with `x * y >= groups` and the
/// least overshoot, within `max_per_dim` (wgpu's
/// `max_compute_workgroups_per_dimension`).
pub fn grid(groups: u64, max_per_dim: u32) -> Result<(u32, u32), ErrorKind> {
    let max = (max_per_dim as u64).max(1);
    let groups = groups.max(1);
    let y = groups.div_ceil(max);
    if y > max {
        return Err(ErrorKind::TooLarge {
            what: "dispatch",
            detail: format!("{groups} workgroups exceed the device's {max}×{max} grid"),
        });
    }
    let x = groups.div_ceil(y);
    Ok((x as u32, y as u32))
}

// Host-only checks, run as trials by `crate::tests::main` (harness = false).
#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn grid_covers_every_group_with_little_overshoot() {
        for groups in [1u64, 63, 64, 65_535, 65_536, 1_000_000, 67_108_864] {
            let (x, y) = grid(groups, 65_535).unwrap();
            let total = x as u64 * y as u64;
            assert!(total >= groups, "{groups}: {x}×{y}");
            assert!(total - groups < y as u64, "{groups}: {x}×{y} overshoots");
        }
    }

    pub(crate) fn grid_refuses_what_does_not_fit() {
        assert!(grid(65_535u64 * 65_535 + 1, 65_535).is_err());
        assert_eq!(grid(10, 4).unwrap(), (4, 3));
    }
}
