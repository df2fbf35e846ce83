//! Validates every WGSL kernel with naga (parse + full validation), so a
//! broken shader fails the build on every machine, GPU or not; translates
//! each one to SPIR-V (one module per op, every entry point in it, the
//! `var<immediate>` block as Vulkan push constants); and generates the source
//! and SPIR-V tables `src/lib.rs` includes, plus each entry point's
//! `@workgroup_size` as naga reflects it (for the geometry tests).

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo");
    let header = std::fs::read_to_string(root.join("wgsl/params.wgsl")).expect("wgsl/params.wgsl");
    println!("cargo:rerun-if-changed=wgsl");
    println!("cargo:rerun-if-changed=cuda");

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
                let module = naga::front::wgsl::parse_str(&full).unwrap_or_else(|e| {
                    panic!(
                        "{}: WGSL parse error:\n{}",
                        path.display(),
                        e.emit_to_string(&full)
                    )
                });
                let info = naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::all(),
                )
                .validate(&module)
                .unwrap_or_else(|e| {
                    panic!(
                        "{}: WGSL validation error:\n{}",
                        path.display(),
                        e.emit_to_string(&full)
                    )
                });
                for ep in &module.entry_points {
                    writeln!(sizes, "    ({:?}, {:?}),", ep.name, ep.workgroup_size).unwrap();
                }
                let words = to_spirv(&module, &info).unwrap_or_else(|e| {
                    panic!("{}: SPIR-V generation failed: {e}", path.display())
                });
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

/// SPIR-V 1.0 (every Vulkan version accepts it) with all entry points.
/// Workgroup memory is not zero-initialised (no kernel reads before it
/// writes) and loops are not instrumented: both would only cost time.
fn to_spirv(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
) -> Result<Vec<u32>, naga::back::spv::Error> {
    let options = naga::back::spv::Options {
        lang_version: (1, 0),
        flags: naga::back::spv::WriterFlags::empty(),
        zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: false,
        ..Default::default()
    };
    naga::back::spv::write_vec(module, info, &options, None)
}
