//! The JSON report: device, driver and per-trial verdicts with durations and
//! output digests, so reports from many machines can be merged.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict", content = "detail")]
pub enum Verdict {
    Passed,
    Failed(String),
    /// Not run: device missing, capture unsupported, or listed unsupported.
    Ignored(String),
    /// Failed as listed in expectations (does not fail the run).
    ExpectedFailure(String),
    /// Listed as an expected failure but passed: fails the run.
    UnexpectedPass(String),
    /// The case did not finish within its deadline.
    TimedOut(String),
    /// The isolated process running this trial died from a signal.
    Crashed(String),
    /// The isolated process printed its summary but did not exit within its
    /// deadline (a runtime's teardown deadlocked).
    TeardownHang(String),
}

impl Verdict {
    /// Whether this verdict fails the run (as [`Summary::ok`] counts): a
    /// failure, an unexpected pass, or a trial or process that did not finish.
    pub fn fails_run(&self) -> bool {
        matches!(
            self,
            Verdict::Failed(_)
                | Verdict::UnexpectedPass(_)
                | Verdict::TimedOut(_)
                | Verdict::Crashed(_)
                | Verdict::TeardownHang(_)
        )
    }
    /// The verdict's message; empty for a pass.
    pub fn detail(&self) -> &str {
        match self {
            Verdict::Passed => "",
            Verdict::Failed(m)
            | Verdict::Ignored(m)
            | Verdict::ExpectedFailure(m)
            | Verdict::UnexpectedPass(m)
            | Verdict::TimedOut(m)
            | Verdict::Crashed(m)
            | Verdict::TeardownHang(m) => m,
        }
    }
    pub fn short(&self) -> &'static str {
        match self {
            Verdict::Passed => "ok",
            Verdict::Failed(_) => "FAIL",
            Verdict::Ignored(_) => "ign",
            Verdict::ExpectedFailure(_) => "xfail",
            Verdict::UnexpectedPass(_) => "XPASS",
            Verdict::TimedOut(_) => "TIMEOUT",
            Verdict::Crashed(_) => "CRASH",
            Verdict::TeardownHang(_) => "HANG",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialRecord {
    /// `<device>::<case>[::<mode>]`
    pub name: String,
    pub device: String,
    pub case: String,
    pub rule: String,
    pub mode: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    pub duration_ms: f64,
    /// FNV-1a of the case's outputs, where it records them.
    pub digest: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceRecord {
    pub id: String,
    pub backend: String,
    pub name: String,
    pub driver: String,
    pub capture_support: seam::CaptureSupport,
    /// What the device declares for f32 subnormals (C11); absent in
    /// reports written before it was recorded, and for a device that
    /// failed to open.
    #[serde(default)]
    pub subnormals: Option<seam::Subnormals>,
    /// How the device updates a captured graph (C13); absent in reports
    /// written before it was recorded, and for a device that failed to open.
    #[serde(default)]
    pub update_support: Option<seam::UpdateSupport>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MissingRecord {
    pub backend: String,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub ignored: usize,
    pub expected_failures: usize,
    pub unexpected_passes: usize,
    pub timed_out: usize,
    #[serde(default)]
    pub crashed: usize,
    #[serde(default)]
    pub teardown_hangs: usize,
}

impl Summary {
    pub fn add(&mut self, v: &Verdict) {
        match v {
            Verdict::Passed => self.passed += 1,
            Verdict::Failed(_) => self.failed += 1,
            Verdict::Ignored(_) => self.ignored += 1,
            Verdict::ExpectedFailure(_) => self.expected_failures += 1,
            Verdict::UnexpectedPass(_) => self.unexpected_passes += 1,
            Verdict::TimedOut(_) => self.timed_out += 1,
            Verdict::Crashed(_) => self.crashed += 1,
            Verdict::TeardownHang(_) => self.teardown_hangs += 1,
        }
    }
    pub fn ok(&self) -> bool {
        self.failed + self.unexpected_passes + self.timed_out + self.crashed + self.teardown_hangs
            == 0
    }
    /// One line, for logs and closing notes.
    pub fn line(&self) -> String {
        format!(
            "conformance: {} passed, {} failed, {} ignored, {} expected failures, {} unexpected passes, {} timed out, {} crashed, {} teardown hangs",
            self.passed,
            self.failed,
            self.ignored,
            self.expected_failures,
            self.unexpected_passes,
            self.timed_out,
            self.crashed,
            self.teardown_hangs
        )
    }
}

/// The report format this build writes. 1: before run metadata (no
/// `format_version`, `git_commit`, `started_at`, OS pretty name); 2: with them.
pub const REPORT_FORMAT_VERSION: u32 = 2;

fn legacy_format() -> u32 {
    1
}

/// Where the suite ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    /// `std::env::consts::OS` (`linux`, `macos`).
    pub os: String,
    pub arch: String,
    pub hostname: String,
    /// `PRETTY_NAME` from /etc/os-release (`Debian GNU/Linux 12 (bookworm)`).
    #[serde(default)]
    pub os_pretty: String,
    /// Kernel release (/proc/sys/kernel/osrelease), where there is one.
    #[serde(default)]
    pub kernel: String,
    /// CPU model (/proc/cpuinfo), where there is one.
    #[serde(default)]
    pub cpu: String,
    /// A name for this machine in merged matrices (`SEAM_MACHINE_NAME`, e.g.
    /// a CI runner's name); the hostname when unset.
    #[serde(default)]
    pub label: String,
}

impl Machine {
    pub fn here() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let hostname = read("/etc/hostname");
        Machine {
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            os_pretty: os_pretty_name(&read("/etc/os-release")).unwrap_or_default(),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpu: read("/proc/cpuinfo")
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim() == "model name").then(|| v.trim().to_string())
                })
                .unwrap_or_default(),
            label: std::env::var("SEAM_MACHINE_NAME")
                .ok()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| hostname.clone()),
            hostname,
        }
    }

    /// What a merged matrix calls this machine.
    pub fn display_name(&self) -> &str {
        if !self.label.is_empty() {
            &self.label
        } else if !self.hostname.is_empty() {
            &self.hostname
        } else {
            "unknown machine"
        }
    }

    /// The OS as a person reads it: the pretty name, else `os/arch`.
    pub fn os_line(&self) -> String {
        if self.os_pretty.is_empty() {
            format!("{} {}", self.os, self.arch)
        } else {
            format!("{} ({})", self.os_pretty, self.arch)
        }
    }
}

