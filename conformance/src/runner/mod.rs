//! Expands cases × devices × modes into trials, and runs one trial with a
//! deadline, mapping its outcome through the expectations to a verdict.

use crate::report::{DeviceRecord, MissingRecord, Report, Summary, TrialRecord, Verdict};
use crate::{Case, Ctx, Mode, Tag};
use seam_backends::{discover, DeviceSlot, Discovery};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which trials to plan.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these backends (`cpu`, `cuda`, …); empty = all.
    pub backends: Vec<String>,
    /// Only cases whose name contains one of these; empty = all.
    pub cases: Vec<String>,
    /// Only these device ids (`cuda:1`); empty = all. Missing backends are
    /// planned only when this is empty.
    pub devices: Vec<String>,
}

impl Filter {
    fn backend(&self, b: &str) -> bool {
        self.backends.is_empty() || self.backends.iter().any(|x| x == b)
    }
    fn case(&self, c: &str) -> bool {
        self.cases.is_empty() || self.cases.iter().any(|x| c.contains(x.as_str()))
    }
}

/// Where a trial runs.
#[derive(Clone)]
pub enum Target {
    Device(Arc<DeviceSlot>),
    /// The backend is compiled in (or known) but has no device here; a
    /// `required` device (`SEAM_REQUIRE_DEVICES`) fails its trials.
    Missing {
        backend: &'static str,
        reason: String,
        required: bool,
    },
}

/// One trial: a case on a device in a mode.
#[derive(Clone)]
pub struct Trial {
    pub name: String,
    pub device: String,
    pub backend: &'static str,
    pub case: &'static Case,
    pub mode: Mode,
    pub target: Target,
    /// The user kernel of a per-kernel case (`cases::KERNEL_CASES`).
    pub kernel: Option<&'static seam::KernelDef>,
}

/// The plan: trials plus what discovery saw.
pub struct Plan {
    pub trials: Vec<Trial>,
    pub devices: Vec<DeviceRecord>,
    pub missing: Vec<MissingRecord>,
    /// What in the filter selects nothing (a backend no build knows, a case
    /// name no case contains, a device of a backend the filter leaves out,
    /// a filter that plans no trial): a run of such a plan would pass
    /// while checking less than asked, so the binary refuses it.
    pub problems: Vec<String>,
    /// Every device discovery found and every backend it found missing
    /// (`backend: reason`), whatever the filter selected: what a device
    /// the filter names and discovery did not find is told.
    pub discovered: (Vec<String>, Vec<String>),
}

impl Plan {
    /// What refuses this plan, a line per problem (`seam-conformance:
    /// <problem>`), or `None` where it can run.
    pub fn refusal(&self) -> Option<String> {
        if self.problems.is_empty() {
            return None;
        }
        let lines: Vec<String> = (self.problems.iter())
            .map(|p| format!("seam-conformance: {p}"))
            .collect();
        Some(lines.join("\n"))
    }

    /// Why device `id` cannot run its trials in this process: discovery did
    /// not find it, or it failed to open. `None` when it opened.
    pub fn unavailable(&self, id: &str) -> Option<String> {
        match self.devices.iter().find(|d| d.id == id) {
            Some(d) => d
                .open_error
                .as_ref()
                .map(|e| format!("device {id} failed to open: {e}")),
            None => {
                let (found, missing) = &self.discovered;
                Some(format!(
                    "discovery found no device {id} (devices: [{}]; missing backends: [{}])",
                    found.join(", "),
                    missing.join("; ")
                ))
            }
        }
    }
}

/// Discover the in-tree backends' devices and expand every case onto every
/// device (and every missing backend, as ignored trials).
pub fn plan(filter: &Filter) -> Plan {
    plan_in(filter, discover())
}

/// [`plan`] over what a discovery found: the in-tree backends
/// (`seam_backends::discover`) or any others
/// (`seam_backends::discover_in(&[&MY_BACKEND])`).
pub fn plan_in(filter: &Filter, found: Discovery) -> Plan {
    plan_requiring(filter, found, &seam::testing::required_devices())
}

