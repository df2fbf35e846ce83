//! The Metal side of the launch geometry in [`seam_kernels::geometry`]:
//! threads per group come from the MSL entry point (recorded in
//! [`crate::msl`], naga's reflection of the same WGSL), and the grid keeps to
//! [`geometry::GRID_EDGE`] on both axes (Metal allows far more; this keeps
//! the layout identical to the Vulkan and wgpu backends').
#![cfg_attr(not(target_vendor = "apple"), allow(dead_code))]

use crate::msl::EntryPoint;
use seam::{ErrorKind, Launch};
use seam_kernels::geometry;

/// Threadgroups a launch needs (before laying them out on the grid).
pub fn threadgroups(launch: &Launch, ep: &EntryPoint) -> u64 {
    geometry::workgroups_of(launch, ep.threads)
}

/// Lay `groups` threadgroups out as `(x, y)` on the grid.
pub fn grid(groups: u64) -> Result<(u32, u32), ErrorKind> {
    Ok(geometry::grid(groups, [geometry::GRID_EDGE; 2])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msl;
    use seam::{OpKind, Params};

    /// The MSL entry points run with the threads per group the shared
    /// geometry counts workgroups for.
    #[test]
    fn msl_threads_are_the_kernels_workgroup_sizes() {
        for op in OpKind::ALL {
            for &dtype in op.dtypes() {
                let (_, ep) = msl::kernel(op, dtype).unwrap();
                assert_eq!(ep.threads, geometry::workgroup_size(op), "{op}/{dtype}");
                let launch = Launch {
                    op,
                    dtype,
                    buffers: Default::default(),
                    params: Params {
                        d0: 1000,
                        d1: 33,
                        ..Params::default()
                    },
                };
                assert_eq!(threadgroups(&launch, ep), geometry::workgroups(&launch));
            }
        }
    }
}
