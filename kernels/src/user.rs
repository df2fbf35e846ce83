//! User kernels' WGSL ([`seam::KernelDef::wgsl`]) turned into a validated
//! naga module, the one copy the Vulkan, wgpu and Metal backends share:
//! the prelude ([`crate::WGSL_PARAMS`]) prepended, parsed and validated with
//! naga, and its interface checked against the definition (the entry point,
//! its `@workgroup_size`, one storage buffer per binding at `@group(0)
//! @binding(k)` and nothing else), so a backend never builds a pipeline
//! whose layout the module does not match. Each backend then emits what its
//! driver takes (SPIR-V, MSL) or hands the source to wgpu.
//!
//! Errors are [`ErrorKind::KernelSourceMissing`] (no WGSL) and
//! [`ErrorKind::KernelCompile`] with naga's full message, its line numbers
//! those of the kernel's own source (the prelude is not counted).

use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use seam::{ErrorKind, Kernel};

/// What [`ErrorKind::KernelSourceMissing`] says a WGSL backend needs.
pub const SOURCE_KIND: &str = "WGSL source (KernelDef::wgsl)";

/// The compiler [`ErrorKind::KernelCompile`] names for these checks.
pub const COMPILER: &str = "naga 30 (WGSL front end and validator)";

/// A user kernel's module, validated and checked against its definition.
pub struct UserModule {
    /// The complete source: the prelude, then the kernel's own WGSL.
    pub source: String,
    pub module: naga::Module,
    pub info: ModuleInfo,
    /// Per binding, whether the WGSL declares it `read` only.
    pub read_only: Vec<bool>,
}

/// Capabilities a user kernel may use: immediates (the `Params` block)
/// and nothing beyond core WGSL, so a kernel that validates here runs on
/// every backend.
pub const CAPABILITIES: Capabilities = Capabilities::IMMEDIATES;

/// The full source of `kernel` (prelude included), or `KernelSourceMissing`.
pub fn source(kernel: Kernel) -> Result<String, ErrorKind> {
    let def = kernel.def();
    let body = def.wgsl.ok_or(ErrorKind::KernelSourceMissing {
        kernel: def.name,
        source_kind: SOURCE_KIND,
    })?;
    Ok(format!("{}{body}", prelude()))
}

/// The prelude as prepended: [`crate::WGSL_PARAMS`] ending in a newline.
fn prelude() -> String {
    let mut p = crate::WGSL_PARAMS.to_string();
    if !p.ends_with('\n') {
        p.push('\n');
    }
    p
}

/// naga's message for `source`, with line numbers moved back by the
/// prelude's lines so they name lines of the kernel's own WGSL.
fn log(kernel: &'static str, rendered: String) -> ErrorKind {
    let shift = prelude().lines().count();
    ErrorKind::KernelCompile {
        kernel,
        compiler: COMPILER.into(),
        log: renumber(&rendered, shift, kernel),
    }
}

/// Rewrite naga's `wgsl:LINE:COL` locations and its gutter line numbers
/// (`NN │`) to be relative to the kernel's source, `shift` lines below the
/// top of the module. Lines in the prelude keep their number and say so.
fn renumber(rendered: &str, shift: usize, kernel: &str) -> String {
    let mut out = String::with_capacity(rendered.len() + 64);
    for line in rendered.lines() {
        let fixed = if let Some(at) = line.find("wgsl:") {
            let (head, rest) = line.split_at(at + "wgsl:".len());
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            match digits.parse::<usize>() {
                Ok(n) if n > shift => {
                    let head = &head[..head.len() - "wgsl:".len()];
                    format!("{head}{kernel}.wgsl:{}{}", n - shift, &rest[digits.len()..])
                }
                Ok(_) => format!("{line} (in the prelude, seam_kernels::WGSL_PARAMS)"),
                Err(_) => line.to_string(),
            }
        } else {
            let trimmed = line.trim_start();
            let digits: String = trimmed.chars().take_while(|c| c.is_ascii_digit()).collect();
            let after = &trimmed[digits.len()..];
            match digits.parse::<usize>() {
                Ok(n) if n > shift && after.trim_start().starts_with('│') => {
                    let indent = &line[..line.len() - trimmed.len()];
                    let new = (n - shift).to_string();
                    let pad = " ".repeat(digits.len().saturating_sub(new.len()));
                    format!("{indent}{pad}{new}{after}")
                }
                _ => line.to_string(),
            }
        };
        out.push_str(&fixed);
        out.push('\n');
    }
    out
}

