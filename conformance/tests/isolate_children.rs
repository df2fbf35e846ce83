//! The isolated harness against real child processes: this test binary
//! re-invokes itself as the device child (`fake_child`, selected by
//! `SEAM_FAKE_CHILD`), which runs real trials on cpu:0 through the runner —
//! so through the runner's verdict stream — and then misbehaves as asked:
//! crashes in a trial, hangs in a trial, or hangs after its summary line.

use seam_conformance::isolate::{self, ChildEnd, ChildFiles, Limits, Planned};
use seam_conformance::report::{Report, Summary, TrialRecord, Verdict};
use seam_conformance::runner::{self, Filter, RunOptions};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const FAKE: &str = "SEAM_FAKE_CHILD";
/// The trial (0-based) the fake misbehaves in.
const BAD_TRIAL: usize = 2;

/// The cases a resumed fake child is given (comma-separated), instead of `c1_`.
const FAKE_CASES: &str = "SEAM_FAKE_CASES";
/// Where the fake child writes its report (the binary's `--json`).
const FAKE_JSON: &str = "SEAM_FAKE_JSON";

fn filter() -> Filter {
    Filter {
        backends: vec!["cpu".into()],
        cases: vec!["c1_".into()],
        devices: vec!["cpu:0".into()],
    }
}

/// The device child. In a normal test run (no `SEAM_FAKE_CHILD`) it does nothing.
#[test]
fn fake_child() {
    let Ok(behaviour) = std::env::var(FAKE) else {
        return;
    };
    let mut filter = filter();
    // A resumed child runs the cases it is given, and misbehaves no more.
    let resumed = std::env::var(FAKE_CASES).ok();
    if let Some(cases) = &resumed {
        filter.cases = cases.split(',').map(str::to_string).collect();
    }
    let behaviour = match (resumed.is_some(), behaviour.as_str()) {
        // The child that resumes after a slow crash hangs in its first trial.
        (true, "slow-crash-then-hang") => "hang-first",
        (true, _) => "",
        (false, b) => b,
    };
    let mut plan = runner::plan(&filter);
    match behaviour {
        // A child whose device vanished before it started: nothing to run.
        "empty-report" => {
            plan.trials.clear();
            plan.devices.clear();
        }
        // A child that leaves half its plan out of its report.
        "half-report" => plan.trials.truncate(plan.trials.len() / 2),
        _ => {}
    }
    let mut n = 0;
    let (report, _) = runner::run_all_observed(
        &plan,
        RunOptions {
            trace: behaviour == "crash-traced",
        },
        |_| {
            if n == 0 && behaviour == "hang-first" {
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            if n == BAD_TRIAL {
                match behaviour {
                    "slow-crash-then-hang" => {
                        std::thread::sleep(Duration::from_secs(3));
                        std::process::abort()
                    }
                    "crash" | "crash-traced" => std::process::abort(),
                    // A trial whose own output begins as the summary does,
                    // then takes longer than the teardown limit.
                    "chatty-slow" => {
                        println!("\nconformance: the backend says hello");
                        std::thread::sleep(Duration::from_secs(2));
                    }
                    "hang" => loop {
                        std::thread::sleep(Duration::from_secs(3600));
                    },
                    _ => {}
                }
            }
            n += 1;
        },
        |_, _| {},
    );
    // libtest left "test fake_child ... " unterminated: the summary starts a line.
    println!("\n{}", report.summary.line());
    // As the binary does: the report, after the summary line.
    if let Ok(path) = std::env::var(FAKE_JSON) {
        std::fs::write(path, serde_json::to_string(&report).unwrap()).unwrap();
    }
    match behaviour {
        "teardown-hang" => std::thread::sleep(Duration::from_secs(3600)),
        // Every trial passed and the report says so; the exit code does not.
        "report-then-exit-3" => std::process::exit(3),
        "report-then-abort" => std::process::abort(),
        _ => {}
    }
}

fn planned() -> Vec<Planned> {
    let plan = runner::plan(&filter());
    let planned: Vec<Planned> = plan.trials.iter().map(Planned::from).collect();
    assert!(
        planned.len() > BAD_TRIAL + 1,
        "need more than {} c1_ trials on cpu:0: {planned:?}",
        BAD_TRIAL + 1
    );
    planned
}

fn fake_command(behaviour: &str, only: Option<&[String]>, files: &ChildFiles) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "fake_child",
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(FAKE, behaviour)
    .env(FAKE_JSON, &files.json);
    if let Some(cases) = only {
        cmd.env(FAKE_CASES, cases.join(","));
    }
    cmd
}

