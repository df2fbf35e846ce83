//! User kernels on Vulkan: the kernel's WGSL (prelude prepended) parsed,
//! validated and checked against its definition by
//! [`seam::wgsl::compile`], then made SPIR-V by naga at
//! registration with the options `kernels/build.rs` uses for the catalogue
//! (SPIR-V 1.0, no workgroup zeroing, no loop bounding), plus bounds checks
//! on every index (`Restrict`, and `ReadZeroSkipWrite` on buffers): a user
//! kernel is not audited as the catalogue is, and an access past a buffer
//! must not reach other memory. `sys::Gpu::compute_pipeline` then applies
//! the same `DenormPreserve 32` patch (`float_controls.rs`) as to every
//! catalogue module.

use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
use seam::{ErrorKind, Kernel};

/// What [`ErrorKind::KernelCompile`] names when naga's SPIR-V writer fails.
const WRITER: &str = "naga 30 (SPIR-V writer)";

/// The SPIR-V of `kernel`, or why it has none.
pub fn spirv(kernel: Kernel) -> Result<Vec<u32>, ErrorKind> {
    let m = seam::wgsl::compile(kernel)?;
    let options = naga::back::spv::Options {
        lang_version: (1, 0),
        flags: naga::back::spv::WriterFlags::empty(),
        zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: false,
        bounds_check_policies: BoundsCheckPolicies {
            index: BoundsCheckPolicy::Restrict,
            buffer: BoundsCheckPolicy::ReadZeroSkipWrite,
            ..Default::default()
        },
        ..Default::default()
    };
    naga::back::spv::write_vec(&m.module, &m.info, &options, None).map_err(|e| {
        ErrorKind::KernelCompile {
            kernel: kernel.name(),
            compiler: WRITER.into(),
            log: e.to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use seam::kernel::{Field, KernelDef};
    use seam::ops::{Access, Binding};
    use seam::{DType, Params, Tolerance};

    fn extents(p: &Params, out: &mut [u64]) {
        out.fill(p.d0 as u64);
    }
    fn grid(p: &Params) -> [u32; 3] {
        [p.d0.div_ceil(64).max(1), 1, 1]
    }

    static NEG: KernelDef = KernelDef {
        name: "neg_f32",
        bindings: &[
            Binding::fixed("x", Access::Read, DType::F32),
            Binding::fixed("y", Access::Write, DType::F32),
        ],
        reads: &[Field::D0],
        extents,
        workgroup_size: [64, 1, 1],
        grid,
        check: None,
        allows_aliasing: true,
        tolerance: Tolerance::BitExact,
        wgsl: Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn neg_f32(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                 if (g.x < p.d0) { y[p.o1 + g.x] = -x[p.o0 + g.x]; }\n\
             }\n",
        ),
        cuda: None,
        cpu: None,
        samples: &[],
    };

    /// A user kernel's module is SPIR-V with its entry point, and takes the
    /// DenormPreserve patch as the catalogue's modules do.
    #[test]
    fn a_user_kernel_becomes_patchable_spirv() {
        let words = spirv(Kernel::new(&NEG)).unwrap();
        assert_eq!(words[0], 0x0723_0203);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert!(bytes.windows(8).any(|w| w == b"neg_f32\0"));
        crate::float_controls::denorm_preserve_f32(&words).unwrap();
    }
}
