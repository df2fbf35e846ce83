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

use crate::report::{Report, Summary, TrialRecord, Verdict};
use crate::runner::{Plan, Trial};
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The line a finished suite prints last (see `Summary::line`).
pub const SUMMARY_PREFIX: &str = "conformance: ";
/// What a child prints to stderr as each trial starts (for people reading its log).
pub const START_PREFIX: &str = "> start ";
/// The env var that names the file a child streams its verdicts to.
pub const STREAM_ENV: &str = "SEAM_VERDICT_STREAM";

/// One line of the verdict stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamEvent {
    /// A trial is about to run.
    Start { name: String },
    /// A trial finished, with its record as the report will hold it.
    Done(TrialRecord),
}

/// The child side of the verdict stream: appends one line per event, each
/// in a single write, so a crash leaves every earlier line whole. Does
/// nothing when [`STREAM_ENV`] is unset (an in-process run).
pub struct VerdictStream {
    file: Option<std::fs::File>,
}

impl VerdictStream {
    /// The stream the parent asked for, if any.
    pub fn from_env() -> Self {
        match std::env::var_os(STREAM_ENV) {
            None => VerdictStream { file: None },
            Some(path) => Self::to_file(Path::new(&path)).unwrap_or_else(|e| {
                eprintln!(
                    "warning: cannot stream verdicts to {}: {e}",
                    Path::new(&path).display()
                );
                VerdictStream { file: None }
            }),
        }
    }

    pub fn to_file(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(VerdictStream { file: Some(file) })
    }

    pub fn started(&mut self, name: &str) {
        self.emit(&StreamEvent::Start { name: name.into() });
    }

    pub fn finished(&mut self, record: &TrialRecord) {
        self.emit(&StreamEvent::Done(record.clone()));
    }

    fn emit(&mut self, event: &StreamEvent) {
        let Some(file) = &mut self.file else { return };
        if let Ok(mut line) = serde_json::to_string(event) {
            line.push('\n');
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// New complete lines of a file another process appends to.
#[derive(Default)]
struct Tail {
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    fn lines(&mut self, path: &Path) -> Vec<String> {
        let Ok(mut f) = std::fs::File::open(path) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        String::from_utf8_lossy(&done)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// What the parent has read of a child's stream.
#[derive(Default)]
struct StreamState {
    tail: Tail,
    done: Vec<TrialRecord>,
    /// The trial started and not yet finished, and when the parent saw it start.
    running: Option<(String, Instant)>,
}

impl StreamState {
    fn poll(&mut self, path: &Path) {
        for line in self.tail.lines(path) {
            // A line that does not parse is not ours (or torn): skip it.
            match serde_json::from_str::<StreamEvent>(&line) {
                Ok(StreamEvent::Start { name }) => self.running = Some((name, Instant::now())),
                Ok(StreamEvent::Done(record)) => {
                    if self
                        .running
                        .as_ref()
                        .is_some_and(|(n, _)| *n == record.name)
                    {
                        self.running = None;
                    }
                    self.done.push(record);
                }
                Err(_) => {}
            }
        }
    }
}

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
    pub traces: PathBuf,
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
            traces: dir.join(format!("{safe}.trace.json")),
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
        }
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `exe --in-process --child --device <id> --json … [--case …] [--trace-logs …]`.
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
        cmd.arg("--trace-logs").arg(&files.traces);
    }
    cmd
}

/// Start `cmd` (with its output to `files.log` and [`STREAM_ENV`] set to
/// `files.stream`) and wait for it within `limits`, killing it past one.
pub fn watch(mut cmd: Command, files: &ChildFiles, limits: &Limits) -> ChildRun {
    let start = Instant::now();
    for stale in [&files.json, &files.traces, &files.stream] {
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
                .any(|l| l.starts_with(SUMMARY_PREFIX))
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
    let traces = std::fs::read_to_string(&files.traces)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
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
    fn record(&self, verdict: Verdict) -> TrialRecord {
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
struct Settled<'a> {
    records: Vec<TrialRecord>,
    not_run: Vec<&'a Planned>,
    /// What a trial of `not_run` gets if no other child runs it.
    not_run_verdict: Verdict,
}

fn settle<'a>(device: &str, planned: &'a [Planned], run: &ChildRun) -> Settled<'a> {
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
    let report = Report::new(plan.devices.clone(), plan.missing.clone(), trials, summary);
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
        let settled = settle(device, &left, &run);
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(
            matches!(&records[2].verdict, Verdict::TeardownHang(m) if m.contains("did not exit"))
        );
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
}
