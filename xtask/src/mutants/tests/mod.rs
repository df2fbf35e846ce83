//! The campaign's choices and its run end to end, against a fake
//! cargo-mutants that records how it was called.

use super::cargo::{at_any_line, baseline_command, exact, find_or_install};
use super::*;
use fake::Fake;

mod fake;

#[test]
fn an_exact_regex_escapes_what_mutant_names_hold() {
    let r = exact(&[
        "a.rs:1:2: replace f -> Result<(), E> with Ok(())",
        "b.rs:3:4: replace + with * in g",
    ]);
    assert_eq!(
        r,
        "^(?:a\\.rs:1:2: replace f \\-> Result<\\(\\), E> with Ok\\(\\(\\)\\)|b\\.rs:3:4: replace \\+ with \\* in g)$"
    );
}

#[test]
fn a_rerun_finds_a_survivor_wherever_it_has_moved() {
    let r = at_any_line(&["a/b.rs:10:2: replace > with >= in load"]);
    assert_eq!(r, "^(?:a/b\\.rs:\\d+:\\d+: replace > with >= in load)$");
}

#[test]
fn packages_are_found_where_the_workspace_keeps_them() {
    for (p, d) in [
        ("seam", "core"),
        ("seam-cpu", "backends/cpu"),
        ("seam-streamgraph", "backends/streamgraph"),
        ("seam-conformance", "conformance"),
        ("seam-kernels", "kernels"),
        ("seam-example-llama", "examples/llama"),
    ] {
        assert_eq!(package_dir(p), d);
        assert!(root().join(d).join("Cargo.toml").is_file(), "{d}");
    }
    for g in groups::GROUPS {
        assert!(
            root()
                .join(package_dir(g.package))
                .join("Cargo.toml")
                .is_file(),
            "{}",
            g.package
        );
    }
}

fn listed(file: &str, n: usize) -> Vec<Listed> {
    (0..n)
        .map(|i| Listed {
            name: format!("{file}:{i}:1: m{i}"),
            file: file.into(),
        })
        .collect()
}

#[test]
fn a_campaign_takes_every_mutant_of_its_files_and_a_sample_of_the_rest() {
    let g = groups::GROUPS.iter().find(|g| g.name == "vulkan").unwrap();
    let mut all = listed("backends/vulkan/src/dispatch.rs", 12);
    all.extend(listed("backends/vulkan/src/float_controls.rs", 400));
    all.extend(listed("backends/vulkan/src/backend/staging.rs", 24));
    let (chosen, how) = choose(g, &all, &[]);
    assert_eq!(chosen.len(), 12 + 150, "{how}");
    assert!(chosen.iter().all(|m| !m.file.ends_with("staging.rs")));
    assert!(
        how.contains("a uniform sample of 150 of the other 400"),
        "{how}"
    );
    let core = groups::GROUPS.iter().find(|g| g.name == "core").unwrap();
    let (chosen, _) = choose(core, &listed("core/src/ops.rs", 7), &[]);
    assert_eq!(chosen.len(), 7);
    let (chosen, _) = choose(
        core,
        &listed("core/src/ops.rs", 7),
        &["core/src/x.rs".into()],
    );
    assert!(chosen.is_empty());
}

const MERGE: &str = "conformance/src/merge.rs";
const JUNIT: &str = "conformance/src/junit.rs";
const CASE: &str = "conformance/src/cases/c1.rs";

