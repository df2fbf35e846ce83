//! Validates every WGSL kernel with naga (parse + full validation), so a
//! broken shader fails the build on every machine, GPU or not, and generates
//! the source table `src/lib.rs` includes.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo");
    let header = std::fs::read_to_string(root.join("wgsl/params.wgsl")).expect("wgsl/params.wgsl");
    println!("cargo:rerun-if-changed=wgsl");
    println!("cargo:rerun-if-changed=cuda");

    let mut table = String::from("pub(crate) static SOURCES: &[(Language, &str, &str)] = &[\n");
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
                naga::valid::Validator::new(
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
    std::fs::write(Path::new(&out).join("sources.rs"), table).expect("writing sources.rs");
}
