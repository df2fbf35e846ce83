//! The wgpu side of the launch geometry in [`seam_kernels::geometry`]: one
//! limit, `max_compute_workgroups_per_dimension`, bounds both grid axes.

use seam::{ErrorKind, Launch};
use seam_kernels::geometry;

/// The workgroups (x, y, z) `launch` dispatches, within `max_per_dim` on
/// each axis: a catalogue op's laid out on the grid, a user kernel's own.
pub fn groups(launch: &Launch, max_per_dim: u32) -> Result<(u32, u32, u32), ErrorKind> {
    let [x, y, z] = geometry::dispatch(launch, [max_per_dim; 2])?;
    Ok((x, y, z))
}

/// Lay `groups` workgroups out on the grid, within `max_per_dim` on each axis.
#[cfg(test)]
pub fn grid(groups: u64, max_per_dim: u32) -> Result<(u32, u32), ErrorKind> {
    Ok(geometry::grid(groups, [max_per_dim; 2])?)
}

// Host-only checks, run as trials by `crate::tests::main` (harness = false).
// The geometry itself is tested in seam-kernels; these check the wgpu limit.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn grid_covers_every_group_with_little_overshoot() {
        for groups in [1u64, 65_535, 65_536, 67_108_864] {
            let (x, y) = grid(groups, 65_535).unwrap();
            assert_eq!((x, y), geometry::grid(groups, [65_535; 2]).unwrap());
        }
    }

    pub(crate) fn grid_refuses_what_does_not_fit() {
        // The one per-dimension limit bounds both axes.
        assert_eq!(grid(16, 4).unwrap(), (4, 4));
        let e = grid(17, 4).unwrap_err();
        assert!(
            matches!(
                e,
                ErrorKind::TooLarge {
                    what: "dispatch",
                    ..
                }
            ),
            "{e:?}"
        );
    }
}
