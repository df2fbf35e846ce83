//! Merging reports of many machines into one [`Matrix`].
//!
//! Reports of different seam versions are refused, never mixed: a case's
//! name, body and digest only mean the same thing within one version.
//!
//! ## When output digests are compared
//!
//! A digest is the FNV-1a hash of a case's output bytes, so two digests are
//! equal only if the bytes are. That is a meaningful cross-device check only
//! where the contract demands identical bytes: every output the case folds
//! into its digest must come from an (op, dtype) whose
//! [`OpKind::tolerance`] is [`Tolerance::BitExact`]. [`digested_outputs`]
//! lists, per case that records a digest, which (op, dtype) outputs it
//! digests; [`comparison`] derives the rule from the tolerance table, so a
//! tolerance change in core moves a case between the two groups by itself.
//! Other digests are shown but not compared: those cases check their bound
//! against the CPU reference themselves (C11), and the verdict says so.

use crate::matrix::{Cell, Column, Digests, Matrix, Missing, Row, Source};
use crate::report::{Report, ReportError};
use seam::{DType, OpKind, Tolerance};
use std::fmt;
use std::io::Read;
use std::path::Path;

/// The (op, dtype) outputs a case folds into its digest, for every case that
/// records one (`Ctx::digest_bytes`). `None`: the case records no digest, or
/// is not listed here (a test runs the suite and fails on unlisted ones).
pub fn digested_outputs(case: &str) -> Option<Vec<(OpKind, DType)>> {
    use DType::*;
    use OpKind::*;
    Some(match case {
        // dst += a (f32 add) replayed three times.
        "c1_replay_reexecutes" | "c1_current_exec_reexecutes" => vec![(Add, F32)],
        // Every (op, dtype) workload of the catalogue.
        "c4_eager_and_captured_identical" | "c11_every_op_agrees_with_cpu" => {
            crate::workloads::all_pairs()
        }
        // rms_norm → gemm → silu → add, f32.
        "c4_decode_stack_eager_and_captured_identical" => {
            vec![(RmsNorm, F32), (Gemm, F32), (Silu, F32), (Add, F32)]
        }
        // GEMM for each input type (at every shape of the table, for the second).
        "c7_prepared_gemm_captures_and_replays" | "c11_gemm_shapes_agree_with_cpu" => {
            Gemm.dtypes().iter().map(|&d| (Gemm, d)).collect()
        }
        // x through alternating u32 adds and muls, eager and replayed.
        "c2_eager_work_and_replays_keep_stream_order" => vec![(Add, U32), (Mul, U32)],
        // copy → scale_add → add over f32, after a rebind or a params update.
        "c13_rebind_equals_fresh_capture" | "c13_update_params_equals_fresh_capture" => {
            vec![(Copy, F32), (ScaleAdd, F32), (Add, F32)]
        }
        // k += b, then a copy of k into a slot of the cache, f32.
        "c13_update_launch_moves_a_view" => vec![(ScaleAdd, F32), (Copy, F32)],
        // Every (op, dtype) workload of the catalogue, over views.
        "c11_views_at_odd_offsets_agree_with_cpu" => crate::workloads::all_pairs(),
        // Every buffer of each user kernel's samples (its tolerance).
        "c11_user_kernel_agrees_with_cpu" | "c4_user_kernel_eager_and_captured_identical" => {
            crate::kernels()
                .iter()
                .filter_map(|&k| Some((User(seam::Kernel::new(k)), k.dtype()?)))
                .collect()
        }
        _ => return None,
    })
}

/// Whether a case's digests may be compared across devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// Every digested output is bit-exact: different digests are a real
    /// disagreement.
    BitExact,
    /// Some digested output is only bound by a tolerance: the listed
    /// `op/dtype` pairs.
    Bounded(Vec<String>),
    /// The case is not in [`digested_outputs`].
    Unclassified,
}

pub fn comparison(case: &str) -> Comparison {
    let Some(outputs) = digested_outputs(case) else {
        return Comparison::Unclassified;
    };
    let bounded: Vec<String> = outputs
        .iter()
        .filter(|(op, dt)| op.tolerance(*dt) != Tolerance::BitExact)
        .map(|(op, dt)| format!("{op}/{dt}"))
        .collect();
    if bounded.is_empty() {
        Comparison::BitExact
    } else {
        Comparison::Bounded(bounded)
    }
}

