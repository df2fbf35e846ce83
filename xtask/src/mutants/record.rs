//! docs/results/mutants.md: one section per group, each with the commit it
//! ran at, and an overview table made from the sections. Recording a group
//! replaces its section and keeps the others, so a campaign can span runs.

use super::summary::GroupSummary;
use super::{TARGET, VERSION};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// A group's section as the record holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// The commit the group's campaign ran at.
    pub commit: String,
    /// How its mutants were chosen.
    pub chosen: String,
    /// The section's Markdown, markers included.
    pub text: String,
}

const OPEN: &str = "<!-- group ";
const CLOSE: &str = "<!-- end group -->";

/// The sections of an existing record, by group name.
pub fn read(path: &Path) -> BTreeMap<String, Recorded> {
    parse(&std::fs::read_to_string(path).unwrap_or_default())
}

pub fn parse(text: &str) -> BTreeMap<String, Recorded> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at..];
        let Some(end) = after.find(CLOSE) else { break };
        let section = &after[..end + CLOSE.len()];
        let header = section.lines().next().unwrap_or("");
        // `<!-- group NAME at COMMIT -->`
        let mut words = header
            .trim_start_matches(OPEN)
            .trim_end_matches("-->")
            .split_whitespace();
        if let (Some(name), Some("at"), Some(commit)) = (words.next(), words.next(), words.next()) {
            let chosen = section
                .lines()
                .find_map(|l| l.strip_prefix("Mutants: "))
                .map(|l| l.trim_end_matches('.').to_string())
                .unwrap_or_default();
            out.insert(
                name.to_string(),
                Recorded {
                    commit: commit.to_string(),
                    chosen,
                    text: section.to_string(),
                },
            );
        }
        rest = &after[end + CLOSE.len()..];
    }
    out
}

/// One group's section, markers included.
pub fn section(s: &GroupSummary, commit: &str) -> String {
    format!(
        "{OPEN}{} at {commit} -->\n{}Commit: `{commit}`.\n{CLOSE}",
        s.group.name,
        s.markdown()
    )
}

/// The whole record: the overview, then every section (recorded ones kept
/// unless `summaries` replaces them), in the groups' order.
pub fn render(
    recorded: &BTreeMap<String, Recorded>,
    summaries: &[(GroupSummary, String)],
) -> String {
    let mut sections: BTreeMap<String, (String, String)> = recorded
        .iter()
        .map(|(k, r)| (k.clone(), (r.commit.clone(), r.text.clone())))
        .collect();
    for (s, commit) in summaries {
        sections.insert(
            s.group.name.to_string(),
            (commit.clone(), section(s, commit)),
        );
    }
    let mut m = String::from("# Mutation testing: cargo-mutants over every crate with logic\n\n");
    let _ = writeln!(
        m,
        "Produced by `cargo xtask mutants --record` (cargo-mutants {VERSION}), one \
         group at a time: each group's mutants face the tests that answer for its \
         files, and each section names the commit it ran at. A timed-out mutant \
         counts as caught (the tests did not finish); unviable mutants do not \
         compile and are not counted. Target: {:.0}% of viable mutants caught in \
         every group, and every missed mutant either killed or listed in \
         `docs/mutants-equivalent.md` with the reason. Files no group mutates are \
         excluded in `.cargo/mutants.toml`, each with its reason. `.ci/run` \
         mutates what changed since each group's commit (`cargo xtask mutants \
         --in-diff recorded`). Each group's outcomes, mutant by mutant, are kept \
         beside this file in `mutants/<group>.json`: `--rerun-missed` starts from \
         them in a checkout without the campaign's output.\n",
        100.0 * TARGET
    );
    m.push_str("| group | commit | mutants | unviable | caught | timed out | missed | caught / viable |\n|---|---|---|---|---|---|---|---|\n");
    let order: Vec<&str> = super::groups::GROUPS.iter().map(|g| g.name).collect();
    let mut names: Vec<&String> = sections.keys().collect();
    names.sort_by_key(|n| order.iter().position(|o| o == n).unwrap_or(usize::MAX));
    for name in &names {
        let (commit, text) = &sections[*name];
        let all = text
            .lines()
            .find_map(|l| l.strip_prefix("| **all** |"))
            .unwrap_or(" — | — | — | — | — | not run |");
        let short = commit.get(..10).unwrap_or(commit);
        let _ = writeln!(m, "| {name} | `{short}` |{all}");
    }
    for name in &names {
        m.push('\n');
        m.push_str(&sections[*name].1);
        m.push('\n');
    }
    m
}

pub fn write(path: &Path, summaries: &[(GroupSummary, String)]) -> Result<(), String> {
    let text = render(&read(path), summaries);
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::groups::GROUPS;
    use crate::mutants::summary::Outcome;

    fn summary(group: usize, caught: usize, missed: usize) -> GroupSummary {
        let g = &GROUPS[group];
        let mut o: Vec<Outcome> = (0..caught)
            .map(|i| Outcome {
                name: format!("x.rs:{i}:1: c"),
                file: "x.rs".into(),
                summary: "CaughtMutant".into(),
            })
            .collect();
        o.extend((0..missed).map(|i| Outcome {
            name: format!("x.rs:{i}:9: m"),
            file: "x.rs".into(),
            summary: "MissedMutant".into(),
        }));
        GroupSummary::new(g, &o, &Default::default(), format!("all {caught}"), None)
    }

    /// Recording one group keeps the others' sections and their commits,
    /// and the overview has a row per recorded group, in the groups' order.
    #[test]
    fn recording_a_group_keeps_the_others() {
        let first = render(
            &BTreeMap::new(),
            &[(summary(1, 10, 0), "aaaaaaaaaaaa".into())],
        );
        let parsed = parse(&first);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[GROUPS[1].name].commit, "aaaaaaaaaaaa");
        assert_eq!(parsed[GROUPS[1].name].chosen, "all 10");
        let second = render(&parsed, &[(summary(0, 19, 1), "bbbbbbbbbbbb".into())]);
        let parsed = parse(&second);
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[GROUPS[1].name].commit, "aaaaaaaaaaaa");
        assert_eq!(parsed[GROUPS[0].name].commit, "bbbbbbbbbbbb");
        let rows: Vec<&str> = second.lines().filter(|l| l.contains("| `")).collect();
        assert!(
            rows[0].starts_with(&format!("| {} | `bbbbbbbbbb` | 20 |", GROUPS[0].name)),
            "{rows:?}"
        );
        assert!(
            rows[1].starts_with(&format!("| {} | `aaaaaaaaaa` | 10 |", GROUPS[1].name)),
            "{rows:?}"
        );
        assert!(second.contains("95.0%"), "{second}");
        // Rendering again from the parsed record changes nothing.
        assert_eq!(render(&parsed, &[]), second);
    }

    /// `write` keeps what the file held and `read` reads it back; a record
    /// that does not exist yet reads as empty.
    #[test]
    fn a_record_is_written_and_read_back_from_its_file() {
        let dir = std::env::temp_dir().join(format!("seam-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mutants.md");
        assert!(read(&path).is_empty());
        write(&path, &[(summary(1, 10, 0), "aaaaaaaaaaaa".into())]).unwrap();
        write(&path, &[(summary(0, 3, 0), "cccccccccccc".into())]).unwrap();
        let back = read(&path);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(back.len(), 2, "{back:?}");
        assert_eq!(back[GROUPS[1].name].commit, "aaaaaaaaaaaa");
        assert_eq!(back[GROUPS[0].name].chosen, "all 3");
    }
}
