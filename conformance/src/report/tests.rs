//! The report's types and the refusal of reports that are not reports.
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
    // Where the algorithm's century and era terms start to count: around
    // 2100-03-01 (100 years into the era that began 2000-03-01), and the
    // era's last day, 2400-02-29.
    for (secs, want) in [
        (4_107_542_399, "2100-02-28T23:59:59Z"),
        (4_107_542_400, "2100-03-01T00:00:00Z"),
        (13_569_379_200, "2399-12-31T00:00:00Z"),
        (13_574_606_400, "2400-02-29T12:00:00Z"),
        (13_574_649_600, "2400-03-01T00:00:00Z"),
    ] {
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(secs)), want);
    }
}

#[test]
fn pretty_name_is_unquoted() {
    let f =
        "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n";
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

/// Every verdict counts where its name says, and only the ones that fail
/// the run make `ok` false: an expected failure does not, an unexpected
/// pass does.
#[test]
fn a_summary_counts_every_kind_of_verdict() {
    let each = [
        Verdict::Passed,
        Verdict::Failed("f".into()),
        Verdict::Ignored("i".into()),
        Verdict::ExpectedFailure("x".into()),
        Verdict::UnexpectedPass("u".into()),
        Verdict::TimedOut("t".into()),
        Verdict::Crashed("c".into()),
        Verdict::TeardownHang("h".into()),
    ];
    let mut s = Summary::default();
    for (i, v) in each.iter().enumerate() {
        for _ in 0..=i {
            s.add(v);
        }
    }
    assert_eq!(
        s.line(),
        "conformance: 1 passed, 2 failed, 3 ignored, 4 expected failures, 5 unexpected passes, 6 timed out, 7 crashed, 8 teardown hangs"
    );
    for v in &each {
        let mut one = Summary::default();
        one.add(v);
        let fails = !matches!(
            v,
            Verdict::Passed | Verdict::Ignored(_) | Verdict::ExpectedFailure(_)
        );
        assert_eq!(one.ok(), !fails, "{v:?}");
        assert_eq!(v.fails_run(), fails, "{v:?}");
    }
}

#[test]
fn the_os_line_prefers_the_pretty_name() {
    let mut m = Machine {
        os: "linux".into(),
        arch: "x86_64".into(),
        ..Default::default()
    };
    assert_eq!(m.os_line(), "linux x86_64");
    m.os_pretty = "Debian GNU/Linux 12 (bookworm)".into();
    assert_eq!(m.os_line(), "Debian GNU/Linux 12 (bookworm) (x86_64)");
}
