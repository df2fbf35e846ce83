//! The backends seam-backends knows are its cargo features: each feature
//! that enables a `seam-<name>` crate (`cuda = ["dep:seam-cuda"]`) is one
//! backend, whose crate exports `REGISTRATION`. This script turns that one
//! feature line into the list `discover()` walks, so adding a backend needs
//! no other list.

use std::fmt::Write;

fn main() {
    println!("cargo::rerun-if-changed=Cargo.toml");
    let manifest = std::fs::read_to_string("Cargo.toml").expect("seam-backends' Cargo.toml");
    let mut in_features = false;
    let mut known = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_features = line == "[features]";
            continue;
        }
        if !in_features || line.starts_with('#') {
            continue;
        }
        let Some((feature, deps)) = line.split_once('=') else {
            continue;
        };
        let feature = feature.trim();
        if let Some(start) = deps.find("\"dep:seam-") {
            let rest = &deps[start + "\"dep:seam-".len()..];
            let name = &rest[..rest.find('"').expect("a closing quote")];
            known.push((name.to_string(), feature.to_string()));
        }
    }
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
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut in_seam = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_seam = line == "[package.metadata.seam]";
            } else if let (true, Some(v)) = (in_seam, line.strip_prefix("check-target")) {
                let triple = v.trim_start_matches([' ', '=']).trim().trim_matches('"');
                targets.push((name.clone(), triple.to_string()));
            }
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
    out.push_str("];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("known.rs");
    std::fs::write(dest, out).expect("writing known.rs");
}
