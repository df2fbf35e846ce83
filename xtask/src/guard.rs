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
        if let Err(e) = run(&cargo, g.args, &[]) {
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
