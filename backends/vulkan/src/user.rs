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

    /// Indexes a local array by the invocation: naga's `Restrict` policy
    /// clamps such an index.
    static PICK: KernelDef = KernelDef {
        name: "pick_f32",
        wgsl: Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn pick_f32(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                 var t = array<f32, 4>(1.0, 2.0, 3.0, 4.0);\n\
                 if (g.x < p.d0) { y[p.o1 + g.x] = x[p.o0 + g.x] * t[g.x]; }\n\
             }\n",
        ),
        ..NEG
    };

    /// A loop and workgroup memory (read after every invocation wrote its
    /// slot, behind a barrier).
    static SUM: KernelDef = KernelDef {
        name: "sum_f32",
        wgsl: Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             var<workgroup> part: array<f32, 64>;\n\
             @compute @workgroup_size(64)\n\
             fn sum_f32(@builtin(global_invocation_id) g: vec3<u32>, @builtin(local_invocation_index) l: u32) {\n\
                 var s = 0.0;\n\
                 for (var i = 0u; i < 4u; i++) { s += x[p.o0 + i]; }\n\
                 part[l] = s;\n\
                 workgroupBarrier();\n\
                 if (g.x < p.d0) { y[p.o1 + g.x] = part[63u - l]; }\n\
             }\n",
        ),
        ..NEG
    };

    /// The (opcode, first operand word) of every instruction of a module.
    fn instructions(words: &[u32]) -> Vec<(u32, Option<u32>)> {
        let mut out = Vec::new();
        let mut at = 5;
        while at < words.len() {
            let count = (words[at] >> 16) as usize;
            assert!(count > 0, "a zero-length instruction at word {at}");
            out.push((words[at] & 0xffff, words.get(at + 4).copied()));
            at += count;
        }
        out
    }

    /// Out-of-bounds accesses are checked: a buffer index against the
    /// buffer's length (`OpArrayLength`, which neither kernel calls itself,
    /// then a skipped write or a zero read), a local array's index clamped
    /// (GLSL.std.450 `UMin`). Without the policies naga writes neither.
    #[test]
    fn user_kernels_check_their_indices() {
        const OP_ARRAY_LENGTH: u32 = 68;
        const OP_EXT_INST: u32 = 12;
        const UMIN: u32 = 38;
        for def in [&NEG, &PICK] {
            let ops = instructions(&spirv(Kernel::new(def)).unwrap());
            assert!(
                ops.iter().any(|&(op, _)| op == OP_ARRAY_LENGTH),
                "{}: no buffer bounds check",
                def.name
            );
        }
        let ops = instructions(&spirv(Kernel::new(&PICK)).unwrap());
        assert!(
            ops.iter()
                .any(|&(op, ext)| op == OP_EXT_INST && ext == Some(UMIN)),
            "pick_f32: the local array's index is not clamped"
        );
    }

    /// User kernels are written with the catalogue's options, as the module
    /// documentation says: SPIR-V 1.0, no debug names, workgroup memory not
    /// zeroed (naga's polyfill adds a barrier, so `sum_f32` would have two),
    /// loops not bounded (naga's bound breaks out when `all()` of its
    /// counter's halves are zero: `OpAll`, which no kernel here calls).
    /// Mutations (tried): each option left
    /// to naga's default → red, but the version, whose default is 1.0.
    #[test]
    fn user_kernels_take_the_catalogues_options() {
        const OP_NAME: u32 = 5;
        const OP_ALL: u32 = 155;
        const OP_CONTROL_BARRIER: u32 = 224;
        for def in [&NEG, &PICK, &SUM] {
            let words = spirv(Kernel::new(def)).unwrap();
            assert_eq!(words[1], 0x0001_0000, "{}: SPIR-V 1.0", def.name);
            let mut at = 5;
            let (mut barriers, mut names, mut alls) = (0, 0, 0);
            while at < words.len() {
                let (count, op) = ((words[at] >> 16) as usize, words[at] & 0xffff);
                barriers += usize::from(op == OP_CONTROL_BARRIER);
                names += usize::from(op == OP_NAME);
                alls += usize::from(op == OP_ALL);
                at += count;
            }
            assert_eq!(names, 0, "{}: debug names", def.name);
            assert_eq!(alls, 0, "{}: a bounded loop", def.name);
            let expected = usize::from(def.name == "sum_f32");
            assert_eq!(barriers, expected, "{}: barriers", def.name);
        }
    }

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
