//! The Vulkan side of the launch geometry in [`seam_kernels::geometry`]: the
//! device's `maxComputeWorkGroupCount` (x, y) bounds the grid.

use seam::ErrorKind;
use seam_kernels::geometry;

pub use geometry::workgroups;

/// Lay `groups` workgroups out on the grid, within `max_group_count`.
pub fn grid(groups: u64, max_group_count: [u32; 3]) -> Result<(u32, u32), ErrorKind> {
    Ok(geometry::grid(
        groups,
        [max_group_count[0], max_group_count[1]],
    )?)
}
