//! `cargo xtask mutants`: cargo-mutants over every crate with logic, each
//! group of files judged by the tests that answer for it ([`groups::GROUPS`]).
//!
//! A campaign (`cargo xtask mutants [--group G] [--record]`) runs every
//! mutant of a group's files, plus a seeded uniform sample of the rest of
//! its package where the group says so. `--in-diff BASE` (CI) runs only the
//! mutants in lines changed since BASE (`recorded`: the commit each group's
//! record was made at), at most `--max` of them over every group, shared
//! evenly among the groups that changed (`groups::share`), each group's a
//! sample seeded by HEAD.
//!
//! cargo-mutants is installed from crates.io (pinned) into `target/tools/`
//! unless that version is already on the PATH. Files no group mutates are
//! excluded in `.cargo/mutants.toml`, each with its reason.
//!
//! Afterwards every missed mutant must be listed, with why it cannot be
//! caught, in [`EQUIVALENT`]; a campaign also fails when a group catches
//! fewer than [`TARGET`] of its viable mutants. `--record` writes each
//! group's figures into [`RESULTS`], keeping the other groups' sections.

mod cargo;
mod groups;
mod record;
mod summary;

use crate::root;
use cargo::{cargo_mutants, list, run_group, Listed};
use groups::Group;
use std::path::{Path, PathBuf};
use std::process::Command;
use summary::{read_equivalent, read_outcomes, read_times, GroupSummary};

/// The cargo-mutants release this project's figures were measured with.
pub const VERSION: &str = "27.1.0";
/// Missed mutants that no test can catch, each with why.
pub const EQUIVALENT: &str = "docs/mutants-equivalent.md";
/// Where `--record` writes the figures.
pub const RESULTS: &str = "docs/results/mutants.md";
/// Where `--record` keeps each group's outcomes (`<group>.json`: every
/// mutant's name, file and verdict, how they were chosen, the commit), so
/// that a later checkout can run a group's missed mutants again
/// (`--rerun-missed`) without the campaign's own output.
pub const OUTCOMES: &str = "docs/results/mutants";
/// Caught (or timed out) / viable mutants that every group must reach.
pub const TARGET: f64 = 0.95;

pub struct Options {
    /// Groups to run; empty: every group.
    pub groups: Vec<String>,
    /// Only files matching these globs (within the groups).
    pub files: Vec<String>,
    /// Only mutants in lines changed since this commit (`recorded`: each
    /// group's recorded commit).
    pub in_diff: Option<String>,
    /// With `in_diff`: at most this many mutants over all groups.
    pub max: usize,
    /// Mutate the checkout itself instead of a copy (CI's fresh clone).
    pub in_place: bool,
    /// Where each group's `mutants.out/` goes (`<output>/<group>/`).
    pub output: PathBuf,
    /// Summarise earlier output (`<from>/<group>/`) instead of running.
    pub from: Option<PathBuf>,
    /// Write the figures into docs/results/mutants.md.
    pub record: bool,
    /// Run the mutants an earlier run of each group missed again (after
    /// new tests), and judge the first run's outcomes with theirs.
    pub rerun_missed: bool,
    /// Parallel cargo-mutants jobs.
    pub jobs: usize,
    /// Where each group's outcomes are kept ([`OUTCOMES`] in the checkout).
    pub kept: PathBuf,
    /// Cargo, for the baselines xtask runs itself.
    pub cargo: PathBuf,
}

