//! A report is input too: one written on another machine of the fleet is
//! checked field by field before it is merged, and refused with the file's
//! field at fault ([`ReportError`]).

use super::*;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

impl Report {
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
