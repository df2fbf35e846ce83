//! The harness tests itself, with fake children (the test binary re-invoked).

use super::stream::StreamState;
use super::*;
use std::io::Write;

fn planned(n: usize) -> Vec<Planned> {
    (0..n)
        .map(|i| Planned {
            name: format!("cpu:0::case{i}"),
            device: "cpu:0".into(),
            case: format!("case{i}"),
            rule: "C1".into(),
            mode: "eager".into(),
        })
        .collect()
}

fn done(p: &Planned, verdict: Verdict) -> TrialRecord {
    TrialRecord {
        duration_ms: 3.0,
        digest: Some("ab".into()),
        ..p.record(verdict)
    }
}

fn run(end: ChildEnd, streamed: Vec<TrialRecord>, running: Option<&str>) -> ChildRun {
    ChildRun {
        end,
        report: None,
        traces: Vec::new(),
        log: "> start cpu:0::case2\nsomething went wrong".into(),
        elapsed: Duration::from_millis(5),
        streamed,
        running: running.map(str::to_string),
        killed: None,
        trace_error: None,
    }
}

fn summary(records: &[TrialRecord]) -> Summary {
    let mut s = Summary::default();
    records.iter().for_each(|r| s.add(&r.verdict));
    s
}

#[test]
fn stream_lines_read_back_whole_and_a_torn_line_waits() {
    let dir = std::env::temp_dir().join(format!("seam-isolate-stream-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("v.jsonl");
    let _ = std::fs::remove_file(&path);
    let p = planned(2);
    let mut out = VerdictStream::to_file(&path).unwrap();
    out.started(&p[0].name);
    out.finished(&done(&p[0], Verdict::Failed("1 != 2".into())));
    out.started(&p[1].name);
    let mut state = StreamState::default();
    state.poll(&path);
    assert_eq!(state.done.len(), 1);
    assert_eq!(state.done[0].verdict, Verdict::Failed("1 != 2".into()));
    assert_eq!(state.done[0].digest.as_deref(), Some("ab"));
    assert_eq!(
        state.running.as_ref().map(|r| r.0.as_str()),
        Some("cpu:0::case1")
    );
    // Half a line (a writer that died mid-write) is not read as an event.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"{\"done\":{\"name\":").unwrap();
    state.poll(&path);
    assert_eq!(state.done.len(), 1);
    // The rest of the line arrives: the whole event is read, once.
    let whole = serde_json::to_string(&StreamEvent::Done(done(&p[1], Verdict::Passed))).unwrap();
    let rest = whole.strip_prefix("{\"done\":{\"name\":").unwrap();
    f.write_all(rest.as_bytes()).unwrap();
    f.write_all(b"\n").unwrap();
    state.poll(&path);
    assert_eq!(state.done.len(), 2, "{:?}", state.done);
    assert_eq!(state.done[1].name, p[1].name);
    assert!(
        state.running.is_none(),
        "the finished trial is no longer running"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trial's trace logs come back from the stream; a trace line that does
/// not read back is said (`trace_error`), a line that is no event at all is
/// skipped without one. Mutations: the trace line's guard taken as always
/// true or always false → red.
#[test]
fn stream_traces_read_back_and_a_broken_one_is_said() {
    let dir = std::env::temp_dir().join(format!("seam-isolate-traces-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("v.jsonl");
    let _ = std::fs::remove_file(&path);
    let mut out = VerdictStream::to_file(&path).unwrap();
    let log = seam::TraceLog {
        device: "cpu:0".into(),
        device_name: "cpu".into(),
        label: "cpu:0::case0".into(),
        events: Vec::new(),
        device_spans: Vec::new(),
        device_timing_unavailable: None,
        node_spans: Vec::new(),
        node_timing_unavailable: None,
    };
    out.traced(&[log]);
    out.traced(&[]);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"not an event\n").unwrap();
    let mut state = StreamState::default();
    state.poll(&path);
    assert_eq!(state.traces.len(), 1);
    assert_eq!(state.traces[0].label, "cpu:0::case0");
    assert!(state.trace_error.is_none(), "{:?}", state.trace_error);
    f.write_all(b"{\"trace\":[{\"device\":1}]}\n").unwrap();
    state.poll(&path);
    let why = state.trace_error.as_deref().unwrap_or_default();
    assert!(why.contains("does not read back"), "{why:?}");
    assert_eq!(state.traces.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child died in the third of four trials: the first two keep their
/// own verdicts (a pass and a failure), the third crashed, the fourth
/// was not run; the run fails and each of them prints a FAILED line.
#[test]
fn a_crash_keeps_the_verdicts_of_finished_trials() {
    let p = planned(4);
    let streamed = vec![
        done(&p[0], Verdict::Passed),
        done(&p[1], Verdict::Failed("1 != 2".into())),
    ];
    let r = run(
        ChildEnd::Signaled("killed by signal 11".into()),
        streamed,
        Some("cpu:0::case2"),
    );
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records.len(), 4, "{records:#?}");
    assert_eq!(records[0].verdict, Verdict::Passed);
    assert_eq!(records[0].duration_ms, 3.0);
    assert_eq!(records[1].verdict, Verdict::Failed("1 != 2".into()));
    let Verdict::Crashed(why) = &records[2].verdict else {
        panic!("{:?}", records[2].verdict)
    };
    assert!(
        why.contains("(killed by signal 11) while this trial ran"),
        "{why}"
    );
    assert!(why.contains("something went wrong"), "{why}");
    let Verdict::Crashed(why) = &records[3].verdict else {
        panic!("{:?}", records[3].verdict)
    };
    assert!(why.starts_with("not run: "), "{why}");
    let s = summary(&records);
    assert_eq!((s.passed, s.failed, s.crashed), (1, 1, 2));
    assert!(!s.ok());
    let report = Report::new(vec![], vec![], records, s);
    let failed = report.failed_lines();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(failed[1]
        .starts_with("FAILED cpu:0::case2: the device process ended (killed by signal 11)"));
}

#[test]
fn a_summary_then_a_hang_is_a_teardown_hang() {
    let p = planned(2);
    let streamed = p.iter().map(|t| done(t, Verdict::Passed)).collect();
    let mut r = run(ChildEnd::TeardownHang, streamed, None);
    r.killed = Some("printed its summary, then did not exit within 1s".into());
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records.len(), 3);
    assert!(records[..2].iter().all(|t| t.verdict == Verdict::Passed));
    assert_eq!(records[2].name, "cpu:0::teardown");
    assert!(matches!(&records[2].verdict, Verdict::TeardownHang(m) if m.contains("did not exit")));
    let s = summary(&records);
    assert_eq!((s.passed, s.teardown_hangs), (2, 1));
    assert!(!s.ok());
    let report = Report::new(vec![], vec![], records, s);
    assert_eq!(report.failed_lines().len(), 1);
    assert!(report.failed_lines()[0].starts_with("FAILED cpu:0::teardown: printed its summary"));
}

#[test]
fn a_trial_that_never_returns_times_out() {
    let p = planned(3);
    let mut r = run(
        ChildEnd::TimedOut,
        vec![done(&p[0], Verdict::Passed)],
        Some("cpu:0::case1"),
    );
    r.killed = Some("no verdict within 2s of the trial's start".into());
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records[0].verdict, Verdict::Passed);
    assert!(
        matches!(&records[1].verdict, Verdict::TimedOut(m) if m.contains("no verdict within 2s"))
    );
    assert!(matches!(&records[2].verdict, Verdict::TimedOut(m) if m.starts_with("not run")));
    assert!(
        !records[1].verdict.detail().contains("while this trial ran"),
        "a timeout is not a crash during the trial: {:?}",
        records[1].verdict
    );
    let report = Report::new(vec![], vec![], records.clone(), summary(&records));
    assert!(!report.summary.ok());
    assert!(report.failed_lines()[0]
        .starts_with("FAILED cpu:0::case1: the device process was killed: no verdict"));
}

/// A crash after the last trial has no trial to blame: it is a record of
/// its own, so the run still fails.
#[test]
fn a_crash_after_every_trial_finished_still_fails_the_run() {
    let p = planned(2);
    let streamed = p.iter().map(|t| done(t, Verdict::Passed)).collect();
    let r = run(
        ChildEnd::Signaled("killed by signal 6".into()),
        streamed,
        None,
    );
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records.len(), 3);
    assert_eq!(records[2].name, "cpu:0::teardown");
    assert!(
        matches!(&records[2].verdict, Verdict::Crashed(m) if m.contains("after its last trial"))
    );
    assert!(!summary(&records).ok());
}

/// A child that exited with its report: the report is the answer.
#[test]
fn an_exit_with_a_report_takes_the_report() {
    let p = planned(2);
    let trials: Vec<TrialRecord> = p.iter().map(|t| done(t, Verdict::Passed)).collect();
    let mut r = run(ChildEnd::Exited(0), Vec::new(), None);
    r.report = Some(Report::new(
        vec![],
        vec![],
        trials.clone(),
        summary(&trials),
    ));
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records.len(), 2);
    assert!(summary(&records).ok());
}

/// A report is held against the plan both ways: a planned trial it leaves
/// out crashes, and a trial the plan never held is refused by name.
#[test]
fn a_report_with_an_unplanned_trial_is_refused_by_name() {
    let p = planned(2);
    let extra = Planned {
        name: "cpu:0::invented".into(),
        device: "cuda:7".into(),
        ..p[0].clone()
    };
    let trials = vec![done(&p[0], Verdict::Passed), done(&extra, Verdict::Passed)];
    let mut r = run(ChildEnd::Exited(0), Vec::new(), None);
    r.report = Some(Report::new(
        vec![],
        vec![],
        trials.clone(),
        summary(&trials),
    ));
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records[0].verdict, Verdict::Passed);
    assert!(
        matches!(&records[1].verdict, Verdict::Crashed(m) if m.starts_with("not in the device's report")),
        "{records:#?}"
    );
    let refused = records
        .iter()
        .find(|t| t.name == "cpu:0::invented")
        .unwrap();
    assert_eq!(
        refused.device, "cpu:0",
        "the refusal is the child's device's"
    );
    assert!(
        matches!(&refused.verdict, Verdict::Crashed(m) if m.contains("which the run did not plan")),
        "{refused:?}"
    );
    assert!(!summary(&records).ok());
}

/// Exit 1 with a failing report is what the binary does: no extra record.
/// Exit 0 with a failing report, or 1 with a passing one, is a contradiction.
#[test]
fn the_exit_code_must_agree_with_the_report() {
    let p = planned(1);
    for (code, verdict, extra) in [
        (1, Verdict::Failed("x".into()), false),
        (0, Verdict::Passed, false),
        (0, Verdict::Failed("x".into()), true),
        (1, Verdict::Passed, true),
        (101, Verdict::Failed("x".into()), true),
    ] {
        let trials = vec![done(&p[0], verdict.clone())];
        let mut r = run(ChildEnd::Exited(code), Vec::new(), None);
        r.report = Some(Report::new(
            vec![],
            vec![],
            trials.clone(),
            summary(&trials),
        ));
        let records = verdicts("cpu:0", &p, &r);
        assert_eq!(
            records.len(),
            1 + usize::from(extra),
            "exit {code} with {verdict:?}: {records:#?}"
        );
        if extra {
            assert_eq!(records[1].name, "cpu:0::teardown");
            assert!(records[1].verdict.fails_run());
        }
    }
}

/// A trace the child wrote and the parent cannot read is a failed record.
#[test]
fn an_unreadable_trace_is_a_failed_record() {
    let p = planned(1);
    let trials = vec![done(&p[0], Verdict::Passed)];
    let mut r = run(ChildEnd::Exited(0), Vec::new(), None);
    r.report = Some(Report::new(
        vec![],
        vec![],
        trials.clone(),
        summary(&trials),
    ));
    r.trace_error =
        Some("a trace line of the device process's verdict stream does not read back".into());
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].name, "cpu:0::trace");
    assert_eq!(records[1].case, "trace");
    assert!(matches!(records[1].verdict, Verdict::Failed(_)));
}