/// A campaign runs the group's mutants (not a case's, which no harness
/// group mutates) with the group's tests, counts what came back and fails
/// on a survivor nobody listed; the same with every mutant caught passes.
#[test]
fn a_campaign_runs_its_groups_mutants_and_judges_what_comes_back() {
    let fake = Fake::new("campaign");
    let a = "conformance/src/merge.rs:10:5: replace + with - in merge";
    let b = "conformance/src/junit.rs:20:9: delete ! in escape";
    let c = "conformance/src/junit.rs:30:9: replace f -> bool with true";
    fake.lists(&[
        (a, MERGE),
        (b, JUNIT),
        (c, JUNIT),
        ("conformance/src/cases/c1.rs:1:1: x", CASE),
    ]);
    fake.finds(&[
        (a, MERGE, "CaughtMutant"),
        (b, JUNIT, "MissedMutant"),
        (c, JUNIT, "Unviable"),
    ]);
    fake.exits(2);
    let o = fake.options("harness");
    let summaries = drive(&o, &fake.program()).unwrap();
    let runs = fake.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let args = &runs[0];
    let after = |flag: &str| {
        let i = args
            .iter()
            .position(|x| x == flag)
            .unwrap_or_else(|| panic!("no {flag}: {args:?}"));
        args[i + 1].clone()
    };
    assert_eq!(after("--package"), "seam-conformance");
    assert_eq!(after("--test-package"), "seam-conformance");
    assert_eq!(after("--timeout"), "300");
    assert_eq!(after("--jobs"), "1");
    assert!(
        args.iter().any(|x| x == "env CARGO_INCREMENTAL=1"),
        "incremental builds: {args:?}"
    );
    assert_eq!(
        after("--re"),
        exact(&[a, b, c]),
        "the case's mutant is not the group's"
    );
    let tests = &args[args.iter().position(|x| x == "--").unwrap() + 1..];
    assert_eq!(
        tests.join(" "),
        groups::GROUPS
            .iter()
            .find(|g| g.name == "harness")
            .unwrap()
            .test_args
            .join(" ")
    );
    let (s, commit) = &summaries[0];
    assert_eq!(commit, &head());
    assert_eq!(commit.len(), 40, "{commit}");
    assert_eq!(
        (s.total.caught, s.total.missed, s.total.unviable),
        (1, 1, 1)
    );
    assert_eq!(s.per_file[JUNIT].missed, 1);
    assert_eq!(s.per_file[MERGE].caught, 1);
    assert!(
        s.chosen
            .starts_with("every mutant of `conformance/src/isolate/**`"),
        "{}",
        s.chosen
    );
    assert!(s.chosen.ends_with("(3)"), "{}", s.chosen);
    assert_eq!(
        s.times,
        Some(("2026-01-01T00:00:00Z".into(), "2026-01-01T01:00:00Z".into()))
    );
    let text = s.text();
    assert!(
        text.contains(&format!("missed {b}   <-- NOT LISTED")),
        "{text}"
    );
    assert!(text.starts_with("mutants [harness]: 1 caught, 0 timed out, 1 missed, 1 unviable — 50.0% of 2 viable caught"), "{text}");
    let e = verdict(&o, &summaries).unwrap_err();
    assert!(e.contains(b), "{e}");
    // What the run chose is kept beside its output, for a later --from.
    let chosen = std::fs::read_to_string(o.output.join("harness").join(CHOSEN)).unwrap();
    assert_eq!(chosen, format!("{}\n{}\n", s.chosen, commit));

    // Summarised again from that output, without running anything.
    let from = Options {
        from: Some(o.output.clone()),
        ..fake.options("harness")
    };
    let again = drive(&from, Path::new("/nonexistent")).unwrap();
    assert_eq!(again[0].0.total, s.total);
    assert_eq!(again[0].0.chosen, s.chosen);
    assert_eq!(fake.runs().len(), 1, "--from runs nothing");
    let e = run(&from).unwrap_err();
    assert!(
        e.contains("not in docs/mutants-equivalent.md") && e.contains(b),
        "{e}"
    );

    fake.finds(&[(a, MERGE, "CaughtMutant"), (b, JUNIT, "CaughtMutant")]);
    fake.exits(0);
    let summaries = drive(&o, &fake.program()).unwrap();
    assert!(verdict(&o, &summaries).is_ok());
    assert!(summaries[0].0.text().contains("100.0% of 2 viable caught"));
    assert!(run(&from).is_ok(), "read back: every mutant caught");
}

