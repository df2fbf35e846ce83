//! Backend differences, as data with reasons (IREE CTS style). A case is
//! never forked per backend; a backend that cannot pass one says so here.
//!
//! - `UNSUPPORTED`: permanent; the trial is ignored with the reason.
//! - `EXPECTED_FAILURES`: temporary; the trial must fail. An expected failure
//!   that passes fails the run ("unexpected pass"), so stale entries get removed.

/// One entry: which backend, which case (exact name), and why.
#[derive(Clone, Copy, Debug)]
pub struct Expectation {
    pub backend: &'static str,
    pub case: &'static str,
    pub reason: &'static str,
}

/// The capture support each backend declares (C9). A device whose report
/// differs fails `c9_report_matches_behaviour`: a backend that silently
/// regresses to `Unsupported` would otherwise turn every capture case into
/// an ignored trial instead of a failure.
pub const DECLARED_CAPTURE: &[(&str, &str)] = &[
    ("cpu", "native"),
    ("cuda", "native"),
    ("hip", "native"),
    ("vulkan", "native"),
    ("metal", "native or emulated"),
    ("wgpu", "emulated"),
];

/// What `backend` declares, if it is listed.
pub fn declared_capture(backend: &str) -> Option<&'static str> {
    DECLARED_CAPTURE
        .iter()
        .find(|(b, _)| *b == backend)
        .map(|(_, d)| *d)
}

pub const UNSUPPORTED: &[Expectation] = &[];

pub const EXPECTED_FAILURES: &[Expectation] = &[];

fn find(list: &'static [Expectation], backend: &str, case: &str) -> Option<&'static Expectation> {
    list.iter().find(|e| e.backend == backend && e.case == case)
}

pub fn unsupported(backend: &str, case: &str) -> Option<&'static Expectation> {
    find(UNSUPPORTED, backend, case)
}

pub fn expected_failure(backend: &str, case: &str) -> Option<&'static Expectation> {
    find(EXPECTED_FAILURES, backend, case)
}
