use super::*;
use crate::report::{DeviceRecord, Machine, MissingRecord, Summary, TrialRecord, Verdict};

fn report(machine: &str, version: &str, devices: &[&str], trials: Vec<TrialRecord>) -> Report {
    let mut summary = Summary::default();
    trials.iter().for_each(|t| summary.add(&t.verdict));
    Report {
        format_version: 2,
        seam_version: version.into(),
        git_commit: "c0ffee".into(),
        started_at: "2025-01-01T00:00:00Z".into(),
        machine: Machine {
            hostname: machine.into(),
            ..Default::default()
        },
        devices: devices
            .iter()
            .map(|d| DeviceRecord {
                id: d.to_string(),
                backend: d.split(':').next().unwrap().into(),
                name: format!("{d} name"),
                driver: "drv 1".into(),
                capture_support: seam::CaptureSupport::Native,
                subnormals: None,
                update_support: None,
                node_timing: None,
                conditional_support: None,
                open_error: None,
            })
            .collect(),
        missing: vec![MissingRecord {
            backend: "hip".into(),
            reason: "no ROCm".into(),
        }],
        trials,
        summary,
        planned: Default::default(),
    }
}

fn t(device: &str, label: &str, verdict: Verdict, digest: Option<&str>) -> TrialRecord {
    TrialRecord {
        name: format!("{device}::{label}"),
        device: device.into(),
        case: case_of(label).into(),
        rule: "C1".into(),
        mode: "eager".into(),
        verdict,
        duration_ms: 2.0,
        digest: digest.map(str::to_string),
    }
}

#[test]
fn rule_follows_the_tolerance_table() {
    assert_eq!(comparison("c1_replay_reexecutes"), Comparison::BitExact);
    assert_eq!(
        comparison("c1_current_exec_reexecutes"),
        Comparison::BitExact
    );
    let Comparison::Bounded(ops) = comparison("c11_every_op_agrees_with_cpu") else {
        panic!("c11 digests silu, softmax, gemm: not bit-exact");
    };
    assert!(ops.contains(&"silu/f32".to_string()), "{ops:?}");
    assert!(!ops.contains(&"add/f32".to_string()), "{ops:?}");
    assert!(matches!(
        comparison("c4_decode_stack_eager_and_captured_identical"),
        Comparison::Bounded(_)
    ));
    assert!(matches!(
        comparison("c7_prepared_gemm_captures_and_replays"),
        Comparison::Bounded(_)
    ));
    assert_eq!(
        comparison("c13_rebind_equals_fresh_capture"),
        Comparison::BitExact
    );
    assert_eq!(
        comparison("c6_nested_begin_refused"),
        Comparison::Unclassified
    );
}

/// A report whose trials fall short of its own plan is flagged in the
/// matrix (Markdown and HTML), with the device and the counts.
#[test]
fn a_report_that_does_not_cover_its_plan_is_flagged() {
    let trials = vec![t("cpu:0", "c1_replay_reexecutes", Verdict::Passed, None)];
    let mut whole = report("alpha", "0.1.0", &["cpu:0"], trials.clone()).planned(["cpu:0"]);
    whole.git_commit = "0123456789abcdef0123456789abcdef01234567".into();
    let mut short = report("beta", "0.1.0", &["cpu:0", "vulkan:0"], trials)
        .planned(["cpu:0", "vulkan:0", "vulkan:0"]);
    // A format-1 report: no commit, no start time.
    short.git_commit.clear();
    short.started_at.clear();
    let m = merge(&[("a.json".into(), whole), ("b.json".into(), short)]).unwrap();
    assert!(m.sources[0].uncovered.is_empty());
    assert_eq!(
        m.sources[1].uncovered,
        ["vulkan:0: 0 of 2 planned trials reported"]
    );
    let md = crate::matrix::markdown(&m);
    assert!(
        md.contains("INCOMPLETE: vulkan:0: 0 of 2 planned trials reported"),
        "{md}"
    );
    assert!(!md.contains("## ⚠ Outputs disagree"), "{md}");
    assert!(!md.contains("## Failures"), "{md}");
    assert!(!crate::matrix::html(&m).contains("<h2>Failures"));
    assert!(crate::matrix::html(&m).contains("INCOMPLETE: vulkan:0"));
    assert!(md.contains("| `0123456789ab` |"), "{md}");
    assert!(md.contains("| `unknown` | unknown |"), "{md}");
}