/// A rerun of the missed runs only them, at any line, and keeps the
/// merged outcomes: a survivor now caught counts as caught, one gone from
/// the code is dropped, one still missed stays missed.
#[test]
fn a_rerun_of_the_missed_runs_only_them_and_merges_the_outcomes() {
    let fake = Fake::new("rerun");
    let a = "conformance/src/merge.rs:10:5: replace + with - in merge";
    let b = "conformance/src/junit.rs:20:9: delete ! in escape";
    let c = "conformance/src/junit.rs:30:9: replace f -> bool with true";
    let d = "conformance/src/junit.rs:40:9: replace g -> bool with false";
    fake.lists(&[(a, MERGE), (b, JUNIT), (c, JUNIT), (d, JUNIT)]);
    fake.finds(&[
        (a, MERGE, "CaughtMutant"),
        (b, JUNIT, "MissedMutant"),
        (c, JUNIT, "MissedMutant"),
        (d, JUNIT, "MissedMutant"),
    ]);
    let o = fake.options("harness");
    drive(&o, &fake.program()).unwrap();
    // b now caught (moved two lines down), c still missed, d gone.
    let b2 = "conformance/src/junit.rs:22:9: delete ! in escape";
    let c2 = "conformance/src/junit.rs:32:9: replace f -> bool with true";
    fake.finds(&[(b2, JUNIT, "CaughtMutant"), (c2, JUNIT, "MissedMutant")]);
    let rerun = Options {
        rerun_missed: true,
        ..fake.options("harness")
    };
    let summaries = drive(&rerun, &fake.program()).unwrap();
    let runs = fake.runs();
    assert_eq!(runs.len(), 2);
    let re = &runs[1][runs[1].iter().position(|x| x == "--re").unwrap() + 1];
    assert_eq!(re, &at_any_line(&[b, c, d]));
    let s = &summaries[0].0;
    assert_eq!((s.total.caught, s.total.missed), (2, 1), "{}", s.text());
    assert!(
        s.chosen.contains("the 3 it missed were run again at")
            && s.chosen
                .ends_with("1 caught, 1 missed, 1 no longer in the code"),
        "{}",
        s.chosen
    );
    assert_eq!(s.missed, vec![(c.to_string(), None)]);
    // The next rerun starts from the merged outcomes: only c again.
    drive(&rerun, &fake.program()).unwrap();
    let runs = fake.runs();
    let re = &runs[2][runs[2].iter().position(|x| x == "--re").unwrap() + 1];
    assert_eq!(re, &at_any_line(&[c]));
}

/// In a diff, only mutants in changed lines are listed (`--in-diff` with
/// the diff since the group's recorded commit), at most `max` of them, no
/// baseline; a group with no recorded campaign is skipped; a failing
/// cargo-mutants is an error that names the group.
#[test]
fn a_diff_run_is_bounded_and_a_failing_run_is_an_error() {
    let fake = Fake::new("diff");
    let a = "conformance/src/merge.rs:10:5: replace + with - in merge";
    let b = "conformance/src/junit.rs:20:9: delete ! in escape";
    fake.lists(&[(a, MERGE), (b, JUNIT)]);
    fake.finds(&[(a, MERGE, "CaughtMutant")]);
    let recorded = record::read(&root().join(RESULTS));
    let Some(base) = recorded.get("harness") else {
        panic!("the harness group's campaign is recorded in {RESULTS}");
    };
    let o = Options {
        in_diff: Some("recorded".into()),
        max: 1,
        in_place: true,
        ..fake.options("harness")
    };
    let summaries = drive(&o, &fake.program()).unwrap();
    let runs = fake.runs();
    let args = &runs[0];
    assert!(args.iter().any(|x| x == "--in-place") && !args.iter().any(|x| x == "--jobs"));
    let i = args.iter().position(|x| x == "--baseline").unwrap();
    assert_eq!(args[i + 1], "skip");
    let re = &args[args.iter().position(|x| x == "--re").unwrap() + 1];
    assert!(
        re == &exact(&[a]) || re == &exact(&[b]),
        "one of the two: {re}"
    );
    let s = &summaries[0].0;
    assert!(
        s.chosen.starts_with(&format!(
            "the 1 of 2 mutants in lines changed since {}",
            base.commit
        )) && s.chosen.contains("its share of at most 1 over every group"),
        "{}",
        s.chosen
    );
    let diff = std::fs::read_to_string(o.output.join("harness.diff")).unwrap();
    assert!(diff.starts_with("diff --git a/conformance/"), "{diff:.200}");
    // Nothing left of the budget: the next group is not run.
    let unrecorded = Options {
        groups: vec!["vulkan-staging".into()],
        ..o
    };
    let skipped = drive(&unrecorded, &fake.program());
    assert!(recorded.contains_key("vulkan-staging") || skipped.unwrap().is_empty());
    // A diff with no mutable line: cargo-mutants lists nothing at all (not
    // even `[]`), and the group has nothing to run.
    std::fs::write(fake.dir.join("list.json"), "").unwrap();
    let runs = fake.runs().len();
    let none = drive(
        &Options {
            in_diff: Some("recorded".into()),
            ..fake.options("harness")
        },
        &fake.program(),
    )
    .unwrap();
    assert!(none.is_empty(), "nothing listed, nothing run");
    assert_eq!(fake.runs().len(), runs);
    fake.lists(&[(a, MERGE), (b, JUNIT)]);
    fake.exits(1);
    let e = match drive(&fake.options("harness"), &fake.program()) {
        Err(e) => e,
        Ok(_) => panic!("a cargo-mutants that fails is an error"),
    };
    assert!(e.contains("cargo-mutants over group harness failed"), "{e}");
}