/// `PRETTY_NAME` of an os-release file, unquoted.
pub fn os_pretty_name(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|l| {
        let v = l.trim().strip_prefix("PRETTY_NAME=")?;
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(v);
        Some(v.to_string())
    })
}

/// The commit the suite ran from: `SEAM_GIT_COMMIT` when set (`cargo xtask
/// conformance` sets it from the checkout it found at run time; a binary
/// copied to another machine gets it from whoever runs it), else
/// `git rev-parse HEAD` in the current directory's checkout, else
/// "unknown". Never the build path: a target dir shared by two checkouts
/// reuses the binary built in the first, whose path says nothing about the
/// run.
pub fn git_commit() -> String {
    let given = std::env::var("SEAM_GIT_COMMIT")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    given
        .or_else(|| {
            std::process::Command::new("git")
                .args(["rev-parse", "HEAD"])
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "unknown".into())
}

static STARTED: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();

/// Note now as the run's start (the first call wins); the binary calls it
/// first thing, so a report built at the end still says when the run began.
pub fn mark_started() -> std::time::SystemTime {
    *STARTED.get_or_init(std::time::SystemTime::now)
}

/// RFC 3339 UTC, second precision: `2025-01-31T23:59:07Z`.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_FORMAT_VERSION`] of the writer; 1 for reports written before it existed.
    #[serde(default = "legacy_format")]
    pub format_version: u32,
    pub seam_version: String,
    /// See [`git_commit`]; empty in format 1.
    #[serde(default)]
    pub git_commit: String,
    /// When the run started, RFC 3339 UTC; empty in format 1.
    #[serde(default)]
    pub started_at: String,
    pub machine: Machine,
    /// Each device's name, driver/runtime version and capture support.
    pub devices: Vec<DeviceRecord>,
    pub missing: Vec<MissingRecord>,
    pub trials: Vec<TrialRecord>,
    pub summary: Summary,
}

impl Report {
    /// A report of this build, on this machine, with its run metadata.
    pub fn new(
        devices: Vec<DeviceRecord>,
        missing: Vec<MissingRecord>,
        trials: Vec<TrialRecord>,
        summary: Summary,
    ) -> Self {
        Report {
            format_version: REPORT_FORMAT_VERSION,
            seam_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: git_commit(),
            started_at: rfc3339(mark_started()),
            machine: Machine::here(),
            devices,
            missing,
            trials,
            summary,
        }
    }

