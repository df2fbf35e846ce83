//! User kernels' WGSL ([`KernelDef::wgsl`](crate::KernelDef::wgsl)) turned
//! into a validated naga module: the prelude ([`crate::kernel::WGSL_PRELUDE`])
//! prepended, parsed and validated with naga, and its interface checked
//! against the definition: the entry point, its `@workgroup_size`, one
//! storage buffer per binding at `@group(0) @binding(k)` and nothing else,
//! each an array of the binding's element type (16-bit types packed two to
//! a `u32`), and written only where the definition says `Write`; which
//! bindings it declares `read` is kept (a launch may not bind one buffer to
//! such a binding and to a `read_write` one, in place or not:
//! `ErrorKind::ReadOnlyShared`, since WebGPU refuses a buffer used
//! read-only and read-write in one dispatch). `Device::register_kernel` runs
//! it on every machine, a CPU-only one included; the Vulkan, wgpu and
//! Metal backends then emit what their driver takes from the same module.
//!
//! Errors are [`ErrorKind::KernelSourceMissing`] (no WGSL) and
//! [`ErrorKind::KernelCompile`] with naga's full message, its line numbers
//! those of the kernel's own source (the prelude is not counted).

use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::kernel::Kernel;
use crate::signature::{Access, Role};
use naga::valid::{Capabilities, GlobalUse, ModuleInfo, ValidationFlags, Validator};

/// What [`ErrorKind::KernelSourceMissing`] says a WGSL backend needs.
pub const SOURCE_KIND: &str = "WGSL source (KernelDef::wgsl)";

/// The compiler [`ErrorKind::KernelCompile`] names for these checks.
pub const COMPILER: &str = "naga 30 (WGSL front end and validator)";

