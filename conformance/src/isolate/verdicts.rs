//! What each planned trial gets from what a child left: its own streamed
//! verdict, or the blame for how the child ended.

use super::child::tail;
use super::*;

/// A planned trial, as the parent needs it to give a verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub name: String,
    pub device: String,
    pub case: String,
    pub rule: String,
    pub mode: String,
}

impl From<&Trial> for Planned {
    fn from(t: &Trial) -> Self {
        Planned {
            name: t.name.clone(),
            device: t.device.clone(),
            case: t.case.name.into(),
            rule: t.case.rule.to_string(),
            mode: t.mode.to_string(),
        }
    }
}

impl Planned {
    pub(super) fn record(&self, verdict: Verdict) -> TrialRecord {
        TrialRecord {
            name: self.name.clone(),
            device: self.device.clone(),
            case: self.case.clone(),
            rule: self.rule.clone(),
            mode: self.mode.clone(),
            verdict,
            duration_ms: 0.0,
            digest: None,
        }
    }
}

/// Every planned trial's record after its device's child ended: the child's
/// report when it exited with one, held against the plan; else each
/// streamed verdict as the child gave it, the running trial crashed or
/// timed out, the rest not run. A process that went wrong with no trial to
/// blame (a teardown hang, a crash after the last trial, an exit code its
/// report does not explain) adds a `<device>::teardown` record.
pub fn verdicts(device: &str, planned: &[Planned], run: &ChildRun) -> Vec<TrialRecord> {
    let settled = settle(device, planned, planned, run);
    let mut records = settled.records;
    records.extend(
        settled
            .not_run
            .iter()
            .map(|t| t.record(settled.not_run_verdict.clone())),
    );
    records
}

/// What one child settled: the records of the trials it ran (or was running),
/// and the planned trials it never started.
pub(super) struct Settled<'a> {
    pub(super) records: Vec<TrialRecord>,
    pub(super) not_run: Vec<&'a Planned>,
    /// What a trial of `not_run` gets if no other child runs it.
    pub(super) not_run_verdict: Verdict,
}

/// The exit code a child's report explains: 0 when no trial fails the run,
/// 1 when one does (the binary's own exit code). Any other code, or one
/// that contradicts the report, is the process going wrong.
fn exit_explained(code: i32, reported: &[TrialRecord]) -> bool {
    let failed = reported.iter().any(|t| t.verdict.fails_run());
    match code {
        0 => !failed,
        1 => failed,
        _ => false,
    }
}

/// `reported` held against the plan: each trial of `planned` gets its own
/// reported record, or `absent` when the child left it out; a reported
/// trial that the device's plan (`all`) never held is refused by name. One
/// planned for the device but not for this child (a resumed child reruns
/// the finished modes of the cases it was given) is dropped: the first
/// verdict stands.
fn against_plan(
    device: &str,
    planned: &[Planned],
    all: &[Planned],
    reported: &[TrialRecord],
    absent: impl Fn(&Planned) -> Option<Verdict>,
) -> (Vec<TrialRecord>, Vec<Planned>) {
    let mut records = Vec::new();
    let mut left_out = Vec::new();
    for t in planned {
        match reported.iter().find(|r| r.name == t.name) {
            Some(r) => records.push(r.clone()),
            None => match absent(t) {
                Some(v) => records.push(t.record(v)),
                None => left_out.push(t.clone()),
            },
        }
    }
    for r in reported {
        if !all.iter().any(|t| t.name == r.name) {
            records.push(TrialRecord {
                device: device.into(),
                verdict: Verdict::Crashed(format!(
                    "refused: the device process reported trial `{}`, which the run did not plan for {device}",
                    r.name
                )),
                ..r.clone()
            });
        }
    }
    (records, left_out)
}

