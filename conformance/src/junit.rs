//! JUnit XML for CI dashboards: one `<testsuite>` per device, one
//! `<testcase>` per trial (classname = device, name = `case[::mode]`).
//!
//! Verdict mapping: failed and unexpected pass → `<failure>`; timed out,
//! crashed and teardown hang → `<error>` (the harness, not the assertion,
//! gave out); ignored and expected failure → `<skipped>` with the reason.

use crate::report::{Report, TrialRecord, Verdict};
use std::fmt::Write;

/// Escape text for XML 1.0 content and attribute values. Characters XML 1.0
/// cannot carry at all (C0 controls other than tab, LF, CR; U+FFFE/U+FFFF)
/// become U+FFFD, so a driver message with a stray control byte still gives
/// a well-formed file. Also used for the HTML matrix.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// `case[::mode]`: the trial name without its device prefix.
pub fn case_label(t: &TrialRecord) -> String {
    t.name
        .strip_prefix(&format!("{}::", t.device))
        .map(str::to_string)
        .unwrap_or_else(|| t.case.clone())
}

/// Devices in the order their first trial appears.
fn device_order(report: &Report) -> Vec<&str> {
    let mut order: Vec<&str> = Vec::new();
    for t in &report.trials {
        if !order.contains(&t.device.as_str()) {
            order.push(&t.device);
        }
    }
    order
}

fn is_failure(v: &Verdict) -> bool {
    matches!(v, Verdict::Failed(_) | Verdict::UnexpectedPass(_))
}

fn is_error(v: &Verdict) -> bool {
    matches!(
        v,
        Verdict::TimedOut(_) | Verdict::Crashed(_) | Verdict::TeardownHang(_)
    )
}

fn is_skipped(v: &Verdict) -> bool {
    matches!(v, Verdict::Ignored(_) | Verdict::ExpectedFailure(_))
}

/// `tests=… failures=… errors=… skipped=…` of some trials.
fn counts(ts: &[&TrialRecord]) -> String {
    let n = |f: fn(&Verdict) -> bool| ts.iter().filter(|t| f(&t.verdict)).count();
    format!(
        "tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\"",
        ts.len(),
        n(is_failure),
        n(is_error),
        n(is_skipped)
    )
}

