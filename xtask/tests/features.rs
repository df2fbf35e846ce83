//! The packages the README and CI build alone (`cargo xtask …` builds
//! xtask, and through it the conformance binary; `cargo run -p
//! seam-example-llama`; `cargo run -p seam-bench`) get every dependency with
//! the features the README's test command (`cargo test --workspace`) gives
//! it, so they reuse that build. `workspace-hack` asks for the union; this
//! fails, naming the crate and both feature lists, when a dependency change
//! makes it incomplete. The workspace's own crates are left out: their
//! features differ by design (a backend feature, the stream backend's test
//! driver) and they are cheap to build.
//!
//! Mutation: drop `msl-out` from both of workspace-hack's `naga` lines →
//! red, naming naga for `-p xtask` (tried).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Each resolved crate of `cargo tree <selection>` as `name version|features`.
fn resolved(selection: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .arg("tree")
        .args(selection)
        .args(["--locked", "--offline", "-f", "{p}|{f}", "--prefix", "none"])
        .current_dir(root())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree {}: {}",
        selection.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("(*)"))
        .map(|l| l.replace(" (proc-macro)", ""))
        // Path crates (the workspace's own) print their folder.
        .filter(|l| !l.contains(" (/"))
        .collect()
}

#[test]
fn a_package_built_alone_gets_the_workspace_builds_features() {
    let workspace = resolved(&["--workspace", "-e", "normal,build,dev"]);
    assert!(
        workspace.iter().any(|l| l.starts_with("wgpu ")),
        "the workspace resolves no wgpu: {workspace:?}"
    );
    let mut wrong = Vec::new();
    for alone in [
        &["-p", "xtask"][..],
        &["-p", "seam-conformance", "-p", "workspace-hack"],
        &["-p", "seam-example-llama"],
        &["-p", "seam-bench"],
    ] {
        let mut selection = alone.to_vec();
        selection.extend(["-e", "normal,build"]);
        for line in resolved(&selection).difference(&workspace) {
            let name = line.split('|').next().unwrap_or(line);
            let there: Vec<&String> = workspace
                .iter()
                .filter(|w| w.split('|').next() == Some(name))
                .collect();
            wrong.push(format!(
                "{}: {line}; the workspace build: {there:?}",
                alone.join(" ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "built alone, these crates get other features than in `cargo test --workspace`; \
         add the workspace's features to workspace-hack/Cargo.toml:\n{}",
        wrong.join("\n")
    );
}
