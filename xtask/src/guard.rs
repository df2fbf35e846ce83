//! The seam guard: every backend must still compile against the seam on a
//! machine without its hardware. Each backend adds one row to `GUARDS`.

use crate::{cargo, run};

/// One compile-only check.
struct Guard {
    /// What is checked, for the summary.
    name: &'static str,
    /// cargo arguments.
    args: &'static [&'static str],
}

const GUARDS: &[Guard] = &[
    Guard {
        name: "core + cpu",
        args: &[
            "check",
            "-p",
            "seam",
            "-p",
            "seam-cpu",
            "-p",
            "seam-backends",
            "--all-targets",
        ],
    },
    Guard {
        name: "cuda (cudarc, loaded at run time)",
        args: &[
            "check",
            "-p",
            "seam-backends",
            "--features",
            "cuda",
            "--all-targets",
        ],
    },
    Guard {
        name: "vulkan (ash, loaded at run time)",
        args: &[
            "check",
            "-p",
            "seam-backends",
            "--features",
            "vulkan",
            "--all-targets",
        ],
    },
    Guard {
        name: "wgpu (wgpu 30, adapters found at run time)",
        args: &[
            "check",
            "-p",
            "seam-backends",
            "--features",
            "wgpu",
            "--all-targets",
        ],
    },
    Guard {
        name: "metal (objc2-metal), type-checked for aarch64-apple-darwin",
        args: &[
            "check",
            "-p",
            "seam-metal",
            "--all-targets",
            "--target",
            "aarch64-apple-darwin",
        ],
    },
    Guard {
        name: "seam-backends --features metal, type-checked for aarch64-apple-darwin",
        args: &[
            "check",
            "-p",
            "seam-backends",
            "--features",
            "metal",
            "--target",
            "aarch64-apple-darwin",
        ],
    },
    Guard {
        name: "clippy -D warnings, whole workspace",
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    },
];

pub fn seam_guard() -> Result<(), String> {
    let cargo = cargo();
    let mut failed = Vec::new();
    for g in GUARDS {
        eprintln!("seam-guard: {}", g.name);
        if let Err(e) = target_installed(g.args).and_then(|()| run(&cargo, g.args, &[])) {
            failed.push(format!("{}: {e}", g.name));
        }
    }
    if failed.is_empty() {
        eprintln!("seam-guard: all {} checks passed", GUARDS.len());
        Ok(())
    } else {
        Err(format!("seam-guard failed:\n  {}", failed.join("\n  ")))
    }
}

/// A row that checks for another target (`--target T`) needs T's standard
/// library: fail with what to run, never skip the row silently.
fn target_installed(args: &[&str]) -> Result<(), String> {
    let Some(target) = args
        .iter()
        .position(|a| *a == "--target")
        .and_then(|i| args.get(i + 1))
    else {
        return Ok(());
    };
    let hint = format!("run: rustup target add {target}");
    let out = std::process::Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("`rustup target list --installed` could not run ({e}); {hint}"))?;
    let installed = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && installed.lines().any(|l| l.trim() == *target) {
        Ok(())
    } else {
        Err(format!("target {target} is not installed; {hint}"))
    }
}
