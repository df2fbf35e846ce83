//! Each device's trials run in a child process with a deadline, so a case
//! that crashes or poisons a driver context, or a runtime whose teardown
//! deadlocks after the suite printed success, is a verdict of its own
//! (crashed, teardown hang, timed out) instead of a dead or hung run.

use crate::report::{Report, Summary, TrialRecord, Verdict};
use crate::runner::Plan;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Seconds from an env var, or a default.
fn secs(var: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(var)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default),
    )
}

/// How a child ended.
#[derive(Debug)]
pub enum ChildEnd {
    Exited(i32),
    Signaled(String),
    /// Printed its summary line, then did not exit within the grace period.
    TeardownHang,
    /// Never printed its summary within the device deadline.
    TimedOut,
}

/// What a child left behind.
pub struct ChildRun {
    pub end: ChildEnd,
    pub report: Option<Report>,
    pub traces: Vec<seam::TraceLog>,
    pub log: String,
    pub elapsed: Duration,
}

/// The line a finished suite prints last (see `Summary::line`).
pub const SUMMARY_PREFIX: &str = "conformance: ";
/// What a child prints to stderr as each trial starts, so a crash can be placed.
pub const START_PREFIX: &str = "> start ";

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Run `exe --device <id> --in-process …` and wait for it within the deadlines
/// (`SEAM_DEVICE_DEADLINE_S`, default 1800; `SEAM_TEARDOWN_S` after the
/// summary line, default 20).
pub fn run_child(exe: &Path, device: &str, cases: &[String], trace: bool, dir: &Path) -> ChildRun {
    let safe = device.replace(':', "_");
    let json = dir.join(format!("{safe}.json"));
    let traces = dir.join(format!("{safe}.trace.json"));
    let log = dir.join(format!("{safe}.log"));
    let start = Instant::now();
    let mut cmd = Command::new(exe);
    cmd.args(["--in-process", "--child", "--device", device, "--json"])
        .arg(&json);
    if !cases.is_empty() {
        cmd.args(["--case", &cases.join(",")]);
    }
    if trace {
        cmd.arg("--trace-logs").arg(&traces);
    }
    let out = match std::fs::File::create(&log) {
        Ok(f) => f,
        Err(e) => {
            return ChildRun {
                end: ChildEnd::Signaled(format!("could not create {}: {e}", log.display())),
                report: None,
                traces: Vec::new(),
                log: String::new(),
                elapsed: start.elapsed(),
            }
        }
    };
    let err = out.try_clone();
    cmd.stdin(Stdio::null()).stdout(out);
    if let Ok(e) = err {
        cmd.stderr(e);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return ChildRun {
                end: ChildEnd::Signaled(format!("could not start {}: {e}", exe.display())),
                report: None,
                traces: Vec::new(),
                log: String::new(),
                elapsed: start.elapsed(),
            }
        }
    };
    let (deadline, grace) = (
        secs("SEAM_DEVICE_DEADLINE_S", 1800),
        secs("SEAM_TEARDOWN_S", 20),
    );
    let mut summary_seen: Option<Instant> = None;
    let read_log = || {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    };
    let end = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                break match status.code() {
                    Some(code) => ChildEnd::Exited(code),
                    None => ChildEnd::Signaled(signal_of(&status)),
                }
            }
            Ok(None) => {}
            Err(e) => break ChildEnd::Signaled(format!("waiting failed: {e}")),
        }
        if summary_seen.is_none() && read_log().lines().any(|l| l.starts_with(SUMMARY_PREFIX)) {
            summary_seen = Some(Instant::now());
        }
        let hung = summary_seen.is_some_and(|t| t.elapsed() > grace);
        if hung || start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break if summary_seen.is_some() {
                ChildEnd::TeardownHang
            } else {
                ChildEnd::TimedOut
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|s| serde_json::from_str::<Report>(&s).ok());
    let traces = std::fs::read_to_string(&traces)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    ChildRun {
        end,
        report,
        traces,
        log: read_log(),
        elapsed: start.elapsed(),
    }
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => format!("killed by signal {sig}"),
        None => "ended without an exit code".into(),
    }
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> String {
    "ended without an exit code".into()
}

