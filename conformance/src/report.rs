//! The JSON report: device, driver and per-trial verdicts with durations and
//! output digests, so reports from many machines can be merged.

use serde::{Deserialize, Serialize};

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
    pub fn fails_run(&self) -> bool {
        matches!(
            self,
            Verdict::Failed(_) | Verdict::UnexpectedPass(_) | Verdict::TimedOut(_)
        )
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

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub os: String,
    pub arch: String,
    pub hostname: String,
}

impl Machine {
    pub fn here() -> Self {
        Machine {
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            hostname: std::fs::read_to_string("/etc/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub seam_version: String,
    pub machine: Machine,
    pub devices: Vec<DeviceRecord>,
    pub missing: Vec<MissingRecord>,
    pub trials: Vec<TrialRecord>,
    pub summary: Summary,
}
