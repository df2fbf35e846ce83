//! Kernel sources: one file per op per language.
//!
//! - `wgsl/<op>.wgsl`: WGSL for wgpu, turned into SPIR-V (Vulkan) and MSL
//!   (Metal) by naga. Each is prefixed with core's prelude ([`WGSL_PARAMS`]:
//!   the `Params` push-constant block and helpers such as `exp_accurate`).
//!   Validated by naga at build time.
//!   [`spirv`] gives the SPIR-V naga made from it at build time: one module
//!   per op holding every entry point, `Params` as Vulkan push constants
//!   (the Vulkan backend moves them to a uniform buffer at the binding after
//!   the storage buffers), storage buffers at set 0 in signature order.
//! - `cuda/<op>.cu`: CUDA C for the CUDA (NVRTC) and HIP (hipRTC) backends.
//!   Each is prefixed with `cuda/params.cu` (the `Params` block).
//!
//! Entry points are named `<op>_<variant>`; [`entry_point`] gives the
//! variant for each op and element type, the same for every language.
//! [`geometry`] says how many workgroups a WGSL launch needs.
//! [`conditional`] emulates conditional bodies (C14) with indirect
//! dispatches and a gate kernel, for the backends that have no device loop
//! (and holds the setter of CUDA's conditional nodes).
//!
//! [`user`] holds two kernels written as a user writes one (RoPE and a fused
//! residual-add + rms_norm, `seam::kernel::KernelDef`s with WGSL, CUDA C and
//! a CPU oracle): the ones the conformance suite certifies by default and
//! the examples decode with.

use seam::{DType, OpKind};

pub mod conditional;
pub mod geometry;
pub mod stamp;
pub mod user;

/// A kernel language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    Wgsl,
    CudaC,
}

include!(concat!(env!("OUT_DIR"), "/sources.rs"));

/// The shared WGSL prelude: the immediate block (`seam::Launch::immediates`:
/// `Params`, then the view offsets `o0` … `o7`) and helpers. A backend
/// prepends it to a user kernel's [`seam::KernelDef::wgsl`].
pub const WGSL_PARAMS: &str = seam::kernel::WGSL_PRELUDE;

/// Bytes every buffer a WGSL kernel binds is a whole multiple of: the
/// Vulkan, wgpu and Metal backends round allocations up to it. gemm binds
/// b as `array<vec4<u32>>`, so the quad holding any word of a buffer must
/// lie inside it.
pub const BUFFER_ROUND: u64 = 16;

/// The shared CUDA C prelude: the `Params` block every kernel takes by value.
pub const CUDA_PARAMS: &str = include_str!("../cuda/params.cu");

/// The source of `op` in `lang`, if it has been written: the complete
/// module or translation unit, its language's prelude included. CUDA C
/// restarts line numbering after the prelude, so NVRTC and hipRTC messages
/// name the line in `<op>.cu`. A user kernel's source is its definition's
/// (`KernelDef::wgsl`, `KernelDef::cuda`), with the same prelude.
pub fn source(op: OpKind, lang: Language) -> Option<String> {
    let body = match op {
        OpKind::User(k) => match lang {
            Language::Wgsl => k.def().wgsl?,
            Language::CudaC => k.def().cuda?.source(),
        },
        _ => SOURCES
            .iter()
            .find(|(l, name, _)| *l == lang && *name == op.name())
            .map(|(_, _, src)| *src)?,
    };
    Some(match lang {
        Language::Wgsl => format!("{WGSL_PARAMS}\n{body}"),
        Language::CudaC => format!("{CUDA_PARAMS}\n#line 1 \"{}.cu\"\n{body}", op.name()),
    })
}

