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
    failed.extend(hip_rows(&cargo));
    if failed.is_empty() {
        eprintln!(
            "seam-guard: all {} checks passed",
            GUARDS.len() + HIP_ROWS.len() + HIP_ARCHS.len()
        );
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

// ----- rocm: hip-runtime-sys links libamdhip64 at build time (D9), so these
// rows need its headers and say what to install when they are missing. -----

/// What to install when the HIP headers or runtime are missing.
const HIP_INSTALL: &str =
    "install libamdhip64-dev (apt-get install libamdhip64-dev) and set HIP_PATH=/usr";

/// Compile-only rows for the HIP backend (run with `HIP_PATH` set).
const HIP_ROWS: &[Guard] = &[
    Guard {
        name: "rocm (hip-runtime-sys, linked at build time)",
        args: &[
            "check",
            "-p",
            "seam-backends",
            "--features",
            "rocm",
            "--all-targets",
        ],
    },
    Guard {
        name: "rocm: clippy -D warnings, seam-hip with its runtime",
        args: &[
            "clippy",
            "-p",
            "seam-hip",
            "--features",
            "rocm",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    },
];

/// Every kernel is compiled with hipRTC for these, no GPU needed (ROCm 5.2
/// builds both; shared/FACTS.md), each in its own process so an architecture
/// that crashes the runtime (gfx1200 on 5.2) cannot take the guard down.
const HIP_ARCHS: &[&str] = &["gfx90a", "gfx1030"];

/// `HIP_PATH` (default `/usr`, Debian's layout) if it holds the HIP headers.
fn hip_path() -> Result<String, String> {
    let path = std::env::var("HIP_PATH").unwrap_or_else(|_| "/usr".into());
    let header = std::path::Path::new(&path).join("include/hip/hip_runtime_api.h");
    if header.is_file() {
        Ok(path)
    } else {
        Err(format!("no {}: {HIP_INSTALL}", header.display()))
    }
}

/// The HIP rows; returns the failures.
fn hip_rows(cargo: &str) -> Vec<String> {
    let mut failed = Vec::new();
    let hip = match hip_path() {
        Ok(path) => path,
        Err(e) => {
            for g in HIP_ROWS {
                eprintln!("seam-guard: {}", g.name);
                failed.push(format!("{}: {e}", g.name));
            }
            failed.push(format!("hip device code: {e}"));
            return failed;
        }
    };
    let env = [("HIP_PATH", hip.as_str())];
    for g in HIP_ROWS {
        eprintln!("seam-guard: {}", g.name);
        if let Err(e) = run(cargo, g.args, &env) {
            failed.push(format!("{}: {e} ({HIP_INSTALL})", g.name));
        }
    }
    for arch in HIP_ARCHS {
        eprintln!("seam-guard: hip device code: every kernel through hipRTC for {arch}");
        let args = [
            "run",
            "--quiet",
            "-p",
            "seam-hip",
            "--features",
            "rocm",
            "--bin",
            "hip-kernel-check",
            "--",
            arch,
        ];
        // A crash of the child (a signal) is a failed row, not a dead guard.
        if let Err(e) = run(cargo, &args, &env) {
            failed.push(format!("hip device code for {arch}: {e}"));
        }
    }
    failed
}
