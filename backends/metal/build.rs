//! Generates the Metal Shading Language for every kernel from the shared WGSL
//! sources (`kernels/wgsl/<op>.wgsl`, each prefixed by `params.wgsl`) with
//! naga, on every host, so a kernel naga cannot lower to MSL fails the build
//! on Linux CI too. One MSL library per op holds every entry point of the op.
//!
//! Bindings: storage buffer `@binding(i)` is Metal buffer index `i`, so the
//! backend binds a launch's buffers in signature order; the `var<immediate>`
//! `Params` block is buffer index `PARAMS_INDEX` (set with `setBytes` eagerly,
//! or a slice of an argument buffer in an indirect command buffer), and
//! naga's `_mslBufferSizes` block (the byte size of each runtime-sized array
//! binding, in declaration order; naga requires it whenever a kernel has a
//! runtime-sized array) is buffer index `SIZES_INDEX`.
//!
//! Generated here (rather than in seam-kernels) so this crate owns its
//! lowering; kernels/ is not touched.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Metal buffer index of the `Params` block. One past the largest binding
/// count (3), so an indirect command buffer needs only 4 kernel buffer slots.
const PARAMS_INDEX: u8 = 3;
/// Metal buffer index of naga's buffer-sizes block.
const SIZES_INDEX: u8 = 4;
/// MSL 2.1: the oldest that has compute in indirect command buffers
/// (macOS 10.14 / iOS 12); naga also emits `max_total_threads_per_threadgroup` from 2.1 on.
const MSL_VERSION: (u8, u8) = (2, 1);

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let wgsl_dir = manifest.join("../../kernels/wgsl");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed={}", wgsl_dir.display());
    println!("cargo:rerun-if-changed=build.rs");

    let header = std::fs::read_to_string(wgsl_dir.join("params.wgsl"))
        .unwrap_or_else(|e| panic!("{}/params.wgsl: {e}", wgsl_dir.display()));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&wgsl_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", wgsl_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wgsl"))
        .filter(|p| p.file_stem().is_some_and(|s| s != "params"))
        .collect();
    files.sort();

    let mut table = format!(
        "/// Metal buffer index of the `Params` block in every kernel.\n\
         pub const PARAMS_INDEX: usize = {PARAMS_INDEX};\n\
         /// Metal buffer index of naga's `_mslBufferSizes` block.\n\
         pub const SIZES_INDEX: usize = {SIZES_INDEX};\n\
         /// MSL version naga targeted.\n\
         pub const MSL_VERSION: (u8, u8) = {MSL_VERSION:?};\n\
         pub(crate) static LIBRARIES: &[Library] = &[\n"
    );
    for path in files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_else(|| panic!("{}: file name is not UTF-8", path.display()))
            .to_string();
        let body =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let full = format!("{header}\n{body}");
        let (msl, entry_points, sizes) = to_msl(&path, &full);
        let file = out.join(format!("{stem}.metal"));
        std::fs::write(&file, &msl).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        writeln!(
            table,
            "    Library {{\n        op: {stem:?},\n        source: include_str!({:?}),\n        sizes: &{sizes:?},\n        entry_points: &[",
            file.display().to_string()
        )
        .expect("writing to a String");
        for ep in entry_points {
            writeln!(
                table,
                "            EntryPoint {{ wgsl: {:?}, msl: {:?}, threads: {:?}, threadgroup_memory: &{:?} }},",
                ep.wgsl, ep.msl, ep.threads, ep.threadgroup_memory
            )
            .expect("writing to a String");
        }
        table.push_str("        ],\n    },\n");
    }
    table.push_str("];\n");
    std::fs::write(out.join("msl.rs"), table).expect("writing msl.rs");
}

struct Ep {
    wgsl: String,
    msl: String,
    threads: [u32; 3],
    /// Bytes of each `var<workgroup>` the entry point uses, in declaration
    /// order: naga passes them as `threadgroup` arguments, which take
    /// `[[threadgroup(i)]]` indices in that order, and the host sets each
    /// length (a multiple of 16, as Metal requires).
    threadgroup_memory: Vec<u32>,
}

