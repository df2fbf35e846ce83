//! The committed reports in docs/results/ (this machine's cpu and lavapipe
//! runs, and the GPU machine's run) merge into one cross-device matrix, and
//! the matrix says concretely what each report said. Also: every case that
//! records an output digest is classified for digest comparison.

use seam_conformance::matrix::{self, Digests};
use seam_conformance::merge::{self, Comparison};
use seam_conformance::report::{Report, Verdict};
use seam_conformance::runner::{self, Filter, RunOptions};
use std::path::PathBuf;

/// The reports merged here. The CPU-only machine's two come from
/// `SEAM_MACHINE_NAME=ci-vm seam-conformance --backend cpu,cuda` and
/// `--backend vulkan` (lavapipe); the third is the 2-GPU H200 machine's
/// (`--backend cuda,vulkan,wgpu`: cuda:0/1, vulkan:0/1, wgpu:0/1).
const REPORTS: &[&str] = &["cpu-ci.json", "vulkan-lavapipe.json", "h200x2.json"];

fn results() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/results")
}

fn load_all() -> Vec<(String, Report)> {
    REPORTS
        .iter()
        .map(|name| {
            let path = results().join(name);
            assert!(
                path.is_file(),
                "docs/results/{name} is missing: this test merges {REPORTS:?}; \
                 commit the report (see docs/reports.md) or fix the list"
            );
            let (_, report) = merge::load(&path).unwrap_or_else(|e| panic!("{e}"));
            (name.to_string(), report)
        })
        .collect()
}

#[test]
fn three_committed_reports_merge_into_one_matrix() {
    let reports = load_all();
    let m = merge::merge(&reports).unwrap_or_else(|e| panic!("{e}"));

    // Columns: one per device, in report order, named device @ machine.
    let keys: Vec<String> = m.columns.iter().map(|c| c.key()).collect();
    assert_eq!(keys[0], "cpu:0 @ ci-vm", "{keys:?}");
    assert_eq!(keys[1], "vulkan:0 @ ci-vm", "{keys:?}");
    let gpus = &m.columns[2..];
    assert!(!gpus.is_empty(), "the H200 report has no device: {keys:?}");
    for c in gpus {
        assert!(
            ["cuda", "vulkan", "wgpu"].contains(&c.backend.as_str()),
            "{c:?}"
        );
        assert!(c.name.contains("H200"), "{c:?}");
        assert!(c.driver.contains("580.159.04"), "{c:?}");
        if c.backend == "cuda" {
            assert!(c.driver.contains("CUDA"), "{c:?}");
        }
        assert_eq!(c.source, 2);
    }
    for backend in ["cuda", "vulkan", "wgpu"] {
        let n = gpus.iter().filter(|c| c.backend == backend).count();
        assert_eq!(n, 2, "{backend}: both GPUs of the 2-GPU machine: {keys:?}");
    }
    assert_eq!(m.columns[0].name, "seam CPU reference");
    assert!(
        m.columns[1].driver.contains("llvmpipe") || m.columns[1].driver.contains("lavapipe"),
        "{:?}",
        m.columns[1]
    );

    // Rows: every trial of the current suite, once, in contract order.
    let plan = runner::plan(&Filter {
        backends: vec!["cpu".into()],
        ..Default::default()
    });
    let planned: Vec<String> = plan
        .trials
        .iter()
        .map(|t| t.name.trim_start_matches("cpu:0::").to_string())
        .collect();
    let labels: Vec<&str> = m.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, planned);

    // Cells: this machine's two devices passed everything they run; a C14
    // trial is ignored, saying why, exactly where the device's report says
    // it runs no conditional bodies. The GPU's cells are verdicts it
    // reported, or empty where its report predates a case.
    for r in &m.rows {
        for (i, (cell, key)) in r.cells.iter().zip(&keys).take(2).enumerate() {
            let cell = cell
                .as_ref()
                .unwrap_or_else(|| panic!("{} has no cell on {key}", r.label));
            let device = &reports[i].1.devices[0];
            let unsupported = matches!(
                device.conditional_support,
                Some(seam::ConditionalSupport::Unsupported(_))
            );
            match &cell.verdict {
                Verdict::Ignored(why) if r.label.starts_with("c14_") && unsupported => {
                    assert!(
                        why.starts_with("conditional bodies unsupported"),
                        "{} on {key}: {why}",
                        r.label
                    )
                }
                v => assert_eq!(v.short(), "ok", "{} on {key}", r.label),
            }
        }
    }
    let gpu_report = &reports[2].1;
    for (i, c) in gpus.iter().enumerate() {
        let col = 2 + i;
        for r in &m.rows {
            let reported = gpu_report
                .trials
                .iter()
                .find(|t| t.name == format!("{}::{}", c.device, r.label));
            match (&r.cells[col], reported) {
                (Some(cell), Some(t)) => assert_eq!(cell.verdict, t.verdict, "{}", r.label),
                (None, None) => {}
                (cell, t) => panic!("{} on {}: cell {cell:?}, report {t:?}", r.label, c.key()),
            }
        }
    }
    // Multi-GPU: the two H200s of one machine give the same output bytes on
    // every case that records a digest (same model, same driver, same code).
    for backend in ["cuda", "vulkan", "wgpu"] {
        let (d0, d1) = (format!("{backend}:0"), format!("{backend}:1"));
        let mut compared = 0;
        for t in gpu_report.trials.iter().filter(|t| t.device == d0) {
            let twin = format!("{d1}{}", &t.name[d0.len()..]);
            let other = gpu_report.trials.iter().find(|u| u.name == twin);
            let other = other.unwrap_or_else(|| panic!("{twin} missing"));
            if t.digest.is_some() {
                assert_eq!(t.digest, other.digest, "{} vs {twin}", t.name);
                compared += 1;
            }
        }
        assert!(compared >= 7, "{backend}: only {compared} digests compared");
    }
    let gpu_cells = m.rows.iter().filter(|r| r.cells[2].is_some()).count();
    assert!(gpu_cells >= 30, "only {gpu_cells} H200 cells");

    // Digests: the bit-exact C1 case agrees on every device; cases over
    // tolerance-bounded ops differ between cpu, lavapipe and CUDA, and are
    // shown as such, not flagged.
    let n = m.columns.len();
    assert_eq!(
        m.row("c1_replay_reexecutes").unwrap().digests,
        Digests::Agree { devices: n }
    );
    let c11 = &m
        .row("c11_every_op_agrees_with_cpu::eager")
        .unwrap()
        .digests;
    match c11 {
        Digests::NotCompared {
            distinct,
            devices,
            why,
        } => {
            assert!(*distinct >= 2, "{c11:?}");
            assert_eq!(*devices, n);
            assert!(why.contains("gemm"), "{why}");
        }
        other => panic!("c11 digests should be shown, not compared: {other:?}"),
    }
    assert!(c11
        .text(&m.columns)
        .starts_with("digest differs (within tolerance bound"));
    assert!(m.disagreements().is_empty(), "{:?}", m.disagreements());
    assert!(m.failures().is_empty(), "{:?}", m.failures());

    // This machine has no CUDA: said once, with the reason, not as a column.
    assert!(
        m.missing
            .iter()
            .any(|x| x.machine == "ci-vm" && x.backend == "cuda" && x.reason.contains("libcuda")),
        "{:?}",
        m.missing
    );
    assert!(!keys.iter().any(|k| k.contains(":none")));

    let md = matrix::markdown(&m);
    let oks = vec!["ok"; n].join(" | ");
    assert!(
        md.contains(&format!(
            "| `c1_replay_reexecutes` | C1 | {oks} | agree ({n} devices) |"
        )),
        "{md}"
    );
    assert!(md.contains("| cpu:0 @ ci-vm | seam CPU reference | cpu |"));

    let html = matrix::html(&m);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    for external in ["<script", "<link", "src=", "href=", "@import", "url("] {
        assert!(
            !html.contains(external),
            "the page must be self-contained: {external}"
        );
    }
    assert_eq!(html.matches("<th class=\"dev\"").count(), n);
    let matrix_table = html.split("<table class=\"matrix\">").nth(1).unwrap();
    let matrix_table = matrix_table.split("</table>").next().unwrap();
    assert_eq!(matrix_table.matches("<tr").count(), m.rows.len() + 1);
    // This machine's two columns: every cell ok but the C14 trials its
    // vulkan:0 ignores (above).
    let ignored_here = m
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().take(2))
        .filter(|c| c.as_ref().is_some_and(|c| c.verdict.short() != "ok"))
        .count();
    assert_eq!(
        matrix_table.matches("<td class=\"v ok\"").count(),
        2 * m.rows.len() - ignored_here + gpu_cells_ok(&m)
    );
}

