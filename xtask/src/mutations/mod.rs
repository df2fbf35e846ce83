//! `cargo xtask mutations`: every conformance case names the mutation of the
//! implementation that turns it red. This applies each one to a scratch copy
//! of the tree, runs that case on the CPU device, and checks it went red.
//! The table is the record; docs/contract.md lists the outcome.

use crate::root;
use seam_conformance::report::Report;
use std::path::{Path, PathBuf};
use std::process::Command;

mod table;

pub use table::MUTATIONS;

/// One mutation: replace `find` (must occur exactly once) in `file` and expect `case` to fail.
#[derive(Debug)]
pub struct Mutation {
    pub case: &'static str,
    pub file: &'static str,
    pub find: &'static str,
    pub replace: &'static str,
    pub what: &'static str,
}

fn copy_tree(to: &Path) -> Result<(), String> {
    let out = Command::new("git")
        .args(["ls-files", "-co", "--exclude-standard"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("git ls-files: {e}"))?;
    for f in String::from_utf8_lossy(&out.stdout).lines() {
        let (src, dst) = (root().join(f), to.join(f));
        if !src.is_file() {
            continue;
        }
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p).map_err(|e| e.to_string())?;
        }
        std::fs::copy(&src, &dst).map_err(|e| format!("copying {f}: {e}"))?;
    }
    Ok(())
}

/// `source` with the mutation applied, or why it no longer applies: its
/// text must occur exactly once, and replacing it must change the file.
pub fn apply(m: &Mutation, source: &str) -> Result<String, String> {
    match source.matches(m.find).count() {
        0 => Err(format!(
            "mutation no longer applies: {}: {}",
            m.file, m.find
        )),
        1 => {
            let mutated = source.replacen(m.find, m.replace, 1);
            if mutated == source {
                Err(format!("mutation changes nothing: {}: {}", m.file, m.find))
            } else {
                Ok(mutated)
            }
        }
        n => Err(format!(
            "mutation is ambiguous ({n} matches): {}: {}",
            m.file, m.find
        )),
    }
}

/// Each mutation's file as it is under `tree`, with the mutated text; every
/// mutation that does not apply is named, and then nothing runs.
pub fn prepare<'a>(
    mutations: &[&'a Mutation],
    tree: &Path,
) -> Result<Vec<(&'a Mutation, String, String)>, String> {
    let mut ready = Vec::new();
    let mut stale = Vec::new();
    for m in mutations {
        let original = match std::fs::read_to_string(tree.join(m.file)) {
            Ok(s) => s,
            Err(e) => {
                stale.push(format!("mutation no longer applies: {}: {e}", m.file));
                continue;
            }
        };
        match apply(m, &original) {
            Ok(mutated) => ready.push((*m, original, mutated)),
            Err(e) => stale.push(format!("{e}\n    (for {})", m.case)),
        }
    }
    if stale.is_empty() {
        Ok(ready)
    } else {
        Err(stale.join("\n"))
    }
}

/// What a mutated run's JSON report says about the mutation's case.
#[derive(Debug, PartialEq)]
pub enum Judgement {
    /// These trials of the case fail the run (failed, crashed, timed out…).
    Red(Vec<String>),
    /// Every trial of the case passed, or was ignored or expected to fail.
    Survived,
    /// The report holds no trial of the case (renamed, or filtered away).
    NoTrial,
}

/// Judge by the verdicts of the case's trials in `report` (the exact case
/// name: `--case` matches substrings, so the report may hold others).
pub fn judge(report: &Report, case: &str) -> Judgement {
    let trials: Vec<_> = report.trials.iter().filter(|t| t.case == case).collect();
    if trials.is_empty() {
        return Judgement::NoTrial;
    }
    let red: Vec<String> = trials
        .iter()
        .filter(|t| t.verdict.fails_run())
        .map(|t| {
            let detail = t.verdict.detail().lines().next().unwrap_or("");
            format!("{} {}: {detail}", t.verdict.short(), t.name)
        })
        .collect();
    if red.is_empty() {
        Judgement::Survived
    } else {
        Judgement::Red(red)
    }
}

/// Apply every mutation (or those whose case contains `filter`) and check its case goes red.
pub fn run(filter: Option<&str>) -> Result<(), String> {
    let selected: Vec<&Mutation> = MUTATIONS
        .iter()
        .filter(|m| filter.is_none_or(|f| m.case.contains(f)))
        .collect();
    if selected.is_empty() {
        // A filter that matches nothing would run nothing and pass.
        return Err(format!(
            "no mutation's case contains `{}`",
            filter.unwrap_or_default()
        ));
    }
    run_in(&selected, &crate::cargo(), &root().join("target/mutants"))
}

