// The conformance suite, the fault sweep and seeded model sequences on the
// CPU reference device, run as this package's own tests.
//
// `core/tests/` and `backends/cpu/tests/` hold this same file (the CPU
// backend's copy is an `include!` of this one), so that mutation testing
// (`cargo xtask mutants`, which runs the mutated package's tests) judges
// the shared semantics and the reference backend by the cases.
//
// Mutations that turn it red: every named mutation of
// `cargo xtask mutations` (e.g. C1: replay a snapshot instead of
// re-executing), and the caught cargo-mutants mutants of
// docs/results/mutants.md (e.g. `replace Device::stop_recording with ()`,
// caught by the fault sweep).

/// Model sequences per run (CI's full 10,000 run in `seam-reliability`).
const MODEL_CASES: u32 = 300;

#[test]
fn conformance_suite_on_the_cpu_reference() {
    let passed = seam_conformance::runner::assert_reference_suite_passes();
    assert!(passed >= 78, "{passed} trials");
}

#[test]
fn fault_sweep_and_model_on_the_cpu_reference() {
    seam_reliability::assert_reference_checks_pass(MODEL_CASES);
}