/// The error for a kernel `lang` has no source of: a user kernel without
/// one is [`ErrorKind::KernelSourceMissing`](seam::ErrorKind::KernelSourceMissing); a catalogue op without one,
/// [`ErrorKind::OpUnsupported`](seam::ErrorKind::OpUnsupported).
pub fn missing_source(op: OpKind, lang: Language) -> seam::ErrorKind {
    match op {
        OpKind::User(k) => seam::ErrorKind::KernelSourceMissing {
            kernel: k.name(),
            source_kind: match lang {
                Language::Wgsl => "WGSL source (KernelDef::wgsl)",
                Language::CudaC => "CUDA C source (KernelDef::cuda)",
            },
        },
        _ => seam::ErrorKind::OpUnsupported {
            op,
            dtype: op.dtypes()[0],
        },
    }
}

/// The SPIR-V module of `op` (every entry point of its WGSL source), made by
/// naga at build time. `None` if the op has no WGSL source.
pub fn spirv(op: OpKind) -> Option<&'static [u32]> {
    SPIRV
        .iter()
        .find(|(name, _)| *name == op.name())
        .map(|(_, words)| *words)
}

/// The kernel variant an (op, dtype) pair runs. Variants are shared where the
/// bits are the same: fill and copy only care about element width, and
/// wrapping integer add/mul give the same bits for i32 and u32.
pub fn variant(op: OpKind, dtype: DType) -> &'static str {
    match (op, dtype) {
        (OpKind::User(_), _) => "",
        (OpKind::Fill | OpKind::Copy, d) if d.size() == 4 => "32",
        (OpKind::Fill | OpKind::Copy, _) => "16",
        (_, DType::I32 | DType::U32) => "u32",
        (_, DType::F32) => "f32",
        (_, DType::F16) => "f16",
        (_, DType::Bf16) => "bf16",
    }
}

