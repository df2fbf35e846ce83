//! What a campaign found: each group's outcomes (cargo-mutants'
//! `outcomes.json`), counted per file, the survivors held against
//! `docs/mutants-equivalent.md`, and the record in Markdown.

use super::groups::Group;
use super::{EQUIVALENT, TARGET};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

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

/// Write `outcomes` in the shape [`read_outcomes`] reads (cargo-mutants'
/// `outcomes.json`, mutants only).
pub fn write_outcomes(path: &Path, outcomes: &[Outcome]) -> Result<(), String> {
    let list: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            serde_json::json!({
                "scenario": { "Mutant": { "name": o.name, "file": o.file } },
                "summary": o.summary,
            })
        })
        .collect();
    let text = serde_json::to_string_pretty(&serde_json::json!({ "outcomes": list }))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
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
            let cells = cells(l.trim().strip_prefix('|')?);
            let key = cells.first()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((key_of(key), cells.get(1).cloned().unwrap_or_default()))
        })
        .collect()
}

/// A Markdown table row's cells, trimmed: split at each `|` that is not
/// escaped, and `\|` read as `|` (how a mutant's `|` is written in a cell).
fn cells(row: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                out.last_mut().expect("one cell at least").push('|');
            }
            '|' => out.push(String::new()),
            c => out.last_mut().expect("one cell at least").push(c),
        }
    }
    out.iter().map(|c| c.trim().to_string()).collect()
}

#[derive(Default, Clone, Copy, Debug, PartialEq)]
pub struct Counts {
    pub caught: usize,
    pub missed: usize,
    pub timeout: usize,
    pub unviable: usize,
}