/// [`plan_in`] with `required` as the devices `SEAM_REQUIRE_DEVICES` names.
fn plan_requiring(filter: &Filter, found: Discovery, required: &[String]) -> Plan {
    let known: Vec<&'static str> = (found.devices.iter().map(|s| s.backend))
        .chain(found.missing.iter().map(|m| m.backend))
        .collect();
    let discovered = (
        found.devices.iter().map(|s| s.id.clone()).collect(),
        (found.missing.iter())
            .map(|m| format!("{}: {}", m.backend, m.reason))
            .collect(),
    );
    let mut trials = Vec::new();
    let mut devices = Vec::new();
    let cases = planned_cases(filter);
    for slot in found
        .devices
        .into_iter()
        .filter(|s| filter.backend(s.backend))
        .filter(|s| filter.devices.is_empty() || filter.devices.contains(&s.id))
    {
        // Open once to describe the device; each trial opens its own.
        match slot.device() {
            Ok(dev) => devices.push(DeviceRecord {
                id: slot.id.clone(),
                backend: slot.backend.into(),
                name: dev.info().name.clone(),
                driver: dev.info().driver.clone(),
                capture_support: dev.capture_support().clone(),
                subnormals: Some(dev.subnormals().clone()),
                update_support: Some(dev.update_support()),
                node_timing: Some(dev.node_timing()),
                conditional_support: Some(dev.conditional_support()),
                open_error: None,
            }),
            Err(e) => devices.push(DeviceRecord {
                id: slot.id.clone(),
                backend: slot.backend.into(),
                name: format!("<failed to open: {e}>"),
                driver: String::new(),
                capture_support: seam::CaptureSupport::Unsupported("device failed to open".into()),
                subnormals: None,
                update_support: None,
                node_timing: None,
                conditional_support: None,
                open_error: Some(e.to_string()),
            }),
        }
        let slot = Arc::new(slot);
        for &(case, kernel) in &cases {
            for &mode in case.modes {
                trials.push(Trial {
                    name: trial_name(&slot.id, case, kernel, mode),
                    device: slot.id.clone(),
                    backend: slot.backend,
                    case,
                    mode,
                    target: Target::Device(slot.clone()),
                    kernel,
                });
            }
        }
    }
    let mut missing = Vec::new();
    for m in found
        .missing
        .into_iter()
        .filter(|m| filter.backend(m.backend) && filter.devices.is_empty())
    {
        missing.push(MissingRecord {
            backend: m.backend.into(),
            reason: m.reason.clone(),
        });
        let device = format!("{}:none", m.backend);
        for &(case, kernel) in &cases {
            for &mode in case.modes {
                trials.push(Trial {
                    name: trial_name(&device, case, kernel, mode),
                    device: device.clone(),
                    backend: m.backend,
                    case,
                    mode,
                    target: Target::Missing {
                        backend: m.backend,
                        reason: m.reason.clone(),
                        required: false,
                    },
                    kernel,
                });
            }
        }
    }
    let mut plan = Plan {
        trials,
        devices,
        missing,
        problems: Vec::new(),
        discovered,
    };
    plan.problems = problems(filter, &known);
    absent(&mut plan, filter, &cases, &known, required);
    if plan.trials.is_empty() && plan.problems.is_empty() {
        plan.problems.push("the selection plans no trial".into());
    }
    plan
}