/// The mutants a campaign of `g` tests, and a sentence saying how they were
/// chosen: every mutant of its files, and a seeded sample of the rest.
fn choose(g: &Group, listed: &[Listed], only: &[String]) -> (Vec<Listed>, String) {
    let matches = |globs: &[&str], f: &str| globs.iter().any(|x| groups::glob_match(x, f));
    let wanted = |m: &&Listed| {
        !matches(g.exclude, &m.file)
            && (only.is_empty() || only.iter().any(|x| groups::glob_match(x, &m.file)))
    };
    let full: Vec<Listed> = listed
        .iter()
        .filter(wanted)
        .filter(|m| g.files.is_empty() || matches(g.files, &m.file))
        .cloned()
        .collect();
    let Some((globs, k)) = g.sampled else {
        let how = match g.files {
            [] => format!("every mutant of the package ({})", full.len()),
            files => format!(
                "every mutant of {} ({})",
                files
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                full.len()
            ),
        };
        return (full, how);
    };
    let rest: Vec<Listed> = listed
        .iter()
        .filter(wanted)
        .filter(|m| !matches(g.files, &m.file) && matches(globs, &m.file))
        .cloned()
        .collect();
    let sampled = groups::sample(&rest, k, groups::SEED);
    let how = format!(
        "every mutant of {} ({}), and a uniform sample of {} of the other {} mutants of {} (seed {:#x})",
        g.files
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", "),
        full.len(),
        sampled.len(),
        rest.len(),
        globs
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", "),
        groups::SEED
    );
    let mut all = full;
    all.extend(sampled);
    (all, how)
}

/// The diff since `base` of the group's package, written for `--in-diff`;
/// `None` when nothing of the package changed.
fn diff_since(base: &str, g: &Group, dir: &Path) -> Result<Option<PathBuf>, String> {
    let pkg_dir = package_dir(g.package);
    let out = Command::new("git")
        .args(["diff", "--no-color", base, "--", &pkg_dir])
        .current_dir(root())
        .output()
        .map_err(|e| format!("git diff could not start: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git diff {base} -- {pkg_dir}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if out.stdout.is_empty() {
        return Ok(None);
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!("{}.diff", g.name));
    std::fs::write(&path, &out.stdout).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(path))
}

/// Where a workspace package lives.
fn package_dir(package: &str) -> String {
    match package {
        "seam" => "core".into(),
        "seam-kernels" => "kernels".into(),
        "seam-conformance" => "conformance".into(),
        "xtask" => "xtask".into(),
        "seam-backends" => "backends".into(),
        "seam-example-llama" => "examples/llama".into(),
        p => format!("backends/{}", p.trim_start_matches("seam-")),
    }
}

