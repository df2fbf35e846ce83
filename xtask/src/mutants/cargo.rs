//! cargo-mutants itself: found or installed at the pinned version, asked
//! for its list of mutants, and run over the mutants a campaign chose with
//! the tests of their group. Two behaviours of cargo-mutants 27.1.0 are
//! worked around here, each where it bites: its `--re` filter lets every
//! struct-field deletion through, and its baseline tests only the mutated
//! package.

use super::groups::Group;
use super::{summary, Options, VERSION};
use crate::root;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Find or install cargo-mutants VERSION.
pub(super) fn cargo_mutants() -> Result<PathBuf, String> {
    find_or_install(
        Path::new("cargo-mutants"),
        &root().join("target/tools/cargo-mutants"),
        |dir| {
            let dir_s = dir.display().to_string();
            crate::run(
                &crate::cargo(),
                &[
                    "install",
                    // Unoptimised: it only lists mutants and runs cargo, so
                    // the build is what costs. On a 2-core machine
                    // (2026-12-03) the release install took 122 s and this
                    // one 63 s; listing the workspace's 3,112 mutants took
                    // 3.7 s instead of 0.8.
                    "--debug",
                    "--locked",
                    "cargo-mutants",
                    "--version",
                    VERSION,
                    "--root",
                    &dir_s,
                ],
                &[],
            )
            .map_err(|e| format!("installing cargo-mutants {VERSION} from crates.io: {e}"))
        },
    )
}

/// `on_path` when it is cargo-mutants VERSION, else the copy installed
/// under `dir` (`install` puts it there first when it is missing).
pub(super) fn find_or_install(
    on_path: &Path,
    dir: &Path,
    install: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    let found = Command::new(on_path)
        .args(["mutants", "--version"])
        .output();
    if let Ok(out) = found {
        if String::from_utf8_lossy(&out.stdout).contains(VERSION) {
            return Ok(on_path.to_path_buf());
        }
    }
    let bin = dir.join("bin/cargo-mutants");
    if !bin.is_file() {
        install(dir)?;
        if !bin.is_file() {
            return Err(format!(
                "cargo-mutants {VERSION} was installed but {} is not there",
                bin.display()
            ));
        }
    }
    Ok(bin)
}

/// One mutant as `--list --json` names it.
#[derive(Clone, Debug)]
pub(super) struct Listed {
    pub name: String,
    pub file: String,
}

