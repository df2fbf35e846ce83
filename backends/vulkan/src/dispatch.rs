//! How many workgroups each launch needs, and how they are laid out on the
//! 2D dispatch grid. Must agree with the kernels in `kernels/wgsl/`: every
//! kernel flattens its workgroup id as `x + y * groups_x` and bounds-checks
//! the result, so any `x * y >= groups` is correct.

use seam::{ErrorKind, Launch, OpKind};

/// Invocations per workgroup of the elementwise kernels.
const ELEMENTWISE_WG: u64 = 64;
/// Output tile edge of the GEMM kernel.
const GEMM_TILE: u64 = 16;
/// Grid edge kept within the Vulkan minimum for `maxComputeWorkGroupCount`.
const GRID_EDGE: u64 = 65_535;

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// Workgroups a launch needs (before laying them out on the grid).
pub fn workgroups(launch: &Launch) -> u64 {
    let p = &launch.params;
    let n = p.d0 as u64;
    match launch.op {
        // 16-bit fill/copy: one invocation per packed 32-bit word.
        OpKind::Fill | OpKind::Copy if launch.dtype.size() == 2 => {
            ceil_div(ceil_div(n, 2), ELEMENTWISE_WG)
        }
        OpKind::Fill
        | OpKind::Copy
        | OpKind::ScaleAdd
        | OpKind::Add
        | OpKind::Mul
        | OpKind::Silu => ceil_div(n, ELEMENTWISE_WG),
        // One workgroup per row.
        OpKind::RmsNorm | OpKind::Softmax => n,
        OpKind::Gemm => ceil_div(p.d0 as u64, GEMM_TILE) * ceil_div(p.d1 as u64, GEMM_TILE),
    }
}

/// Lay `groups` workgroups out as `(x, y)` with `x * y >= groups` and the
/// least overshoot, within the device's limits.
pub fn grid(groups: u64, max: [u32; 3]) -> Result<(u32, u32), ErrorKind> {
    let max_x = GRID_EDGE.min(max[0] as u64).max(1);
    let max_y = GRID_EDGE.min(max[1] as u64).max(1);
    let groups = groups.max(1);
    let y = ceil_div(groups, max_x);
    if y > max_y {
        return Err(ErrorKind::TooLarge {
            what: "dispatch",
            detail: format!("{groups} workgroups exceed the device's {max_x}×{max_y} grid"),
        });
    }
    let x = ceil_div(groups, y);
    Ok((x as u32, y as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_covers_every_group_with_little_overshoot() {
        let max = [65_535, 65_535, 65_535];
        for groups in [1u64, 63, 64, 65_535, 65_536, 1_000_000, 67_108_864] {
            let (x, y) = grid(groups, max).unwrap();
            let total = x as u64 * y as u64;
            assert!(total >= groups, "{groups}: {x}×{y}");
            assert!(total - groups < y as u64, "{groups}: {x}×{y} overshoots");
        }
    }

    #[test]
    fn grid_refuses_what_does_not_fit() {
        assert!(grid(65_535u64 * 65_535 + 1, [65_535; 3]).is_err());
        assert_eq!(grid(10, [4, 4, 1]).unwrap(), (4, 3));
    }
}