/// What the child for `planned` (part of the device's plan `all`) left.
pub(super) fn settle<'a>(
    device: &str,
    planned: &'a [Planned],
    all: &[Planned],
    run: &ChildRun,
) -> Settled<'a> {
    let log_tail = tail(&run.log, 15);
    let killed = || {
        run.killed
            .clone()
            .unwrap_or_else(|| "deadline passed".into())
    };
    let ended = match (&run.end, &run.report) {
        (ChildEnd::Exited(code), Some(r)) => {
            let code = *code;
            let n = r.trials.len();
            let (mut records, _) = against_plan(device, planned, all, &r.trials, |_| {
                Some(Verdict::Crashed(format!(
                    "not in the device's report: the device process exited {code} with a report of {n} trial(s) that leaves this one out; last output:\n{log_tail}"
                )))
            });
            if !exit_explained(code, &r.trials) {
                let why = format!(
                    "the device process exited {code} after writing a report ({}), which that exit code contradicts; last output:\n{log_tail}",
                    r.summary.line()
                );
                records.push(process_record(device, run, Verdict::Crashed(why)));
            }
            records.extend(trace_record(device, run));
            return Settled {
                records,
                not_run: Vec::new(),
                not_run_verdict: Verdict::Passed,
            };
        }
        (ChildEnd::Exited(code), None) => {
            format!("the device process exited {code} without a report")
        }
        (ChildEnd::Signaled(why), _) => format!("the device process ended ({why})"),
        (ChildEnd::TimedOut | ChildEnd::TeardownHang, _) => {
            format!("the device process was killed: {}", killed())
        }
    };
    // A trial that did not finish gets the kind of end its process had.
    let unfinished = |msg: String| match &run.end {
        ChildEnd::TimedOut => Verdict::TimedOut(msg),
        _ => Verdict::Crashed(msg),
    };
    let gone = match (&run.running, run.streamed.last()) {
        (Some(r), _) => format!("{ended} in {r}"),
        (None, Some(d)) => format!("{ended} after {}", d.name),
        (None, None) => format!("{ended} before its first trial; last output:\n{log_tail}"),
    };
    // A child that hung after its summary wrote its report first: the
    // report is whole, so it answers for every planned trial.
    let (mut records, not_run) = match (&run.end, &run.report) {
        (ChildEnd::TeardownHang, Some(r)) => against_plan(device, planned, all, &r.trials, |_| {
            Some(Verdict::Crashed(format!(
                "not in the device's report: {ended}"
            )))
        }),
        _ => against_plan(device, planned, all, &run.streamed, |t| {
            (run.running.as_deref() == Some(t.name.as_str())).then(|| {
                let during = match run.end {
                    ChildEnd::TimedOut => "",
                    _ => " while this trial ran",
                };
                unfinished(format!("{ended}{during}; last output:\n{log_tail}"))
            })
        }),
    };
    let blamed = run
        .running
        .as_ref()
        .is_some_and(|r| planned.iter().any(|t| t.name == *r))
        || !not_run.is_empty();
    let process = match &run.end {
        ChildEnd::TeardownHang => Some(Verdict::TeardownHang(killed())),
        _ if !blamed => Some(unfinished(format!(
            "{ended} after its last trial; last output:\n{log_tail}"
        ))),
        _ => None,
    };
    if let Some(verdict) = process {
        records.push(process_record(device, run, verdict));
    }
    records.extend(trace_record(device, run));
    let not_run: Vec<&'a Planned> = not_run
        .iter()
        .filter_map(|t| planned.iter().find(|p| p.name == t.name))
        .collect();
    Settled {
        records,
        not_run,
        not_run_verdict: unfinished(format!("not run: {gone}")),
    }
}

/// `<device>::teardown`: the process itself went wrong.
fn process_record(device: &str, run: &ChildRun, verdict: Verdict) -> TrialRecord {
    TrialRecord {
        name: format!("{device}::teardown"),
        device: device.into(),
        case: "teardown".into(),
        rule: "isolation".into(),
        mode: "eager".into(),
        verdict,
        duration_ms: run.elapsed.as_secs_f64() * 1e3,
        digest: None,
    }
}

/// `<device>::trace`: the run asked for a trace and the child's did not
/// come back whole (an empty trace file is no trace of a run).
fn trace_record(device: &str, run: &ChildRun) -> Option<TrialRecord> {
    let why = run.trace_error.as_ref()?;
    Some(TrialRecord {
        name: format!("{device}::trace"),
        case: "trace".into(),
        ..process_record(device, run, Verdict::Failed(why.clone()))
    })
}
