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
        "c13_rebind_equals_fresh_capture"
        | "c13_update_params_equals_fresh_capture"
        | "c13_updates_back_and_forth" => {
            vec![(Copy, F32), (ScaleAdd, F32), (Add, F32)]
        }
        // k += b, then a copy of k into a slot of the cache, f32.
        "c13_update_launch_moves_a_view" => vec![(ScaleAdd, F32), (Copy, F32)],
        // Two f32 copies made dependent by rebinds.
        "c13_rebind_makes_launches_dependent" => vec![(Copy, F32)],
        // Every (op, dtype) workload of the catalogue, over views.
        "c11_views_at_odd_offsets_agree_with_cpu" => crate::workloads::all_pairs(),
        // Every buffer of each user kernel's samples (its tolerance), in
        // one launch or a chain of them.
        "c11_user_kernel_agrees_with_cpu"
        | "c11_user_kernel_chain_agrees_with_cpu"
        | "c4_user_kernel_eager_and_captured_identical" => crate::kernels()
            .iter()
            .filter_map(|&k| Some((User(seam::Kernel::new(k)), k.dtype()?)))
            .collect(),
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
    /// One report given twice (the same run's every field): its devices
    /// would appear to agree with themselves.
    Duplicate {
        first: String,
        again: String,
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
            MergeError::Duplicate { first, again } => write!(
                f,
                "{again} is the report {first} again (the same run): each run is merged once"
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
    // The same run twice: every field equal, down to each trial's duration.
    let values: Vec<Option<serde_json::Value>> = reports
        .iter()
        .map(|(_, r)| serde_json::to_value(r).ok())
        .collect();
    for (i, v) in values.iter().enumerate() {
        if let Some(j) = (v.is_some())
            .then(|| values[..i].iter().position(|w| w == v))
            .flatten()
        {
            return Err(MergeError::Duplicate {
                first: reports[j].0.clone(),
                again: reports[i].0.clone(),
            });
        }
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
                conditional: d
                    .conditional_support
                    .as_ref()
                    .map_or_else(|| "—".to_string(), |c| format!("{c:?}")),
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
mod tests;