/// Run the fake child with `behaviour` under `limits`.
fn run_fake(behaviour: &str, limits: &Limits) -> (isolate::ChildRun, Vec<TrialRecord>) {
    let dir = std::env::temp_dir().join(format!(
        "seam-isolate-children-{}-{behaviour}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let files = ChildFiles::for_device(&dir, "cpu:0");
    let run = isolate::watch(fake_command(behaviour, None, &files), &files, limits);
    let records = isolate::verdicts("cpu:0", &planned(), &run);
    let _ = std::fs::remove_dir_all(&dir);
    (run, records)
}

fn limits() -> Limits {
    Limits {
        device: Duration::from_secs(120),
        trial: Duration::from_secs(120),
        teardown: Duration::from_secs(120),
    }
}

fn report_of(records: Vec<TrialRecord>) -> Report {
    let mut s = Summary::default();
    records.iter().for_each(|t| s.add(&t.verdict));
    Report::new(vec![], vec![], records, s)
}

#[test]
fn a_crash_in_a_child_keeps_the_verdicts_of_trials_that_finished() {
    let planned = planned();
    let (run, records) = run_fake("crash", &limits());
    assert!(
        matches!(&run.end, ChildEnd::Signaled(why) if why == "killed by signal 6"),
        "{:?}\n{}",
        run.end,
        run.log
    );
    assert_eq!(
        run.running.as_deref(),
        Some(planned[BAD_TRIAL].name.as_str())
    );
    assert_eq!(records.len(), planned.len(), "{records:#?}");
    for (t, p) in records.iter().zip(&planned) {
        assert_eq!(t.name, p.name);
    }
    // The trials before the crash ran for real: their own verdicts and durations.
    for t in &records[..BAD_TRIAL] {
        assert_eq!(t.verdict, Verdict::Passed, "{t:?}");
        assert!(t.duration_ms > 0.0, "{t:?}");
    }
    let Verdict::Crashed(why) = &records[BAD_TRIAL].verdict else {
        panic!("{:?}", records[BAD_TRIAL]);
    };
    assert!(why.contains("while this trial ran"), "{why}");
    for t in &records[BAD_TRIAL + 1..] {
        assert!(
            matches!(&t.verdict, Verdict::Crashed(m) if m.starts_with("not run")),
            "{t:?}"
        );
    }
    let report = report_of(records);
    assert!(!report.summary.ok());
    assert_eq!(report.summary.passed, BAD_TRIAL);
    let failed = report.failed_lines();
    assert!(
        failed[0].starts_with(&format!("FAILED {}: ", planned[BAD_TRIAL].name)),
        "{failed:?}"
    );
}

/// The whole isolated run: after the crash, a second child runs the trials
/// the first never started, so one crash costs one trial.
#[test]
fn a_crashed_child_is_resumed_for_the_trials_it_never_started() {
    let planned = planned();
    let plan = runner::plan(&filter());
    let mut children = Vec::new();
    let (report, _) = isolate::run_isolated_with(
        &plan,
        &limits(),
        |_, only, files| fake_command("crash", only, files),
        |device, run| children.push((device.to_string(), format!("{:?}", run.end))),
    );
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("seam-conformance-{}", std::process::id())),
    );
    assert_eq!(children.len(), 2, "{children:?}");
    assert!(children[0].1.starts_with("Signaled"), "{children:?}");
    assert_eq!(children[1].1, "Exited(0)", "{children:?}");
    let names: Vec<&str> = report.trials.iter().map(|t| t.name.as_str()).collect();
    let want: Vec<&str> = planned.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, want);
    for (i, t) in report.trials.iter().enumerate() {
        match i {
            BAD_TRIAL => assert!(matches!(t.verdict, Verdict::Crashed(_)), "{t:?}"),
            _ => assert_eq!(t.verdict, Verdict::Passed, "{t:?}"),
        }
    }
    assert_eq!(report.summary.crashed, 1);
    assert_eq!(report.summary.passed, planned.len() - 1);
    assert!(!report.summary.ok());
}