impl Counts {
    pub fn add(&mut self, summary: &str) {
        match summary {
            "CaughtMutant" => self.caught += 1,
            "MissedMutant" => self.missed += 1,
            "Timeout" => self.timeout += 1,
            _ => self.unviable += 1,
        }
    }
    pub fn viable(&self) -> usize {
        self.caught + self.missed + self.timeout
    }
    pub fn score(&self) -> f64 {
        (self.caught + self.timeout) as f64 / self.viable().max(1) as f64
    }
    pub fn row(&self, scope: &str) -> String {
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

/// One group's outcomes, counted.
pub struct GroupSummary {
    pub group: &'static Group,
    pub total: Counts,
    pub per_file: BTreeMap<String, Counts>,
    /// Missed mutants with the reason the equivalents list gives (None: unlisted).
    pub missed: Vec<(String, Option<String>)>,
    pub timeouts: Vec<String>,
    /// How the mutants were chosen, for the record.
    pub chosen: String,
    /// cargo-mutants' start and end times.
    pub times: Option<(String, String)>,
}

impl GroupSummary {
    pub fn new(
        group: &'static Group,
        outcomes: &[Outcome],
        equivalent: &BTreeMap<String, String>,
        chosen: String,
        times: Option<(String, String)>,
    ) -> Self {
        let mut s = GroupSummary {
            group,
            total: Counts::default(),
            per_file: BTreeMap::new(),
            missed: Vec::new(),
            timeouts: Vec::new(),
            chosen,
            times,
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

    pub fn unlisted(&self) -> Vec<&str> {
        self.missed
            .iter()
            .filter(|(_, why)| why.is_none())
            .map(|(n, _)| n.as_str())
            .collect()
    }

    pub fn text(&self) -> String {
        let t = &self.total;
        let mut s = format!(
            "mutants [{}]: {} caught, {} timed out, {} missed, {} unviable — {:.1}% of {} viable caught (target {:.0}%)\n",
            self.group.name,
            t.caught,
            t.timeout,
            t.missed,
            t.unviable,
            100.0 * t.score(),
            t.viable(),
            100.0 * TARGET
        );
        for (name, why) in &self.missed {
            let mark = if why.is_some() {
                " (listed)"
            } else {
                "   <-- NOT LISTED"
            };
            let _ = writeln!(s, "  missed {name}{mark}");
        }
        s
    }

    /// Err when a survivor is not listed, or (`whole`: a campaign, not a
    /// handful of changed lines) fewer than [`TARGET`] are caught.
    pub fn verdict(&self, whole: bool) -> Result<(), String> {
        let unlisted = self.unlisted();
        if !unlisted.is_empty() {
            return Err(format!(
                "[{}] {} missed mutant(s) are not in {EQUIVALENT}: kill each with a case or a test, or list it with why it cannot be caught:\n  {}",
                self.group.name,
                unlisted.len(),
                unlisted.join("\n  ")
            ));
        }
        if whole && self.total.viable() > 0 && self.total.score() < TARGET {
            return Err(format!(
                "[{}] {:.1}% of viable mutants caught, below the {:.0}% target",
                self.group.name,
                100.0 * self.total.score(),
                100.0 * TARGET
            ));
        }
        Ok(())
    }

    /// This group's section of the record.
    pub fn markdown(&self) -> String {
        let g = self.group;
        let mut m = format!("## {} (package `{}`)\n\n", g.name, g.package);
        let _ = writeln!(
            m,
            "Judged by {}: `cargo test -p {} {}`{}.\n",
            g.judged_by,
            g.test_packages.join(" -p "),
            g.test_args.join(" "),
            if g.env.is_empty() {
                String::new()
            } else {
                format!(
                    " with {}",
                    g.env
                        .iter()
                        .map(|(k, v)| format!("`{k}={v}`"))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            }
        );
        let _ = writeln!(m, "Mutants: {}.\n", self.chosen);
        if let Some((start, end)) = &self.times {
            let _ = writeln!(m, "Run from {start} to {end}.\n");
        }
        m.push_str(
            "| file | mutants | unviable | caught | timed out | missed | caught / viable |\n",
        );
        m.push_str("|---|---|---|---|---|---|---|\n");
        for (file, c) in &self.per_file {
            m.push_str(&c.row(&format!("`{file}`")));
        }
        m.push_str(&self.total.row("**all**"));
        if !self.missed.is_empty() {
            m.push_str("\nMissed, each listed in `docs/mutants-equivalent.md` with why no test can catch it:\n\n| mutant | why it survives |\n|---|---|\n");
            // A `|` in a cell is written `\|`, or it splits the cell.
            let cell = |s: &str| s.replace('|', "\\|");
            for (name, why) in &self.missed {
                let _ = writeln!(
                    m,
                    "| `{}` | {} |",
                    cell(name),
                    why.as_deref().map_or("**not listed**".into(), cell)
                );
            }
        }
        if !self.timeouts.is_empty() {
            m.push_str("\nTimed out (counted as caught):\n\n");
            for t in &self.timeouts {
                let _ = writeln!(m, "- `{t}`");
            }
        }
        m.push('\n');
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::groups::GROUPS;

    /// A rerun's merged outcomes read back as written, so the next rerun
    /// starts from them. Mutation: `write_outcomes` writing `summary`
    /// under another key → red.
    #[test]
    fn merged_outcomes_read_back_as_written() {
        let dir = std::env::temp_dir().join(format!("seam-merged-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("merged.json");
        let list = vec![
            Outcome {
                name: "a.rs:1:2: replace + with -".into(),
                file: "a.rs".into(),
                summary: "CaughtMutant".into(),
            },
            Outcome {
                name: "b.rs:3:4: delete !".into(),
                file: "b.rs".into(),
                summary: "MissedMutant".into(),
            },
        ];
        write_outcomes(&path, &list).unwrap();
        let back = read_outcomes(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let pairs = |l: &[Outcome]| -> Vec<(String, String, String)> {
            l.iter()
                .map(|o| (o.name.clone(), o.file.clone(), o.summary.clone()))
                .collect()
        };
        assert_eq!(pairs(&back), pairs(&list));
    }

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
        // Only a line and a column, both numbers, are dropped.
        assert_eq!(key_of("a.rs:12:x: rest"), "a.rs:12:x: rest");
        assert_eq!(key_of("a.rs:x:3: rest"), "a.rs:x:3: rest");
    }

    /// A timed-out mutant counts as caught and is listed as timed out; a
    /// group with no viable mutant passes (nothing to score) and says so.
    #[test]
    fn timeouts_count_as_caught_and_no_viable_mutant_is_no_score() {
        let o = vec![
            outcome("a.rs:1:1: slow", "Timeout"),
            outcome("a.rs:2:1: caught", "CaughtMutant"),
            outcome("b.rs:3:1: bad", "Unviable"),
        ];
        let g = &GROUPS[0];
        let s = GroupSummary::new(g, &o, &BTreeMap::new(), "how".into(), None);
        assert_eq!(
            s.total,
            Counts {
                caught: 1,
                missed: 0,
                timeout: 1,
                unviable: 1
            }
        );
        assert_eq!(s.total.viable(), 2);
        assert!((s.total.score() - 1.0).abs() < 1e-9);
        assert_eq!(s.timeouts, ["a.rs:1:1: slow"]);
        let md = s.markdown();
        assert!(
            md.contains("| `a.rs` | 2 | 0 | 1 | 1 | 0 | 100.0% |"),
            "{md}"
        );
        assert!(
            md.contains("| `b.rs` | 1 | 1 | 0 | 0 | 0 | no viable mutant |"),
            "{md}"
        );
        assert!(
            md.contains("Timed out (counted as caught):\n\n- `a.rs:1:1: slow`"),
            "{md}"
        );
        assert!(!md.contains("Missed, each listed"), "{md}");
        assert!(md.contains("Mutants: how."), "{md}");
        let none = GroupSummary::new(g, &o[2..], &BTreeMap::new(), String::new(), None);
        assert!(
            none.verdict(true).is_ok(),
            "no viable mutant: nothing to score"
        );
        assert!(!none.markdown().contains("Timed out"));
    }

    /// The equivalents list is read from its file, a missing file is an
    /// error, and the times come from cargo-mutants' outcomes.
    #[test]
    fn the_equivalents_and_times_are_read_from_their_files() {
        let dir = std::env::temp_dir().join(format!("seam-eq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let eq = dir.join("eq.md");
        std::fs::write(
            &eq,
            "| mutant | why |\n|---|---|\n| `a.rs:1:2: x` | because |\n",
        )
        .unwrap();
        let read = read_equivalent(&eq).unwrap();
        assert_eq!(read.get("a.rs: x").map(String::as_str), Some("because"));
        // A mutant's `|` is written `\|` in its cell, and so is one in the
        // reason. Mutations in `cells` (the escape not read, a `|` not
        // splitting) → red.
        let piped = parse_equivalent(
            "| `b.rs:3:4: replace \\| with ^ in f` | the bits \\| nothing | extra |\n",
        );
        assert_eq!(
            piped.get("b.rs: replace | with ^ in f").map(String::as_str),
            Some("the bits | nothing"),
            "{piped:?}"
        );
        // A backslash before anything else is itself.
        let slashed = parse_equivalent("| `c.rs:1:1: replace a\\b` | why\\not |\n");
        assert_eq!(
            slashed.get("c.rs: replace a\\b").map(String::as_str),
            Some("why\\not"),
            "{slashed:?}"
        );
        assert!(read_equivalent(&dir.join("none.md")).is_err());
        let times = dir.join("outcomes.json");
        std::fs::write(
            &times,
            r#"{"start_time":"s0","end_time":"e1","outcomes":[]}"#,
        )
        .unwrap();
        assert_eq!(read_times(&times), Some(("s0".into(), "e1".into())));
        assert_eq!(read_times(&dir.join("none.json")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unlisted_survivors_and_low_scores_fail() {
        let eq = parse_equivalent(
            "| mutant | why |\n|---|---|\n| `a.rs:1:1: replace f with ()` | nothing observes it |\n",
        );
        assert_eq!(eq.len(), 1, "{eq:?}");
        let mut o: Vec<Outcome> = (0..19)
            .map(|i| outcome(&format!("a.rs:{i}:1: caught {i}"), "CaughtMutant"))
            .collect();
        o.push(outcome("a.rs:7:5: replace f with ()", "MissedMutant"));
        o.push(outcome("a.rs:8:5: bad", "Unviable"));
        let g = &GROUPS[0];
        let s = GroupSummary::new(g, &o, &eq, String::new(), None);
        assert!(s.verdict(true).is_ok(), "95% with the survivor listed");
        assert!((s.total.score() - 0.95).abs() < 1e-9);
        assert_eq!(s.total.unviable, 1);
        o.push(outcome("a.rs:9:5: replace g with ()", "MissedMutant"));
        let s = GroupSummary::new(g, &o, &eq, String::new(), None);
        let e = s.verdict(false).unwrap_err();
        assert!(e.contains("replace g with ()"), "{e}");
        let mut eq2 = eq.clone();
        eq2.insert("a.rs: replace g with ()".into(), "why".into());
        let s = GroupSummary::new(g, &o, &eq2, String::new(), None);
        let e = s.verdict(true).unwrap_err();
        assert!(e.contains("below the 95% target"), "{e}");
        assert!(s.verdict(false).is_ok(), "a diff's few mutants: no score");
        let md = s.markdown();
        assert!(
            md.contains("| `a.rs` | 22 | 1 | 19 | 0 | 2 | 90.5% |"),
            "{md}"
        );
        // A `|` in a survivor's name or reason is escaped in its row.
        o.push(outcome("a.rs:10:5: replace | with ^", "MissedMutant"));
        eq2.insert("a.rs: replace | with ^".into(), "bits | bits".into());
        let md = GroupSummary::new(g, &o, &eq2, String::new(), None).markdown();
        assert!(
            md.contains("| `a.rs:10:5: replace \\| with ^` | bits \\| bits |"),
            "{md}"
        );
    }
}