/// Why a merge was refused.
#[derive(Debug, PartialEq)]
pub enum MergeError {
    NoReports,
    Read {
        path: String,
        error: String,
    },
    /// Not a report: which file, and which field (or that it is not JSON).
    Parse {
        path: String,
        error: ReportError,
    },
    /// Larger than any report ([`MAX_REPORT_BYTES`]).
    TooLarge {
        path: String,
        bytes: u64,
    },
    /// Two reports of different seam versions.
    VersionMismatch {
        first: (String, String),
        other: (String, String),
    },
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::NoReports => f.write_str("no reports to merge"),
            MergeError::Read { path, error } => write!(f, "reading {path}: {error}"),
            MergeError::Parse { path, error } => {
                write!(f, "{path} is not a seam conformance report: {error}")
            }
            MergeError::TooLarge { path, bytes } => write!(
                f,
                "{path} is {bytes} bytes or more; a seam conformance report is at most {MAX_REPORT_BYTES}"
            ),
            MergeError::VersionMismatch { first, other } => write!(
                f,
                "refusing to merge reports of different seam versions: {} is seam {}, {} is seam {}; \
                 rerun the suite with one seam version on every machine",
                first.0, first.1, other.0, other.1
            ),
        }
    }
}

impl std::error::Error for MergeError {}

/// The largest report `load` reads: a whole suite on many devices is a few
/// MiB; anything far beyond is not a report.
pub const MAX_REPORT_BYTES: u64 = 256 << 20;

/// Read one JSON report, written on any machine, so checked field by field
/// ([`Report::parse`]); `label` is how the matrix names it (its path).
pub fn load(path: &Path) -> Result<(String, Report), MergeError> {
    load_within(path, MAX_REPORT_BYTES)
}