/// A user kernel's module, validated and checked against its definition.
pub struct UserModule {
    /// The complete source: the prelude, then the kernel's own WGSL.
    pub source: String,
    /// The parsed module.
    pub module: naga::Module,
    /// naga's validation of it.
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

/// The prelude as prepended: [`crate::kernel::WGSL_PRELUDE`] ending in a newline.
fn prelude() -> String {
    let mut p = crate::kernel::WGSL_PRELUDE.to_string();
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
                Ok(_) => format!("{line} (in the prelude, seam::kernel::WGSL_PRELUDE)"),
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
    // Pipeline-overridable constants need values at pipeline creation,
    // which no backend gives (some would take the default, some refuse):
    // refused here, so a kernel that registers runs on every backend.
    if let Some((_, o)) = module.overrides.iter().next() {
        return Err(refuse(format!(
            "`override {}`: pipeline-overridable constants are not supported; declare a `const`",
            o.name.as_deref().unwrap_or("(unnamed)")
        )));
    }
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
    let uses = info.get_entry_point(
        module
            .entry_points
            .iter()
            .position(|e| e.name == def.name)
            .expect("found above"),
    );
    // Per binding: whether it is declared read-only, and what the entry
    // point does with it.
    let mut declared: Vec<Option<(bool, GlobalUse)>> = vec![None; n];
    for (handle, g) in module.global_variables.iter() {
        let name = g.name.as_deref().unwrap_or("(unnamed)");
        match (g.space, &g.binding) {
            (naga::AddressSpace::Immediate, None) => {}
            (_, None) => {}
            (naga::AddressSpace::Storage { access }, Some(b))
                if b.group == 0 && (b.binding as usize) < n =>
            {
                let k = b.binding as usize;
                if declared[k].is_some() {
                    return Err(refuse(format!("two variables at @group(0) @binding({k})")));
                }
                let binding = &def.bindings[k];
                // A fixed-size array asks the bound range for its whole size,
                // whatever the view holds (wgpu refuses a smaller binding when
                // the work is submitted): the length is the view's.
                if let naga::TypeInner::Array {
                    size: naga::ArraySize::Constant(_) | naga::ArraySize::Pending(_),
                    ..
                } = module.types[g.ty].inner
                {
                    return Err(refuse(format!(
                        "binding {k} (`{}`): its WGSL `{name}` is a fixed-size array; declare                          a runtime-sized `array<{}>`, whose length is the bound view's",
                        binding.name,
                        match binding.role {
                            Role::Fixed(dtype) => wgsl_element(dtype),
                            _ => "T",
                        }
                    )));
                }
                if let Role::Fixed(dtype) = binding.role {
                    element_type(&module, g.ty, dtype).map_err(|found| {
                        refuse(format!(
                            "binding {k} (`{}`) holds {dtype}: its WGSL `{name}` must be an \
                             array of {}, not {found}",
                            binding.name,
                            wgsl_element(dtype)
                        ))
                    })?;
                }
                declared[k] = Some((!access.contains(naga::StorageAccess::STORE), uses[handle]));
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
    for (k, (slot, b)) in declared.iter().zip(def.bindings).enumerate() {
        let (ro, used) = slot.ok_or_else(|| {
            refuse(format!(
                "binding {k} (`{}`) is not declared: every binding needs a \
                 var<storage> at @group(0) @binding({k})",
                b.name
            ))
        })?;
        if ro && b.access == Access::Write {
            return Err(refuse(format!(
                "binding {k} (`{}`) is written by the kernel's signature but declared \
                 var<storage, read>",
                b.name
            )));
        }
        if b.access == Access::Read && used.intersects(GlobalUse::WRITE | GlobalUse::ATOMIC) {
            return Err(refuse(format!(
                "binding {k} (`{}`) is read in the kernel's signature (Access::Read) but the \
                 WGSL writes it: declare it Access::Write, or do not store to it",
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

/// The WGSL element a binding of `dtype` is an array of.
fn wgsl_element(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::I32 => "i32",
        // 16-bit types two to a word, as the catalogue's kernels hold them.
        DType::U32 | DType::F16 | DType::Bf16 => "u32",
    }
}

/// Whether type `ty` is an array (or an array of atomics) of `dtype`'s
/// WGSL element; otherwise what it is, in WGSL's words.
fn element_type(
    module: &naga::Module,
    ty: naga::Handle<naga::Type>,
    dtype: DType,
) -> Result<(), String> {
    use naga::{Scalar, TypeInner};
    let want = match dtype {
        DType::F32 => Scalar::F32,
        DType::I32 => Scalar::I32,
        DType::U32 | DType::F16 | DType::Bf16 => Scalar::U32,
    };
    let scalar = |s: Scalar| match (s.kind, s.width) {
        (naga::ScalarKind::Float, 4) => "f32".to_string(),
        (naga::ScalarKind::Float, 2) => "f16".to_string(),
        (naga::ScalarKind::Sint, 4) => "i32".to_string(),
        (naga::ScalarKind::Uint, 4) => "u32".to_string(),
        (kind, width) => format!("{kind:?} of {width} bytes"),
    };
    let describe = |t: naga::Handle<naga::Type>| match &module.types[t].inner {
        TypeInner::Scalar(s) => scalar(*s),
        TypeInner::Atomic(s) => format!("atomic<{}>", scalar(*s)),
        other => module.types[t]
            .name
            .clone()
            .unwrap_or_else(|| format!("{other:?}")),
    };
    let TypeInner::Array { base, .. } = module.types[ty].inner else {
        return Err(describe(ty));
    };
    match module.types[base].inner {
        TypeInner::Scalar(s) | TypeInner::Atomic(s) if s == want => Ok(()),
        _ => Err(format!("an array of {}", describe(base))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Field, KernelDef};
    use crate::signature::{Access, Binding};
    use crate::{DType, Params, Tolerance};

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
            def!($name, $entry, $src, false);
        };
        ($name:ident, $entry:literal, $src:expr, $aliasing:expr) => {
            static $name: KernelDef = KernelDef {
                name: $entry,
                bindings: BINDINGS,
                reads: &[Field::D0],
                extents,
                workgroup_size: [64, 1, 1],
                grid,
                check: None,
                allows_aliasing: $aliasing,
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
    def!(
        WRONG_ELEMENT,
        "words",
        Some(
            "@group(0) @binding(0) var<storage, read> x: array<u32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn words(@builtin(global_invocation_id) g: vec3<u32>) { y[g.x] = f32(x[g.x]); }\n"
        )
    );
    def!(
        WRITES_ITS_INPUT,
        "scribble",
        Some(
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn scribble(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                 y[g.x] = x[g.x];\n\
                 x[g.x] = 0.0;\n\
             }\n"
        )
    );
    def!(
        ALIASED_READ_ONLY,
        "in_place",
        Some(
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn in_place(@builtin(global_invocation_id) g: vec3<u32>) { y[g.x] = x[g.x]; }\n"
        ),
        true
    );
    def!(
        ALIASED_READ_WRITE,
        "in_place_rw",
        Some(
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn in_place_rw(@builtin(global_invocation_id) g: vec3<u32>) { y[g.x] = x[g.x]; }\n"
        ),
        true
    );
    def!(NONE, "none", None);

    #[test]
    fn a_well_formed_kernel_compiles_with_its_bindings() {
        let m = compile(Kernel::new(&GOOD)).unwrap();
        assert_eq!(m.read_only, vec![true, false]);
        assert!(m.source.starts_with(crate::kernel::WGSL_PRELUDE));
        // The kernel's source follows the prelude on a line of its own,
        // with no blank line between. Mutation: `prelude`'s `!` deleted → red.
        let p = prelude();
        assert!(p.ends_with('\n') && !p.ends_with("\n\n"), "{p:?}");
        assert_eq!(&m.source[p.len()..], GOOD.wgsl.unwrap());
    }

    /// naga's locations and gutter numbers past the prelude become the
    /// kernel's own lines, padded to the gutter's width; lines in the
    /// prelude say so; other lines stay as they are. Mutations in
    /// `renumber` (either `>` → `>=`, either `-` → `/`, the gutter's guard
    /// → `true` or its `&&` → `||`) → red.
    #[test]
    fn naga_lines_are_renumbered_past_the_prelude() {
        let rendered = "error at wgsl:12:5 bad\n\
                        note at wgsl:10:1 here\n   \
                        12 │ let x = 1;\n   \
                        10 │ struct Params\n   \
                        15 items\n\
                        no location";
        let got = renumber(rendered, 10, "k");
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            [
                "error at k.wgsl:2:5 bad",
                "note at wgsl:10:1 here (in the prelude, seam::kernel::WGSL_PRELUDE)",
                "    2 │ let x = 1;",
                "   10 │ struct Params",
                "   15 items",
                "no location",
            ]
        );
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
            (
                &WRONG_ELEMENT,
                "must be an array of f32, not an array of u32",
            ),
            (
                &WRITES_ITS_INPUT,
                "binding 0 (`x`) is read in the kernel's signature",
            ),
        ] {
            match compile(Kernel::new(def)) {
                Err(ErrorKind::KernelCompile { log, .. }) => {
                    assert!(log.contains(want), "{}: {log}", def.name)
                }
                other => panic!("{}: {:?}", def.name, other.err()),
            }
        }
    }

    /// Which bindings a kernel's WGSL declares `read` is what core holds
    /// a launch's buffers to (`ReadOnlyShared`, `validate::lower`).
    #[test]
    fn read_only_bindings_are_reported() {
        let m = compile(Kernel::new(&ALIASED_READ_ONLY)).unwrap();
        assert_eq!(m.read_only, vec![true, false]);
        let m = compile(Kernel::new(&ALIASED_READ_WRITE)).unwrap();
        assert_eq!(m.read_only, vec![false, false]);
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