/// An in-diff budget reaches every group that changed: with two groups
/// changed and a budget of 2, each gets one, though the first lists more
/// than the whole budget (spent group by group in order, the first took
/// it all and the second ran nothing). Mutation: `share` answered by the
/// old in-order spending → red.
#[test]
fn a_diff_budget_reaches_every_group_that_changed() {
    let fake = Fake::new("share");
    let a = "conformance/src/merge.rs:10:5: replace + with - in merge";
    let b = "conformance/src/junit.rs:20:9: delete ! in escape";
    let c = "conformance/src/merge.rs:30:5: replace == with != in merge";
    let x = "xtask/src/mutants/groups.rs:9:9: replace share -> Vec<usize> with vec![]";
    const GROUPS_RS: &str = "xtask/src/mutants/groups.rs";
    fake.lists(&[(a, MERGE), (b, JUNIT), (c, MERGE), (x, GROUPS_RS)]);
    fake.finds(&[(a, MERGE, "CaughtMutant"), (x, GROUPS_RS, "CaughtMutant")]);
    let o = Options {
        groups: vec!["harness".into(), "xtask".into()],
        in_diff: Some("recorded".into()),
        max: 2,
        in_place: true,
        ..fake.options("harness")
    };
    drive(&o, &fake.program()).unwrap();
    let runs = fake.runs();
    let res: Vec<&String> = runs
        .iter()
        .map(|args| &args[args.iter().position(|x| x == "--re").unwrap() + 1])
        .collect();
    assert_eq!(res.len(), 2, "one run a group: {runs:?}");
    assert!(
        [exact(&[a]), exact(&[b]), exact(&[c])].contains(res[0]),
        "one of the harness's three: {}",
        res[0]
    );
    assert_eq!(res[1], &exact(&[x]), "the xtask group's one");
}

/// cargo-mutants VERSION on the PATH is used as it is; another version is
/// not, and then the copy under the tools folder is used, installed first
/// only when it is missing (and an install that leaves none is an error).
#[test]
fn cargo_mutants_is_found_or_installed_once() {
    let fake = Fake::new("install");
    let script = |version: &str| format!("#!/bin/sh\necho 'cargo-mutants {version}'\n");
    let on_path = fake.dir.join("on-path");
    std::fs::write(&on_path, script(VERSION)).unwrap();
    let exec = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exec(&on_path);
    let tools = fake.dir.join("tools");
    let never = |_: &Path| -> Result<(), String> { panic!("installed with one on the PATH") };
    assert_eq!(find_or_install(&on_path, &tools, never).unwrap(), on_path);
    std::fs::write(&on_path, script("1.0.0")).unwrap();
    let installs = std::cell::Cell::new(0);
    let install = |dir: &Path| {
        installs.set(installs.get() + 1);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/cargo-mutants"), "").unwrap();
        Ok(())
    };
    let bin = tools.join("bin/cargo-mutants");
    assert_eq!(find_or_install(&on_path, &tools, install).unwrap(), bin);
    assert_eq!(find_or_install(&on_path, &tools, install).unwrap(), bin);
    assert_eq!(installs.get(), 1, "installed once, then found");
    let empty = fake.dir.join("empty");
    let e = find_or_install(&on_path, &empty, |_| Ok(())).unwrap_err();
    assert!(e.contains("is not there"), "{e}");
    let e = find_or_install(&on_path, &empty, |_| Err("offline".into())).unwrap_err();
    assert_eq!(e, "offline");
}