/// The workspace's debug profile optimises core, the suite and the user
/// kernels (Cargo.toml: a whole suite pass is four times faster); here one
/// mutated line is rebuilt per mutation and one case runs, so the rebuild
/// dominates: at opt-level 0 eleven C13 mutations took 27 s, at 2 60 s
/// (this 2-core machine, 2026-12-06). Config overrides the manifest.
const UNOPTIMISED: [&str; 6] = [
    "--config",
    "profile.dev.package.seam.opt-level=0",
    "--config",
    "profile.dev.package.seam-conformance.opt-level=0",
    "--config",
    "profile.dev.package.seam-kernels.opt-level=0",
];

/// [`run`] of `selected`, with `cargo` building and running the suite, in
/// `work` (the scratch tree, its target folder and the report).
fn run_in(selected: &[&Mutation], cargo: &str, work: &Path) -> Result<(), String> {
    let scratch: PathBuf = work.join("tree");
    let _ = std::fs::remove_dir_all(&scratch);
    copy_tree(&scratch)?;
    // Every mutation must still apply before any runs: a stale one would
    // run the suite unmutated and call that a survivor (or, worse, a kill).
    let ready = prepare(selected, &scratch)?;
    let target = work.join("target");
    // The checkout's own build folder holds the scratch build's
    // intermediates: the registry crates are built there already, with the
    // features and profile CI builds them with, so the first mutation
    // compiles only the workspace's crates (a 2-core machine, 2026-12-05:
    // the first mutation took 37 s, tree copy, whole build and case
    // together; the scratch build alone now takes 8 s, and CI's step fell
    // from 200 s to 165 s). The scratch crates live at another path,
    // so their artifacts are their own; the binaries land in `target`.
    let build_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let json = work.join("report.json");
    let mut survivors = Vec::new();
    for (i, (m, original, mutated)) in ready.iter().enumerate() {
        let path = scratch.join(m.file);
        std::fs::write(&path, mutated).map_err(|e| format!("writing {}: {e}", path.display()))?;
        if std::fs::read_to_string(&path).ok().as_ref() != Some(mutated) {
            return Err(format!(
                "{} did not take the mutation for {}",
                path.display(),
                m.case
            ));
        }
        let _ = std::fs::remove_file(&json);
        let out = Command::new(cargo)
            .args(UNOPTIMISED)
            .args([
                "run",
                "--quiet",
                "-p",
                "seam-conformance",
                "--no-default-features",
                "--bin",
                "seam-conformance",
                "--",
                "--backend",
                "cpu",
                "--case",
                m.case,
                "--json",
            ])
            .arg(&json)
            .env("CARGO_TARGET_DIR", &target)
            .env("CARGO_BUILD_BUILD_DIR", &build_dir)
            // One mutated line between builds: incremental compilation
            // rebuilds it in about 2.5 s instead of 10–17 s (a CPU-backend
            // or core mutation, this 2-core machine, 2026-12-02), whatever
            // the caller's CARGO_INCREMENTAL (CI sets 0 for one-shot builds).
            .env("CARGO_INCREMENTAL", "1")
            // Nothing reads this private build's debug info (a case's
            // failure is its report), and without it a mutation costs about
            // 1.7 s instead of 2.5 s with line tables (the same machine,
            // 2026-12-05).
            .env("CARGO_PROFILE_DEV_DEBUG", "0")
            .env("SEAM_CASE_DEADLINE_S", "60")
            .current_dir(&scratch)
            .output()
            .map_err(|e| format!("running the suite: {e}"))?;
        std::fs::write(&path, original).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let report = std::fs::read_to_string(&json)
            .map_err(|e| e.to_string())
            .and_then(|s| Report::parse(&s).map_err(|e| e.to_string()));
        let (verdict, lines) = match &report {
            Ok(r) => match judge(r, m.case) {
                Judgement::Red(lines) => ("red", lines),
                Judgement::Survived => ("SURVIVED", Vec::new()),
                Judgement::NoTrial => ("NO TRIAL", Vec::new()),
            },
            Err(_) if text.contains("error[E") || text.contains("error: could not compile") => {
                ("DID NOT COMPILE", Vec::new())
            }
            Err(e) => ("NO REPORT", vec![format!("{}: {e}", json.display())]),
        };
        println!(
            "[{}/{}] {verdict:>7}  {}  — {}",
            i + 1,
            ready.len(),
            m.case,
            m.what
        );
        for l in &lines {
            println!("           {}", l.chars().take(200).collect::<String>());
        }
        if verdict != "red" {
            // Where the suite said nothing about the case, its output says why.
            let said = if report.is_err() || verdict == "NO TRIAL" {
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!(":\n{}", tail.join("\n"))
            } else {
                String::new()
            };
            survivors.push(format!("{} ({verdict}){said}", m.case));
        }
    }
    if survivors.is_empty() {
        println!("mutations: all {} went red", ready.len());
        Ok(())
    } else {
        Err(format!("mutations not caught: {}", survivors.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALE: Mutation = Mutation {
        case: "c1_replay_reexecutes",
        file: "Cargo.toml",
        find: "[workspace]\nthis line was never there",
        replace: "",
        what: "a mutation whose text has gone",
    };

    #[test]
    fn a_mutation_whose_text_has_gone_fails_loudly_and_nothing_runs() {
        let source = "fn replay() {\n    run();\n}\n";
        let gone = Mutation {
            find: "    skip();",
            file: "core/src/device.rs",
            ..STALE
        };
        assert_eq!(
            apply(&gone, source).unwrap_err(),
            "mutation no longer applies: core/src/device.rs:     skip();"
        );
        let twice = Mutation { find: "r", ..gone };
        assert!(apply(&twice, source)
            .unwrap_err()
            .starts_with("mutation is ambiguous"));
        let same = Mutation {
            find: "run();",
            replace: "run();",
            ..gone
        };
        assert!(apply(&same, source)
            .unwrap_err()
            .starts_with("mutation changes nothing"));
        let good = Mutation {
            find: "run();",
            replace: "return;",
            ..gone
        };
        assert_eq!(
            apply(&good, source).unwrap(),
            "fn replay() {\n    return;\n}\n"
        );
        // Against the tree: one stale mutation refuses the whole set, naming it.
        let e = prepare(&[&MUTATIONS[0], &STALE], &root()).unwrap_err();
        assert!(
            e.starts_with(
                "mutation no longer applies: Cargo.toml: [workspace]\nthis line was never there"
            ),
            "{e}"
        );
        let missing = Mutation {
            file: "no/such/file.rs",
            ..STALE
        };
        let e = prepare(&[&missing], &root()).unwrap_err();
        assert!(
            e.starts_with("mutation no longer applies: no/such/file.rs: "),
            "{e}"
        );
    }

    /// Every mutation of the table still applies to this tree.
    #[test]
    fn every_mutation_still_applies() {
        let all: Vec<&Mutation> = MUTATIONS.iter().collect();
        if let Err(e) = prepare(&all, &root()) {
            panic!("{e}");
        }
    }

    #[test]
    fn red_is_read_from_the_json_verdicts() {
        let report = |trials: &str| {
            let text = format!(
                r#"{{"format_version":2,"seam_version":"0.1.0","machine":{{"os":"linux","arch":"x86_64","hostname":"h"}},
                "devices":[],"missing":[],"trials":[{trials}],
                "summary":{{"passed":0,"failed":0,"ignored":0,"expected_failures":0,"unexpected_passes":0,"timed_out":0}}}}"#
            );
            Report::from_json(&text).unwrap()
        };
        let t = |case: &str, verdict: &str| {
            format!(
                r#"{{"name":"cpu:0::{case}","device":"cpu:0","case":"{case}","rule":"C1","mode":"eager",{verdict},"duration_ms":1.0,"digest":null}}"#
            )
        };
        let passed = r#""verdict":"passed""#;
        let failed = r#""verdict":"failed","detail":"dst = 17, want 34\nmore""#;
        let crashed = r#""verdict":"crashed","detail":"killed by signal 11""#;
        let ignored = r#""verdict":"ignored","detail":"no device""#;
        // A pass of the case survives, whatever a longer-named case did.
        let r = report(&[t("c1_x", passed), t("c1_x_longer", failed)].join(","));
        assert_eq!(judge(&r, "c1_x"), Judgement::Survived);
        let r = report(&t("c1_x", failed));
        assert_eq!(
            judge(&r, "c1_x"),
            Judgement::Red(vec!["FAIL cpu:0::c1_x: dst = 17, want 34".into()])
        );
        // A crash or a timeout caught the mutation too.
        let r = report(&[t("c1_x", passed), t("c1_x", crashed)].join(","));
        assert!(matches!(judge(&r, "c1_x"), Judgement::Red(l) if l[0].starts_with("CRASH")));
        let r = report(&t("c1_x", ignored));
        assert_eq!(judge(&r, "c1_x"), Judgement::Survived);
        // Output that merely looks like a failure line is not a verdict.
        let r = report(&t("c1_y", passed));
        assert_eq!(judge(&r, "c1_x"), Judgement::NoTrial);
    }

    /// The committed cpu report without `case`'s trials.
    fn report_without(case: &str) -> String {
        let text = std::fs::read_to_string(root().join("docs/results/cpu-ci.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let trials = v["trials"].as_array_mut().unwrap();
        let gone: Vec<String> = trials
            .iter()
            .filter(|t| t["case"] == case)
            .map(|t| t["verdict"].as_str().unwrap().to_string())
            .collect();
        trials.retain(|t| t["case"] != case);
        for verdict in gone {
            let key = if verdict == "passed" {
                "passed"
            } else {
                "ignored"
            };
            let n = v["summary"][key].as_u64().unwrap();
            v["summary"][key] = (n - 1).into();
        }
        v.to_string()
    }

    /// A fake `cargo run` in its own folder: it records the mutated file
    /// as the suite saw it, then writes `report.json` (or, when
    /// `broken` exists, prints a compile error and writes nothing).
    fn fake_cargo(dir: &Path, file: &str) -> String {
        let d = dir.display();
        let script = format!(
            "#!/bin/sh\n\
             json=''; prev=''\n\
             for a in \"$@\"; do [ \"$prev\" = --json ] && json=\"$a\"; prev=\"$a\"; done\n\
             cat '{file}' >> '{d}/seen.txt'\n\
             echo 'the fake cargo ran'\n\
             if [ -e '{d}/quiet' ]; then echo 'it stopped'; exit 101; fi\n\
             if [ -e '{d}/broken' ]; then echo 'error[E0425]: cannot find value'; exit 101; fi\n\
             cp '{d}/report.json' \"$json\"\n"
        );
        let path = dir.join("cargo");
        std::fs::write(&path, script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path.display().to_string()
    }

    /// The committed cpu report with `case`'s trials given `verdict`.
    fn report_with(case: &str, verdict: &str) -> String {
        let text = std::fs::read_to_string(root().join("docs/results/cpu-ci.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut turned = 0;
        for t in v["trials"].as_array_mut().unwrap() {
            if t["case"] == case && t["verdict"] == "passed" && verdict == "failed" {
                t["verdict"] = verdict.into();
                t["detail"] = "the mutation turned it red".into();
                turned += 1;
            }
        }
        // The summary agrees with the trials (a report is checked for it).
        let summary = &mut v["summary"];
        summary["passed"] = (summary["passed"].as_u64().unwrap() - turned).into();
        summary["failed"] = (summary["failed"].as_u64().unwrap() + turned).into();
        v.to_string()
    }

    /// Each mutation runs in a scratch copy of the tree with its text in
    /// place (and the original back afterwards); a red case passes, a case
    /// that survives, a mutation that does not compile and a run with no
    /// report each fail the run by name.
    #[test]
    fn each_mutation_runs_mutated_and_only_red_passes() {
        let m = &MUTATIONS[0];
        let work = root()
            .join("target/xtask-tests")
            .join(format!("mutations-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        let fake = work.join("fake");
        std::fs::create_dir_all(&fake).unwrap();
        let cargo = fake_cargo(&fake, m.file);
        let mutated_text = || {
            let original = std::fs::read_to_string(root().join(m.file)).unwrap();
            apply(m, &original).unwrap()
        };

        std::fs::write(fake.join("report.json"), report_with(m.case, "failed")).unwrap();
        run_in(&[m], &cargo, &work).unwrap();
        let seen = std::fs::read_to_string(fake.join("seen.txt")).unwrap();
        assert_eq!(seen, mutated_text(), "the suite ran over the mutated file");
        let tree = work.join("tree");
        assert!(tree.join("Cargo.toml").is_file() && tree.join("core/src/lib.rs").is_file());
        assert_eq!(
            std::fs::read_to_string(tree.join(m.file)).unwrap(),
            std::fs::read_to_string(root().join(m.file)).unwrap(),
            "the original is back after the run"
        );

        std::fs::write(fake.join("report.json"), report_with(m.case, "passed")).unwrap();
        let e = run_in(&[m], &cargo, &work).unwrap_err();
        assert_eq!(e, format!("mutations not caught: {} (SURVIVED)", m.case));

        std::fs::write(fake.join("report.json"), report_without(m.case)).unwrap();
        let e = run_in(&[m], &cargo, &work).unwrap_err();
        assert!(
            e.starts_with(&format!("mutations not caught: {} (NO TRIAL):", m.case))
                && e.ends_with("the fake cargo ran"),
            "a report without the case: {e}"
        );

        std::fs::write(fake.join("broken"), "").unwrap();
        let e = run_in(&[m], &cargo, &work).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "mutations not caught: {} (DID NOT COMPILE):",
                m.case
            )) && e.contains("error[E0425]"),
            "a mutation that does not compile: {e}"
        );
        // No report and no compile error: said so, with the output.
        std::fs::write(fake.join("quiet"), "").unwrap();
        let e = run_in(&[m], &cargo, &work).unwrap_err();
        assert!(
            e.starts_with(&format!("mutations not caught: {} (NO REPORT):", m.case))
                && e.ends_with("it stopped"),
            "{e}"
        );
        let e = run(Some("no_case_has_this_name")).unwrap_err();
        assert!(e.contains("no mutation's case contains"), "{e}");
        let _ = std::fs::remove_dir_all(&work);
    }
}
