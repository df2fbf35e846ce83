//! The Metal Shading Language naga generated at build time (see `build.rs`)
//! from the shared WGSL kernels: one library per op, every entry point of the
//! op in it. Compiled on every host, so Linux CI proves each op lowers to MSL.

use seam::{DType, OpKind};

/// One op's MSL library.
#[derive(Debug)]
pub struct Library {
    /// The op's name (`OpKind::name`).
    pub op: &'static str,
    /// The complete MSL source.
    pub source: &'static str,
    /// For each member of naga's `_mslBufferSizes` block, in order, the
    /// binding (signature position) whose byte size it carries.
    pub sizes: &'static [u32],
    pub entry_points: &'static [EntryPoint],
}

/// One kernel entry point.
#[derive(Debug)]
pub struct EntryPoint {
    /// Name in the WGSL source, as `seam_kernels::entry_point` gives it.
    pub wgsl: &'static str,
    /// Name of the `kernel` function in the MSL (naga may rename it).
    pub msl: &'static str,
    /// `@workgroup_size`: threads per threadgroup.
    pub threads: [u32; 3],
    /// Length of each `threadgroup` argument, in `[[threadgroup(i)]]` order.
    pub threadgroup_memory: &'static [u32],
}

impl EntryPoint {
    pub fn threads_per_group(&self) -> u64 {
        self.threads.iter().map(|&t| t as u64).product()
    }
}

include!(concat!(env!("OUT_DIR"), "/msl.rs"));

/// Metal buffer index of the `Params` block in every kernel, catalogue and
/// user alike (the layout is `crate::lowering`'s, which build.rs shares).
pub const PARAMS_INDEX: usize = crate::lowering::PARAMS_INDEX as usize;
/// Metal buffer index of naga's `_mslBufferSizes` block.
pub const SIZES_INDEX: usize = crate::lowering::SIZES_INDEX as usize;
/// Buffer indices a kernel's bindings may take (`0..MAX_BINDINGS`).
pub const MAX_BINDINGS: usize = crate::lowering::MAX_BINDINGS as usize;
/// MSL version naga targets.
pub const MSL_VERSION: (u8, u8) = crate::lowering::MSL_VERSION;

/// The catalogue's MSL library of `op`. None for a user kernel (even one
/// named like a catalogue op): those are lowered at registration
/// (`crate::user`).
pub fn library(op: OpKind) -> Option<&'static Library> {
    if op.user().is_some() {
        return None;
    }
    LIBRARIES.iter().find(|l| l.op == op.name())
}

/// The library and entry point an (op, dtype) launch runs.
pub fn kernel(op: OpKind, dtype: DType) -> Option<(&'static Library, &'static EntryPoint)> {
    let lib = library(op)?;
    let name = seam_kernels::entry_point(op, dtype);
    let ep = lib.entry_points.iter().find(|ep| ep.wgsl == name)?;
    Some((lib, ep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_msl_with_every_entry_point() {
        for op in OpKind::ALL {
            let lib = library(op).unwrap_or_else(|| panic!("{op}: no MSL library"));
            assert!(!lib.source.trim().is_empty(), "{op}: empty MSL");
            assert!(
                lib.source.contains("#include <metal_stdlib>"),
                "{op}: not MSL"
            );
            for &dtype in op.dtypes() {
                let wgsl = seam_kernels::entry_point(op, dtype);
                let (_, ep) =
                    kernel(op, dtype).unwrap_or_else(|| panic!("{op}/{dtype}: no entry point"));
                assert_eq!(ep.wgsl, wgsl);
                assert!(
                    ep.msl.starts_with(&wgsl),
                    "{op}/{dtype}: MSL name {} does not name {wgsl}",
                    ep.msl
                );
                assert!(
                    lib.source.contains(&format!("kernel void {}(", ep.msl)),
                    "{op}/{dtype}: `kernel void {}(` missing from the MSL",
                    ep.msl
                );
            }
        }
    }

    #[test]
    fn params_and_sizes_sit_at_the_chosen_buffer_indices() {
        for lib in LIBRARIES {
            let params = format!("constant Params& p [[buffer({PARAMS_INDEX})]]");
            let sizes = format!("[[buffer({SIZES_INDEX})]]");
            for ep in lib.entry_points {
                let start = lib
                    .source
                    .find(&format!("kernel void {}(", ep.msl))
                    .unwrap_or_else(|| panic!("{}: no kernel", ep.msl));
                let args = &lib.source[start..];
                let args = &args[..args.find(") {").expect("end of argument list")];
                assert!(args.contains(&params), "{}: {params} missing", ep.msl);
                assert!(args.contains(&sizes), "{}: {sizes} missing", ep.msl);
                let groups = args.matches("threadgroup ").count();
                assert_eq!(
                    groups,
                    ep.threadgroup_memory.len(),
                    "{}: threadgroup arguments vs recorded lengths",
                    ep.msl
                );
            }
            // Signature order: every buffer binding below the Params index.
            let op = OpKind::ALL
                .into_iter()
                .find(|op| op.name() == lib.op)
                .expect("library of a catalogue op");
            assert!(op.signature().len() <= MAX_BINDINGS);
            for k in 0..op.signature().len() {
                assert!(
                    lib.source.contains(&format!("[[buffer({k})]]")),
                    "{}: binding {k}",
                    lib.op
                );
            }
            assert_eq!(lib.sizes.len(), op.signature().len(), "{}", lib.op);
        }
    }

    /// Every binding a user kernel may have fits below the Params block,
    /// and the sizes block follows it, within Metal's 31 buffer indices.
    #[test]
    fn params_and_sizes_sit_past_every_binding() {
        assert_eq!(MAX_BINDINGS, seam::kernel::MAX_BINDINGS);
        assert_eq!(PARAMS_INDEX, MAX_BINDINGS);
        assert_eq!(SIZES_INDEX, PARAMS_INDEX + 1);
        const { assert!(SIZES_INDEX < 31) };
    }

    #[test]
    fn threadgroup_memory_lengths_are_multiples_of_16() {
        for lib in LIBRARIES {
            for ep in lib.entry_points {
                assert!(ep.threads_per_group() > 0);
                for &len in ep.threadgroup_memory {
                    assert!(len > 0 && len % 16 == 0, "{}: {len}", ep.msl);
                }
            }
        }
    }
}