/// A diff run's budget is shared by its groups: with one mutant allowed
/// the first group takes it and the next runs nothing; a diff run judges
/// no score, so a listed survivor alone passes it.
#[test]
fn a_diff_runs_budget_is_shared_and_a_diff_is_not_scored() {
    let fake = Fake::new("budget");
    let listed = "conformance/src/isolate/stream.rs:87:48: replace + with * in Tail::lines";
    let equivalent = read_equivalent(&root().join(EQUIVALENT)).unwrap();
    assert!(
        equivalent.contains_key(&summary::key_of(listed)),
        "{listed} is listed"
    );
    let file = "conformance/src/isolate/stream.rs";
    // One mutant of each group: the harness's comes first and takes the budget.
    let xtask =
        "xtask/src/report.rs:30:5: replace expand -> Result<Vec<PathBuf>, String> with Ok(vec![])";
    fake.lists(&[(listed, file), (xtask, "xtask/src/report.rs")]);
    fake.finds(&[(listed, file, "MissedMutant")]);
    let base = record::read(&root().join(RESULTS))["harness"]
        .commit
        .clone();
    let o = Options {
        groups: vec!["harness".into(), "xtask".into()],
        in_diff: Some(base),
        max: 1,
        ..fake.options("harness")
    };
    let summaries = drive(&o, &fake.program()).unwrap();
    assert_eq!(fake.runs().len(), 1, "one mutant in all: {:?}", fake.runs());
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].0.total.missed, 1);
    assert!(
        verdict(&o, &summaries).is_ok(),
        "a diff's listed survivor is not scored"
    );
    let whole = Options {
        in_diff: None,
        ..fake.options("harness")
    };
    let e = verdict(&whole, &summaries).unwrap_err();
    assert!(e.contains("below the 95% target"), "{e}");
}

/// cargo-mutants runs every struct-field deletion of the package whatever
/// `--re` says; the ones not chosen are handed to `--iterate` as already
/// caught, so they are skipped, and a chosen one is not. With none to
/// skip, there is no `--iterate`.
#[test]
fn field_deletions_not_chosen_are_skipped() {
    let fake = Fake::new("fields");
    let a = "conformance/src/merge.rs:10:5: replace + with - in merge";
    let mine = "conformance/src/merge.rs:12:9: delete field x from struct S expression in merge";
    let other = "conformance/src/cases/c1.rs:3:9: delete field y from struct T expression in c1";
    fake.lists(&[(a, MERGE), (mine, MERGE), (other, CASE)]);
    fake.finds(&[(a, MERGE, "CaughtMutant"), (mine, MERGE, "CaughtMutant")]);
    let o = fake.options("harness");
    drive(&o, &fake.program()).unwrap();
    let args = &fake.runs()[0];
    assert!(args.iter().any(|x| x == "--iterate"), "{args:?}");
    let caught = std::fs::read_to_string(o.output.join("harness/mutants.out/caught.txt")).unwrap();
    assert_eq!(caught, format!("{other}\n"), "only the unchosen one");
    // Nothing to skip: a plain run.
    fake.lists(&[(a, MERGE), (mine, MERGE)]);
    drive(&o, &fake.program()).unwrap();
    let args = &fake.runs()[1];
    assert!(!args.iter().any(|x| x == "--iterate"), "{args:?}");
    assert!(!o.output.join("harness/mutants.out/caught.txt").exists());
}

/// A group judged by another package's tests gets its baseline from xtask
/// (the group's own test command, with its environment), since
/// cargo-mutants' baseline tests only the mutated package; a group judged
/// by its own package keeps cargo-mutants' baseline.
#[test]
fn a_group_judged_by_another_package_has_its_own_baseline() {
    let pick = |name: &str| groups::GROUPS.iter().find(|g| g.name == name).unwrap();
    assert!(baseline_command(pick("core"), Path::new("cargo")).is_none());
    assert!(baseline_command(pick("harness"), Path::new("cargo")).is_none());
    let cmd = baseline_command(pick("vulkan"), Path::new("/x/cargo")).unwrap();
    assert_eq!(cmd.get_program(), "/x/cargo");
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        args,
        [
            "test",
            "-p",
            "seam-conformance",
            "-p",
            "seam-vulkan",
            "--lib",
            "--test",
            "conformance",
            "--test",
            "lavapipe",
            "--",
            "vulkan:0::",
            "tests::"
        ]
    );
    let env: Vec<(String, String)> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_str()?.into(), v?.to_str()?.into())))
        .collect();
    assert!(
        env.contains(&("SEAM_VULKAN_VALIDATION".into(), "sync".into())),
        "{env:?}"
    );
    assert_eq!(cmd.get_current_dir(), Some(root().as_path()));
    for name in ["vulkan-staging", "wgpu", "kernels", "backends"] {
        assert!(
            baseline_command(pick(name), Path::new("cargo")).is_some(),
            "{name}"
        );
    }
}

