//! `cargo xtask mutants`: cargo-mutants over `core` (package `seam`) and the
//! CPU backend (`seam-cpu`), judged by each package's own tests: their
//! `tests/reference_suite.rs` runs the conformance suite, the fault sweep and
//! seeded model sequences on cpu:0.
//!
//! cargo-mutants is installed from crates.io (pinned) into `target/tools/`
//! unless that version is already on the PATH. Mutants build with the
//! `mutants` profile (the dev profile, with the CPU reference optimised so
//! the suite on cpu:0 runs in 0.5 s instead of 10 s, most of which were the C8
//! in-flight chains).
//!
//! Afterwards every missed mutant must be listed, with why it cannot be
//! caught, in [`EQUIVALENT`]; the run fails on an unlisted survivor or when
//! fewer than [`TARGET`] of the viable mutants are caught. `--record` writes
//! the figures to [`RESULTS`].

use crate::root;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The cargo-mutants release this project's figures were measured with.
pub const VERSION: &str = "27.1.0";
/// Missed mutants that no test can catch, each with why.
pub const EQUIVALENT: &str = "docs/mutants-equivalent.md";
/// Where `--record` writes the figures.
pub const RESULTS: &str = "docs/results/mutants.md";
/// Caught (or timed out) / viable mutants that a run must reach.
pub const TARGET: f64 = 0.90;
/// The packages mutated.
const PACKAGES: [&str; 2] = ["seam", "seam-cpu"];

pub struct Options {
    /// Only files matching these globs (cargo-mutants `-f`).
    pub files: Vec<String>,
    /// Where cargo-mutants writes `mutants.out/`.
    pub output: PathBuf,
    /// Summarise an earlier run's output instead of running.
    pub from: Option<PathBuf>,
    /// Write the summary to docs/results/mutants.md.
    pub record: bool,
    /// Parallel cargo-mutants jobs.
    pub jobs: usize,
}

/// Find or install cargo-mutants VERSION; returns the program and its leading args.
fn cargo_mutants() -> Result<(PathBuf, Vec<String>), String> {
    let on_path = Command::new("cargo-mutants")
        .args(["mutants", "--version"])
        .output();
    if let Ok(out) = on_path {
        if String::from_utf8_lossy(&out.stdout).contains(VERSION) {
            return Ok(("cargo-mutants".into(), vec!["mutants".into()]));
        }
    }
    let dir = root().join("target/tools/cargo-mutants");
    let bin = dir.join("bin/cargo-mutants");
    if !bin.is_file() {
        let dir_s = dir.display().to_string();
        crate::run(
            &crate::cargo(),
            &[
                "install",
                "--locked",
                "cargo-mutants",
                "--version",
                VERSION,
                "--root",
                &dir_s,
            ],
            &[],
        )
        .map_err(|e| format!("installing cargo-mutants {VERSION} from crates.io: {e}"))?;
    }
    Ok((bin, vec!["mutants".into()]))
}

pub fn run(o: &Options) -> Result<(), String> {
    let out_dir = match &o.from {
        Some(dir) => root().join(dir),
        None => {
            let output = root().join(&o.output);
            let (program, mut args) = cargo_mutants()?;
            for p in PACKAGES {
                args.extend(["--package".into(), p.into()]);
            }
            for f in &o.files {
                args.extend(["--file".into(), f.clone()]);
            }
            args.extend([
                "--profile".into(),
                "mutants".into(),
                "--timeout".into(),
                "120".into(),
                "--jobs".into(),
                o.jobs.to_string(),
                "--output".into(),
                output.display().to_string(),
                "--".into(),
                "--tests".into(),
            ]);
            let line = format!("{} {}", program.display(), args.join(" "));
            eprintln!("$ {line}");
            let start = Instant::now();
            let status = Command::new(&program)
                .args(&args)
                .current_dir(root())
                .status()
                .map_err(|e| format!("`{line}` could not start: {e}"))?;
            eprintln!("  ({:.0} s)", start.elapsed().as_secs_f64());
            // 0: all caught, 2: some missed, 3: some timed out; judged below.
            if !matches!(status.code(), Some(0 | 2 | 3)) {
                return Err(format!("`{line}` failed ({status})"));
            }
            output
        }
    };
    let outcomes = read_outcomes(&out_dir.join("mutants.out/outcomes.json"))?;
    let equivalent = read_equivalent(&root().join(EQUIVALENT))?;
    let summary = Summary::new(&outcomes, &equivalent);
    let times = read_times(&out_dir.join("mutants.out/outcomes.json"));
    let markdown = summary.markdown(o, times);
    let local = out_dir.join("mutants.md");
    std::fs::write(&local, &markdown).map_err(|e| format!("writing {}: {e}", local.display()))?;
    eprint!("{}", summary.text());
    if o.record {
        let path = root().join(RESULTS);
        std::fs::write(&path, &markdown).map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("wrote {RESULTS}");
    }
    summary.verdict()
}

