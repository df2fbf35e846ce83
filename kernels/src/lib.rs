//! Kernel sources: one file per op per language.
//!
//! - `wgsl/<op>.wgsl`: WGSL for wgpu, turned into SPIR-V (Vulkan) and MSL
//!   (Metal) by naga. Each is prefixed with `wgsl/params.wgsl` (the shared prelude:
//!   the `Params` push-constant block and helpers such as `exp_accurate`).
//!   Validated by naga at build time.
//!   [`spirv`] gives the SPIR-V naga made from it at build time: one module
//!   per op holding every entry point, `Params` as Vulkan push constants,
//!   storage buffers at set 0 in signature order.
//! - `cuda/<op>.cu`: CUDA C for the CUDA (NVRTC) and HIP (hipRTC) backends.
//!
//! Entry points are named `<op>_<variant>`; [`entry_point`] gives the
//! variant for each op and element type, the same for every language.
//! [`geometry`] says how many workgroups a WGSL launch needs.

use seam::{DType, OpKind};

pub mod geometry;

/// A kernel language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    Wgsl,
    CudaC,
}

include!(concat!(env!("OUT_DIR"), "/sources.rs"));

/// The shared WGSL prelude: the `Params` push-constant block and helpers.
pub const WGSL_PARAMS: &str = include_str!("../wgsl/params.wgsl");

/// The source of `op` in `lang`, if it has been written. For WGSL this is the
/// complete module (params header included).
pub fn source(op: OpKind, lang: Language) -> Option<String> {
    let body = SOURCES
        .iter()
        .find(|(l, name, _)| *l == lang && *name == op.name())
        .map(|(_, _, src)| *src)?;
    Some(match lang {
        Language::Wgsl => format!("{WGSL_PARAMS}\n{body}"),
        Language::CudaC => body.to_string(),
    })
}

/// The SPIR-V module of `op` (every entry point of its WGSL source), made by
/// naga at build time. `None` if the op has no WGSL source.
pub fn spirv(op: OpKind) -> Option<&'static [u32]> {
    SPIRV
        .iter()
        .find(|(name, _)| *name == op.name())
        .map(|(_, words)| *words)
}

/// Ops that have a source in `lang`.
pub fn available(lang: Language) -> Vec<OpKind> {
    OpKind::ALL
        .into_iter()
        .filter(|op| {
            SOURCES
                .iter()
                .any(|(l, n, _)| *l == lang && *n == op.name())
        })
        .collect()
}

/// The kernel variant an (op, dtype) pair runs. Variants are shared where the
/// bits are the same: fill and copy only care about element width, and
/// wrapping integer add/mul give the same bits for i32 and u32.
pub fn variant(op: OpKind, dtype: DType) -> &'static str {
    match (op, dtype) {
        (OpKind::Fill | OpKind::Copy, d) if d.size() == 4 => "32",
        (OpKind::Fill | OpKind::Copy, _) => "16",
        (_, DType::I32 | DType::U32) => "u32",
        (_, DType::F32) => "f32",
        (_, DType::F16) => "f16",
        (_, DType::Bf16) => "bf16",
    }
}

/// Entry point name of an (op, dtype) pair, e.g. `add_u32`, `fill_16`.
pub fn entry_point(op: OpKind, dtype: DType) -> String {
    format!("{}_{}", op.name(), variant(op, dtype))
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

    #[test]
    fn every_wgsl_entry_point_named_by_variant_exists() {
        for op in available(Language::Wgsl) {
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

    #[test]
    fn variants_share_bits_not_semantics() {
        assert_eq!(entry_point(OpKind::Add, DType::I32), "add_u32");
        assert_eq!(entry_point(OpKind::Fill, DType::Bf16), "fill_16");
        assert_eq!(entry_point(OpKind::Gemm, DType::F16), "gemm_f16");
    }
}