/// Run every device of `plan` in its own child process; missing backends'
/// ignored trials come from the plan. Calls `progress` once per device.
pub fn run_isolated(
    plan: &Plan,
    cases: &[String],
    trace: bool,
    mut progress: impl FnMut(&str, &ChildRun),
) -> (Report, Vec<seam::TraceLog>) {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("seam-conformance"));
    let dir = std::env::temp_dir().join(format!("seam-conformance-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let mut trials = Vec::new();
    let mut traces = Vec::new();
    for device in &plan.devices {
        let run = run_child(&exe, &device.id, cases, trace, &dir);
        progress(&device.id, &run);
        let planned: Vec<&crate::runner::Trial> = plan
            .trials
            .iter()
            .filter(|t| t.device == device.id)
            .collect();
        let mut records: Vec<TrialRecord> = run
            .report
            .as_ref()
            .map(|r| r.trials.clone())
            .unwrap_or_default();
        let log_tail = tail(&run.log, 15);
        match &run.end {
            ChildEnd::Exited(_) if run.report.is_some() => {}
            ChildEnd::TeardownHang => records.push(TrialRecord {
                name: format!("{}::teardown", device.id),
                device: device.id.clone(),
                case: "teardown".into(),
                rule: "isolation".into(),
                mode: "eager".into(),
                verdict: Verdict::TeardownHang(format!(
                    "printed its summary, then did not exit within {:?}",
                    secs("SEAM_TEARDOWN_S", 20)
                )),
                duration_ms: run.elapsed.as_secs_f64() * 1e3,
                digest: None,
            }),
            end => {
                // No report: place the failure on the trial that was running.
                let started: Vec<&str> = run
                    .log
                    .lines()
                    .filter_map(|l| l.strip_prefix(START_PREFIX))
                    .collect();
                let running = started.last().copied().unwrap_or("");
                for t in &planned {
                    let verdict = if t.name == running {
                        match end {
                            ChildEnd::TimedOut => Verdict::TimedOut(format!(
                                "the device process did not finish within {:?}; last output:\n{log_tail}",
                                secs("SEAM_DEVICE_DEADLINE_S", 1800)
                            )),
                            ChildEnd::Signaled(why) => Verdict::Crashed(format!("{why}; last output:\n{log_tail}")),
                            ChildEnd::Exited(code) => Verdict::Crashed(format!("exited {code} without a report; last output:\n{log_tail}")),
                            ChildEnd::TeardownHang => unreachable!("handled above"),
                        }
                    } else if started.contains(&t.name.as_str()) {
                        Verdict::Failed(format!(
                            "ran before the device process died; verdict lost (see {})",
                            dir.display()
                        ))
                    } else {
                        Verdict::Crashed(format!("not run: the device process died in {running}"))
                    };
                    records.push(TrialRecord {
                        name: t.name.clone(),
                        device: t.device.clone(),
                        case: t.case.name.into(),
                        rule: t.case.rule.to_string(),
                        mode: t.mode.to_string(),
                        verdict,
                        duration_ms: 0.0,
                        digest: None,
                    });
                }
            }
        }
        trials.extend(records);
        traces.extend(run.traces);
    }
    for t in plan
        .trials
        .iter()
        .filter(|t| matches!(t.target, crate::runner::Target::Missing { .. }))
    {
        let out = crate::runner::run(t);
        trials.push(TrialRecord {
            name: t.name.clone(),
            device: t.device.clone(),
            case: t.case.name.into(),
            rule: t.case.rule.to_string(),
            mode: t.mode.to_string(),
            verdict: out.verdict,
            duration_ms: 0.0,
            digest: None,
        });
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
    let report = Report::new(plan.devices.clone(), plan.missing.clone(), trials, summary);
    (report, traces)
}
