//! Each device's trials run in a child process with deadlines, so a case
//! that crashes or poisons a driver context, or a runtime whose teardown
//! deadlocks after the suite printed success, is a verdict of its own
//! (crashed, teardown hang, timed out) instead of a dead or hung run.
//!
//! The child streams one JSON line per event to the file named by
//! [`STREAM_ENV`] ([`VerdictStream`]: a trial started, a trial finished with
//! its record), so when it dies the trials that had finished keep their own
//! verdicts and only the one that was running is blamed; a new child then
//! runs the trials the dead one never started. The parent side is [`watch`]
//! (run one child within [`Limits`]) and [`verdicts`] (what each planned
//! trial gets from what the child left).

mod child;
mod stream;
#[cfg(test)]
mod tests;
mod verdicts;

pub use child::*;
pub use stream::*;
use verdicts::settle;
pub use verdicts::*;

use crate::report::{Report, Summary, TrialRecord, Verdict};
use crate::runner::{Plan, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The line a finished suite prints last (see `Summary::line`).
pub const SUMMARY_PREFIX: &str = "conformance: ";
/// What a child prints to stderr as each trial starts (for people reading its log).
pub const START_PREFIX: &str = "> start ";
/// The env var that names the file a child streams its verdicts to.
pub const STREAM_ENV: &str = "SEAM_VERDICT_STREAM";

/// How long a child may take.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The whole device process, up to its summary line
    /// (`SEAM_DEVICE_DEADLINE_S`, default 1800 s).
    pub device: Duration,
    /// One trial, from its start to its verdict: the case deadline plus 30 s.
    /// The child's own deadline ([`crate::runner::deadline`]) fires first;
    /// this catches a child whose trial loop itself is stuck.
    pub trial: Duration,
    /// After the summary line, to exit (`SEAM_TEARDOWN_S`, default 20 s).
    pub teardown: Duration,
}

impl Limits {
    pub fn from_env() -> Self {
        Limits {
            device: secs("SEAM_DEVICE_DEADLINE_S", 1800),
            trial: crate::runner::deadline() + Duration::from_secs(30),
            teardown: secs("SEAM_TEARDOWN_S", 20),
        }
    }
}

/// Seconds from an env var, or a default.
fn secs(var: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(var)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default),
    )
}

/// Run every device of `plan` in its own child process; missing backends'
/// ignored trials come from the plan. Calls `progress` once per child.
pub fn run_isolated(
    plan: &Plan,
    cases: &[String],
    trace: bool,
    progress: impl FnMut(&str, &ChildRun),
) -> (Report, Vec<seam::TraceLog>) {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("seam-conformance"));
    run_isolated_with(
        plan,
        &Limits::from_env(),
        |device, only, files| child_command(&exe, device, only.unwrap_or(cases), trace, files),
        progress,
    )
}

/// [`run_isolated`], with the limits and the child command given:
/// `command(device, only, files)`, where `only` (when given) names the cases
/// the child is to run instead of the run's own filter.
///
/// A child that crashed or was killed in a trial is started again for the
/// trials it never started (their cases: `only`), so one crash costs one
/// trial, not the rest of the device. Each child must settle at least one
/// trial, so this ends; the device deadline spans all of them.
pub fn run_isolated_with(
    plan: &Plan,
    limits: &Limits,
    command: impl Fn(&str, Option<&[String]>, &ChildFiles) -> Command,
    mut progress: impl FnMut(&str, &ChildRun),
) -> (Report, Vec<seam::TraceLog>) {
    let dir = std::env::temp_dir().join(format!("seam-conformance-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let mut trials = Vec::new();
    let mut traces = Vec::new();
    for device in &plan.devices {
        let planned: Vec<Planned> = plan
            .trials
            .iter()
            .filter(|t| t.device == device.id)
            .map(Planned::from)
            .collect();
        let (records, logs) =
            run_device(&device.id, &planned, &dir, limits, &command, &mut progress);
        trials.extend(records);
        traces.extend(logs);
    }
    for t in plan
        .trials
        .iter()
        .filter(|t| matches!(t.target, crate::runner::Target::Missing { .. }))
    {
        let out = crate::runner::run(t);
        trials.push(Planned::from(t).record(out.verdict));
    }
    let mut summary = Summary::default();
    for t in &trials {
        summary.add(&t.verdict);
    }
    if summary.ok() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("child logs kept in {}", dir.display());
    }
    let report = Report::new(plan.devices.clone(), plan.missing.clone(), trials, summary)
        .planned(plan.trials.iter().map(|t| t.device.as_str()));
    (report, traces)
}

/// One device's trials, in as many children as its crashes take.
fn run_device(
    device: &str,
    planned: &[Planned],
    dir: &Path,
    limits: &Limits,
    command: &impl Fn(&str, Option<&[String]>, &ChildFiles) -> Command,
    progress: &mut impl FnMut(&str, &ChildRun),
) -> (Vec<TrialRecord>, Vec<seam::TraceLog>) {
    let start = Instant::now();
    let mut records: Vec<TrialRecord> = Vec::new();
    let mut traces = Vec::new();
    let mut left: Vec<Planned> = planned.to_vec();
    for attempt in 0.. {
        let name = match attempt {
            0 => device.to_string(),
            n => format!("{device}.resume{n}"),
        };
        let files = ChildFiles::for_device(dir, &name);
        let only: Option<Vec<String>> = (attempt > 0).then(|| {
            let mut cases: Vec<String> = Vec::new();
            for t in &left {
                if !cases.contains(&t.case) {
                    cases.push(t.case.clone());
                }
            }
            cases
        });
        let remaining = Limits {
            device: limits.device.saturating_sub(start.elapsed()),
            ..limits.clone()
        };
        let run = watch(command(device, only.as_deref(), &files), &files, &remaining);
        progress(device, &run);
        let settled = settle(device, &left, planned, &run);
        let progressed = settled.not_run.len() < left.len();
        // A resumed child reruns the finished modes of a case it was given:
        // the first verdict of a trial stands.
        for r in settled.records {
            if !records.iter().any(|x| x.name == r.name) {
                records.push(r);
            }
        }
        traces.extend(run.traces);
        let out_of_time = start.elapsed() >= limits.device;
        if settled.not_run.is_empty() || !progressed || out_of_time {
            records.extend(
                settled
                    .not_run
                    .iter()
                    .map(|t| t.record(settled.not_run_verdict.clone())),
            );
            break;
        }
        left = settled.not_run.into_iter().cloned().collect();
    }
    (records, traces)
}
