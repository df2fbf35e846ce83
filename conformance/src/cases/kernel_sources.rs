//! A user kernel whose WGSL does not match its definition is refused when
//! it is registered, on every device: the check is core's, so a device that
//! runs no WGSL (the CPU reference) refuses it too, and no device is left
//! holding it.

use crate::{check, expect_err, Case, Rule, ONCE};
use seam::kernel::{Field, KernelDef};
use seam::ops::{Access, Binding};
use seam::{ops, DType, ErrorKind, Params, Tolerance};

fn extents(p: &Params, out: &mut [u64]) {
    out.fill(p.d0 as u64);
}
fn grid(p: &Params) -> [u32; 3] {
    [p.d0.div_ceil(64).max(1), 1, 1]
}
fn copy_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let n = p.d0 as usize * 4;
    let x = b[0][..n].to_vec();
    b[1][..n].copy_from_slice(&x);
}

macro_rules! kernel {
    ($name:ident, $entry:literal, $wgsl:expr) => {
        static $name: KernelDef = KernelDef {
            name: $entry,
            bindings: &[
                Binding::fixed("x", Access::Read, DType::F32),
                Binding::fixed("y", Access::Write, DType::F32),
            ],
            reads: &[Field::D0],
            extents,
            workgroup_size: [64, 1, 1],
            grid,
            check: None,
            allows_aliasing: false,
            tolerance: Tolerance::BitExact,
            wgsl: Some($wgsl),
            cuda: None,
            cpu: Some(copy_cpu),
            samples: &[],
        };
    };
}

kernel!(
    WORDS_FOR_FLOATS,
    "seam_words_for_floats",
    "@group(0) @binding(0) var<storage, read> x: array<u32>;\n\
     @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
     @compute @workgroup_size(64)\n\
     fn seam_words_for_floats(@builtin(global_invocation_id) g: vec3<u32>) {\n\
         if (g.x < p.d0) { y[p.o1 + g.x] = bitcast<f32>(x[p.o0 + g.x]); }\n\
     }\n"
);
kernel!(
    WRITES_ITS_INPUT,
    "seam_writes_its_input",
    "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
     @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
     @compute @workgroup_size(64)\n\
     fn seam_writes_its_input(@builtin(global_invocation_id) g: vec3<u32>) {\n\
         if (g.x < p.d0) { y[p.o1 + g.x] = x[p.o0 + g.x]; x[p.o0 + g.x] = 0.0; }\n\
     }\n"
);
kernel!(
    OTHER_WORKGROUP,
    "seam_other_workgroup",
    "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
     @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
     @compute @workgroup_size(32)\n\
     fn seam_other_workgroup(@builtin(global_invocation_id) g: vec3<u32>) {\n\
         if (g.x < p.d0) { y[p.o1 + g.x] = x[p.o0 + g.x]; }\n\
     }\n"
);
kernel!(NOT_WGSL, "seam_not_wgsl", "fn seam_not_wgsl( {\n");
kernel!(
    FIXED_SIZE,
    "seam_fixed_size",
    "@group(0) @binding(0) var<storage, read> x: array<f32, 1024>;\n\
     @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
     @compute @workgroup_size(64)\n\
     fn seam_fixed_size(@builtin(global_invocation_id) g: vec3<u32>) {\n\
         if (g.x < p.d0) { y[p.o1 + g.x] = x[p.o0 + g.x]; }\n\
     }\n"
);
kernel!(
    OVERRIDE,
    "seam_override",
    "override scale: f32 = 2.0;\n\
     @group(0) @binding(0) var<storage, read> x: array<f32>;\n\
     @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
     @compute @workgroup_size(64)\n\
     fn seam_override(@builtin(global_invocation_id) g: vec3<u32>) {\n\
         if (g.x < p.d0) { y[p.o1 + g.x] = scale * x[p.o0 + g.x]; }\n\
     }\n"
);

/// Kernels whose WGSL declares `array<u32>` for an f32 binding, writes a
/// binding the definition reads, declares another `@workgroup_size`, does
/// not parse, binds a fixed-size array (its size, not the view's, is what
/// wgpu asks of the binding) or declares an `override` (which one backend
/// takes at its default and another refuses): each registration is
/// `KernelCompile` naming the kernel
/// and what is wrong, on every device (the CPU reference, which runs only
/// each kernel's Rust, included), and a launch of it afterwards is
/// `KernelNotRegistered`; nothing is allocated or left behind.
///
/// Mutation: skip the WGSL check in `Device::register_kernel`
/// (`def.wgsl.is_some()` → `… && false`) → red on cpu:0 ("registered").
/// Also red: overrides or fixed-size arrays let through by core's check
/// (cpu:0 registers them).
pub const C12_BAD_KERNEL_SOURCES_REFUSED: Case = Case {
    name: "c12_bad_kernel_sources_refused",
    rule: Rule::C12,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let x = d.buffer_from(&[1.0f32; 8])?;
        let y = d.buffer_from(&[0.0f32; 8])?;
        let before = d.live();
        for (def, why) in [
            (&WORDS_FOR_FLOATS, "array of f32"),
            (&WRITES_ITS_INPUT, "WGSL writes it"),
            (&OTHER_WORKGROUP, "@workgroup_size"),
            (&NOT_WGSL, "seam_not_wgsl.wgsl:1"),
            (&FIXED_SIZE, "fixed-size array"),
            (&OVERRIDE, "override scale"),
        ] {
            let e = match d.register_kernel(def) {
                Ok(()) => return Err(crate::Failure(format!("{}: registered", def.name))),
                Err(e) => e,
            };
            check!(
                matches!(&e.kind, ErrorKind::KernelCompile { kernel, log, .. }
                    if *kernel == def.name && log.contains(why)),
                "{}: not KernelCompile naming it and `{why}`: {e}",
                def.name
            );
            let call = ops::user(def, &[x.id().into(), y.id().into()], Params::dims(8, 0, 0));
            expect_err!(d.launch(&call), ErrorKind::KernelNotRegistered { .. });
        }
        check!(
            d.live() == before,
            "refused registrations left something: {:?} then {:?}",
            before,
            d.live()
        );
        Ok(())
    },
};