#[test]
fn a_trial_that_never_returns_times_out() {
    let planned = planned();
    let limits = Limits {
        trial: Duration::from_secs(2),
        ..limits()
    };
    let start = Instant::now();
    let (run, records) = run_fake("hang", &limits);
    assert!(
        matches!(run.end, ChildEnd::TimedOut),
        "{:?}\n{}",
        run.end,
        run.log
    );
    assert!(start.elapsed() < Duration::from_secs(120));
    assert!(records[..BAD_TRIAL]
        .iter()
        .all(|t| t.verdict == Verdict::Passed));
    let Verdict::TimedOut(why) = &records[BAD_TRIAL].verdict else {
        panic!("{:?}", records[BAD_TRIAL]);
    };
    assert!(why.contains("no verdict within 2s"), "{why}");
    let report = report_of(records);
    assert!(!report.summary.ok());
    assert!(report.failed_lines()[0].starts_with(&format!("FAILED {}: ", planned[BAD_TRIAL].name)));
}

#[test]
fn a_child_that_prints_its_summary_then_sleeps_is_a_teardown_hang() {
    let planned = planned();
    let limits = Limits {
        teardown: Duration::from_millis(500),
        ..limits()
    };
    let (run, records) = run_fake("teardown-hang", &limits);
    assert!(
        matches!(run.end, ChildEnd::TeardownHang),
        "{:?}\n{}",
        run.end,
        run.log
    );
    // Every trial finished and kept its verdict; the hang is a record of its own.
    assert_eq!(records.len(), planned.len() + 1, "{records:#?}");
    assert!(records[..planned.len()]
        .iter()
        .all(|t| t.verdict == Verdict::Passed));
    let hang = records.last().unwrap();
    assert_eq!(hang.name, "cpu:0::teardown");
    assert!(
        matches!(&hang.verdict, Verdict::TeardownHang(m) if m.contains("did not exit within 500ms")),
        "{hang:?}"
    );
    let report = report_of(records);
    assert!(!report.summary.ok());
    assert_eq!(report.summary.teardown_hangs, 1);
    assert_eq!(
        report.failed_lines(),
        ["FAILED cpu:0::teardown: printed its summary, then did not exit within 500ms"]
    );
}

/// A traced child that crashes loses the trace of no trial that finished
/// before the crash: each came back with its verdict. Mutation: the child
/// keeping its traces to write once at the end (as it did) → red (no
/// trace at all).
#[test]
fn a_traced_child_that_crashes_keeps_the_traces_of_finished_trials() {
    let (run, records) = run_fake("crash-traced", &limits());
    let passed = records
        .iter()
        .filter(|t| t.verdict == Verdict::Passed)
        .count();
    assert_eq!(passed, BAD_TRIAL, "{records:#?}");
    assert_eq!(
        run.traces.len(),
        BAD_TRIAL,
        "one trace log per finished trial: {:?}",
        run.traces.iter().map(|t| &t.label).collect::<Vec<_>>()
    );
    assert!(run.trace_error.is_none(), "{:?}", run.trace_error);
}

/// A line a trial prints that only begins as the summary does starts no
/// teardown clock: the child that prints one, then works on past the
/// teardown limit, passes every trial. Mutation: the parent taking any line
/// that starts `conformance: ` for the summary (as it did) → red (the
/// trial crashed, "printed its summary, then did not exit").
#[test]
fn a_line_that_begins_like_the_summary_is_not_the_summary() {
    let planned = planned();
    let limits = Limits {
        teardown: Duration::from_millis(500),
        ..limits()
    };
    let (run, records) = run_fake("chatty-slow", &limits);
    assert!(
        matches!(run.end, ChildEnd::Exited(0)),
        "{:?}\n{}",
        run.end,
        run.log
    );
    assert_eq!(records.len(), planned.len(), "{records:#?}");
    assert!(
        records.iter().all(|t| t.verdict == Verdict::Passed),
        "{records:#?}"
    );
    assert!(Summary::is_line(&Summary::default().line()));
    for not in [
        "conformance: the backend says hello",
        "conformance: 1 passed",
        "conformance: 1 passed, 0 failed, 0 ignored, 0 expected failures, 0 unexpected passes, 0 timed out, 0 crashed, x teardown hangs",
        "  conformance: 1 passed, 0 failed, 0 ignored, 0 expected failures, 0 unexpected passes, 0 timed out, 0 crashed, 0 teardown hangs",
    ] {
        assert!(!Summary::is_line(not), "{not}");
    }
}

