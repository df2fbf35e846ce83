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
/// report when it exited with one; else each streamed verdict as the child
/// gave it, the running trial crashed or timed out, the rest not run. A
/// process that went wrong with no trial to blame (a teardown hang, a crash
/// after the last trial) adds a `<device>::teardown` record.
pub fn verdicts(device: &str, planned: &[Planned], run: &ChildRun) -> Vec<TrialRecord> {
    let settled = settle(device, planned, run);
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

pub(super) fn settle<'a>(device: &str, planned: &'a [Planned], run: &ChildRun) -> Settled<'a> {
    let log_tail = tail(&run.log, 15);
    let killed = || {
        run.killed
            .clone()
            .unwrap_or_else(|| "deadline passed".into())
    };
    let ended = match (&run.end, &run.report) {
        (ChildEnd::Exited(_), Some(r)) => {
            return Settled {
                records: r.trials.clone(),
                not_run: Vec::new(),
                not_run_verdict: Verdict::Passed,
            }
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
    let mut records: Vec<TrialRecord> = match (&run.end, &run.report) {
        (ChildEnd::TeardownHang, Some(r)) => r.trials.clone(),
        _ => Vec::new(),
    };
    let mut blamed = false;
    let mut not_run = Vec::new();
    let gone = match (&run.running, run.streamed.last()) {
        (Some(r), _) => format!("{ended} in {r}"),
        (None, Some(d)) => format!("{ended} after {}", d.name),
        (None, None) => format!("{ended} before its first trial"),
    };
    if records.is_empty() {
        for t in planned {
            if let Some(r) = run.streamed.iter().find(|r| r.name == t.name) {
                records.push(r.clone());
                continue;
            }
            blamed = true;
            if run.running.as_deref() == Some(t.name.as_str()) {
                let during = match run.end {
                    ChildEnd::TimedOut => "",
                    _ => " while this trial ran",
                };
                let msg = format!("{ended}{during}; last output:\n{log_tail}");
                records.push(t.record(unfinished(msg)));
            } else {
                not_run.push(t);
            }
        }
        // What the child ran beyond the parent's plan is still what it said.
        for r in &run.streamed {
            if !planned.iter().any(|t| t.name == r.name) {
                records.push(r.clone());
            }
        }
    }
    let process = match &run.end {
        ChildEnd::TeardownHang => Some(Verdict::TeardownHang(killed())),
        _ if !blamed => Some(unfinished(format!(
            "{ended} after its last trial; last output:\n{log_tail}"
        ))),
        _ => None,
    };
    if let Some(verdict) = process {
        records.push(TrialRecord {
            name: format!("{device}::teardown"),
            device: device.into(),
            case: "teardown".into(),
            rule: "isolation".into(),
            mode: "eager".into(),
            verdict,
            duration_ms: run.elapsed.as_secs_f64() * 1e3,
            digest: None,
        });
    }
    Settled {
        records,
        not_run,
        not_run_verdict: unfinished(format!("not run: {gone}")),
    }
}
