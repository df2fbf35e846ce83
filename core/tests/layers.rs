//! Core's modules form layers: no import runs in a circle. Each top-level
//! module of `core/src` (a file, or a folder with its files) depends on the
//! modules its code names through `crate::` (a re-exported item counts as
//! the module `lib.rs` re-exports it from); the graph of those dependencies
//! must have no cycle. Comments and doc links do not count: a doc link is
//! not an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn src() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

/// The code of a file without its comments (line comments and doc lines;
/// block comments are not used in core).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal is kept (an odd number of
            // quotes before it means it is inside one).
            Some(i) if l[..i].matches('"').count() % 2 == 0 => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names each `crate::` path in `code` starts with: `crate::a::B` gives
/// `a`, `crate::{a::B, C}` gives `a` and `C`.
fn crate_names(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split at commas not nested in braces.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(item.trim()));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.push(ident(item.trim()));
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

/// Each item `lib.rs` re-exports, with the module it comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let code = code(lib);
    for stmt in code.split(';') {
        let stmt = stmt.trim();
        let Some(rest) = stmt.strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.trim().rsplit(" as ").next().unwrap_or("").trim();
            if !name.is_empty() {
                out.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    out
}

/// Every top-level module of core and the modules it depends on.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let items = reexports(&lib);
    let mut files: Vec<(String, std::path::PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            for f in std::fs::read_dir(&path).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "rs") {
                    files.push((name.clone(), f));
                }
            }
        } else if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
            files.push((name, path));
        }
    }
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut deps: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        for name in crate_names(&code(&text)) {
            let target = if modules.contains(&name) {
                name
            } else if let Some(m) = items.get(&name) {
                m.clone()
            } else {
                panic!(
                    "{}: `crate::{name}` is neither a module of core nor an item lib.rs re-exports",
                    path.display()
                );
            };
            if target != *module && modules.contains(&target) {
                deps.get_mut(module).unwrap().insert(target);
            }
        }
    }
    deps
}

/// A cycle through `deps`, if there is one, as the modules on it.
fn cycle(deps: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search with the path kept: a module met again while still
    // on the path closes a cycle.
    fn visit(
        m: &str,
        deps: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut c = path[at..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for d in deps.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, deps, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    deps.keys()
        .find_map(|m| visit(m, deps, &mut Vec::new(), &mut done))
}

#[test]
fn core_has_no_import_circles() {
    let deps = dependencies();
    // The reading is not empty: the device depends on the catalogue and the
    // backend trait, and the ids on nothing.
    assert!(deps["device"].contains("ops") && deps["device"].contains("backend"));
    assert!(deps["ids"].is_empty(), "ids: {:?}", deps["ids"]);
    if let Some(c) = cycle(&deps) {
        let edges: Vec<String> = deps
            .iter()
            .map(|(m, d)| {
                format!(
                    "{m} -> {}",
                    d.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        panic!(
            "an import circle in core: {}\nevery module's dependencies:\n{}",
            c.join(" -> "),
            edges.join("\n")
        );
    }
}

#[test]
fn the_reader_finds_paths_groups_and_cycles() {
    let names = crate_names(&code(
        "use crate::ops::{A, B};\nuse crate::{dtype::DType, Error};\n// crate::gone\nlet x = crate::view::at(\"//\");",
    ));
    assert_eq!(names, ["ops", "dtype", "Error", "view"]);
    let items = reexports("pub use error::{Error, ErrorKind};\npub use ids::BufferId;");
    assert_eq!(items["ErrorKind"], "error");
    assert_eq!(items["BufferId"], "ids");
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    deps.insert("a".into(), ["b".to_string()].into());
    deps.insert("b".into(), ["c".to_string()].into());
    deps.insert("c".into(), BTreeSet::new());
    assert_eq!(cycle(&deps), None);
    deps.get_mut("c").unwrap().insert("a".into());
    assert_eq!(cycle(&deps).unwrap(), ["a", "b", "c", "a"]);
}