/// Parse, validate and lower one op's WGSL to MSL, every entry point in one
/// library. Every binding must be mapped: a missing one is a build error,
/// never silently invalid MSL.
/// Also returns, for each member of `_mslBufferSizes` in order, the binding
/// whose byte size it carries.
fn to_msl(path: &Path, full: &str) -> (String, Vec<Ep>, Vec<u32>) {
    use naga::back::msl;
    let module = naga::front::wgsl::parse_str(full).unwrap_or_else(|e| {
        panic!(
            "{}: WGSL parse error:\n{}",
            path.display(),
            e.emit_to_string(full)
        )
    });
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        msl::supported_capabilities(),
    )
    .validate(&module)
    .unwrap_or_else(|e| {
        panic!(
            "{}: WGSL validation for Metal failed:\n{}",
            path.display(),
            e.emit_to_string(full)
        )
    });

    let mut resources = msl::BindingMap::default();
    let mut sizes = Vec::new();
    for (_, var) in module.global_variables.iter() {
        let Some(binding) = var.binding else { continue };
        assert_eq!(
            binding.group,
            0,
            "{}: kernels use bind group 0 only",
            path.display()
        );
        let slot = u8::try_from(binding.binding)
            .ok()
            .filter(|&s| s < PARAMS_INDEX)
            .unwrap_or_else(|| {
                panic!(
                    "{}: binding {} collides with the Params buffer index {PARAMS_INDEX}",
                    path.display(),
                    binding.binding
                )
            });
        if module.types[var.ty]
            .inner
            .needs_host_buffer_byte_size(&module.types)
        {
            sizes.push(binding.binding);
        }
        let mutable = matches!(
            var.space,
            naga::AddressSpace::Storage { access } if access.contains(naga::StorageAccess::STORE)
        );
        resources.insert(
            binding,
            msl::BindTarget {
                buffer: Some(slot),
                mutable,
                ..Default::default()
            },
        );
    }
    let mut per_entry_point_map = msl::EntryPointResourceMap::default();
    for ep in &module.entry_points {
        per_entry_point_map.insert(
            ep.name.clone(),
            msl::EntryPointResources {
                resources: resources.clone(),
                immediates_buffer: Some(PARAMS_INDEX),
                sizes_buffer: Some(SIZES_INDEX),
            },
        );
    }
    // As the SPIR-V path: no zero-initialised workgroup memory (no kernel
    // reads before it writes), no loop instrumentation, buffer accesses
    // unchecked (core validates every launch's ranges before it is queued).
    let options = msl::Options {
        lang_version: MSL_VERSION,
        per_entry_point_map,
        fake_missing_bindings: false,
        zero_initialize_workgroup_memory: false,
        force_loop_bounding: false,
        ..Default::default()
    };
    let (msl, translation) =
        msl::write_string(&module, &info, &options, &msl::PipelineOptions::default())
            .unwrap_or_else(|e| panic!("{}: MSL generation failed: {e:?}", path.display()));
    let eps = module
        .entry_points
        .iter()
        .zip(translation.entry_point_names)
        .enumerate()
        .map(|(index, (ep, name))| Ep {
            wgsl: ep.name.clone(),
            msl: name.unwrap_or_else(|e| {
                panic!(
                    "{}: entry point {}: MSL generation failed: {e:?}",
                    path.display(),
                    ep.name
                )
            }),
            threads: ep.workgroup_size,
            threadgroup_memory: {
                let used = info.get_entry_point(index);
                module
                    .global_variables
                    .iter()
                    .filter(|(h, v)| {
                        v.space == naga::AddressSpace::WorkGroup && !used[*h].is_empty()
                    })
                    .map(|(_, v)| {
                        module.types[v.ty]
                            .inner
                            .size(module.to_ctx())
                            .next_multiple_of(16)
                    })
                    .collect()
            },
        })
        .collect();
    (msl, eps, sizes)
}
