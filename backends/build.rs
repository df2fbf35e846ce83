//! The backends seam-backends knows are its cargo features: each feature
//! that enables a `seam-<name>` crate (`cuda = ["dep:seam-cuda"]`) is one
//! backend, whose crate exports `REGISTRATION`. This script turns that one
//! feature line into the list `discover()` walks, so adding a backend needs
//! no other list.

use std::fmt::Write;

/// A manifest, parsed.
fn read(path: &str) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    text.parse()
        .unwrap_or_else(|e| panic!("{path} is not valid TOML: {e}"))
}

fn main() {
    println!("cargo::rerun-if-changed=Cargo.toml");
    let manifest = read("Cargo.toml");
    let features = manifest
        .get("features")
        .and_then(toml::Value::as_table)
        .expect("seam-backends' Cargo.toml has [features]");
    // (backend name, feature): every feature that enables a `seam-<name>`
    // crate, in the manifest's order.
    let known: Vec<(String, String)> = features
        .iter()
        .filter_map(|(feature, enables)| {
            let name = enables
                .as_array()?
                .iter()
                .find_map(|e| e.as_str()?.strip_prefix("dep:seam-"))?;
            Some((name.to_string(), feature.clone()))
        })
        .collect();
    assert!(
        !known.is_empty(),
        "no `feature = [\"dep:seam-<name>\"]` line in seam-backends' [features]"
    );
    // A backend that only type-checks for another target says so in its own
    // manifest: `[package.metadata.seam] check-target = "<triple>"`.
    let mut targets = Vec::new();
    for (name, _) in &known {
        let path = format!("{name}/Cargo.toml");
        println!("cargo::rerun-if-changed={path}");
        let triple = read(&path)
            .get("package")
            .and_then(|p| p.get("metadata"))
            .and_then(|m| m.get("seam"))
            .and_then(|s| s.get("check-target"))
            .and_then(|t| t.as_str().map(str::to_string));
        if let Some(triple) = triple {
            targets.push((name.clone(), triple));
        }
    }
    let mut out = String::from(
        "/// Every backend this build knows, compiled in or not: (name, cargo feature).\n\
         pub const KNOWN: &[(&str, &str)] = &[\n    (\"cpu\", \"always on\"),\n",
    );
    for (name, feature) in &known {
        writeln!(out, "    ({name:?}, {feature:?}),").unwrap();
    }
    out.push_str(
        "];\n\n/// The registrations of the backends compiled into this build.\n\
         pub fn registrations() -> Vec<&'static seam::Registration> {\n    vec![\n        &seam_cpu::REGISTRATION,\n",
    );
    for (name, feature) in &known {
        let krate = format!("seam_{name}");
        writeln!(
            out,
            "        #[cfg(feature = {feature:?})]\n        &{krate}::REGISTRATION,"
        )
        .unwrap();
    }
    out.push_str("    ]\n}\n\n");
    out.push_str(
        "/// Backends whose crate type-checks only for another target (the seam\n\
         /// guard checks them there): (name, target triple).\n\
         pub const CHECK_TARGETS: &[(&str, &str)] = &[\n",
    );
    for (name, triple) in &targets {
        writeln!(out, "    ({name:?}, {triple:?}),").unwrap();
    }
    out.push_str("];\n\n");
    // `portable`: the backends every machine builds, which the other
    // crates turn on by default (each forwards this one feature).
    let portable: Vec<&str> = features
        .get("portable")
        .and_then(toml::Value::as_array)
        .expect("seam-backends' [features] has `portable`")
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    out.push_str(
        "/// The features of the `portable` set: the backends every machine\n\
         /// builds, on by default in the suite, the examples and the tools.\n\
         pub const PORTABLE: &[&str] = &[\n",
    );
    for feature in &portable {
        writeln!(out, "    {feature:?},").unwrap();
    }
    out.push_str("];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("known.rs");
    std::fs::write(dest, out).expect("writing known.rs");
}