/// [`load`], refusing what is longer than `limit` bytes.
pub fn load_within(path: &Path, limit: u64) -> Result<(String, Report), MergeError> {
    let label = path.display().to_string();
    let read = |e: std::io::Error| MergeError::Read {
        path: label.clone(),
        error: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(read)?;
    if let Some(bytes) = file.metadata().ok().map(|m| m.len()) {
        if bytes > limit {
            return Err(MergeError::TooLarge { path: label, bytes });
        }
    }
    let mut text = String::new();
    // A pipe or a growing file has no honest length: read one byte past the
    // limit, to tell "at the limit" from "over it".
    let bytes = file
        .take(limit + 1)
        .read_to_string(&mut text)
        .map_err(read)? as u64;
    if bytes > limit {
        return Err(MergeError::TooLarge { path: label, bytes });
    }
    parse(&label, &text).map(|r| (label, r))
}

/// [`load`] of text already read; `label` names it in errors.
pub fn parse(label: &str, text: &str) -> Result<Report, MergeError> {
    Report::parse(text).map_err(|error| MergeError::Parse {
        path: label.into(),
        error,
    })
}

/// One matrix from `(label, report)` pairs, all of one seam version.
pub fn merge(reports: &[(String, Report)]) -> Result<Matrix, MergeError> {
    let Some((first_label, first)) = reports.first() else {
        return Err(MergeError::NoReports);
    };
    if let Some((label, r)) = reports
        .iter()
        .find(|(_, r)| r.seam_version != first.seam_version)
    {
        return Err(MergeError::VersionMismatch {
            first: (first_label.clone(), first.seam_version.clone()),
            other: (label.clone(), r.seam_version.clone()),
        });
    }
    let mut m = Matrix {
        seam_version: first.seam_version.clone(),
        sources: Vec::new(),
        columns: Vec::new(),
        rows: Vec::new(),
        missing: Vec::new(),
    };
    for (i, (label, r)) in reports.iter().enumerate() {
        m.sources.push(Source {
            label: label.clone(),
            machine: r.machine.display_name().into(),
            os: r.machine.os_line(),
            cpu: r.machine.cpu.clone(),
            git_commit: or_unknown(&r.git_commit),
            started_at: or_unknown(&r.started_at),
            format_version: r.format_version,
            summary: r.summary.line(),
            uncovered: r.uncovered(),
        });
        for x in &r.missing {
            m.missing.push(Missing {
                machine: r.machine.display_name().into(),
                backend: x.backend.clone(),
                reason: x.reason.clone(),
            });
        }
        for d in &r.devices {
            let mut col = Column {
                device: d.id.clone(),
                backend: d.backend.clone(),
                name: d.name.clone(),
                driver: d.driver.clone(),
                machine: r.machine.display_name().into(),
                capture: format!("{:?}", d.capture_support),
                update: d
                    .update_support
                    .as_ref()
                    .map_or_else(|| "—".to_string(), |u| format!("{u:?}")),
                node_timing: d
                    .node_timing
                    .as_ref()
                    .map_or_else(|| "—".to_string(), |n| format!("{n:?}")),
                source: i,
            };
            // The same device on the same machine twice (two runs): keep both.
            if m.columns.iter().any(|c| c.key() == col.key()) {
                col.machine = format!("{} (report {})", col.machine, i + 1);
            }
            let c = m.columns.len();
            m.columns.push(col);
            for row in &mut m.rows {
                row.cells.push(None);
            }
            for t in r.trials.iter().filter(|t| t.device == d.id) {
                let label = crate::junit::case_label(t);
                let idx = match m.rows.iter().position(|row| row.label == label) {
                    Some(idx) => idx,
                    None => {
                        m.rows.push(Row {
                            label,
                            rule: t.rule.clone(),
                            cells: vec![None; c + 1],
                            digests: Digests::None,
                        });
                        m.rows.len() - 1
                    }
                };
                m.rows[idx].cells[c] = Some(Cell {
                    verdict: t.verdict.clone(),
                    digest: t.digest.clone(),
                    duration_ms: t.duration_ms,
                });
            }
        }
    }
    for row in &mut m.rows {
        row.digests = check_digests(row);
    }
    Ok(m)
}

/// Format-1 reports have no commit or start time.
fn or_unknown(s: &str) -> String {
    if s.is_empty() {
        "unknown".into()
    } else {
        s.into()
    }
}

/// The case name of a row label (`case::mode` → `case`).
fn case_of(label: &str) -> &str {
    label.split("::").next().unwrap_or(label)
}

fn check_digests(row: &Row) -> Digests {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (c, cell) in row.cells.iter().enumerate() {
        if let Some(d) = cell.as_ref().and_then(|cell| cell.digest.as_ref()) {
            match groups.iter_mut().find(|(g, _)| g == d) {
                Some((_, cols)) => cols.push(c),
                None => groups.push((d.clone(), vec![c])),
            }
        }
    }
    if groups.is_empty() {
        return Digests::None;
    }
    let devices = groups.iter().map(|(_, cols)| cols.len()).sum();
    match comparison(case_of(&row.label)) {
        Comparison::BitExact if groups.len() == 1 => Digests::Agree {
            devices: groups[0].1.len(),
        },
        Comparison::BitExact => Digests::Disagree { groups },
        Comparison::Bounded(ops) => Digests::NotCompared {
            distinct: groups.len(),
            devices,
            why: format!("within tolerance bound: {}", bounded_ops(&ops)),
        },
        Comparison::Unclassified => Digests::NotCompared {
            distinct: groups.len(),
            devices,
            why: "case not classified for digest comparison".into(),
        },
    }
}

/// `silu, rms_norm, gemm` from `silu/f32, rms_norm/f32, rms_norm/f16, …`.
fn bounded_ops(pairs: &[String]) -> String {
    let mut ops: Vec<&str> = Vec::new();
    for p in pairs {
        let op = p.split('/').next().unwrap_or(p);
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    ops.join(", ")
}

#[cfg(test)]
mod tests {
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
        assert!(
            html.contains("<tr class=\"disagree\"><td class=\"case\">c1_replay_reexecutes</td>")
        );
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

    #[test]
    fn the_same_device_twice_gets_two_columns() {
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
        let m = merge(&[("1".into(), a.clone()), ("2".into(), a)]).unwrap();
        assert_eq!(m.columns.len(), 2);
        assert_eq!(m.columns[1].key(), "cpu:0 @ h (report 2)");
        assert_eq!(m.rows[0].digests, Digests::Agree { devices: 2 });
    }
}
