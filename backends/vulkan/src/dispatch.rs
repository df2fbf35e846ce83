//! The Vulkan side of the launch geometry in [`seam_kernels::geometry`]: the
//! device's `maxComputeWorkGroupCount` (x, y) bounds the grid.

use seam::{ErrorKind, Launch};
use seam_kernels::geometry;

/// The workgroups (x, y, z) `launch` dispatches on a device whose
/// `maxComputeWorkGroupCount` is `max_group_count`: a catalogue op's laid
/// out on the grid, a user kernel's own grid.
pub fn groups(launch: &Launch, max_group_count: [u32; 3]) -> Result<(u32, u32, u32), ErrorKind> {
    let [x, y, z] = geometry::dispatch(launch, [max_group_count[0], max_group_count[1]])?;
    Ok((x, y, z))
}
