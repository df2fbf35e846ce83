//! `cargo xtask bench`: build the benchmark here, lay out the carry folder
//! the GPU machine runs it from, and print (or, on a GPU machine, execute)
//! the one device command that measures every arm. `cargo xtask bench
//! report` turns the arms' CSVs into docs/results/bench/.

use crate::{cargo, root, run};
use std::path::{Path, PathBuf};

/// The folder that travels to the GPU machine (git-ignored by `/.device-*/`).
pub const CARRY: &str = ".device-bench";
/// Where results are committed.
pub const RESULTS: &str = "docs/results/bench";
/// The arms' CSVs the device command writes.
pub const CSVS: [&str; 4] = ["raw.csv", "torch.csv", "seam.csv", "seam_cuda.csv"];

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root().join(p) })
        .unwrap_or_else(|| root().join("target"))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}

/// Build the bench in release and fill the carry folder.
pub fn prepare(mode: &str, exec: bool) -> Result<(), String> {
    let carry = root().join(CARRY);
    let kernels = carry.join("kernels");
    std::fs::create_dir_all(&kernels).map_err(|e| format!("{}: {e}", kernels.display()))?;
    // Two builds: every backend, and cuda alone (no Vulkan driver in the
    // process), so the CUDA numbers can be checked for interference.
    for (features, name) in [
        ("cuda", "seam-bench-cuda"),
        ("cuda,vulkan,wgpu", "seam-bench"),
    ] {
        let args = [
            "build",
            "--release",
            "-p",
            "seam-bench",
            "--bin",
            "seam-bench",
            "--no-default-features",
            "--features",
            features,
        ];
        run(&cargo(), &args, &[])?;
        copy(&target_dir().join("release/seam-bench"), &carry.join(name))?;
    }
    for f in ["raw_cuda.cu", "torch_arm.py", "run.sh"] {
        copy(&root().join("bench/anchors").join(f), &carry.join(f))?;
    }
    // The raw arm compiles the very sources the CUDA backend compiles.
    let src = root().join("kernels/cuda");
    for e in std::fs::read_dir(&src).map_err(|e| format!("{}: {e}", src.display()))? {
        let p = e.map_err(|e| e.to_string())?.path();
        if p.extension().is_some_and(|x| x == "cu") {
            copy(&p, &kernels.join(p.file_name().expect("a file")))?;
        }
    }
    let gl = root().join(".gl").is_dir();
    // run.sh writes into $OUT where the device tool sets it, else .device-bench/out.
    let command = format!("bash {CARRY}/run.sh {mode}");
    eprintln!("carry folder ready: {}", carry.display());
    if !gl {
        eprintln!(
            "no .gl/ folder: the Vulkan and wgpu arms need the loader packages \
             (see the device README); the CUDA, raw and PyTorch arms run without them"
        );
    }
    println!(
        "device command (kind nvidia-h200, carry [\"{CARRY}\"{}]):",
        if gl { ", \".gl\"" } else { "" }
    );
    println!("  {command}");
    println!("then: copy the CSVs and log.txt into {RESULTS}/ and run `cargo xtask bench report`");
    if exec {
        let script = format!("{CARRY}/run.sh");
        run("bash", &[&script, mode], &[])?;
        let out = carry.join("out");
        if mode == "quick" {
            // Tiny sizes on whatever this machine has: never results of record.
            eprintln!("quick mode: CSVs in {}", out.display());
            for f in CSVS {
                if let Ok(t) = std::fs::read_to_string(out.join(f)) {
                    println!("== {f}");
                    print!("{t}");
                }
            }
            return report_into(&out, &out.join("report"));
        }
        let dest = root().join(RESULTS);
        std::fs::create_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        for f in CSVS.iter().chain(&["log.txt"]) {
            copy(&out.join(f), &dest.join(f))?;
        }
        report(&dest)?;
    }
    Ok(())
}

/// CSVs in `from` → results.md and SVG plots in docs/results/bench.
pub fn report(from: &Path) -> Result<(), String> {
    report_into(from, &root().join(RESULTS))
}

/// CSVs in `from` → results.md and SVG plots in `to`.
fn report_into(from: &Path, to: &Path) -> Result<(), String> {
    let mut args: Vec<String> = [
        "run",
        "--release",
        "--quiet",
        "-p",
        "seam-bench",
        "--",
        "report",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for f in CSVS {
        let p = from.join(f);
        if p.exists() {
            args.push("--csv".into());
            args.push(p.display().to_string());
        } else {
            eprintln!(
                "xtask bench report: {} missing, reporting without it",
                p.display()
            );
        }
    }
    args.push("--out".into());
    args.push(to.display().to_string());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&cargo(), &refs, &[])
}