/// The whole report as a JUnit XML document.
pub fn junit(report: &Report) -> String {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let all: Vec<&TrialRecord> = report.trials.iter().collect();
    let total_s: f64 = all.iter().map(|t| t.duration_ms).sum::<f64>() / 1e3;
    let _ = writeln!(
        x,
        "<testsuites name=\"seam-conformance\" {} time=\"{total_s:.3}\">",
        counts(&all)
    );
    for device in device_order(report) {
        let trials: Vec<&TrialRecord> =
            all.iter().copied().filter(|t| t.device == device).collect();
        let time: f64 = trials.iter().map(|t| t.duration_ms).sum::<f64>() / 1e3;
        let _ = writeln!(
            x,
            "  <testsuite name=\"{}\" {} time=\"{time:.3}\" timestamp=\"{}\" hostname=\"{}\">",
            escape(device),
            counts(&trials),
            escape(report.started_at.trim_end_matches('Z')),
            escape(report.machine.display_name()),
        );
        x.push_str("    <properties>\n");
        let mut props: Vec<(&str, String)> = vec![
            ("seam_version", report.seam_version.clone()),
            ("git_commit", report.git_commit.clone()),
            ("os", report.machine.os_line()),
            ("report_format", report.format_version.to_string()),
        ];
        if let Some(d) = report.devices.iter().find(|d| d.id == device) {
            props.push(("device_name", d.name.clone()));
            props.push(("driver", d.driver.clone()));
            props.push(("capture_support", format!("{:?}", d.capture_support)));
        } else if let Some(m) = report
            .missing
            .iter()
            .find(|m| device == format!("{}:none", m.backend))
        {
            props.push(("missing", m.reason.clone()));
        }
        for (k, v) in props {
            let _ = writeln!(x, "      <property name=\"{k}\" value=\"{}\"/>", escape(&v));
        }
        x.push_str("    </properties>\n");
        for t in trials {
            testcase(&mut x, t);
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

/// The verdict's tag in snake case, for the `type` attribute.
fn kind(v: &Verdict) -> &'static str {
    match v {
        Verdict::Passed => "passed",
        Verdict::Failed(_) => "failed",
        Verdict::Ignored(_) => "ignored",
        Verdict::ExpectedFailure(_) => "expected_failure",
        Verdict::UnexpectedPass(_) => "unexpected_pass",
        Verdict::TimedOut(_) => "timed_out",
        Verdict::Crashed(_) => "crashed",
        Verdict::TeardownHang(_) => "teardown_hang",
    }
}

fn testcase(x: &mut String, t: &TrialRecord) {
    let _ = write!(
        x,
        "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
        escape(&t.device),
        escape(&case_label(t)),
        t.duration_ms / 1e3
    );
    let body = match &t.verdict {
        Verdict::Passed => None,
        Verdict::Failed(m) | Verdict::UnexpectedPass(m) => Some(("failure", m.clone())),
        Verdict::TimedOut(m) | Verdict::Crashed(m) | Verdict::TeardownHang(m) => {
            Some(("error", m.clone()))
        }
        Verdict::Ignored(m) => Some(("skipped", m.clone())),
        Verdict::ExpectedFailure(m) => Some(("skipped", format!("expected failure: {m}"))),
    };
    if body.is_none() && t.digest.is_none() {
        x.push_str("/>\n");
        return;
    }
    x.push_str(">\n");
    match body {
        Some(("skipped", msg)) => {
            let _ = writeln!(x, "      <skipped message=\"{}\"/>", escape(&msg));
        }
        Some((tag, msg)) => {
            let first = msg.lines().next().unwrap_or("");
            let _ = writeln!(
                x,
                "      <{tag} message=\"{}\" type=\"{}\">{}</{tag}>",
                escape(first),
                kind(&t.verdict),
                escape(&msg)
            );
        }
        None => {}
    }
    if let Some(d) = &t.digest {
        let _ = writeln!(
            x,
            "      <system-out>output digest (FNV-1a): {}</system-out>",
            escape(d)
        );
    }
    x.push_str("    </testcase>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{DeviceRecord, Machine, MissingRecord, Summary};

    fn trial(device: &str, name: &str, verdict: Verdict, digest: Option<&str>) -> TrialRecord {
        let parts = name.split("::").collect::<Vec<_>>();
        TrialRecord {
            name: format!("{device}::{name}"),
            device: device.into(),
            case: parts[0].into(),
            rule: "C1".into(),
            mode: parts.get(1).copied().unwrap_or("eager").into(),
            verdict,
            duration_ms: 1500.0,
            digest: digest.map(str::to_string),
        }
    }

    fn report() -> Report {
        let trials = vec![
            trial("cpu:0", "c1_a", Verdict::Passed, Some("00ff")),
            trial(
                "cpu:0",
                "c4_b::captured",
                Verdict::Failed("1 < 2 & \"x\"\u{1}\nsecond line".into()),
                None,
            ),
            trial("cpu:0", "c5_c", Verdict::TimedOut("no result".into()), None),
            trial(
                "cuda:none",
                "c1_a",
                Verdict::Ignored("no cuda device: install <libcuda>".into()),
                None,
            ),
        ];
        let mut summary = Summary::default();
        trials.iter().for_each(|t| summary.add(&t.verdict));
        Report {
            format_version: 2,
            seam_version: "0.1.0".into(),
            git_commit: "abc".into(),
            started_at: "2025-01-01T00:00:00Z".into(),
            machine: Machine {
                hostname: "box".into(),
                ..Default::default()
            },
            devices: vec![DeviceRecord {
                id: "cpu:0".into(),
                backend: "cpu".into(),
                name: "CPU".into(),
                driver: "seam-cpu 0.1".into(),
                capture_support: seam::CaptureSupport::Native,
                subnormals: None,
                update_support: None,
                node_timing: None,
                conditional_support: None,
                open_error: None,
            }],
            missing: vec![MissingRecord {
                backend: "cuda".into(),
                reason: "install <libcuda>".into(),
            }],
            trials,
            summary,
            planned: Default::default(),
        }
    }

    #[test]
    fn escapes_markup_and_illegal_controls() {
        assert_eq!(
            escape("a<b>&\"c'\u{0}\t\u{1b}"),
            "a&lt;b&gt;&amp;&quot;c&apos;\u{FFFD}\t\u{FFFD}"
        );
        assert_eq!(escape("plain ü"), "plain ü");
        // The two noncharacters XML refuses, each alone.
        assert_eq!(escape("\u{FFFE}x\u{FFFF}"), "\u{FFFD}x\u{FFFD}");
        assert_eq!(escape("\r\n\u{1f} \u{20}"), "\r\n\u{FFFD}  ");
    }

    #[test]
    fn one_suite_per_device_one_case_per_trial() {
        let x = junit(&report());
        assert_eq!(x.matches("<testsuite ").count(), 2);
        assert_eq!(x.matches("<testcase ").count(), 4);
        assert!(x.contains(
            "<testsuites name=\"seam-conformance\" tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""
        ));
        assert!(x.contains(
            "<testsuite name=\"cpu:0\" tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"0\" time=\"4.500\""
        ));
        // The whole run's time, in seconds: four trials of 1.5 s.
        assert!(x.contains("skipped=\"1\" time=\"6.000\">"), "{x}");
        assert!(x.contains("<testcase classname=\"cpu:0\" name=\"c4_b::captured\" time=\"1.500\""));
        assert!(x.contains(
            "<failure message=\"1 &lt; 2 &amp; &quot;x&quot;\u{FFFD}\" type=\"failed\">"
        ));
        assert!(x.contains("\nsecond line</failure>"));
        assert!(x.contains("<error message=\"no result\" type=\"timed_out\">"));
        assert!(x.contains("<skipped message=\"no cuda device: install &lt;libcuda&gt;\"/>"));
        assert!(x.contains("<property name=\"missing\" value=\"install &lt;libcuda&gt;\"/>"));
        assert!(x.contains("output digest (FNV-1a): 00ff"));
        // Balanced: every opened suite and case is closed (each case here has a body).
        assert_eq!(x.matches("</testsuite>").count(), 2);
        assert_eq!(x.matches("</testcase>").count(), 4);
    }
}