/// One mutant's result, as cargo-mutants' outcomes.json gives it.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub name: String,
    pub file: String,
    /// CaughtMutant, MissedMutant, Unviable, Timeout.
    pub summary: String,
}

impl Outcome {
    /// The name without line and column, so the equivalents list survives edits.
    pub fn key(&self) -> String {
        key_of(&self.name)
    }
}

/// `core/src/device.rs:178:27: replace > with >=` → `core/src/device.rs: replace > with >=`.
pub fn key_of(name: &str) -> String {
    let mut parts = name.splitn(4, ':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(file), Some(line), Some(col), Some(rest))
            if line.chars().all(|c| c.is_ascii_digit())
                && col.chars().all(|c| c.is_ascii_digit()) =>
        {
            format!("{file}:{rest}")
        }
        _ => name.to_string(),
    }
}

/// When the run started and ended (cargo-mutants' own timestamps).
pub fn read_times(path: &Path) -> Option<(String, String)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    Some((
        v["start_time"].as_str()?.to_string(),
        v["end_time"].as_str()?.to_string(),
    ))
}

pub fn read_outcomes(path: &Path) -> Result<Vec<Outcome>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    let list = v["outcomes"]
        .as_array()
        .ok_or_else(|| format!("{}: no `outcomes` array", path.display()))?;
    let mut out = Vec::new();
    for o in list {
        let Some(m) = o["scenario"].get("Mutant") else {
            continue; // the baseline
        };
        let field = |v: &Value, what: &str| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{}: a mutant without `{what}`", path.display()))
        };
        out.push(Outcome {
            name: field(&m["name"], "name")?,
            file: field(&m["file"], "file")?,
            summary: field(&o["summary"], "summary")?,
        });
    }
    if out.is_empty() {
        return Err(format!("{}: no mutants were tested", path.display()));
    }
    Ok(out)
}

/// The table rows of docs/mutants-equivalent.md: `` | `key` | why | ``.
pub fn read_equivalent(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok(parse_equivalent(&text))
}

pub fn parse_equivalent(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l
                .trim()
                .strip_prefix('|')?
                .split('|')
                .map(str::trim)
                .collect();
            let key = cells.first()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((key_of(key), cells.get(1).copied().unwrap_or("").to_string()))
        })
        .collect()
}

#[derive(Default, Clone, Copy)]
struct Counts {
    caught: usize,
    missed: usize,
    timeout: usize,
    unviable: usize,
}

impl Counts {
    fn add(&mut self, summary: &str) {
        match summary {
            "CaughtMutant" => self.caught += 1,
            "MissedMutant" => self.missed += 1,
            "Timeout" => self.timeout += 1,
            _ => self.unviable += 1,
        }
    }
    fn viable(&self) -> usize {
        self.caught + self.missed + self.timeout
    }
    fn score(&self) -> f64 {
        (self.caught + self.timeout) as f64 / self.viable().max(1) as f64
    }
    fn row(&self, scope: &str) -> String {
        let score = match self.viable() {
            0 => "no viable mutant".to_string(),
            _ => format!("{:.1}%", 100.0 * self.score()),
        };
        format!(
            "| {scope} | {} | {} | {} | {} | {} | {score} |\n",
            self.viable() + self.unviable,
            self.unviable,
            self.caught,
            self.timeout,
            self.missed,
        )
    }
}

struct Summary {
    total: Counts,
    per_file: BTreeMap<String, Counts>,
    /// Missed mutants with the reason the equivalents list gives (None: unlisted).
    missed: Vec<(String, Option<String>)>,
    timeouts: Vec<String>,
}

impl Summary {
    fn new(outcomes: &[Outcome], equivalent: &BTreeMap<String, String>) -> Self {
        let mut s = Summary {
            total: Counts::default(),
            per_file: BTreeMap::new(),
            missed: Vec::new(),
            timeouts: Vec::new(),
        };
        for o in outcomes {
            s.total.add(&o.summary);
            s.per_file
                .entry(o.file.clone())
                .or_default()
                .add(&o.summary);
            match o.summary.as_str() {
                "MissedMutant" => s
                    .missed
                    .push((o.name.clone(), equivalent.get(&o.key()).cloned())),
                "Timeout" => s.timeouts.push(o.name.clone()),
                _ => {}
            }
        }
        s
    }

    fn unlisted(&self) -> Vec<&str> {
        self.missed
            .iter()
            .filter(|(_, why)| why.is_none())
            .map(|(n, _)| n.as_str())
            .collect()
    }