/// What in `filter` names nothing `known` (the backends discovery knows) and
/// the suite's cases hold.
fn problems(filter: &Filter, known: &[&'static str]) -> Vec<String> {
    let mut names: Vec<&str> = known.to_vec();
    names.dedup();
    let mut out = Vec::new();
    for b in &filter.backends {
        if !names.contains(&b.as_str()) {
            out.push(format!(
                "--backend {b}: no such backend (known: {})",
                names.join(", ")
            ));
        }
    }
    for c in &filter.cases {
        let all = crate::cases::ALL.iter().chain(crate::cases::KERNEL_CASES);
        if !all.clone().any(|case| case.name.contains(c.as_str())) {
            out.push(format!("--case {c}: no case name contains it"));
        }
    }
    for id in &filter.devices {
        let backend = id.split(':').next().unwrap_or(id);
        if !names.contains(&backend) {
            out.push(format!(
                "--device {id}: no such backend {backend:?} (known: {})",
                names.join(", ")
            ));
        } else if !filter.backend(backend) {
            out.push(format!(
                "--device {id}: its backend is not among --backend {}",
                filter.backends.join(",")
            ));
        }
    }
    out
}

/// A case and, for a per-kernel case, its user kernel.
type Planned = (&'static Case, Option<&'static seam::KernelDef>);

/// The cases `filter` selects: every case once, then every per-kernel
/// case once per user kernel.
fn planned_cases(filter: &Filter) -> Vec<Planned> {
    crate::cases::ALL
        .iter()
        .map(|c| (c, None))
        .chain(
            crate::cases::KERNEL_CASES
                .iter()
                .flat_map(|c| crate::kernels().iter().map(move |k| (c, Some(*k)))),
        )
        .filter(|(c, _)| filter.case(c.name))
        .collect()
}

/// Trials of the devices the filter names (`--device`) or `required`
/// names (`SEAM_REQUIRE_DEVICES`, where the filter selects it) that
/// discovery did not find, named as the device's own would be: failing
/// for a required device, ignored with the reason for any other. (One that
/// failed to open fails its trials already.)
fn absent(
    plan: &mut Plan,
    filter: &Filter,
    cases: &[Planned],
    known: &[&'static str],
    required: &[String],
) {
    let selected = required
        .iter()
        .filter(|id| filter.devices.is_empty() || filter.devices.contains(id));
    let mut ids: Vec<&String> = Vec::new();
    for id in filter.devices.iter().chain(selected) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    for id in ids {
        let backend_name = id.split(':').next().unwrap_or(id);
        // A device discovery found has its trials (failing, where it did
        // not open).
        if !filter.backend(backend_name) || plan.trials.iter().any(|t| &t.device == id) {
            continue;
        }
        let reason = plan.unavailable(id).unwrap_or_default();
        // Trials name their backend statically: discovery's name where it
        // knows the backend, else the id's (leaked once per run).
        let backend: &'static str = known
            .iter()
            .copied()
            .find(|n| *n == backend_name)
            .unwrap_or_else(|| Box::leak(backend_name.to_string().into_boxed_str()));
        let required = required.contains(id);
        for &(case, kernel) in cases {
            for &mode in case.modes {
                plan.trials.push(Trial {
                    name: trial_name(id, case, kernel, mode),
                    device: id.clone(),
                    backend,
                    case,
                    mode,
                    target: Target::Missing {
                        backend,
                        reason: reason.clone(),
                        required,
                    },
                    kernel,
                });
            }
        }
    }
}

fn trial_name(
    device: &str,
    case: &Case,
    kernel: Option<&'static seam::KernelDef>,
    mode: Mode,
) -> String {
    let mut name = format!("{device}::{}", case.name);
    if let Some(k) = kernel {
        name = format!("{name}::{}", k.name);
    }
    if case.modes.len() > 1 {
        name = format!("{name}::{mode}");
    }
    name
}

/// Deadline for one trial (`SEAM_CASE_DEADLINE_S`, default 120 s): a hung
/// case becomes a `TimedOut` verdict instead of a hung run.
pub fn deadline() -> Duration {
    std::env::var("SEAM_CASE_DEADLINE_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(120))
}

/// Result of running one trial.
pub struct Outcome {
    pub verdict: Verdict,
    pub duration: Duration,
    pub digest: Option<u64>,
    /// The trial device's trace, when tracing was asked for.
    pub trace: Option<seam::TraceLog>,
}

/// How to run trials.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// Record every launch, capture and replay of each trial (with device
    /// spans where the backend can time the device).
    pub trace: bool,
}

/// Run one trial to a verdict. Never panics and never blocks past the deadline.
pub fn run(trial: &Trial) -> Outcome {
    run_with(trial, RunOptions::default())
}

/// [`run`], with options.
pub fn run_with(trial: &Trial, opts: RunOptions) -> Outcome {
    let start = Instant::now();
    let slot = match &trial.target {
        Target::Missing {
            backend,
            reason,
            required,
        } => {
            let verdict = if *required {
                Verdict::Failed(format!(
                    "{} requires {}, but {reason}",
                    seam::testing::REQUIRE_ENV,
                    trial.device
                ))
            } else {
                Verdict::Ignored(format!("no {backend} device: {reason}"))
            };
            return Outcome {
                verdict,
                duration: start.elapsed(),
                digest: None,
                trace: None,
            };
        }
        Target::Device(slot) => slot.clone(),
    };
    let registration = slot.registration;
    if let Some(e) = registration.unsupported_case(trial.case.name) {
        return Outcome {
            verdict: Verdict::Ignored(format!("unsupported on {}: {}", trial.backend, e.reason)),
            duration: start.elapsed(),
            digest: None,
            trace: None,
        };
    }
    let (tx, rx) = mpsc::channel();
    let case = trial.case;
    let mode = trial.mode;
    let kernel = trial.kernel;
    let label = trial.name.clone();
    let worker = std::thread::Builder::new()
        .name(trial.name.clone())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let dev = slot.device().map_err(|e| e.to_string())?;
                // A user kernel's every eager launch held to its declared
                // extents (a kernel writing elsewhere fails by name).
                dev.set_checked(kernel.is_some());
                let needs_capture = (mode == Mode::Captured).then_some(Tag::NeedsCapture);
                for tag in case.tags.iter().copied().chain(needs_capture) {
                    if let Some(why) = tag.unmet(registration, &dev) {
                        return Ok((Some(why), None, None));
                    }
                }
                if let Some(k) = kernel {
                    // Registration compiles the kernel for the device: a
                    // source the backend lacks is a reason to ignore the
                    // trial, a source that fails to compile a failure.
                    match dev.register_kernel(k) {
                        Err(e) if matches!(e.kind, seam::ErrorKind::KernelSourceMissing { .. }) => {
                            return Ok((Some(e.to_string()), None, None));
                        }
                        Err(e) => return Err(format!("register_kernel: {e}")),
                        Ok(()) => {}
                    }
                }
                if opts.trace {
                    dev.set_tracing(true);
                }
                let mut ctx = Ctx::new(dev, registration, mode);
                ctx.kernel = kernel;
                (case.body)(&ctx).map_err(|f| f.0)?;
                let trace = if opts.trace {
                    ctx.dev.take_trace_log(&label).ok()
                } else {
                    None
                };
                Ok((None, ctx.digest(), trace))
            }));
            let r = match result {
                Ok(r) => r,
                Err(p) => Err(format!(
                    "panicked: {}",
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                )),
            };
            let _ = tx.send(r);
        });
    if let Err(e) = worker {
        return Outcome {
            verdict: Verdict::Failed(format!("could not start the trial thread: {e}")),
            duration: start.elapsed(),
            digest: None,
            trace: None,
        };
    }
    let limit = deadline();
    let (raw, digest, trace) = match rx.recv_timeout(limit) {
        Ok(Ok((Some(ignored), _, _))) => (Verdict::Ignored(ignored), None, None),
        Ok(Ok((None, digest, trace))) => (Verdict::Passed, digest, trace),
        Ok(Err(msg)) => (Verdict::Failed(msg), None, None),
        Err(_) => {
            // The thread is abandoned; the process exits at the end of the run.
            return Outcome {
                verdict: Verdict::TimedOut(format!("no result within {limit:?}")),
                duration: start.elapsed(),
                digest: None,
                trace: None,
            };
        }
    };
    let verdict = match (registration.expected_failure(trial.case.name), raw) {
        (Some(e), Verdict::Failed(msg)) => Verdict::ExpectedFailure(format!("{}: {msg}", e.reason)),
        (Some(e), Verdict::Passed) => Verdict::UnexpectedPass(format!(
            "listed as an expected failure ({}), but passed: remove it from the backend's registration",
            e.reason
        )),
        (_, v) => v,
    };
    Outcome {
        verdict,
        duration: start.elapsed(),
        digest,
        trace,
    }
}

