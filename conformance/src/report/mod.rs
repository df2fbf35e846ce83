//! The JSON report: device, driver and per-trial verdicts with durations and
//! output digests, so reports from many machines can be merged.

use serde::{Deserialize, Serialize};

mod check;
#[cfg(test)]
mod tests;

pub use check::ReportError;

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
    /// How the device times the launches inside a replay (C10); absent in
    /// reports written before it was recorded, and for a device that
    /// failed to open.
    #[serde(default)]
    pub node_timing: Option<seam::NodeTiming>,
    /// How the device runs conditional bodies (C14); absent in reports
    /// written before it was recorded, and for a device that failed to open.
    #[serde(default)]
    pub conditional_support: Option<seam::ConditionalSupport>,
    /// Why the device failed to open, when it did (its trials then fail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_error: Option<String>,
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
    /// Whether `line` is a summary [`Summary::line`] writes (its whole
    /// form, counts and all), not just any line that begins as one does:
    /// what an isolated run's parent watches for to start a child's
    /// teardown clock.
    pub fn is_line(line: &str) -> bool {
        let Some(rest) = line.trim_end().strip_prefix(crate::isolate::SUMMARY_PREFIX) else {
            return false;
        };
        const COUNTS: [&str; 8] = [
            " passed",
            " failed",
            " ignored",
            " expected failures",
            " unexpected passes",
            " timed out",
            " crashed",
            " teardown hangs",
        ];
        let parts: Vec<&str> = rest.split(", ").collect();
        parts.len() == COUNTS.len()
            && parts.iter().zip(COUNTS).all(|(p, name)| {
                p.strip_suffix(name)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
    }

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
    /// How many trials the run planned on each device (and each missing
    /// backend's `<backend>:none`); absent in reports written before it was
    /// recorded. A merge flags a report whose trials fall short of it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub planned: std::collections::BTreeMap<String, usize>,
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
            planned: Default::default(),
        }
    }

    /// The report with the number of trials planned per device noted.
    pub fn planned<'a>(mut self, devices: impl IntoIterator<Item = &'a str>) -> Self {
        for d in devices {
            *self.planned.entry(d.to_string()).or_default() += 1;
        }
        self
    }

    /// Each device whose trials fall short of what the run planned on it:
    /// `cpu:0: 0 of 78 planned trials reported`.
    pub fn uncovered(&self) -> Vec<String> {
        self.planned
            .iter()
            .filter_map(|(d, &n)| {
                let got = self.trials.iter().filter(|t| t.device == *d).count();
                (got < n).then(|| format!("{d}: {got} of {n} planned trials reported"))
            })
            .collect()
    }

    /// Read a JSON report written by any format version.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
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
