//! The suite as a library: every case as libtest trials on the devices of
//! the backends you name, from your own crate's `cargo test`.
//!
//! A crate that implements `seam::Backend` certifies it with a test target
//! `tests/conformance.rs` (`harness = false` in its Cargo.toml):
//!
//! ```no_run
//! # mod my_backend {
//! #     pub const REGISTRATION: seam::Registration =
//! #         seam::Registration::new("mine", None, || Ok(1), |i| {
//! #             Ok(Box::new(seam_backends::CpuBackend::new(i)))
//! #         });
//! # }
//! fn main() {
//!     seam_conformance::harness::certify(&[&my_backend::REGISTRATION]);
//! }
//! ```
//!
//! Trials are named `<device>::<case>[::<mode>]` and mapped through the
//! registration's declarations exactly as for seam's own backends (ignored
//! with a reason where a device is missing or a case is unsupported,
//! expected failures must fail). With `SEAM_CONFORMANCE_REPORT=<dir>` the
//! run also writes `report.json`, `report.xml` (JUnit) and `report.md` (the
//! matrix) there, the same reports `cargo xtask conformance` writes.

use crate::report::{Report, Summary, TrialRecord, Verdict};
use crate::runner::{self, Filter, Plan};
use crate::{junit, matrix, merge};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use seam_backends::Discovery;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Certify these backends: run every case on every device they find, as
/// libtest trials, and exit with libtest's status.
pub fn certify(registrations: &[&'static seam::Registration]) -> ! {
    run(seam_backends::discover_in(registrations))
}

/// Certify these backends and these user kernels: every case as
/// [`certify`] runs them, plus the user-kernel cases (C1, C2, C4, C11,
/// C12 over each kernel: `<device>::<case>::<kernel>`), so an engine
/// certifies its own ops on its own backends. Pass `seam_backends`'
/// registrations to certify kernels on seam's backends:
///
/// ```no_run
/// # static MY_KERNELS: &[&seam::KernelDef] = &[];
/// fn main() {
///     seam_conformance::harness::certify_with(&seam_backends::registrations(), MY_KERNELS);
/// }
/// ```
pub fn certify_with(
    registrations: &[&'static seam::Registration],
    kernels: &'static [&'static seam::KernelDef],
) -> ! {
    crate::set_kernels(kernels);
    run(seam_backends::discover_in(registrations))
}

/// Run every case on every device of `found`, as libtest trials, and exit.
/// seam's own `cargo test` calls this with `seam_backends::discover()`.
pub fn run(found: Discovery) -> ! {
    crate::report::mark_started();
    let (rest, filters) = seam::testing::split_filters(std::env::args());
    let mut args = Arguments::from_iter(rest);
    let plan = runner::plan_in(&Filter::default(), found);
    if let Some(why) = plan.refusal() {
        eprintln!("{why}");
        std::process::exit(2);
    }
    let records: Arc<Mutex<Vec<TrialRecord>>> = Arc::default();
    let trials = plan
        .trials
        .iter()
        .cloned()
        .map(|t| {
            let kind = t.case.rule.to_string();
            let records = records.clone();
            Trial::ignorable_test(t.name.clone(), move || {
                let out = runner::run(&t);
                let verdict = out.verdict.clone();
                lock(&records).push(runner::record(&t, out));
                libtest_verdict(verdict)
            })
            .with_kind(kind)
        })
        .collect::<Vec<Trial>>();
    // libtest-mimic takes one filter; with more, the trials are chosen
    // here (its `--skip` still applies).
    let (one, trials) = seam::testing::apply_filters(&filters, args.exact, trials, Trial::name);
    args.filter = one;
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(dir) = std::env::var_os("SEAM_CONFORMANCE_REPORT") {
        let records = std::mem::take(&mut *lock(&records));
        if let Err(e) = write_reports(Path::new(&dir), &plan, records) {
            eprintln!("error: SEAM_CONFORMANCE_REPORT: {e}");
            std::process::exit(101);
        }
    }
    conclusion.exit()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How libtest shows a verdict: passes pass, ignored and expected failures
/// are ignored with their reason, everything else fails with its message.
pub fn libtest_verdict(verdict: Verdict) -> Result<Completion, Failed> {
    match verdict {
        Verdict::Passed => Ok(Completion::Completed),
        Verdict::ExpectedFailure(reason) => Ok(Completion::ignored_with(format!(
            "expected failure: {reason}"
        ))),
        Verdict::Ignored(reason) => Ok(Completion::ignored_with(reason)),
        Verdict::Failed(m)
        | Verdict::UnexpectedPass(m)
        | Verdict::TimedOut(m)
        | Verdict::Crashed(m)
        | Verdict::TeardownHang(m) => Err(Failed::from(m)),
    }
}

/// Write `report.json`, `report.xml` and `report.md` for the trials that
/// ran (libtest may have filtered some out), in plan order.
fn write_reports(dir: &Path, plan: &Plan, mut records: Vec<TrialRecord>) -> Result<(), String> {
    let order: std::collections::HashMap<&str, usize> = plan
        .trials
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    records.sort_by_key(|r| order.get(r.name.as_str()).copied().unwrap_or(usize::MAX));
    let mut summary = Summary::default();
    for r in &records {
        summary.add(&r.verdict);
    }
    // No `planned` counts: libtest's own filter decides which of the plan's
    // trials run, and every one that ran is here (one process, no child to
    // lose them).
    let report = Report::new(plan.devices.clone(), plan.missing.clone(), records, summary);
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    let md = merge::merge(&[("this run".into(), report.clone())])
        .map(|m| matrix::markdown(&m))
        .map_err(|e| e.to_string())?;
    for (name, text) in [
        ("report.json", json),
        ("report.xml", junit::junit(&report)),
        ("report.md", md),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    eprintln!("{} ({})", report.summary.line(), dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SEAM_CONFORMANCE_REPORT`'s three files, with the trials that ran in
    /// plan order whatever order they finished in.
    #[test]
    fn the_reports_hold_the_trials_that_ran_in_plan_order() {
        let plan = runner::plan(&Filter {
            backends: vec!["cpu".into()],
            cases: vec![
                "c1_replay_reexecutes".into(),
                "c6_nested_begin_refused".into(),
            ],
            devices: vec![],
        });
        assert_eq!(plan.trials.len(), 2);
        let mut records: Vec<TrialRecord> = plan
            .trials
            .iter()
            .map(|t| runner::record(t, runner::run(t)))
            .collect();
        records.reverse();
        let dir = std::env::temp_dir().join(format!("seam-harness-reports-{}", std::process::id()));
        write_reports(&dir, &plan, records).unwrap();
        let report =
            Report::parse(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
        let names: Vec<&str> = report.trials.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "cpu:0::c1_replay_reexecutes",
                "cpu:0::c6_nested_begin_refused"
            ]
        );
        assert_eq!(report.summary.passed, 2);
        for f in ["report.xml", "report.md"] {
            let text = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(text.contains("c6_nested_begin_refused"), "{f}: {text}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
