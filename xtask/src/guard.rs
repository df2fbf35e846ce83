//! The seam guard: every backend must still compile against the seam on a
//! machine without its hardware. The rows come from `seam-backends`' feature
//! lines (`seam_backends::KNOWN`): one `cargo check --features <f>` each, for
//! the target a backend's manifest names in `[package.metadata.seam]
//! check-target` where it only compiles there (`CHECK_TARGETS`). HIP, linked
//! at build time, has its own rows below.

use crate::{cargo, run};

/// One compile-only check.
struct Guard {
    /// What is checked, for the summary.
    name: String,
    /// cargo arguments.
    args: Vec<String>,
}

fn guard(name: String, args: &[&str]) -> Guard {
    Guard {
        name,
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

/// Every row but HIP's, derived from the known backends.
fn guards() -> Vec<Guard> {
    let mut rows = vec![guard(
        "core + cpu".into(),
        &[
            "check",
            "-p",
            "seam",
            "-p",
            "seam-cpu",
            "-p",
            "seam-backends",
            "--all-targets",
        ],
    )];
    for &(backend, feature) in &seam_backends::KNOWN[1..] {
        if backend == "hip" {
            continue; // linked at build time: `hip_rows`
        }
        let krate = format!("seam-{backend}");
        match seam_backends::CHECK_TARGETS
            .iter()
            .find(|(b, _)| *b == backend)
        {
            Some(&(_, target)) => {
                rows.push(guard(
                    format!("{backend}, type-checked for {target}"),
                    &["check", "-p", &krate, "--all-targets", "--target", target],
                ));
                rows.push(guard(
                    format!("seam-backends --features {feature}, type-checked for {target}"),
                    &[
                        "check",
                        "-p",
                        "seam-backends",
                        "--features",
                        feature,
                        "--target",
                        target,
                    ],
                ));
            }
            None => rows.push(guard(
                format!("{backend} (seam-backends --features {feature})"),
                &[
                    "check",
                    "-p",
                    "seam-backends",
                    "--features",
                    feature,
                    "--all-targets",
                ],
            )),
        }
    }
    rows.push(guard(
        "clippy -D warnings, whole workspace".into(),
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    ));
    rows
}

pub fn seam_guard() -> Result<(), String> {
    let cargo = cargo();
    let mut failed = Vec::new();
    let rows = guards();
    for g in &rows {
        eprintln!("seam-guard: {}", g.name);
        let args: Vec<&str> = g.args.iter().map(String::as_str).collect();
        if let Err(e) = target_installed(&args).and_then(|()| run(&cargo, &args, &[])) {
            failed.push(format!("{}: {e}", g.name));
        }
    }
    failed.extend(hip_rows(&cargo));
    if failed.is_empty() {
        eprintln!(
            "seam-guard: all {} checks passed",
            rows.len() + HIP_ROWS.len() + HIP_ARCHS.len()
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

/// Compile-only rows for the HIP backend (run with `HIP_PATH` set): name, cargo arguments.
const HIP_ROWS: &[(&str, &[&str])] = &[
    (
        "rocm (hip-runtime-sys, linked at build time)",
        &[
            "check",
            "-p",
            "seam-backends",
            "--features",
            "rocm",
            "--all-targets",
        ],
    ),
    (
        "rocm: clippy -D warnings, seam-hip with its runtime",
        &[
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
    ),
    (
        "rocm: clippy -D warnings, hip-kernel-check (xtask --features rocm)",
        &[
            "clippy",
            "-p",
            "xtask",
            "--features",
            "rocm",
            "--bin",
            "hip-kernel-check",
            "--",
            "-D",
            "warnings",
        ],
    ),
];

/// Every kernel is compiled with hipRTC for these, no GPU needed (ROCm 5.2's
/// hipRTC builds both on this CPU-only machine), each in its own process so an architecture
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
            for (name, _) in HIP_ROWS {
                eprintln!("seam-guard: {name}");
                failed.push(format!("{name}: {e}"));
            }
            failed.push(format!("hip device code: {e}"));
            return failed;
        }
    };
    let env = [("HIP_PATH", hip.as_str())];
    for (name, args) in HIP_ROWS {
        eprintln!("seam-guard: {name}");
        if let Err(e) = run(cargo, args, &env) {
            failed.push(format!("{name}: {e} ({HIP_INSTALL})"));
        }
    }
    for arch in HIP_ARCHS {
        eprintln!(
            "seam-guard: hip device code: every kernel (catalogue and the suite's user kernels, seam_kernels::user) through hipRTC for {arch}"
        );
        let args = [
            "run",
            "--quiet",
            "-p",
            "xtask",
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

#[cfg(test)]
mod tests {
    /// Every known backend but HIP (its own rows) gets a row, on the target
    /// its manifest names. Mutation: skip `CHECK_TARGETS` → red (metal would
    /// be checked for the host, where it is a shim).
    #[test]
    fn every_known_backend_has_a_row_on_its_target() {
        let rows = super::guards();
        for &(backend, feature) in &seam_backends::KNOWN[1..] {
            if backend == "hip" {
                continue;
            }
            let row = rows
                .iter()
                .find(|g| {
                    g.args
                        .windows(2)
                        .any(|w| w[0] == "--features" && w[1] == feature)
                })
                .unwrap_or_else(|| panic!("no guard row for {backend}"));
            if backend == "metal" {
                assert!(
                    row.args.iter().any(|a| a == "aarch64-apple-darwin"),
                    "{:?}",
                    row.args
                );
            }
        }
    }
}
