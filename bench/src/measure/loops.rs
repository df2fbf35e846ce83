//! What a loop decided on the device costs (`seam-bench loops`): K
//! iterations of one body, run three ways on the same device and buffers,
//! interleaved round by round so each ratio is of one round's arms.
//!
//! The body: `x = 0.999·x + 0.001` (one element), then `counter -= 1`.
//! - `device`: the counter written to K, then one replay of a graph
//!   holding `WHILE counter (at most K) { body }` (C14, as the device
//!   runs it: `conditional_support`), and a wait;
//! - `host`: the loop an engine writes where there is no device loop:
//!   replay a graph of the body, read the counter back (a wait), stop at
//!   zero;
//! - `known`: K replays of the body's graph back to back and one wait,
//!   the count known to the host beforehand (nothing is decided: the
//!   floor of K iterations through replays).
//!
//! Reported per iteration: each arm's median µs, and the ratios
//! `device/host` and `device/known` as the median over rounds with their
//! min–max. A device that runs no conditional bodies gets its `host` and
//! `known` arms and says why `device` is missing.

use super::{err, Res, Sink};
use crate::measure::update::median;
use seam::{ops, Buffer, ConditionalSupport, Device, Graph};
use std::time::Instant;

/// What `seam-bench loops` measures.
pub struct LoopConfig {
    /// Backends (default: every backend found, the CPU reference included).
    pub backends: Vec<String>,
    /// Iteration counts.
    pub ks: Vec<u32>,
    /// Interleaved rounds.
    pub rounds: usize,
}

/// Run every K on the first device of each wanted backend.
pub fn loop_overhead(cfg: &LoopConfig, out: &mut dyn Sink) {
    let found = seam_backends::discover();
    let mut seen = Vec::new();
    out.comment(
        "device | conditional bodies | K | device µs/it | host µs/it | known µs/it | device/host | device/known",
    );
    for slot in &found.devices {
        let wanted = cfg.backends.is_empty() || cfg.backends.iter().any(|b| b == slot.backend);
        if !wanted || seen.contains(&slot.backend) {
            continue;
        }
        seen.push(slot.backend);
        let r = slot
            .device()
            .map_err(err)
            .and_then(|dev| device(&dev, cfg, out));
        if let Err(e) = r {
            out.comment(&format!("{}: stopped: {e}", slot.id));
        }
    }
}

/// The buffers of one device's loops.
struct Loop {
    x: Buffer<f32>,
    counter: Buffer<u32>,
    minus: Buffer<u32>,
}

impl Loop {
    fn body(&self, dev: &Device) -> seam::Result<()> {
        dev.launch(&ops::scale_add(self.x.id(), self.x.id(), 1, 0.999, 0.001))?;
        let c = self.counter.id();
        dev.launch(&ops::add(c, self.minus.id(), c, 1))
    }
}

fn device(dev: &Device, cfg: &LoopConfig, out: &mut dyn Sink) -> Res<()> {
    let l = Loop {
        x: dev.buffer_from(&[1.0f32]).map_err(err)?,
        counter: dev.buffer_from(&[0u32]).map_err(err)?,
        minus: dev.buffer_from(&[u32::MAX]).map_err(err)?,
    };
    let scope = dev.capture().map_err(err)?;
    l.body(dev).map_err(err)?;
    let body = scope.end_graph().map_err(err)?;
    let support = dev.conditional_support();
    let name = match &support {
        ConditionalSupport::Native => "native".to_string(),
        ConditionalSupport::Emulated(_) => "emulated".to_string(),
        ConditionalSupport::Unsupported(why) => {
            out.comment(&format!("{}: no device arm: {why}", dev.id()));
            "unsupported".to_string()
        }
    };
    for &k in &cfg.ks {
        let looped = match support {
            ConditionalSupport::Unsupported(_) => None,
            _ => {
                let scope = dev.capture().map_err(err)?;
                scope
                    .run_while(l.counter.id(), k, || l.body(dev))
                    .map_err(err)?;
                Some(scope.end_graph().map_err(err)?)
            }
        };
        let arms = rounds(dev, &l, &body, looped.as_ref(), k, cfg.rounds)?;
        let per = |v: &[f64]| -> String {
            if v.is_empty() {
                "—".into()
            } else {
                format!("{:.2}", median(v) / f64::from(k))
            }
        };
        out.comment(&format!(
            "{} | {name} | {k} | {} | {} | {} | {} | {}",
            dev.id(),
            per(&arms[0]),
            per(&arms[1]),
            per(&arms[2]),
            ratio(&arms[0], &arms[1]),
            ratio(&arms[0], &arms[2]),
        ));
    }
    Ok(())
}

