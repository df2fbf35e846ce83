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
    out.push_str("    ]\n}\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("known.rs");
    std::fs::write(dest, out).expect("writing known.rs");
}