/// A trial may run for the case deadline, plus 30 s for the child's own
/// deadline to fire first.
#[test]
fn a_trial_gets_the_case_deadline_and_30_s_more() {
    let l = Limits::from_env();
    assert_eq!(l.trial, crate::runner::deadline() + Duration::from_secs(30));
    assert!(l.device >= l.trial, "{l:?}");
}

/// A child that hangs outside any trial (before its first) is killed at
/// the device deadline.
#[test]
fn a_child_hung_before_its_first_trial_is_killed_at_the_device_deadline() {
    let dir = std::env::temp_dir().join(format!("seam-isolate-hang-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let files = ChildFiles::for_device(&dir, "cpu:0");
    let mut cmd = std::process::Command::new("sleep");
    cmd.arg("60");
    let limits = Limits {
        device: Duration::from_millis(500),
        trial: Duration::from_secs(60),
        teardown: Duration::from_secs(60),
    };
    let start = std::time::Instant::now();
    let r = watch(cmd, &files, &limits);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(matches!(r.end, ChildEnd::TimedOut), "{:?}", r.end);
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(
        r.killed.as_deref(),
        Some("the device process did not finish within 500ms")
    );
}

/// A child that hung after its summary answers with its report, even when
/// its verdict stream is empty (the stream is for crashes; the report is
/// whole).
#[test]
fn a_teardown_hang_with_a_report_and_no_stream_takes_the_report() {
    let p = planned(2);
    let trials: Vec<TrialRecord> = p.iter().map(|t| done(t, Verdict::Passed)).collect();
    let mut r = run(ChildEnd::TeardownHang, Vec::new(), None);
    r.report = Some(Report::new(
        vec![],
        vec![],
        trials.clone(),
        summary(&trials),
    ));
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records.len(), 3, "{records:#?}");
    assert!(records[..2].iter().all(|t| t.verdict == Verdict::Passed));
    assert!(matches!(records[2].verdict, Verdict::TeardownHang(_)));
    // The process record lasts as long as the child did, in ms.
    assert_eq!(records[2].duration_ms, 5.0);
    assert_eq!(records[2].case, "teardown");
}

/// A crash in the last planned trial blames that trial and adds no
/// process record; a crash in a trial outside the plan (a resumed child
/// rerunning a finished mode) blames the process.
#[test]
fn a_crash_is_blamed_on_the_planned_trial_it_happened_in_or_on_the_process() {
    let p = planned(2);
    let first = vec![done(&p[0], Verdict::Passed)];
    let r = run(
        ChildEnd::Signaled("killed by signal 11".into()),
        first,
        Some("cpu:0::case1"),
    );
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records.len(), 2, "{records:#?}");
    assert!(matches!(records[1].verdict, Verdict::Crashed(_)));

    let both = p.iter().map(|t| done(t, Verdict::Passed)).collect();
    let r = run(
        ChildEnd::Signaled("killed by signal 11".into()),
        both,
        Some("cpu:0::elsewhere"),
    );
    let records = verdicts("cpu:0", &p, &r);
    assert_eq!(records.len(), 3, "{records:#?}");
    assert_eq!(records[2].name, "cpu:0::teardown");
    assert!(records[2].verdict.fails_run());
}
