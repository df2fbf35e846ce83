//! The model and the fault sweep over every device `seam_backends::discover()`
//! finds (build with `--features portable` to include GPU backends).
//! Ignored by default: `cargo test -p seam-reliability --features
//! seam-backends/vulkan --test all_backends -- --ignored --nocapture`. `SEAM_MODEL_CASES` sets the
//! sequences per device and opening (default 500: opening a GPU device per sequence is slow).
//! A device `SEAM_REQUIRE_DEVICES` names that discovery does not find fails
//! both tests (CI runs the model here on lavapipe).

use seam_reliability::faults::sweep_all;
use seam_reliability::steps::Opening;
use seam_reliability::{check_against_model, PropConfig};

/// Every device `SEAM_REQUIRE_DEVICES` names was found: a lost device must
/// not pass by running nothing.
fn found_every_required_device(found: &seam_backends::Discovery) {
    for id in seam::testing::required_devices() {
        assert!(
            found.devices.iter().any(|d| d.id == id),
            "required device {id} not found (missing backends: {:?})",
            found
                .missing
                .iter()
                .map(|m| format!("{}: {}", m.backend, m.reason))
                .collect::<Vec<_>>()
        );
    }
}

fn cases() -> u32 {
    std::env::var("SEAM_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

#[test]
#[ignore = "opens every device found; run with --ignored"]
fn model_on_every_device() {
    let found = seam_backends::discover();
    found_every_required_device(&found);
    for m in &found.missing {
        eprintln!("missing {}: {}", m.backend, m.reason);
    }
    let mut failed = Vec::new();
    for slot in &found.devices {
        for opening in [Opening::Buffers, Opening::Graph] {
            let cfg = PropConfig {
                cases: cases(),
                max_len: 40,
                opening,
                seed: None,
            };
            match check_against_model(&*slot.open, &cfg) {
                Ok(r) => eprintln!(
                    "{} ({opening:?} opening): {} sequences, {} steps, {:.2?}: agrees with the model",
                    slot.id, r.cases, r.steps, r.elapsed
                ),
                Err(e) => {
                    eprintln!("{} ({opening:?} opening): DISAGREES\n{e}", slot.id);
                    failed.push(slot.id.clone());
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "devices disagreeing with the model: {failed:?}"
    );
}

#[test]
#[ignore = "opens every device found; run with --ignored"]
fn fault_sweep_on_every_device() {
    let found = seam_backends::discover();
    found_every_required_device(&found);
    let mut unknown = Vec::new();
    for slot in &found.devices {
        let reports = match sweep_all(&*slot.open) {
            Ok(r) => r,
            Err(e) => {
                unknown.push(format!("{}: {e}", slot.id));
                continue;
            }
        };
        for r in reports {
            eprintln!(
                "{}: {:32} k = 0..={:3}: {} surfaced, {} absorbed, {} failed",
                slot.id,
                r.workload,
                r.calls,
                r.surfaced,
                r.absorbed,
                r.failures.len()
            );
            for f in r.failures {
                eprintln!("  k={} {}: {}", f.k, f.call, f.problem);
                unknown.push(format!("{}: {f:?}", slot.id));
            }
        }
    }
    assert!(unknown.is_empty(), "unexpected failures: {unknown:#?}");
}