/// A device's files are named after it, without the `:`.
#[test]
fn files_of_a_device_are_named_after_it() {
    let f = ChildFiles::for_device(&PathBuf::from("/tmp/x"), "cuda:1");
    assert_eq!(f.stream, PathBuf::from("/tmp/x/cuda_1.verdicts.jsonl"));
}

/// Every planned trial is in the records, in plan order, and none of them
/// passed unless `passed(i)` says so.
fn assert_plan_covered(records: &[TrialRecord], planned: &[Planned]) {
    for p in planned {
        assert!(
            records.iter().any(|r| r.name == p.name),
            "{} is missing from the verdicts: {records:#?}",
            p.name
        );
    }
}

/// A child that exits 0 with an empty report (its device vanished between
/// the parent's plan and its own start) does not make the device's planned
/// trials vanish: each one crashes, "not in the device's report".
#[test]
fn an_empty_report_with_exit_0_fails_every_planned_trial() {
    let planned = planned();
    let (run, records) = run_fake("empty-report", &limits());
    assert!(matches!(run.end, ChildEnd::Exited(0)), "{:?}", run.end);
    assert_eq!(run.report.as_ref().map(|r| r.trials.len()), Some(0));
    assert_plan_covered(&records, &planned);
    for r in &records {
        assert!(
            matches!(&r.verdict, Verdict::Crashed(m) if m.starts_with("not in the device's report")),
            "{r:?}"
        );
    }
    let report = report_of(records);
    assert!(!report.summary.ok());
    assert_eq!(report.summary.crashed, planned.len());
}

/// A report that holds half the plan: the half it holds keeps its verdicts,
/// the other half crashes.
#[test]
fn a_report_missing_half_the_plan_fails_the_missing_half() {
    let planned = planned();
    let half = planned.len() / 2;
    let (run, records) = run_fake("half-report", &limits());
    assert!(matches!(run.end, ChildEnd::Exited(0)), "{:?}", run.end);
    assert_plan_covered(&records, &planned);
    for p in &planned[..half] {
        let r = records.iter().find(|r| r.name == p.name).unwrap();
        assert_eq!(r.verdict, Verdict::Passed, "{r:?}");
    }
    for p in &planned[half..] {
        let r = records.iter().find(|r| r.name == p.name).unwrap();
        assert!(
            matches!(&r.verdict, Verdict::Crashed(m) if m.contains("not in the device's report")),
            "{r:?}"
        );
    }
    let report = report_of(records);
    assert!(!report.summary.ok());
    assert_eq!(report.summary.passed, half);
    assert_eq!(report.summary.crashed, planned.len() - half);
}

/// Every planned trial passed, and `<device>::teardown` crashed saying `why`.
fn every_trial_passed_and_the_process_crashed(
    records: &[TrialRecord],
    planned: &[Planned],
    why: &str,
) {
    assert_eq!(records.len(), planned.len() + 1, "{records:#?}");
    assert!(records[..planned.len()]
        .iter()
        .all(|t| t.verdict == Verdict::Passed));
    let last = records.last().unwrap();
    assert_eq!(last.name, "cpu:0::teardown");
    assert!(
        matches!(&last.verdict, Verdict::Crashed(m) if m.contains(why)),
        "{last:?}"
    );
    assert!(!report_of(records.to_vec()).summary.ok());
}