/// A recorded campaign keeps its outcomes; a later checkout without the
/// campaign's output runs the missed ones again from them, and records the
/// merged verdicts with the first run's choice and commit.
#[test]
fn a_rerun_starts_from_the_kept_outcomes_when_the_output_is_gone() {
    let fake = Fake::new("kept");
    let a = "conformance/src/merge.rs:10:5: replace + with - in merge";
    let b = "conformance/src/junit.rs:20:9: delete ! in escape";
    fake.lists(&[(a, MERGE), (b, JUNIT)]);
    fake.finds(&[(a, MERGE, "CaughtMutant"), (b, JUNIT, "MissedMutant")]);
    let o = Options {
        record: true,
        ..fake.options("harness")
    };
    let summaries = drive(&o, &fake.program()).unwrap();
    keep_recorded(&o, &summaries);
    let kept = o.kept.join("harness.json");
    let v = read_json(&kept).unwrap();
    assert_eq!(v["outcomes"].as_array().unwrap().len(), 2);
    assert_eq!(v["commit"], summaries[0].1.as_str());
    // A fresh campaign reads its own outcomes, not the kept ones.
    fake.finds(&[(a, MERGE, "CaughtMutant"), (b, JUNIT, "CaughtMutant")]);
    let fresh = drive(&fake.options("harness"), &fake.program()).unwrap();
    assert_eq!(fresh[0].0.total.missed, 0, "the fresh run's outcomes");
    fake.finds(&[(a, MERGE, "CaughtMutant"), (b, JUNIT, "MissedMutant")]);
    drive(&fake.options("harness"), &fake.program()).unwrap();
    // The output is gone (another checkout); the rerun catches b.
    std::fs::remove_dir_all(&o.output).unwrap();
    fake.finds(&[(b, JUNIT, "CaughtMutant")]);
    let again = Options {
        rerun_missed: true,
        record: false,
        ..fake.options("harness")
    };
    let s = drive(&again, &fake.program()).unwrap();
    let runs = fake.runs();
    let last = runs.last().unwrap();
    let re = &last[last.iter().position(|x| x == "--re").unwrap() + 1];
    assert_eq!(re, &at_any_line(&[b]));
    assert_eq!(s[0].0.total.missed, 0, "b caught by the rerun");
    assert_eq!(s[0].1, summaries[0].1, "the first run's commit");
    assert!(s[0].0.chosen.contains("run again at"), "{}", s[0].0.chosen);
}

/// `drive` with `record` keeps the outcomes (what `run` then records).
fn keep_recorded(o: &Options, summaries: &[(summary::GroupSummary, String)]) {
    assert!(o.record);
    assert_eq!(summaries.len(), 1);
    assert!(o
        .kept
        .join(format!("{}.json", summaries[0].0.group.name))
        .is_file());
}

/// A group judged by another package's tests runs them on the unmutated
/// tree first (with the group's environment) and then skips cargo-mutants'
/// baseline; tests that fail there refuse the group before any mutant.
#[test]
fn a_group_judged_elsewhere_runs_its_own_baseline_first() {
    let fake = Fake::new("baseline");
    let a = "backends/vulkan/src/wait.rs:10:5: replace + with - in wait";
    fake.lists(&[(a, "backends/vulkan/src/wait.rs")]);
    fake.finds(&[(a, "backends/vulkan/src/wait.rs", "CaughtMutant")]);
    let o = fake.options("vulkan");
    drive(&o, &fake.program()).unwrap();
    let baseline = std::fs::read_to_string(fake.dir.join("cargo.txt")).unwrap();
    assert!(
        baseline.starts_with("test\n-p\nseam-conformance\n-p\nseam-vulkan\n"),
        "{baseline}"
    );
    let run = &fake.runs()[0];
    let i = run.iter().position(|x| x == "--baseline").unwrap();
    assert_eq!(run[i + 1], "skip");
    std::fs::write(fake.dir.join("cargo-code.txt"), "1").unwrap();
    let e = match drive(&o, &fake.program()) {
        Err(e) => e,
        Ok(_) => panic!("a failing baseline must refuse the group"),
    };
    assert!(e.contains("its tests fail without any mutant"), "{e}");
    assert_eq!(
        fake.runs().len(),
        1,
        "no mutant ran after the failed baseline"
    );
}

/// Only a run that reads a campaign's output and runs nothing again goes
/// without cargo-mutants; `--from` with `--rerun-missed` runs the missed.
#[test]
fn reading_a_campaign_alone_needs_no_cargo_mutants() {
    let fake = Fake::new("runs-mutants");
    let mut o = fake.options("vulkan");
    assert!(runs_mutants(&o), "a campaign");
    o.from = Some("elsewhere".into());
    assert!(!runs_mutants(&o), "--from alone");
    o.rerun_missed = true;
    assert!(runs_mutants(&o), "--from --rerun-missed");
}