/// Parse, validate and check `kernel`'s WGSL.
pub fn compile(kernel: Kernel) -> Result<UserModule, ErrorKind> {
    let def = kernel.def();
    let source = source(kernel)?;
    let module = naga::front::wgsl::parse_str(&source)
        .map_err(|e| log(def.name, e.emit_to_string(&source)))?;
    let info = Validator::new(ValidationFlags::all(), CAPABILITIES)
        .validate(&module)
        .map_err(|e| log(def.name, e.emit_to_string(&source)))?;
    let refuse = |why: String| ErrorKind::KernelCompile {
        kernel: def.name,
        compiler: COMPILER.into(),
        log: why,
    };
    let ep = module
        .entry_points
        .iter()
        .find(|ep| ep.name == def.name)
        .ok_or_else(|| {
            let names: Vec<&str> = module
                .entry_points
                .iter()
                .map(|e| e.name.as_str())
                .collect();
            refuse(format!(
                "no entry point `{}` (the KernelDef's name); the module declares {names:?}",
                def.name
            ))
        })?;
    if ep.stage != naga::ShaderStage::Compute {
        return Err(refuse(format!(
            "entry point `{}` is a {:?} shader, not @compute",
            def.name, ep.stage
        )));
    }
    if ep.workgroup_size != def.workgroup_size {
        return Err(refuse(format!(
            "entry point `{}` declares @workgroup_size{:?}, the KernelDef says {:?}",
            def.name, ep.workgroup_size, def.workgroup_size
        )));
    }
    let n = def.bindings.len();
    let mut read_only: Vec<Option<bool>> = vec![None; n];
    for (_, g) in module.global_variables.iter() {
        let name = g.name.as_deref().unwrap_or("(unnamed)");
        match (g.space, &g.binding) {
            (naga::AddressSpace::Immediate, None) => {}
            (_, None) => {}
            (naga::AddressSpace::Storage { access }, Some(b))
                if b.group == 0 && (b.binding as usize) < n =>
            {
                let slot = &mut read_only[b.binding as usize];
                if slot.is_some() {
                    return Err(refuse(format!(
                        "two variables at @group(0) @binding({})",
                        b.binding
                    )));
                }
                *slot = Some(!access.contains(naga::StorageAccess::STORE));
            }
            (space, Some(b)) => {
                return Err(refuse(format!(
                    "`{name}` at @group({}) @binding({}) ({space:?}): a kernel of {n} bindings \
                     declares storage buffers at @group(0) @binding(0..{n}) only",
                    b.group, b.binding
                )))
            }
        }
    }
    let mut flags = Vec::with_capacity(n);
    for (k, (slot, b)) in read_only.iter().zip(def.bindings).enumerate() {
        let ro = slot.ok_or_else(|| {
            refuse(format!(
                "binding {k} (`{}`) is not declared: every binding needs a \
                 var<storage> at @group(0) @binding({k})",
                b.name
            ))
        })?;
        if ro && b.access == seam::ops::Access::Write {
            return Err(refuse(format!(
                "binding {k} (`{}`) is written by the kernel's signature but declared \
                 var<storage, read>",
                b.name
            )));
        }
        flags.push(ro);
    }
    Ok(UserModule {
        source,
        module,
        info,
        read_only: flags,
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

    const BINDINGS: &[Binding] = &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("y", Access::Write, DType::F32),
    ];

    macro_rules! def {
        ($name:ident, $entry:literal, $src:expr) => {
            static $name: KernelDef = KernelDef {
                name: $entry,
                bindings: BINDINGS,
                reads: &[Field::D0],
                extents,
                workgroup_size: [64, 1, 1],
                grid,
                check: None,
                allows_aliasing: true,
                tolerance: Tolerance::BitExact,
                wgsl: $src,
                cuda: None,
                cpu: None,
                samples: &[],
            };
        };
    }

    def!(
        GOOD,
        "twice",
        Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn twice(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                 if (g.x < p.d0) { y[p.o1 + g.x] = x[p.o0 + g.x] * 2.0; }\n\
             }\n"
        )
    );
    def!(
        SYNTAX,
        "broken",
        Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn broken(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                 y[g.x] = x[g.x] * 2.0 +;\n\
             }\n"
        )
    );
    def!(
        WRONG_SIZE,
        "sized",
        Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(32)\n\
             fn sized(@builtin(global_invocation_id) g: vec3<u32>) { y[g.x] = x[g.x]; }\n"
        )
    );
    def!(
        READ_ONLY_OUT,
        "ro",
        Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn ro(@builtin(global_invocation_id) g: vec3<u32>) { _ = x[g.x] + y[g.x]; }\n"
        )
    );
    def!(
        EXTRA,
        "extra",
        Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @group(0) @binding(2) var<storage, read_write> z: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn extra(@builtin(global_invocation_id) g: vec3<u32>) { y[g.x] = x[g.x] + z[g.x]; }\n"
        )
    );
    def!(NONE, "none", None);

    #[test]
    fn a_well_formed_kernel_compiles_with_its_bindings() {
        let m = compile(Kernel::new(&GOOD)).unwrap();
        assert_eq!(m.read_only, vec![true, false]);
        assert!(m.source.starts_with(crate::WGSL_PARAMS));
    }

    #[test]
    fn a_syntax_error_is_kernel_compile_naming_the_kernels_own_line() {
        let e = compile(Kernel::new(&SYNTAX)).err().unwrap();
        let ErrorKind::KernelCompile { kernel, log, .. } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(*kernel, "broken");
        // The `+;` is on line 5 of the kernel's source.
        assert!(log.contains("broken.wgsl:5:"), "{log}");
        assert!(log.contains("y[g.x] = x[g.x] * 2.0 +;"), "{log}");
    }

    #[test]
    fn interface_mismatches_are_refused_with_why() {
        for (def, want) in [
            (&WRONG_SIZE, "@workgroup_size"),
            (&READ_ONLY_OUT, "declared var<storage, read>"),
            (&EXTRA, "@binding(2)"),
        ] {
            match compile(Kernel::new(def)) {
                Err(ErrorKind::KernelCompile { log, .. }) => {
                    assert!(log.contains(want), "{}: {log}", def.name)
                }
                other => panic!("{}: {:?}", def.name, other.err()),
            }
        }
    }

    #[test]
    fn no_wgsl_is_source_missing() {
        assert!(matches!(
            compile(Kernel::new(&NONE)).err(),
            Some(ErrorKind::KernelSourceMissing {
                kernel: "none",
                source_kind: SOURCE_KIND
            })
        ));
    }

    #[test]
    fn renumber_moves_locations_past_the_prelude() {
        let r = renumber("   ┌─ wgsl:47:9\n   │\n47 │     y = 1 +;\n", 42, "k");
        assert!(r.contains("k.wgsl:5:9"), "{r}");
        assert!(r.contains(" 5 │     y = 1 +;"), "{r}");
        let r = renumber("   ┌─ wgsl:3:1\n", 42, "k");
        assert!(r.contains("in the prelude"), "{r}");
    }
}