    /// Read a JSON report written by any format version.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Read a report from another machine: [`Report::from_json`], then
    /// [`Report::check`]; an error names the field at fault.
    pub fn parse(text: &str) -> Result<Self, ReportError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| ReportError::NotJson(e.to_string()))?;
        let report: Report = match Report::deserialize(&value) {
            Ok(r) => r,
            Err(e) => {
                locate_report(&value)?;
                return Err(ReportError::field("(report)", e));
            }
        };
        report.check()?;
        Ok(report)
    }

    /// What a well-formed report also holds: a format this build reads, one
    /// record per trial name, every trial on a listed device (or a missing
    /// backend's `<backend>:none`), durations that are real, and a summary
    /// that counts its trials.
    pub fn check(&self) -> Result<(), ReportError> {
        if !(1..=REPORT_FORMAT_VERSION).contains(&self.format_version) {
            return Err(ReportError::field(
                "format_version",
                format!(
                    "{} is not a format this build reads (1 to {REPORT_FORMAT_VERSION})",
                    self.format_version
                ),
            ));
        }
        if self.seam_version.trim().is_empty() {
            return Err(ReportError::field("seam_version", "is empty"));
        }
        let mut ids: Vec<&str> = Vec::new();
        for (i, d) in self.devices.iter().enumerate() {
            if d.id.trim().is_empty() {
                return Err(ReportError::field(format!("devices[{i}].id"), "is empty"));
            }
            if let Some(j) = ids.iter().position(|x| *x == d.id) {
                return Err(ReportError::field(
                    format!("devices[{i}].id"),
                    format!("`{}` is listed twice (also devices[{j}])", d.id),
                ));
            }
            ids.push(&d.id);
        }
        let none: Vec<String> = self
            .missing
            .iter()
            .map(|m| format!("{}:none", m.backend))
            .collect();
        let mut names = std::collections::HashMap::new();
        let mut counted = Summary::default();
        for (i, t) in self.trials.iter().enumerate() {
            if let Some(j) = names.insert(t.name.as_str(), i) {
                return Err(ReportError::field(
                    format!("trials[{i}].name"),
                    format!("`{}` is listed twice (also trials[{j}])", t.name),
                ));
            }
            if !ids.contains(&t.device.as_str()) && !none.contains(&t.device) {
                return Err(ReportError::field(
                    format!("trials[{i}].device"),
                    format!(
                        "`{}` is neither in devices[] nor a missing backend's `<backend>:none`",
                        t.device
                    ),
                ));
            }
            if !(t.duration_ms.is_finite() && t.duration_ms >= 0.0) {
                return Err(ReportError::field(
                    format!("trials[{i}].duration_ms"),
                    format!("{} is not a duration", t.duration_ms),
                ));
            }
            counted.add(&t.verdict);
        }
        if counted != self.summary {
            return Err(ReportError::field(
                "summary",
                format!(
                    "says `{}`, but trials[] count `{}`",
                    self.summary
                        .line()
                        .trim_start_matches(crate::isolate::SUMMARY_PREFIX),
                    counted
                        .line()
                        .trim_start_matches(crate::isolate::SUMMARY_PREFIX)
                ),
            ));
        }
        Ok(())
    }

    /// One `FAILED <trial>: <detail>` line per trial that fails the run
    /// (crashes, hangs and timeouts included), in report order.
    pub fn failed_lines(&self) -> Vec<String> {
        self.trials
            .iter()
            .filter(|t| t.verdict.fails_run())
            .map(|t| format!("FAILED {}: {}", t.name, t.verdict.detail()))
            .collect()
    }
}

/// Why a JSON report from another machine was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum ReportError {
    /// The text is not JSON (truncated, or not a report at all).
    NotJson(String),
    /// `field` (`trials[3].duration_ms`) does not hold what a report holds.
    Field { field: String, error: String },
}

impl ReportError {
    fn field(field: impl Into<String>, error: impl fmt::Display) -> Self {
        ReportError::Field {
            field: field.into(),
            error: error.to_string(),
        }
    }
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::NotJson(e) => write!(f, "not JSON: {e}"),
            ReportError::Field { field, error } => write!(f, "field `{field}`: {error}"),
        }
    }
}

impl std::error::Error for ReportError {}

type Check = fn(&Value, &str) -> Result<(), ReportError>;