/// Each arm's wall time per round (µs for K iterations): device (empty
/// without a looped graph), host, known. Every arm's iterations are
/// checked: the counter ends at 0 and `x` moved K steps.
fn rounds(
    dev: &Device,
    l: &Loop,
    body: &Graph,
    looped: Option<&Graph>,
    k: u32,
    rounds: usize,
) -> Res<[Vec<f64>; 3]> {
    let mut arms: [Vec<f64>; 3] = Default::default();
    // Warm every graph once (first replays compile or upload lazily).
    for g in looped.into_iter().chain([body]) {
        l.counter.write(&[1]).map_err(err)?;
        g.replay().map_err(err)?;
    }
    dev.synchronize().map_err(err)?;
    let want = (0..k).fold(1.0f32, |x, _| 0.999f32.mul_add(x, 0.001));
    for _ in 0..rounds.max(1) {
        for (arm, samples) in arms.iter_mut().enumerate() {
            l.x.write(&[1.0]).map_err(err)?;
            l.counter.write(&[k]).map_err(err)?;
            dev.synchronize().map_err(err)?;
            let t = Instant::now();
            match arm {
                0 => {
                    let Some(g) = looped else { continue };
                    g.replay().map_err(err)?;
                    dev.synchronize().map_err(err)?;
                }
                1 => loop {
                    body.replay().map_err(err)?;
                    if l.counter.read().map_err(err)?[0] == 0 {
                        break;
                    }
                },
                _ => {
                    for _ in 0..k {
                        body.replay().map_err(err)?;
                    }
                    dev.synchronize().map_err(err)?;
                }
            }
            samples.push(t.elapsed().as_secs_f64() * 1e6);
            let (x, c) = (
                l.x.read().map_err(err)?[0],
                l.counter.read().map_err(err)?[0],
            );
            if c != 0 || x != want {
                return Err(format!(
                    "K = {k}, arm {arm}: counter {c}, x {x} (want 0 and {want})"
                ));
            }
        }
    }
    Ok(arms)
}

/// `a/b` per round ([`super::ratio_text`]); `—` without `a`.
fn ratio(a: &[f64], b: &[f64]) -> String {
    if a.is_empty() {
        return "—".into();
    }
    super::ratio_text(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::measure::Lines;

    /// On the CPU reference (no timing asserted): a line per K with all
    /// three arms measured and checked, nothing stopped.
    #[test]
    fn every_arm_runs_and_is_checked_on_the_cpu() {
        let mut out = Lines::default();
        loop_overhead(
            &LoopConfig {
                backends: vec!["cpu".into()],
                ks: vec![1, 5],
                rounds: 2,
            },
            &mut out,
        );
        let lines: Vec<&String> = out.0.iter().filter(|l| l.starts_with("cpu:0")).collect();
        assert_eq!(lines.len(), 2, "{:?}", out.0);
        for l in lines {
            let cells: Vec<&str> = l.split(" | ").collect();
            assert_eq!(cells[1], "native", "{l}");
            assert!(cells[3..].iter().all(|c| *c != "—"), "{l}");
        }
        assert!(!out.0.iter().any(|l| l.contains("stopped")), "{:?}", out.0);
    }
}
