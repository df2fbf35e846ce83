//! The decode example's check on every device found (cpu:0 always; the
//! GPU backends and lavapipe where present), and what the check itself
//! must catch.

use seam::Device;
use seam_example_decode::check::{check_kv, compare};
use seam_example_decode::step::{kv_initial, KV_WRITE};
use seam_example_decode::{check_device, Config, DecodeStep, Outcome, Weights, STEP_TOLERANCE};

fn cpu() -> Device {
    Device::new(Box::new(seam_backends::CpuBackend::new(0)))
}

/// Eight steps on cpu:0, captured once and updated, agree with the eager
/// reference; every other device agrees or says why it cannot run them.
#[test]
fn decode_agrees_on_every_device() {
    let cfg = Config::DEFAULT;
    let found = seam_backends::discover();
    assert!(found.devices.iter().any(|s| s.id == "cpu:0"));
    let mut failures = Vec::new();
    for slot in &found.devices {
        let outcome = match slot.device() {
            Ok(dev) => check_device(&dev, cfg, 8),
            Err(e) => Outcome::Skipped(format!("does not open: {e}")),
        };
        eprintln!("decode on {}: {}", slot.id, outcome.describe());
        match (&outcome, slot.id.as_str()) {
            (Outcome::Agreed { updates, .. }, _) => {
                // Steps 1..8 each move 7 launches (two RoPEs, the KV write,
                // four attention sizes).
                assert_eq!(*updates, 7 * 7, "{}", slot.id);
            }
            (_, "cpu:0") => failures.push(format!("cpu:0: {}", outcome.describe())),
            (Outcome::Failed(_), id) => failures.push(format!("{id}: {}", outcome.describe())),
            (Outcome::Skipped(_), _) => {}
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Every step fills the cache to the last slot; the next is refused.
#[test]
fn a_full_cache_refuses_the_next_step() {
    let cfg = Config {
        max_pos: 3,
        ..Config::DEFAULT
    };
    assert!(matches!(
        check_device(&cpu(), cfg, 3),
        Outcome::Agreed { steps: 3, .. }
    ));
    let dev = cpu();
    let mut s = DecodeStep::new(&dev, cfg, &Weights::new(&cfg, 1)).unwrap();
    let x = vec![0.5; cfg.dim() as usize];
    for _ in 0..3 {
        s.replay(&x).unwrap();
    }
    let e = s.replay(&x).unwrap_err();
    assert!(e.to_string().contains("KV cache holds 3 slots"), "{e}");
}

/// Replayed steps equal eager ones bit for bit on the CPU, and each writes
/// its own slot: step `p`'s key is in slot `p`, slot `p + 1` still holds
/// the initial pattern.
#[test]
fn each_step_writes_its_own_slot() {
    let cfg = Config::DEFAULT;
    let w = Weights::new(&cfg, 7);
    let (a, b) = (cpu(), cpu());
    let mut eager = DecodeStep::new(&a, cfg, &w).unwrap();
    let mut replayed = DecodeStep::new(&b, cfg, &w).unwrap();
    let dim = cfg.dim() as usize;
    let initial = kv_initial(&cfg);
    for step in 0..4u32 {
        let x = seam_example_decode::step::input(&cfg, step);
        let e = eager.eager(&x).unwrap();
        let r = replayed.replay(&x).unwrap();
        assert_eq!(e, r, "step {step}");
        let kv = replayed.kv_cache().unwrap();
        assert_eq!(kv, eager.kv_cache().unwrap(), "step {step}");
        let p = step as usize;
        assert_ne!(
            kv[p * dim..][..dim],
            initial[p * dim..][..dim],
            "step {step}"
        );
        assert_eq!(kv[(p + 1) * dim..], initial[(p + 1) * dim..], "step {step}");
    }
    assert_eq!(replayed.launches(0).len(), 12);
    assert!(replayed.launches(3)[KV_WRITE].buffers[1].offset == 3 * dim);
}

/// The check catches a write outside the written slots (even one the
/// reference also made), a wrong slot and a shifted one.
#[test]
fn the_kv_check_catches_stray_and_wrong_writes() {
    let cfg = Config::DEFAULT;
    let dim = cfg.dim() as usize;
    let want = {
        let mut kv = kv_initial(&cfg);
        kv[..2 * dim].iter_mut().for_each(|v| *v = 0.25);
        kv
    };
    assert_eq!(check_kv(&cfg, 2, &want, &want), Ok(0.0));
    let mut stray = want.clone();
    stray[2 * dim + 5] = 0.0;
    assert!(check_kv(&cfg, 2, &stray, &want).is_err());
    assert!(check_kv(&cfg, 2, &stray, &stray).is_err());
    let mut wrong = want.clone();
    wrong[dim + 1] = 0.5;
    assert!(check_kv(&cfg, 2, &wrong, &want).is_err());
    assert!(compare(&[1.0, 2.0], &[1.0, 2.0005], STEP_TOLERANCE, "x").is_ok());
    assert!(compare(&[1.0, 2.0], &[1.0, 2.1], STEP_TOLERANCE, "x").is_err());
    assert!(compare(&[f32::NAN], &[1.0], STEP_TOLERANCE, "x").is_err());
}