fn gpu_cells_ok(m: &matrix::Matrix) -> usize {
    m.rows
        .iter()
        .flat_map(|r| r.cells[2..].iter())
        .filter(|c| c.as_ref().is_some_and(|c| c.verdict.short() == "ok"))
        .count()
}

#[test]
fn committed_reports_of_another_seam_version_are_refused() {
    let mut reports = load_all();
    reports[1].1.seam_version = "9.9.9".into();
    let err = merge::merge(&reports).unwrap_err().to_string();
    assert!(err.contains("cpu-ci.json is seam 0.1.0"), "{err}");
    assert!(err.contains("vulkan-lavapipe.json is seam 9.9.9"), "{err}");
}

/// A case that starts recording a digest must be listed in
/// `merge::digested_outputs`, or its digests would never be compared.
#[test]
fn every_case_that_records_a_digest_is_classified() {
    let plan = runner::plan(&Filter {
        backends: vec!["cpu".into()],
        ..Default::default()
    });
    let (report, _) = runner::run_all(&plan, RunOptions::default(), |_, _| {});
    let digesting: Vec<&str> = report
        .trials
        .iter()
        .filter(|t| t.digest.is_some())
        .map(|t| t.case.as_str())
        .collect();
    assert!(digesting.contains(&"c1_replay_reexecutes"), "{digesting:?}");
    for case in &digesting {
        assert_ne!(
            merge::comparison(case),
            Comparison::Unclassified,
            "{case} records a digest: list its outputs in merge::digested_outputs"
        );
    }
    // And the C1 cases are the bit-exact ones.
    assert_eq!(
        merge::comparison("c1_current_exec_reexecutes"),
        Comparison::BitExact
    );
}
