//! The state machine vs the model on the CPU backend: what CI runs.
//!
//! 10,000 sequences of up to 40 steps, split over four tests so libtest runs
//! them in parallel (CI has two cores and runs the test profile); two of
//! them open every sequence with a captured graph, so graph updates (C13)
//! find one to change. Set
//! `SEAM_MODEL_CASES` to change the count per test, `PROPTEST_RNG_SEED` to
//! replay a failure.

use seam::{Backend, ErrorKind};
use seam_cpu::CpuBackend;
use seam_reliability::steps::Opening;
use seam_reliability::{check_against_model, PropConfig};

fn cpu() -> Result<Box<dyn Backend>, ErrorKind> {
    Ok(Box::new(CpuBackend::new(0)))
}

/// Sequences per test (four tests: 10,000 in all).
const CASES: u32 = 2500;

/// Outcomes every full-size run must reach.
const KEYS: [&str; 9] = [
    "launch: Ok",
    "replay: Ok",
    "end_capture_into_current: Ok",
    "end_capture_graph: Ok",
    "free: BufferInUse",
    "launch: CrossThreadCapture",
    "alloc: AllocInCapture",
    "replay: UnknownGraph",
    "destroy_graph: Ok",
];

/// Outcomes every full-size run that opens with a graph must reach too.
const UPDATE_KEYS: [&str; 4] = [
    "update: Ok",
    "update: NotUsedByGraph",
    "update: UpdateChangesOp",
    "update: OutOfRange",
];

fn run(part: u32, opening: Opening) {
    let cases = std::env::var("SEAM_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);
    let cfg = PropConfig {
        cases,
        max_len: 40,
        opening,
        seed: None,
    };
    let r = check_against_model(&cpu, &cfg).unwrap_or_else(|e| panic!("part {part}: {e}"));
    eprintln!(
        "part {part}: {} sequences, {} steps, {:.2?} (seed {})",
        r.cases, r.steps, r.elapsed, r.seed
    );
    for (k, n) in
        (r.coverage.iter()).filter(|(k, _)| k.starts_with("update") || k.contains("conditional"))
    {
        eprintln!("part {part}: {k}: {n}");
    }
    // The sequences must reach the interesting states, not just bounce off
    // errors (checked on full-size runs; a handful of cases under Miri may miss some).
    let keys: Vec<&str> = match opening {
        _ if r.cases < 1000 => Vec::new(),
        Opening::Buffers => KEYS.to_vec(),
        Opening::Graph => KEYS.iter().chain(&UPDATE_KEYS).copied().collect(),
    };
    for key in keys {
        let n = r.coverage.get(key).copied().unwrap_or(0);
        assert!(
            n * 500 >= u64::from(r.cases),
            "part {part}: `{key}` happened {n} times in {} sequences: the generator drifted",
            r.cases
        );
    }
}

#[test]
fn model_vs_cpu_part_1() {
    run(1, Opening::Buffers);
}

#[test]
fn model_vs_cpu_part_2() {
    run(2, Opening::Buffers);
}

#[test]
fn model_vs_cpu_part_3() {
    run(3, Opening::Graph);
}

#[test]
fn model_vs_cpu_part_4() {
    run(4, Opening::Graph);
}
