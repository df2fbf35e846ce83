//! One child process: its command line, its files, and watching it within
//! [`Limits`] to an end (exited, crashed, timed out, hung in teardown).

use super::stream::{StreamState, Tail};
use super::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// How a child ended.
#[derive(Debug)]
pub enum ChildEnd {
    Exited(i32),
    Signaled(String),
    /// Printed its summary line, then did not exit within the grace period.
    TeardownHang,
    /// Killed: the device deadline passed before its summary line, or one
    /// trial ran past [`Limits::trial`] (see [`ChildRun::killed`]).
    TimedOut,
}

/// The files of one child, in the run's scratch folder.
#[derive(Clone, Debug)]
pub struct ChildFiles {
    pub json: PathBuf,
    /// The child's stdout and stderr.
    pub log: PathBuf,
    /// The verdict stream ([`STREAM_ENV`]).
    pub stream: PathBuf,
}

impl ChildFiles {
    pub fn for_device(dir: &Path, device: &str) -> Self {
        let safe = device.replace(':', "_");
        ChildFiles {
            json: dir.join(format!("{safe}.json")),
            log: dir.join(format!("{safe}.log")),
            stream: dir.join(format!("{safe}.verdicts.jsonl")),
        }
    }
}

/// What a child left behind.
pub struct ChildRun {
    pub end: ChildEnd,
    pub report: Option<Report>,
    pub traces: Vec<seam::TraceLog>,
    pub log: String,
    pub elapsed: Duration,
    /// The verdicts the child streamed, in the order its trials finished.
    pub streamed: Vec<TrialRecord>,
    /// The trial that had started and not finished when the child ended.
    pub running: Option<String>,
    /// Why the parent killed the child, when it did.
    pub killed: Option<String>,
    /// The child sent trace logs the parent could not read back.
    pub trace_error: Option<String>,
}

impl ChildRun {
    fn failed_to_start(why: String, start: Instant) -> Self {
        ChildRun {
            end: ChildEnd::Signaled(why),
            report: None,
            traces: Vec::new(),
            log: String::new(),
            elapsed: start.elapsed(),
            streamed: Vec::new(),
            running: None,
            killed: None,
            trace_error: None,
        }
    }
}

pub(super) fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `exe --in-process --child --device <id> --json … [--case …] [--trace-stream]`.
pub fn child_command(
    exe: &Path,
    device: &str,
    cases: &[String],
    trace: bool,
    files: &ChildFiles,
) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["--in-process", "--child", "--device", device, "--json"])
        .arg(&files.json);
    if !cases.is_empty() {
        cmd.args(["--case", &cases.join(",")]);
    }
    if trace {
        cmd.arg("--trace-stream");
    }
    cmd
}

/// Start `cmd` (with its output to `files.log` and [`STREAM_ENV`] set to
/// `files.stream`) and wait for it within `limits`, killing it past one.
pub fn watch(mut cmd: Command, files: &ChildFiles, limits: &Limits) -> ChildRun {
    let start = Instant::now();
    for stale in [&files.json, &files.stream] {
        let _ = std::fs::remove_file(stale);
    }
    let out = match std::fs::File::create(&files.log) {
        Ok(f) => f,
        Err(e) => {
            let why = format!("could not create {}: {e}", files.log.display());
            return ChildRun::failed_to_start(why, start);
        }
    };
    let err = out.try_clone();
    cmd.env(STREAM_ENV, &files.stream)
        .stdin(Stdio::null())
        .stdout(out);
    if let Ok(e) = err {
        cmd.stderr(e);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let why = format!("could not start {:?}: {e}", cmd.get_program());
            return ChildRun::failed_to_start(why, start);
        }
    };
    let mut stream = StreamState::default();
    let mut log = Tail::default();
    let mut summary_seen: Option<Instant> = None;
    let mut killed = None;
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
        stream.poll(&files.stream);
        if summary_seen.is_none()
            && log
                .lines(&files.log)
                .iter()
                .any(|l| crate::report::Summary::is_line(l))
        {
            summary_seen = Some(Instant::now());
        }
        let verdict = if let Some(t) = summary_seen {
            (t.elapsed() > limits.teardown).then(|| {
                let why = format!(
                    "printed its summary, then did not exit within {:?}",
                    limits.teardown
                );
                (ChildEnd::TeardownHang, why)
            })
        } else if stream
            .running
            .as_ref()
            .is_some_and(|(_, t)| t.elapsed() > limits.trial)
        {
            let why = format!("no verdict within {:?} of the trial's start", limits.trial);
            Some((ChildEnd::TimedOut, why))
        } else {
            (start.elapsed() > limits.device).then(|| {
                let why = format!(
                    "the device process did not finish within {:?}",
                    limits.device
                );
                (ChildEnd::TimedOut, why)
            })
        };
        if let Some((end, why)) = verdict {
            let _ = child.kill();
            let _ = child.wait();
            killed = Some(why);
            break end;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    stream.poll(&files.stream);
    let report = std::fs::read_to_string(&files.json)
        .ok()
        .and_then(|s| Report::from_json(&s).ok());
    // Each trial's trace came with its verdict, so a crash loses only the
    // trace of the trial it crashed in; one that does not read back is
    // said, never dropped (an empty trace looks like a run that did nothing).
    let traces = std::mem::take(&mut stream.traces);
    let trace_error = stream.trace_error.take();
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(&files.log) {
        let _ = f.read_to_string(&mut text);
    }
    ChildRun {
        end,
        report,
        traces,
        log: text,
        elapsed: start.elapsed(),
        streamed: stream.done,
        running: stream.running.map(|(name, _)| name),
        killed,
        trace_error,
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