#[test]
fn bit_exact_digests_that_differ_are_flagged_bounded_ones_are_not() {
    let a = report(
        "alpha",
        "0.1.0",
        &["cpu:0"],
        vec![
            t(
                "cpu:0",
                "c1_replay_reexecutes",
                Verdict::Passed,
                Some("aaaa"),
            ),
            t(
                "cpu:0",
                "c11_every_op_agrees_with_cpu::eager",
                Verdict::Passed,
                Some("1111"),
            ),
            t("cpu:0", "c6_nested_begin_refused", Verdict::Passed, None),
        ],
    );
    let b = report(
        "beta",
        "0.1.0",
        &["cuda:0", "cuda:1"],
        vec![
            t(
                "cuda:0",
                "c1_replay_reexecutes",
                Verdict::Passed,
                Some("aaaa"),
            ),
            t(
                "cuda:1",
                "c1_replay_reexecutes",
                Verdict::Passed,
                Some("bbbb"),
            ),
            t(
                "cuda:0",
                "c11_every_op_agrees_with_cpu::eager",
                Verdict::Passed,
                Some("2222"),
            ),
            t(
                "cuda:1",
                "c11_every_op_agrees_with_cpu::eager",
                Verdict::Failed("gemm off by 3 ulp".into()),
                None,
            ),
        ],
    );
    let m = merge(&[("a.json".into(), a), ("b.json".into(), b)]).unwrap();
    let keys: Vec<String> = m.columns.iter().map(Column::key).collect();
    assert_eq!(keys, ["cpu:0 @ alpha", "cuda:0 @ beta", "cuda:1 @ beta"]);
    let labels: Vec<&str> = m.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "c1_replay_reexecutes",
            "c11_every_op_agrees_with_cpu::eager",
            "c6_nested_begin_refused"
        ]
    );
    assert_eq!(
        m.row("c1_replay_reexecutes").unwrap().digests,
        Digests::Disagree {
            groups: vec![("aaaa".into(), vec![0, 1]), ("bbbb".into(), vec![2])]
        }
    );
    assert_eq!(m.disagreements().len(), 1);
    let c11 = m.row("c11_every_op_agrees_with_cpu::eager").unwrap();
    assert!(
        matches!(&c11.digests, Digests::NotCompared { distinct: 2, devices: 2, why } if why.contains("silu")),
        "{:?}",
        c11.digests
    );
    assert!(c11
        .digests
        .text(&m.columns)
        .starts_with("digest differs (within tolerance bound"));
    // A device without the trial is an empty cell, not a pass.
    assert_eq!(m.cell("c6_nested_begin_refused", "cuda:0 @ beta"), None);
    assert_eq!(
        m.cell("c11_every_op_agrees_with_cpu::eager", "cuda:1 @ beta")
            .map(|c| c.verdict.short()),
        Some("FAIL")
    );
    assert_eq!(m.failures().len(), 1);
    assert_eq!(m.missing.len(), 2);
    let md = crate::matrix::markdown(&m);
    assert!(md.contains("| `c1_replay_reexecutes` | C1 | ok (A) | ok (A) | ok (B) | ⚠ DIGESTS DISAGREE: A = aaaa on cpu:0 @ alpha, cuda:0 @ beta; B = bbbb on cuda:1 @ beta |"), "{md}");
    // The sections that exist only when there is something in them.
    assert!(md.contains("\n## ⚠ Outputs disagree (1 cases)\n"), "{md}");
    assert!(md.contains("\n## Failures (1)\n\n- `c11_every_op_agrees_with_cpu::eager` on cuda:1 @ beta: gemm off by 3 ulp\n"), "{md}");
    assert!(md.contains("\n## Backends without a device\n"), "{md}");
    // A full commit is shortened to 12 characters, anything else kept.
    assert!(md.contains("| `c0ffee` |"), "{md}");
    let html = crate::matrix::html(&m);
    assert!(html.contains("<tr class=\"disagree\"><td class=\"case\">c1_replay_reexecutes</td>"));
    assert!(!html.contains("<script"));
    assert!(html.contains("<h2>Failures (1)</h2>\n<ul>\n<li><code>c11_every_op_agrees_with_cpu::eager</code> on cuda:1 @ beta: gemm off by 3 ulp</li>"), "{html}");
    assert!(
        html.contains("<h2>Backends without a device</h2>"),
        "{html}"
    );
}

#[test]
fn agreeing_bit_exact_digests_say_so() {
    let a = report(
        "a",
        "0.1.0",
        &["cpu:0"],
        vec![t(
            "cpu:0",
            "c1_current_exec_reexecutes",
            Verdict::Passed,
            Some("ab"),
        )],
    );
    let b = report(
        "b",
        "0.1.0",
        &["vulkan:0"],
        vec![t(
            "vulkan:0",
            "c1_current_exec_reexecutes",
            Verdict::Passed,
            Some("ab"),
        )],
    );
    let m = merge(&[("a".into(), a), ("b".into(), b)]).unwrap();
    assert_eq!(m.rows[0].digests, Digests::Agree { devices: 2 });
    assert_eq!(m.rows[0].digests.text(&m.columns), "agree (2 devices)");
}

#[test]
fn different_seam_versions_are_refused_naming_both() {
    let a = report("a", "0.1.0", &["cpu:0"], vec![]);
    let b = report("b", "0.2.0", &["cpu:0"], vec![]);
    let e = merge(&[("old.json".into(), a), ("new.json".into(), b)]).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("old.json is seam 0.1.0"), "{msg}");
    assert!(msg.contains("new.json is seam 0.2.0"), "{msg}");
    assert_eq!(merge(&[]).unwrap_err(), MergeError::NoReports);
}

/// Two runs on one machine are two columns; one run's report given twice
/// is refused.
#[test]
fn the_same_device_twice_gets_two_columns_the_same_run_is_refused() {
    let a = report(
        "h",
        "0.1.0",
        &["cpu:0"],
        vec![t(
            "cpu:0",
            "c1_replay_reexecutes",
            Verdict::Passed,
            Some("1"),
        )],
    );
    // Another run on the same machine: started later.
    let mut b = a.clone();
    b.started_at = "2026-12-05T08:00:00Z".into();
    let m = merge(&[("1".into(), a.clone()), ("2".into(), b)]).unwrap();
    assert_eq!(m.columns.len(), 2);
    assert_eq!(m.columns[1].key(), "cpu:0 @ h (report 2)");
    assert_eq!(m.rows[0].digests, Digests::Agree { devices: 2 });
    // One run's report given twice is refused, naming both: its devices
    // would seem to agree with themselves.
    let two = [("x.json".into(), a.clone()), ("y.json".into(), a.clone())];
    assert_eq!(
        merge(&two).unwrap_err(),
        MergeError::Duplicate {
            first: "x.json".into(),
            again: "y.json".into()
        }
    );
    let e = merge(&[("x.json".into(), a.clone()), ("z".into(), a)]).unwrap_err();
    assert!(
        e.to_string().contains("z is the report x.json again"),
        "{e}"
    );
}
