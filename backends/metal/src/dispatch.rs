//! The Metal side of the launch geometry in [`seam_kernels::geometry`]:
//! threads per group come from the MSL entry point (recorded in
//! [`crate::msl`], naga's reflection of the same WGSL; for a user kernel its
//! `KernelDef::workgroup_size`), and the grid is
//! [`geometry::dispatch_of`]'s: a catalogue launch's threadgroups laid out
//! on x and y within [`geometry::GRID_EDGE`] (Metal allows far more; this
//! keeps the layout identical to the Vulkan and wgpu backends'), a user
//! kernel's own 3-D `KernelDef::grid`.
#![cfg_attr(not(target_vendor = "apple"), allow(dead_code))]

use seam::{ErrorKind, Launch};
use seam_kernels::geometry;

/// Threadgroups on x, y and z for `launch`, each of `threads` threads.
pub fn groups(launch: &Launch, threads: [u32; 3]) -> Result<[u32; 3], ErrorKind> {
    Ok(geometry::dispatch_of(
        launch,
        threads,
        [geometry::GRID_EDGE; 2],
    )?)
}

/// The `_mslBufferSizes` block of a launch: for each member (`map[i]`, the
/// binding it describes) that binding's buffer length in bytes (saturated
/// to `u32`; 0 for a binding the launch lacks). A kernel without
/// runtime-sized arrays has no members; it gets one 0 all the same (the
/// kernel never reads it), so every dispatch binds the block.
pub fn sizes(map: &[u32], lens: &[usize]) -> Vec<u32> {
    let mut out: Vec<u32> = map
        .iter()
        .map(|&k| {
            lens.get(k as usize)
                .map_or(0, |&len| u32::try_from(len).unwrap_or(u32::MAX))
        })
        .collect();
    if out.is_empty() {
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msl;
    use seam::kernel::{Field, Kernel, KernelDef};
    use seam::ops::{Access, Binding};
    use seam::{DType, OpKind, Params, Tolerance};

    #[allow(unsafe_code)] // a launch built by hand, read for its geometry only
    fn launch(op: OpKind, dtype: DType, params: Params) -> Launch {
        // SAFETY: never given to a backend: only its geometry is read.
        unsafe { Launch::new_unchecked(op, dtype, Default::default(), params) }
    }

    /// The MSL entry points run with the threads per group the shared
    /// geometry counts workgroups for, laid out as the other backends do.
    #[test]
    fn msl_threads_are_the_kernels_workgroup_sizes() {
        for op in OpKind::ALL {
            for &dtype in op.dtypes() {
                let (_, ep) = msl::kernel(op, dtype).unwrap();
                assert_eq!(ep.threads, geometry::workgroup_size(op), "{op}/{dtype}");
                let l = launch(op, dtype, Params::dims(1000, 33, 0));
                assert_eq!(
                    groups(&l, ep.threads).unwrap(),
                    geometry::dispatch(&l, [geometry::GRID_EDGE; 2]).unwrap(),
                    "{op}/{dtype}"
                );
            }
        }
    }

    fn extents(p: &Params, out: &mut [u64]) {
        out.fill(p.d0 as u64);
    }
    fn grid(p: &Params) -> [u32; 3] {
        [p.d0, p.d1, 3]
    }
    static THREE_D: KernelDef = KernelDef {
        name: "three_d",
        bindings: &[Binding::fixed("y", Access::Write, DType::F32)],
        reads: &[Field::D0, Field::D1],
        extents,
        workgroup_size: [4, 4, 4],
        grid,
        check: None,
        allows_aliasing: false,
        tolerance: Tolerance::BitExact,
        wgsl: None,
        cuda: None,
        cpu: None,
        samples: &[],
    };

    /// A user kernel runs on its own grid, z included.
    #[test]
    fn a_user_kernel_dispatches_its_own_3d_grid() {
        let op = OpKind::User(Kernel::new(&THREE_D));
        let l = launch(op, DType::F32, Params::dims(7, 5, 0));
        assert_eq!(groups(&l, THREE_D.workgroup_size).unwrap(), [7, 5, 3]);
        let too_wide = launch(op, DType::F32, Params::dims(geometry::GRID_EDGE + 1, 1, 0));
        assert!(matches!(
            groups(&too_wide, THREE_D.workgroup_size),
            Err(ErrorKind::TooLarge { .. })
        ));
    }

    #[test]
    fn the_sizes_block_follows_the_map_and_is_never_empty() {
        assert_eq!(sizes(&[0, 2], &[16, 8, 4096]), [16, 4096]);
        assert_eq!(sizes(&[3], &[16]), [0]);
        assert_eq!(sizes(&[], &[16]), [0]);
        assert_eq!(sizes(&[0], &[usize::MAX]), [u32::MAX]);
    }
}