/// Run every planned trial in order and build the report (and the traces,
/// when asked for).
pub fn run_all(
    plan: &Plan,
    opts: RunOptions,
    progress: impl FnMut(&Trial, &Outcome),
) -> (Report, Vec<seam::TraceLog>) {
    run_all_observed(plan, opts, |_| {}, progress)
}

/// The whole suite on the CPU reference device, in this process; panics
/// with the names of the trials that did not pass, else returns how many
/// passed (every planned trial).
///
/// This is the test that `core` and `backends/cpu` run against themselves
/// (their `tests/reference_suite.rs`), so that mutation testing of either
/// package (`cargo xtask mutants`) is judged by the conformance cases.
pub fn assert_reference_suite_passes() -> usize {
    let plan = plan(&Filter {
        backends: vec!["cpu".into()],
        ..Default::default()
    });
    assert!(
        !plan.trials.is_empty(),
        "no trials planned for the CPU reference backend: {:?}",
        plan.missing
    );
    let (report, _) = run_all(&plan, RunOptions::default(), |_, _| {});
    let bad: Vec<String> = report
        .trials
        .iter()
        .filter(|t| !matches!(t.verdict, Verdict::Passed))
        .map(|t| format!("{}: {:?}", t.name, t.verdict))
        .collect();
    assert!(
        bad.is_empty(),
        "{} trial(s) did not pass on cpu:0:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert_eq!(report.summary.passed, plan.trials.len());
    report.summary.passed
}

/// [`run_all`], calling `started` before each trial.
pub fn run_all_observed(
    plan: &Plan,
    opts: RunOptions,
    mut started: impl FnMut(&Trial),
    mut progress: impl FnMut(&Trial, &Outcome),
) -> (Report, Vec<seam::TraceLog>) {
    let mut records = Vec::new();
    let mut traces = Vec::new();
    let mut summary = Summary::default();
    // An isolated child streams each verdict, so a crash loses none of them.
    let mut stream = crate::isolate::VerdictStream::from_env();
    for trial in &plan.trials {
        stream.started(&trial.name);
        started(trial);
        let mut out = run_with(trial, opts);
        let logs: Vec<seam::TraceLog> = out.trace.take().into_iter().collect();
        progress(trial, &out);
        summary.add(&out.verdict);
        let record = record(trial, out);
        stream.finished(&record);
        stream.traced(&logs);
        traces.extend(logs);
        records.push(record);
    }
    let report = Report::new(plan.devices.clone(), plan.missing.clone(), records, summary)
        .planned(plan.trials.iter().map(|t| t.device.as_str()));
    (report, traces)
}

/// The report's record of one trial's outcome.
pub fn record(trial: &Trial, out: Outcome) -> TrialRecord {
    TrialRecord {
        name: trial.name.clone(),
        device: trial.device.clone(),
        case: trial.case.name.into(),
        rule: trial.case.rule.to_string(),
        mode: trial.mode.to_string(),
        verdict: out.verdict,
        duration_ms: out.duration.as_secs_f64() * 1e3,
        digest: out.digest.map(|d| format!("{d:016x}")),
    }
}

#[cfg(test)]
mod tests;