/// `git rev-parse HEAD`.
fn head() -> String {
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// `--in-diff`: the mutants of `g` in lines changed since the base (the
/// commit its record names, for `recorded`), with that base; `None` where
/// nothing of it changed or it has no record. Listed for every group before
/// any runs, so the budget can be shared among them.
fn in_diff_listed(
    program: &Path,
    g: &Group,
    o: &Options,
    base: &str,
    recorded: &std::collections::BTreeMap<String, record::Recorded>,
    output: &Path,
) -> Result<Option<(Vec<Listed>, String)>, String> {
    let base = match base {
        "recorded" => match recorded.get(g.name) {
            Some(r) => r.commit.clone(),
            None => {
                eprintln!("mutants [{}]: no recorded campaign; skipped", g.name);
                return Ok(None);
            }
        },
        b => b.to_string(),
    };
    let Some(diff) = diff_since(&base, g, output)? else {
        eprintln!("mutants [{}]: nothing changed since {base}", g.name);
        return Ok(None);
    };
    let listed = list(program, g, Some(&diff))?;
    let (all, _) = choose(g, &listed, &o.files);
    Ok(Some((all, base)))
}

/// What a group's run tests: a campaign's choice, or (`--in-diff`) its
/// share of the budget (`groups::share`) of the mutants in lines changed
/// since the base, a sample seeded by HEAD. `None`: nothing to test.
fn pick(
    program: &Path,
    g: &Group,
    o: &Options,
    in_diff: Option<(Vec<Listed>, String)>,
    share: usize,
) -> Result<Option<(Vec<Listed>, String)>, String> {
    let (chosen, how) = match (&o.in_diff, in_diff) {
        (None, _) => {
            let listed = list(program, g, None)?;
            choose(g, &listed, &o.files)
        }
        (Some(_), None) => return Ok(None),
        (Some(_), Some((all, base))) => {
            let seed =
                u64::from_str_radix(head().get(..12).unwrap_or("0"), 16).unwrap_or(groups::SEED);
            let take = groups::sample(&all, share, seed);
            let how = format!(
                "the {} of {} mutants in lines changed since {base} (its share of at most {} over every group, a sample seeded by HEAD)",
                take.len(),
                all.len(),
                o.max
            );
            (take, how)
        }
    };
    if chosen.is_empty() {
        eprintln!("mutants [{}]: no mutant to test", g.name);
        return Ok(None);
    }
    Ok(Some((chosen, how)))
}

/// Beside a group's `mutants.out/`: how its mutants were chosen, and the
/// commit it ran at.
const CHOSEN: &str = "chosen.txt";

/// Beside a group's `mutants.out/`: its outcomes after every rerun so far.
const MERGED: &str = "merged.json";

pub fn run(o: &Options) -> Result<(), String> {
    let program = if runs_mutants(o) {
        cargo_mutants()?
    } else {
        PathBuf::new()
    };
    let summaries = drive(o, &program)?;
    if o.record {
        let path = root().join(RESULTS);
        record::write(&path, &summaries)?;
        eprintln!("wrote {RESULTS}");
    }
    verdict(o, &summaries)
}

/// Whether a run starts cargo-mutants: all but one that only reads a
/// campaign's output (`--from` without `--rerun-missed`).
fn runs_mutants(o: &Options) -> bool {
    o.from.is_none() || o.rerun_missed
}

/// A run's verdict: every group's ([`GroupSummary::verdict`]); the score
/// target holds only for a whole campaign, not a diff's or a file's few.
fn verdict(o: &Options, summaries: &[(GroupSummary, String)]) -> Result<(), String> {
    let whole = o.in_diff.is_none() && o.files.is_empty();
    let errors: Vec<String> = summaries
        .iter()
        .filter_map(|(s, _)| s.verdict(whole).err())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// Run (or, `--from`, read) each selected group with `program` as
/// cargo-mutants: each group's summary and the commit its mutants were
/// taken at.
fn drive(o: &Options, program: &Path) -> Result<Vec<(GroupSummary, String)>, String> {
    let selected = groups::select(&o.groups)?;
    let output = root().join(&o.output);
    let equivalent = read_equivalent(&root().join(EQUIVALENT))?;
    let recorded = record::read(&root().join(RESULTS));
    let mut summaries = Vec::new();
    let runs = o.from.is_none() && !o.rerun_missed;
    // The in-diff mode's mutants of every group, and each one's share of
    // the budget.
    let mut in_diff: Vec<Option<(Vec<Listed>, String)>> = Vec::new();
    if let (Some(base), true) = (&o.in_diff, runs) {
        for g in &selected {
            in_diff.push(in_diff_listed(program, g, o, base, &recorded, &output)?);
        }
    }
    let counts: Vec<usize> = in_diff
        .iter()
        .map(|l| l.as_ref().map_or(0, |(all, _)| all.len()))
        .collect();
    let shares = groups::share(&counts, o.max);
    for (i, g) in selected.into_iter().enumerate() {
        let out = match &o.from {
            Some(dir) => root().join(dir).join(g.name),
            None => output.join(g.name),
        };
        if runs {
            let listed = in_diff.get_mut(i).and_then(Option::take);
            let share = shares.get(i).copied().unwrap_or(0);
            let Some((chosen, how)) = pick(program, g, o, listed, share)? else {
                continue;
            };
            let _ = std::fs::remove_dir_all(&out);
            // The commit the mutants were taken from, before a long run
            // during which the checkout may move on.
            let at = head();
            run_group(program, g, &chosen, &out, o)?;
            let note = format!("{how}\n{at}\n");
            std::fs::write(out.join(CHOSEN), note)
                .map_err(|e| format!("{}: {e}", out.join(CHOSEN).display()))?;
        }
        let outcomes_path = out.join("mutants.out/outcomes.json");
        // A group run again (`--rerun-missed`) keeps its outcomes so far in
        // `merged.json`: the next rerun starts from what is still missed.
        let merged = out.join(MERGED);
        let kept = o.kept.join(format!("{}.json", g.name));
        // No output of this group here: a rerun starts from the recorded
        // outcomes (a campaign that spans checkouts).
        let from_record =
            o.rerun_missed && !merged.is_file() && !outcomes_path.is_file() && kept.is_file();
        let (mut outcomes, mut how, commit, times) = if from_record {
            let v = read_json(&kept)?;
            let field = |k: &str| v[k].as_str().unwrap_or("").to_string();
            eprintln!(
                "mutants [{}]: the recorded outcomes, {}",
                g.name,
                kept.display()
            );
            (
                read_outcomes(&kept)?,
                field("chosen"),
                field("commit"),
                read_times(&kept),
            )
        } else {
            let outcomes = read_outcomes(if merged.is_file() {
                &merged
            } else {
                &outcomes_path
            })?;
            let (how, commit) = match std::fs::read_to_string(out.join(CHOSEN)) {
                Ok(t) => {
                    let mut lines = t.lines();
                    let how = lines.next().unwrap_or("").to_string();
                    (how, lines.next().unwrap_or("").to_string())
                }
                Err(_) => ("as the earlier run chose them".into(), head()),
            };
            (outcomes, how, commit, read_times(&outcomes_path))
        };
        if o.rerun_missed {
            let missed: Vec<Listed> = outcomes
                .iter()
                .filter(|x| x.summary == "MissedMutant")
                .map(|x| Listed {
                    name: x.name.clone(),
                    file: x.file.clone(),
                })
                .collect();
            if !missed.is_empty() {
                let again = out.join("rerun");
                let _ = std::fs::remove_dir_all(&again);
                let at = head();
                run_group(program, g, &missed, &again, o)?;
                let second =
                    read_outcomes(&again.join("mutants.out/outcomes.json")).unwrap_or_default();
                // Each survivor by what it is: caught when every mutant of
                // that kind now is; gone when the code no longer has it.
                let mut gone = 0;
                outcomes.retain_mut(|x| {
                    if x.summary != "MissedMutant" {
                        return true;
                    }
                    let now: Vec<&summary::Outcome> =
                        second.iter().filter(|y| y.key() == x.key()).collect();
                    if now.is_empty() {
                        gone += 1;
                        return false;
                    }
                    if now.iter().all(|y| y.summary != "MissedMutant") {
                        x.summary = "CaughtMutant".into();
                    }
                    true
                });
                let still = outcomes
                    .iter()
                    .filter(|x| x.summary == "MissedMutant")
                    .count();
                how = format!(
                    "{how}; the {} it missed were run again at `{}` after new tests: {} caught, {still} missed, {gone} no longer in the code",
                    missed.len(),
                    at.get(..10).unwrap_or(""),
                    missed.len() - still - gone
                );
                summary::write_outcomes(&merged, &outcomes)?;
                std::fs::write(out.join(CHOSEN), format!("{how}\n{commit}\n"))
                    .map_err(|e| format!("{}: {e}", out.join(CHOSEN).display()))?;
            }
        }
        if o.record {
            keep_outcomes(&kept, &outcomes, &how, &commit, times.as_ref())?;
        }
        let s = GroupSummary::new(g, &outcomes, &equivalent, how, times);
        eprint!("{}", s.text());
        summaries.push((s, commit));
    }
    Ok(summaries)
}

/// A JSON file, parsed.
fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))
}

/// Write a group's outcomes where [`OUTCOMES`] keeps them: in the shape
/// cargo-mutants' `outcomes.json` has (so [`read_outcomes`] and
/// [`read_times`] read it), with how they were chosen and the commit.
fn keep_outcomes(
    path: &Path,
    outcomes: &[summary::Outcome],
    how: &str,
    commit: &str,
    times: Option<&(String, String)>,
) -> Result<(), String> {
    let list: Vec<serde_json::Value> = outcomes
        .iter()
        .map(|o| {
            serde_json::json!({
                "scenario": { "Mutant": { "name": o.name, "file": o.file } },
                "summary": o.summary,
            })
        })
        .collect();
    let v = serde_json::json!({
        "chosen": how,
        "commit": commit,
        "start_time": times.map(|t| t.0.as_str()),
        "end_time": times.map(|t| t.1.as_str()),
        "outcomes": list,
    });
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&v).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests;