/// A whole, passing report and an exit code of 3: the trials keep their
/// verdicts, and the process itself fails the device.
#[test]
fn a_report_then_a_non_zero_exit_fails_the_device() {
    let planned = planned();
    let (run, records) = run_fake("report-then-exit-3", &limits());
    assert!(matches!(run.end, ChildEnd::Exited(3)), "{:?}", run.end);
    every_trial_passed_and_the_process_crashed(
        &records,
        &planned,
        "exited 3 after writing a report",
    );
}

/// A report, the summary line, then death by signal: every trial keeps its
/// verdict, and the crash is a record of its own that fails the run.
#[test]
fn a_report_then_death_by_signal_after_the_summary_fails_the_device() {
    let planned = planned();
    let (run, records) = run_fake("report-then-abort", &limits());
    assert!(matches!(&run.end, ChildEnd::Signaled(_)), "{:?}", run.end);
    assert!(
        run.report.is_some(),
        "the report was written before the abort"
    );
    every_trial_passed_and_the_process_crashed(&records, &planned, "after its last trial");
}

/// The real binary, started as the child of a device this process does not
/// have: it exits 2 and says why, and every trial planned on that device
/// fails with that reason.
#[test]
fn a_child_that_cannot_find_its_device_exits_2_and_its_trials_say_why() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_seam-conformance"));
    let dir = std::env::temp_dir().join(format!("seam-isolate-vanished-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = ChildFiles::for_device(&dir, "cpu:7");
    let cmd = isolate::child_command(&exe, "cpu:7", &["c1_".into()], false, &files);
    let run = isolate::watch(cmd, &files, &limits());
    let planned: Vec<Planned> = planned()
        .into_iter()
        .map(|p| Planned {
            name: p.name.replace("cpu:0", "cpu:7"),
            device: "cpu:7".into(),
            ..p
        })
        .collect();
    let records = isolate::verdicts("cpu:7", &planned, &run);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        matches!(run.end, ChildEnd::Exited(2)),
        "{:?}\n{}",
        run.end,
        run.log
    );
    assert!(run.report.is_none());
    assert_plan_covered(&records, &planned);
    for r in &records {
        assert!(
            matches!(&r.verdict, Verdict::Crashed(m) if m.contains("discovery found no device cpu:7")),
            "{r:?}"
        );
    }
}

/// The device deadline spans all of a device's children: a child resumed
/// after a crash gets what is left of it, not the whole deadline again.
#[test]
fn a_resumed_child_gets_what_is_left_of_the_device_deadline() {
    let plan = runner::plan(&filter());
    let limits = Limits {
        device: Duration::from_secs(6),
        ..limits()
    };
    let start = Instant::now();
    let (report, _) = isolate::run_isolated_with(
        &plan,
        &limits,
        |_, only, files| fake_command("slow-crash-then-hang", only, files),
        |_, _| {},
    );
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("seam-conformance-{}", std::process::id())),
    );
    let hung = report
        .trials
        .iter()
        .find(|t| matches!(t.verdict, Verdict::TimedOut(_)))
        .unwrap_or_else(|| panic!("{:#?}", report.trials));
    let Verdict::TimedOut(why) = &hung.verdict else {
        unreachable!()
    };
    assert!(why.contains("did not finish within"), "{why}");
    assert!(
        !why.contains("within 6s"),
        "the resumed child was given the whole deadline again: {why}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(12),
        "{:?}",
        start.elapsed()
    );
}

/// A child that dies before settling any trial is not started again: a
/// second one would die the same way, until the device deadline.
#[test]
fn a_child_that_settles_nothing_is_not_resumed() {
    let planned = planned();
    let plan = runner::plan(&filter());
    let mut children = 0;
    let limits = Limits {
        device: Duration::from_secs(20),
        ..limits()
    };
    let (report, _) = isolate::run_isolated_with(
        &plan,
        &limits,
        |_, _, _| Command::new("false"),
        |_, _| children += 1,
    );
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("seam-conformance-{}", std::process::id())),
    );
    assert_eq!(children, 1);
    assert_eq!(report.trials.len(), planned.len(), "{:#?}", report.trials);
    for t in &report.trials {
        assert!(
            matches!(&t.verdict, Verdict::Crashed(m)
                if m.starts_with("not run: the device process exited 1 without a report before its first trial")),
            "{t:?}"
        );
    }
}
