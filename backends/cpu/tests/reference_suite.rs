//! The same checks as core's (the conformance suite, the fault sweep and
//! seeded model sequences on cpu:0), so that `cargo xtask mutants` judges
//! mutants of the CPU reference by them. Mutation that turns it red:
//! `replace + with - in worker` (backends/cpu/src/lib.rs, the queue's
//! offset arithmetic), caught in docs/results/mutants.md.
include!("../../../core/tests/reference_suite.rs");
