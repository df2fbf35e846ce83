//! Generates the Metal Shading Language for every kernel from the shared WGSL
//! sources (`kernels/wgsl/<op>.wgsl`, each prefixed by core's `params.wgsl`) with
//! naga, on every host, so a kernel naga cannot lower to MSL fails the build
//! on Linux CI too. One MSL library per op holds every entry point of the op.
//!
//! The options and the buffer layout (bindings at `0..8`, `Params` at
//! `PARAMS_INDEX`, naga's `_mslBufferSizes` at `SIZES_INDEX`, threadgroup
//! memory reflected per entry point) are `src/lowering.rs`, included here and
//! compiled into the crate, which lowers user kernels with the same code.
//!
//! Generated here (rather than in seam-kernels) so this crate owns its
//! lowering; kernels/ is not touched.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

// The crate lowers user kernels with the parts the catalogue does not use
// (`Checks::Bounds`, one entry point).
#[allow(dead_code)]
#[path = "src/lowering.rs"]
mod lowering;

use lowering::Checks;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let wgsl_dir = manifest.join("../../kernels/wgsl");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed={}", wgsl_dir.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/lowering.rs");

    // The prelude is core's (the WGSL view of `seam::Params`).
    let prelude = manifest.join("../../core/src/kernel/params.wgsl");
    println!("cargo:rerun-if-changed={}", prelude.display());
    let header =
        std::fs::read_to_string(&prelude).unwrap_or_else(|e| panic!("{}: {e}", prelude.display()));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&wgsl_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", wgsl_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wgsl"))
        .filter(|p| p.file_stem().is_some_and(|s| s != "params"))
        .collect();
    files.sort();

    let mut table = String::from("pub(crate) static LIBRARIES: &[Library] = &[\n");
    for path in files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_else(|| panic!("{}: file name is not UTF-8", path.display()))
            .to_string();
        let body =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let full = format!("{header}\n{body}");
        let lowering::Lowered {
            msl,
            sizes,
            entry_points,
        } = to_msl(&path, &full);
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

/// Parse, validate and lower one op's WGSL to MSL, every entry point in one
/// library; any failure fails the build.
fn to_msl(path: &Path, full: &str) -> lowering::Lowered {
    let module = naga::front::wgsl::parse_str(full).unwrap_or_else(|e| {
        panic!(
            "{}: WGSL parse error:\n{}",
            path.display(),
            e.emit_to_string(full)
        )
    });
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::back::msl::supported_capabilities(),
    )
    .validate(&module)
    .unwrap_or_else(|e| {
        panic!(
            "{}: WGSL validation for Metal failed:\n{}",
            path.display(),
            e.emit_to_string(full)
        )
    });
    lowering::lower(&module, &info, None, Checks::Unchecked)
        .unwrap_or_else(|e| panic!("{}: MSL generation failed: {e}", path.display()))
}
