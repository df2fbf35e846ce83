//! Validates every WGSL kernel with naga (parse + full validation), so a
//! broken shader fails the build on every machine, GPU or not; translates
//! each one to SPIR-V (one module per op, every entry point in it, the
//! `var<immediate>` block as Vulkan push constants, which the Vulkan backend
//! moves to a uniform buffer when it makes the pipeline); and generates the source
//! and SPIR-V tables `src/lib.rs` includes, plus each entry point's
//! `@workgroup_size` as naga reflects it (for the geometry tests).

use std::fmt::Write as _;
use std::path::Path;

// The WGSL → SPIR-V step, shared with the bench's GEMV probe.
#[path = "spirv.rs"]
mod spirv;

fn main() {
    // Read at run time: a build script compiled for another checkout that
    // shares this target directory must still read this one's files.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set by cargo");
    let root = Path::new(&manifest);
    let out = std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo");
    // The prelude is core's (the WGSL view of `seam::Params`, which user
    // kernels are checked against at registration too).
    let prelude = root.join("../core/src/kernel/params.wgsl");
    let header = std::fs::read_to_string(&prelude).expect("core/src/kernel/params.wgsl");
    println!("cargo:rerun-if-changed={}", prelude.display());
    println!("cargo:rerun-if-changed=wgsl");
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-changed=spirv.rs");

    let mut table = String::from("pub(crate) static SOURCES: &[(Language, &str, &str)] = &[\n");
    let mut spirv = String::from("pub(crate) static SPIRV: &[(&str, &[u32])] = &[\n");
    let mut sizes = String::from("static WORKGROUP_SIZES: &[(&str, [u32; 3])] = &[\n");
    for (lang, dir, ext) in [("Wgsl", "wgsl", "wgsl"), ("CudaC", "cuda", "cu")] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("reading kernels/{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect();
        files.sort();
        for path in files {
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            if stem == "params" || stem == "common" {
                continue;
            }
            if lang == "Wgsl" {
                let body = std::fs::read_to_string(&path).unwrap();
                let full = format!("{header}\n{body}");
                let (module, words) =
                    spirv::compile(&full).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                for ep in &module.entry_points {
                    writeln!(sizes, "    ({:?}, {:?}),", ep.name, ep.workgroup_size).unwrap();
                }
                let file = Path::new(&out).join(format!("{stem}.spv.rs"));
                let mut lit = String::from("&[");
                for (i, w) in words.iter().enumerate() {
                    if i % 8 == 0 {
                        lit.push('\n');
                    }
                    write!(lit, "{w:#010x},").unwrap();
                }
                lit.push_str("\n]");
                std::fs::write(&file, lit).expect("writing SPIR-V table");
                writeln!(
                    spirv,
                    "    ({stem:?}, include!({:?})),",
                    file.display().to_string()
                )
                .unwrap();
            }
            writeln!(
                table,
                "    (Language::{lang}, {stem:?}, include_str!({:?})),",
                path.display().to_string()
            )
            .unwrap();
        }
    }
    table.push_str("];\n");
    spirv.push_str("];\n");
    sizes.push_str("];\n");
    table.push_str(&spirv);
    std::fs::write(Path::new(&out).join("workgroup_sizes.rs"), sizes)
        .expect("writing workgroup_sizes.rs");
    std::fs::write(Path::new(&out).join("sources.rs"), table).expect("writing sources.rs");
}