/// `v` reads as a `T`.
fn is<T: DeserializeOwned>(v: &Value, path: &str) -> Result<(), ReportError> {
    T::deserialize(v)
        .map(drop)
        .map_err(|e| ReportError::field(path, e))
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.into()
    } else {
        format!("{path}.{name}")
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Check an object's known fields one by one (so the error names the
/// field), then the whole as `whole` (missing fields, unknown variants).
fn object(
    v: &Value,
    path: &str,
    fields: &[(&str, Check)],
    whole: Check,
) -> Result<(), ReportError> {
    let Some(map) = v.as_object() else {
        let at = if path.is_empty() { "(report)" } else { path };
        return Err(ReportError::field(
            at,
            format!("expected an object, found {}", kind(v)),
        ));
    };
    for (name, check) in fields {
        if let Some(x) = map.get(*name) {
            check(x, &join(path, name))?;
        }
    }
    whole(v, if path.is_empty() { "(report)" } else { path })
}

fn array(v: &Value, path: &str, each: Check) -> Result<(), ReportError> {
    let Some(items) = v.as_array() else {
        return Err(ReportError::field(
            path,
            format!("expected an array, found {}", kind(v)),
        ));
    };
    for (i, x) in items.iter().enumerate() {
        each(x, &format!("{path}[{i}]"))?;
    }
    Ok(())
}

fn machine(v: &Value, path: &str) -> Result<(), ReportError> {
    let s: Check = is::<String>;
    let fields = [
        "os",
        "arch",
        "hostname",
        "os_pretty",
        "kernel",
        "cpu",
        "label",
    ]
    .map(|n| (n, s));
    object(v, path, &fields, is::<Machine>)
}

fn device(v: &Value, path: &str) -> Result<(), ReportError> {
    let s: Check = is::<String>;
    let fields = [
        ("id", s),
        ("backend", s),
        ("name", s),
        ("driver", s),
        ("capture_support", is::<seam::CaptureSupport>),
    ];
    object(v, path, &fields, is::<DeviceRecord>)
}

fn missing(v: &Value, path: &str) -> Result<(), ReportError> {
    let s: Check = is::<String>;
    object(
        v,
        path,
        &[("backend", s), ("reason", s)],
        is::<MissingRecord>,
    )
}

fn trial(v: &Value, path: &str) -> Result<(), ReportError> {
    let s: Check = is::<String>;
    let fields = [
        ("name", s),
        ("device", s),
        ("case", s),
        ("rule", s),
        ("mode", s),
        ("verdict", s),
        ("duration_ms", is::<f64>),
        ("digest", is::<Option<String>>),
    ];
    object(v, path, &fields, is::<TrialRecord>)
}

fn summary(v: &Value, path: &str) -> Result<(), ReportError> {
    let n: Check = is::<usize>;
    let fields = [
        "passed",
        "failed",
        "ignored",
        "expected_failures",
        "unexpected_passes",
        "timed_out",
        "crashed",
        "teardown_hangs",
    ]
    .map(|f| (f, n));
    object(v, path, &fields, is::<Summary>)
}

/// The first field of a report value that does not read.
fn locate_report(v: &Value) -> Result<(), ReportError> {
    let s: Check = is::<String>;
    let fields: [(&str, Check); 9] = [
        ("format_version", is::<u32>),
        ("seam_version", s),
        ("git_commit", s),
        ("started_at", s),
        ("machine", machine),
        ("devices", |v, p| array(v, p, device)),
        ("missing", |v, p| array(v, p, missing)),
        ("trials", |v, p| array(v, p, trial)),
        ("summary", summary),
    ];
    object(v, "", &fields, is::<Report>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century leap year) 12:34:56.
        let t = UNIX_EPOCH + Duration::from_secs(951_827_696);
        assert_eq!(rfc3339(t), "2000-02-29T12:34:56Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_735_689_599);
        assert_eq!(rfc3339(t), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn pretty_name_is_unquoted() {
        let f = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n";
        assert_eq!(
            os_pretty_name(f).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            os_pretty_name("PRETTY_NAME=Alpine").as_deref(),
            Some("Alpine")
        );
        assert_eq!(os_pretty_name("ID=x"), None);
    }

    /// A format-1 report (before run metadata) still reads, with defaults.
    #[test]
    fn format_1_report_still_reads() {
        let old = r#"{"seam_version":"0.1.0",
            "machine":{"os":"linux","arch":"x86_64","hostname":"h"},
            "devices":[],"missing":[],"trials":[],
            "summary":{"passed":0,"failed":0,"ignored":0,"expected_failures":0,"unexpected_passes":0,"timed_out":0}}"#;
        let r = Report::from_json(old).unwrap();
        assert_eq!(r.format_version, 1);
        assert_eq!(r.git_commit, "");
        assert_eq!(r.machine.display_name(), "h");
    }

    #[test]
    fn new_report_carries_metadata() {
        let r = Report::new(vec![], vec![], vec![], Summary::default());
        assert_eq!(r.format_version, REPORT_FORMAT_VERSION);
        assert_eq!(r.seam_version, env!("CARGO_PKG_VERSION"));
        assert!(!r.git_commit.is_empty());
        assert_eq!(r.started_at.len(), 20, "{}", r.started_at);
        let back = Report::from_json(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.started_at, r.started_at);
    }
}