/// The group's mutants that cargo-mutants generates (after
/// `.cargo/mutants.toml`'s exclusions), within `diff` when given.
pub(super) fn list(program: &Path, g: &Group, diff: Option<&Path>) -> Result<Vec<Listed>, String> {
    let mut cmd = Command::new(program);
    cmd.args(["mutants", "--list", "--json", "--package", g.package])
        .current_dir(root());
    if let Some(d) = diff {
        cmd.arg("--in-diff").arg(d);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cargo-mutants --list could not start: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo-mutants --list --package {} failed: {}",
            g.package,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // With `--in-diff`, a diff that touches no mutable line makes
    // cargo-mutants print nothing at all (not `[]`): no mutants.
    if out.stdout.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo-mutants --list --json: {e}"))?;
    Ok(v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| {
                    Some(Listed {
                        name: m["name"].as_str()?.to_string(),
                        file: m["file"].as_str()?.to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default())
}

/// `s` as a regex that matches it literally.
pub(super) fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
            | '#' | '&' | '-' | '~' => format!("\\{c}"),
            c => c.to_string(),
        })
        .collect()
}

/// A regex that matches exactly these names (cargo-mutants `--re`).
pub(super) fn exact(names: &[&str]) -> String {
    let escaped: Vec<String> = names.iter().map(|n| escape(n)).collect();
    format!("^(?:{})$", escaped.join("|"))
}

/// A regex that matches these names at any line and column: a survivor
/// run again after edits above it has moved.
pub(super) fn at_any_line(names: &[&str]) -> String {
    let escaped: Vec<String> = names
        .iter()
        .map(|n| match summary::key_of(n).split_once(": ") {
            Some((file, rest)) => format!("{}:\\d+:\\d+: {}", escape(file), escape(rest)),
            None => escape(n),
        })
        .collect();
    format!("^(?:{})$", escaped.join("|"))
}

/// Run cargo-mutants over `chosen` of group `g`, writing `out/mutants.out`.
pub(super) fn run_group(
    program: &Path,
    g: &Group,
    chosen: &[Listed],
    out: &Path,
    o: &Options,
) -> Result<(), String> {
    let names: Vec<&str> = chosen.iter().map(|m| m.name.as_str()).collect();
    // A rerun's survivors are found by what they are, not where.
    let re = if o.rerun_missed {
        at_any_line(&names)
    } else {
        exact(&names)
    };
    let mut args: Vec<String> = vec!["mutants".into(), "--package".into(), g.package.into()];
    for p in g.test_packages {
        args.extend(["--test-package".into(), p.to_string()]);
    }
    args.extend([
        "--re".into(),
        re,
        "--timeout".into(),
        g.timeout_s.to_string(),
        "--output".into(),
        out.display().to_string(),
    ]);
    // cargo-mutants makes `out/mutants.out` but not `out` itself: a fresh
    // tree has no `target/mutants/` yet.
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    if skip_unchosen_field_deletions(program, g, &names, o.rerun_missed, out)? {
        args.push("--iterate".into());
    }
    // In place there is one tree, so one job (cargo-mutants refuses --jobs).
    if o.in_place {
        args.push("--in-place".into());
    } else {
        args.extend(["--jobs".into(), o.jobs.to_string()]);
    }
    // A diff's mutants follow the test command, which just passed on the
    // same tree (CI): no baseline run.
    if o.in_diff.is_some() {
        args.extend(["--baseline".into(), "skip".into()]);
    } else if let Some(mut baseline) = baseline_command(g, &o.cargo) {
        // cargo-mutants' own baseline would test the wrong package.
        eprintln!("$ {baseline:?} (the baseline)");
        let status = baseline
            .status()
            .map_err(|e| format!("the baseline of group {} could not start: {e}", g.name))?;
        if !status.success() {
            return Err(format!(
                "group {}: its tests fail without any mutant ({status}), so no mutant was tested",
                g.name
            ));
        }
        args.extend(["--baseline".into(), "skip".into()]);
    }
    args.push("--".into());
    args.extend(g.test_args.iter().map(|s| s.to_string()));
    eprintln!(
        "$ cargo-mutants mutants --package {} … ({} mutants; tests: cargo test -p {} {})",
        g.package,
        names.len(),
        g.test_packages.join(" -p "),
        g.test_args.join(" ")
    );
    let start = Instant::now();
    let status = Command::new(program)
        .args(&args)
        .envs(g.env.iter().copied())
        // Each mutant changes one line of one crate: incremental builds of
        // the workspace's crates cost a fraction of full ones (the named
        // mutations' builds: about 2.5 s against 10–17 s on this 2-core
        // machine), whatever the caller's CARGO_INCREMENTAL.
        .env("CARGO_INCREMENTAL", "1")
        .current_dir(root())
        .status()
        .map_err(|e| format!("cargo-mutants could not start: {e}"))?;
    eprintln!("  ({:.0} s)", start.elapsed().as_secs_f64());
    // 0: all caught, 2: some missed, 3: some timed out; judged afterwards.
    if !matches!(status.code(), Some(0 | 2 | 3)) {
        return Err(format!(
            "cargo-mutants over group {} failed ({status}); its log: {}",
            g.name,
            out.join("mutants.out/debug.log").display()
        ));
    }
    Ok(())
}

/// The unmutated tree's test run for a group whose tests live in other
/// packages than the one it mutates (the suite in seam-conformance judging
/// seam-vulkan), run by xtask itself: cargo-mutants 27.1.0's baseline tests
/// only the mutated package, whatever `--test-package` says, and fails
/// there (`no test target named conformance`) or passes for the wrong
/// reason. `None`: cargo-mutants' baseline is the right one.
pub(super) fn baseline_command(g: &Group, cargo: &Path) -> Option<Command> {
    if g.test_packages == [g.package] {
        return None;
    }
    let mut cmd = Command::new(cargo);
    cmd.arg("test");
    for p in g.test_packages {
        cmd.args(["-p", p]);
    }
    cmd.args(g.test_args)
        .envs(g.env.iter().copied())
        .current_dir(root());
    Some(cmd)
}

/// cargo-mutants 27.1.0 applies `--re` to every kind of mutant but one:
/// each struct-field deletion (`delete field f from struct S expression`)
/// of the package runs whatever the regex says (a CI run of 20 chosen core
/// mutants ran 51). `--iterate` does skip them: it skips what an earlier
/// run into the same folder caught, read from `mutants.out/caught.txt`.
/// The field deletions not chosen are written there, so a run tests what
/// was chosen and nothing else. True when there were any (pass
/// `--iterate`).
pub(super) fn skip_unchosen_field_deletions(
    program: &Path,
    g: &Group,
    names: &[&str],
    rerun: bool,
    out: &Path,
) -> Result<bool, String> {
    // A rerun's names match wherever the mutant has moved.
    let key = |n: &str| {
        if rerun {
            summary::key_of(n)
        } else {
            n.to_string()
        }
    };
    let chosen: std::collections::BTreeSet<String> = names.iter().map(|n| key(n)).collect();
    let skip: Vec<String> = list(program, g, None)?
        .into_iter()
        .filter(|m| m.name.contains(": delete field ") && !chosen.contains(&key(&m.name)))
        .map(|m| m.name)
        .collect();
    if skip.is_empty() {
        return Ok(false);
    }
    let dir = out.join("mutants.out");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join("caught.txt");
    std::fs::write(&path, skip.join("\n") + "\n")
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}
