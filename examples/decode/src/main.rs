//! `cargo run -p seam-example-decode --release [-- STEPS]`: the decode step
//! on every device found, captured once and updated each step, against the
//! same steps run eagerly on the CPU reference. One line per device; exits
//! non-zero if any device that ran disagrees.

use seam_example_decode::{check_device, Config, Outcome};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cfg = Config::DEFAULT;
    let steps = match std::env::args().nth(1).map(|s| s.parse::<u32>()) {
        None => 8,
        Some(Ok(n)) if (1..=cfg.max_pos).contains(&n) => n,
        Some(_) => {
            eprintln!("usage: decode [STEPS] (1 to {})", cfg.max_pos);
            return ExitCode::from(2);
        }
    };
    println!(
        "decode: {} heads × {}, {} KV slots, {steps} steps",
        cfg.heads, cfg.head_dim, cfg.max_pos
    );
    let found = seam_backends::discover();
    for m in &found.missing {
        println!("decode on {}: skipped: {}", m.backend, m.reason);
    }
    let (mut ok, mut failed) = (0, 0);
    for slot in &found.devices {
        let outcome = match slot.device() {
            Ok(dev) => check_device(&dev, cfg, steps),
            Err(e) => Outcome::Skipped(format!("does not open: {e}")),
        };
        println!("decode on {}: {}", slot.id, outcome.describe());
        match &outcome {
            Outcome::Agreed { .. } => ok += 1,
            Outcome::Failed(why) => {
                failed += 1;
                if why.contains('\n') {
                    eprintln!("{}: in full:\n{why}", slot.id);
                }
            }
            Outcome::Skipped(_) => {}
        }
    }
    println!("decode: {ok} devices agree, {failed} disagree");
    if failed > 0 || ok == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