/// Entry point name of an (op, dtype) pair, e.g. `add_u32`, `fill_16`; a
/// user kernel's is its name.
pub fn entry_point(op: OpKind, dtype: DType) -> String {
    match op {
        OpKind::User(k) => k.name().to_string(),
        _ => format!("{}_{}", op.name(), variant(op, dtype)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wgsl_sources_exist_for_the_pipeline_ops() {
        for op in [OpKind::Fill, OpKind::ScaleAdd, OpKind::Add] {
            let src = source(op, Language::Wgsl).expect("wgsl source");
            assert!(
                src.contains("var<immediate> p: Params"),
                "{op}: params header missing"
            );
        }
    }

    /// A user kernel for the crate's tests: one write binding, its grid
    /// `(d0, d1)` workgroups.
    pub(crate) mod user {
        use seam::kernel::KernelDef;
        use seam::ops::{Access, Binding};
        use seam::{DType, Params, Tolerance};
        fn extents(p: &Params, out: &mut [u64]) {
            out.fill(p.d0 as u64);
        }
        fn grid(p: &Params) -> [u32; 3] {
            [p.d0, p.d1, 1]
        }
        pub(crate) const BODY: &str =
            "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn zero_f32(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                 if (g.x < p.d0) { y[p.o0 + g.x] = 0.0; }\n\
             }\n";
        pub(crate) static ZERO: KernelDef = KernelDef {
            name: "zero_f32",
            bindings: &[Binding::fixed("y", Access::Write, DType::F32)],
            reads: &[],
            extents,
            workgroup_size: [64, 1, 1],
            grid,
            check: None,
            allows_aliasing: true,
            tolerance: Tolerance::BitExact,
            wgsl: Some(BODY),
            cuda: None,
            cpu: None,
            samples: &[],
        };
    }

    /// A user kernel's source is its definition's, after the language's
    /// prelude (none where the definition has none), and its entry point
    /// is its name. Mutations: user kernels looked up in the catalogue's
    /// sources, or named as a catalogue variant → red.
    #[test]
    fn a_user_kernels_source_is_its_definitions() {
        let op = OpKind::User(seam::kernel::Kernel::new(&user::ZERO));
        assert_eq!(
            source(op, Language::Wgsl),
            Some(format!("{WGSL_PARAMS}\n{}", user::BODY))
        );
        assert_eq!(source(op, Language::CudaC), None);
        assert_eq!(entry_point(op, DType::F32), "zero_f32");
    }

    #[test]
    fn every_wgsl_entry_point_named_by_variant_exists() {
        for op in OpKind::ALL {
            let src = source(op, Language::Wgsl).unwrap();
            for dtype in op.dtypes() {
                let ep = entry_point(op, *dtype);
                assert!(
                    src.contains(&format!("fn {ep}(")),
                    "{op}/{dtype}: no entry point {ep}"
                );
            }
        }
    }

    #[test]
    fn every_op_has_wgsl_and_spirv() {
        for op in OpKind::ALL {
            let src = source(op, Language::Wgsl).unwrap_or_else(|| panic!("{op}: no WGSL"));
            assert!(
                src.contains("var<immediate> p: Params"),
                "{op}: params header missing"
            );
            let words = spirv(op).unwrap_or_else(|| panic!("{op}: no SPIR-V"));
            assert_eq!(
                words.first(),
                Some(&0x0723_0203),
                "{op}: not a SPIR-V module"
            );
            // Every entry point name appears as a nul-terminated literal string.
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            for dtype in op.dtypes() {
                let ep = format!("{}\0", entry_point(op, *dtype));
                assert!(
                    bytes.windows(ep.len()).any(|w| w == ep.as_bytes()),
                    "{op}/{dtype}: entry point {ep} missing from SPIR-V"
                );
            }
        }
    }

    /// `seam::Params` as (field, value) in declaration order, from its
    /// derived `Debug`; an array field `_pad: [a, b]` becomes `pad0`, `pad1`.
    fn rust_params_fields(p: &seam::Params) -> Vec<(String, f64)> {
        let text = format!("{p:?}");
        let inner = text
            .strip_prefix("Params { ")
            .and_then(|t| t.strip_suffix(" }"))
            .unwrap_or_else(|| panic!("unexpected Debug of Params: {text}"));
        let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&inner[start..]);
        let mut fields = Vec::new();
        for part in parts {
            let (name, value) = part.trim().split_once(": ").unwrap();
            let name = name.trim_start_matches('_');
            match value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                Some(items) => {
                    for (i, v) in items.split(", ").enumerate() {
                        fields.push((format!("{name}{i}"), v.parse().unwrap()));
                    }
                }
                None => fields.push((name.to_string(), value.parse().unwrap())),
            }
        }
        fields
    }

    /// The fields of `struct Params` in a prelude as (name, is_float), in
    /// declaration order; `wgsl` selects `name: type,` over C's `type a, b;`.
    fn prelude_params_fields(prelude: &str, wgsl: bool) -> Vec<(String, bool)> {
        let code: String = prelude
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" ");
        let body = code
            .split_once("struct Params {")
            .and_then(|(_, rest)| rest.split_once('}'))
            .map(|(body, _)| body)
            .expect("the prelude declares struct Params");
        let mut fields = Vec::new();
        if wgsl {
            for decl in body.split(',').map(str::trim).filter(|d| !d.is_empty()) {
                let (name, ty) = decl.split_once(':').expect("`name: type`");
                let ty = ty.trim();
                assert!(
                    matches!(ty, "u32" | "i32" | "f32"),
                    "{name}: {ty} is not 32-bit"
                );
                fields.push((name.trim().to_string(), ty == "f32"));
            }
        } else {
            for decl in body.split(';').map(str::trim).filter(|d| !d.is_empty()) {
                let (first, rest) = decl.split_once(',').unwrap_or((decl, ""));
                let (ty, first) = first.trim().rsplit_once(' ').expect("`type name`");
                let ty = ty.trim();
                assert!(
                    matches!(ty, "unsigned int" | "int" | "float"),
                    "{first}: {ty} is not 32-bit"
                );
                let names = std::iter::once(first).chain(rest.split(',').map(str::trim));
                for name in names.filter(|n| !n.is_empty()) {
                    fields.push((name.to_string(), ty == "float"));
                }
            }
        }
        fields
    }

    /// Each prelude's `Params`, read at its C/WGSL offsets (one 32-bit word per
    /// field, in order), finds the value of the Rust field of the same name:
    /// CUDA's in `Params::to_bytes` (32 bytes), WGSL's in
    /// `Launch::immediates` (64 bytes: the same fields, then `o0` … `o7`,
    /// each binding's view offset). A field removed, added, reordered,
    /// renamed or retyped on either side fails.
    #[test]
    #[allow(unsafe_code)] // a launch built by hand, read for its immediates only
    fn prelude_params_match_seam_params_to_bytes() {
        let params = seam::Params {
            d0: 1,
            d1: 2,
            d2: 3,
            bits: 0xdead_beef,
            s0: 5.5,
            s1: -6.25,
            _pad: [7, 8],
        };
        // Five bindings at distinct offsets; o5..o7 are zero (no binding).
        let offsets = [11u32, 12, 13, 14, 15];
        let views: Vec<seam::RawView> = offsets
            .iter()
            .enumerate()
            .map(|(k, &o)| seam::RawView::at(seam::RawBuffer(k as u64 + 1), o, 4, 100))
            .collect();
        // SAFETY: the launch is only read for its immediates, never given
        // to a backend.
        let launch = unsafe {
            seam::Launch::new_unchecked(
                OpKind::Add,
                DType::F32,
                seam::ops::BufferList::from_slice(&views),
                params,
            )
        };
        let rust = rust_params_fields(&params);
        let mut rust_wgsl = rust.clone();
        for k in 0..seam::kernel::MAX_BINDINGS {
            let o = offsets.get(k).copied().unwrap_or(0);
            rust_wgsl.push((format!("o{k}"), o as f64));
        }
        let cuda_bytes = params.to_bytes();
        let wgsl_bytes = launch.immediates();
        assert_eq!(wgsl_bytes.len(), seam::ops::IMMEDIATE_BYTES);
        for (prelude, wgsl, file, bytes, rust) in [
            (CUDA_PARAMS, false, "cuda/params.cu", &cuda_bytes[..], &rust),
            (
                WGSL_PARAMS,
                true,
                "core/src/kernel/params.wgsl",
                &wgsl_bytes[..],
                &rust_wgsl,
            ),
        ] {
            let fields = prelude_params_fields(prelude, wgsl);
            assert_eq!(
                fields.len() * 4,
                bytes.len(),
                "{file}: {fields:?} is not {} bytes",
                bytes.len()
            );
            let names: Vec<_> = fields.iter().map(|(n, _)| n.as_str()).collect();
            let rust_names: Vec<_> = rust.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, rust_names, "{file}: fields differ from seam's block");
            for (i, ((name, is_float), (_, want))) in fields.iter().zip(rust).enumerate() {
                let word = u32::from_ne_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
                let got = if *is_float {
                    f32::from_bits(word) as f64
                } else {
                    word as f64
                };
                assert_eq!(got, *want, "{file}: {name} at byte {}", 4 * i);
            }
        }
    }

    #[test]
    fn every_cuda_source_has_the_prelude_and_no_params_of_its_own() {
        for op in OpKind::ALL {
            let src = source(op, Language::CudaC).unwrap_or_else(|| panic!("{op}: no CUDA C"));
            assert!(src.starts_with(CUDA_PARAMS), "{op}: prelude missing");
            assert_eq!(src.matches("struct Params").count(), 1, "{op}");
            assert!(src.contains(&format!("#line 1 \"{}.cu\"", op.name())));
        }
    }

    #[test]
    fn variants_share_bits_not_semantics() {
        assert_eq!(entry_point(OpKind::Add, DType::I32), "add_u32");
        assert_eq!(entry_point(OpKind::Fill, DType::Bf16), "fill_16");
        assert_eq!(entry_point(OpKind::Gemm, DType::F16), "gemm_f16");
    }
}