    fn text(&self) -> String {
        let t = &self.total;
        let mut s = format!(
            "mutants: {} caught, {} timed out, {} missed, {} unviable — {:.1}% of {} viable caught (target {:.0}%)\n",
            t.caught,
            t.timeout,
            t.missed,
            t.unviable,
            100.0 * t.score(),
            t.viable(),
            100.0 * TARGET
        );
        for (name, why) in &self.missed {
            let _ = writeln!(
                s,
                "  missed {name}{}",
                if why.is_some() {
                    " (listed)"
                } else {
                    "   <-- NOT LISTED"
                }
            );
        }
        s
    }

    fn verdict(&self) -> Result<(), String> {
        let unlisted = self.unlisted();
        if !unlisted.is_empty() {
            return Err(format!(
                "{} missed mutant(s) are not in {EQUIVALENT}: kill each with a case or list it with why it cannot be caught:\n  {}",
                unlisted.len(),
                unlisted.join("\n  ")
            ));
        }
        if self.total.score() < TARGET {
            return Err(format!(
                "{:.1}% of viable mutants caught, below the {:.0}% target",
                100.0 * self.total.score(),
                100.0 * TARGET
            ));
        }
        Ok(())
    }

    fn markdown(&self, o: &Options, times: Option<(String, String)>) -> String {
        let commit = Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(root())
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let mut m = String::from("# cargo-mutants over core and the CPU backend\n\n");
        let _ = writeln!(
            m,
            "Produced by `cargo xtask mutants{}{}` (cargo-mutants {VERSION}, packages {}, \
             profile `mutants`, each package's own tests: `--tests`) at commit `{commit}`. \
             A timed-out mutant counts as caught (the tests did not finish); unviable mutants \
             do not compile and are not counted.\n",
            o.files
                .iter()
                .map(|f| format!(" --file {f}"))
                .collect::<String>(),
            if o.record { " --record" } else { "" },
            PACKAGES.join(", ")
        );
        if let Some((start, end)) = times {
            let _ = writeln!(m, "Run from {start} to {end}.\n");
        }
        m.push_str(
            "| scope | mutants | unviable | caught | timed out | missed | caught / viable |\n",
        );
        m.push_str("|---|---|---|---|---|---|---|\n");
        for (file, c) in &self.per_file {
            m.push_str(&c.row(&format!("`{file}`")));
        }
        m.push_str(&self.total.row("**all**"));
        let _ = writeln!(
            m,
            "\nTarget: {:.0}% of viable mutants caught.\n",
            100.0 * TARGET
        );
        m.push_str("## Missed mutants\n\n");
        if self.missed.is_empty() {
            m.push_str("None.\n");
        } else {
            let _ = writeln!(
                m,
                "Each is listed in `{EQUIVALENT}` with why no test can catch it.\n"
            );
            m.push_str("| mutant | why it survives |\n|---|---|\n");
            for (name, why) in &self.missed {
                let _ = writeln!(
                    m,
                    "| `{name}` | {} |",
                    why.as_deref().unwrap_or("**not listed**")
                );
            }
        }
        if !self.timeouts.is_empty() {
            m.push_str("\n## Timed out (counted as caught)\n\n");
            for t in &self.timeouts {
                let _ = writeln!(m, "- `{t}`");
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(name: &str, summary: &str) -> Outcome {
        Outcome {
            name: name.into(),
            file: name.split(':').next().unwrap().into(),
            summary: summary.into(),
        }
    }

    #[test]
    fn key_drops_line_and_column_only() {
        assert_eq!(
            key_of("core/src/device.rs:178:27: replace > with >= in Device::alloc"),
            "core/src/device.rs: replace > with >= in Device::alloc"
        );
        assert_eq!(key_of("a.rs: replace x"), "a.rs: replace x");
    }

    #[test]
    fn unlisted_survivors_and_low_scores_fail() {
        let eq = parse_equivalent(
            "| mutant | why |\n|---|---|\n| `a.rs:1:1: replace f with ()` | nothing observes it |\n",
        );
        assert_eq!(eq.len(), 1, "{eq:?}");
        let mut o: Vec<Outcome> = (0..9)
            .map(|i| outcome(&format!("a.rs:{i}:1: caught {i}"), "CaughtMutant"))
            .collect();
        o.push(outcome("a.rs:7:5: replace f with ()", "MissedMutant"));
        o.push(outcome("a.rs:8:5: bad", "Unviable"));
        let s = Summary::new(&o, &eq);
        assert!(s.verdict().is_ok(), "90% with the survivor listed");
        assert!((s.total.score() - 0.9).abs() < 1e-9);
        o.push(outcome("a.rs:9:5: replace g with ()", "MissedMutant"));
        let s = Summary::new(&o, &eq);
        let e = s.verdict().unwrap_err();
        assert!(e.contains("replace g with ()"), "{e}");
        let mut eq2 = eq.clone();
        eq2.insert("a.rs: replace g with ()".into(), "why".into());
        let e = Summary::new(&o, &eq2).verdict().unwrap_err();
        assert!(e.contains("below the 90% target"), "{e}");
    }
}
