//! # seam-reliability
//!
//! Checks that hold the seam's shared semantics to account on any backend:
//!
//! - [`machine`]: random sequences of `Device` calls (proptest) run against a
//!   reference [`model`]; same outcomes, same named errors, same contents, no
//!   leak once every handle is dropped.
//! - [`faulty`] and [`faults`]: a wrapper backend that fails the k-th call, and
//!   a sweep over every k of representative workloads: afterwards the device
//!   still works, no capture is left open, nothing leaks, and the error names
//!   the failed call.
//!
//! Both take a backend opener, so the same checks run on the CPU backend in
//! CI and on every device `seam_backends::discover()` finds.

pub mod faults;
pub mod faulty;
pub mod machine;
pub mod model;
pub mod steps;

use seam::{Backend, ErrorKind};

/// Opens a fresh backend (the shape of `seam_backends::Opener`).
pub type Opener = dyn Fn() -> Result<Box<dyn Backend>, ErrorKind> + Send + Sync;

pub use faulty::{FaultPlan, Faults, FaultyBackend};
pub use machine::{check_against_model, run_sequence, PropConfig, PropReport};

/// The fault sweep (every k of every workload) and `model_cases` seeded
/// model sequences on a CPU reference device (half of them opening with a
/// captured graph); panics with what went wrong.
///
/// `core` and `backends/cpu` run this (with the conformance suite) as their
/// own tests, so that `cargo xtask mutants` judges mutants of either package
/// by these checks too (the seed is fixed: a mutant is caught or not, the
/// same way on every run).
pub fn assert_reference_checks_pass(model_cases: u32) {
    let cpu =
        || -> Result<Box<dyn Backend>, ErrorKind> { Ok(Box::new(seam_cpu::CpuBackend::new(0))) };
    let reports = faults::sweep_all(&cpu).unwrap_or_else(|e| panic!("fault sweep on cpu:0: {e}"));
    assert!(
        reports.len() >= 5,
        "every fault workload runs on the CPU reference"
    );
    let failures: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.failures
                .iter()
                .map(move |f| format!("{} k={} {}: {}", r.workload, f.k, f.call, f.problem))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "fault sweep on cpu:0:\n{}",
        failures.join("\n")
    );
    // Half the sequences open with buffers, half with a captured graph
    // (where graph updates find something to change).
    for opening in [steps::Opening::Buffers, steps::Opening::Graph] {
        let cfg = PropConfig {
            cases: model_cases.div_ceil(2),
            max_len: 40,
            opening,
            seed: Some(0x5EA3_0001),
        };
        check_against_model(&cpu, &cfg)
            .unwrap_or_else(|e| panic!("model vs cpu:0 ({opening:?} opening): {e}"));
    }
}
