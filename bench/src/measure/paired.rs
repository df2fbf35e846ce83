//! Seam against the raw driver in the same process: the chain
//! run by seam and by the raw anchor (`raw_cuda`, `raw_vulkan`) in
//! interleaved rounds, so a ratio compares arms measured side by side, not
//! two medians from two processes.
//!
//! Round r runs k iterations of one arm, then k of the other; the order
//! alternates (seam first in even rounds, raw first in odd ones), so drift
//! (clocks, temperature, other tenants) lands on both. Each iteration is
//! queued and waited for on its own. Per round: the ratio of the medians
//! (seam ÷ raw) of e2e and of host submit time, and the difference of the
//! submit medians (seam − raw, µs); each is reported as its median over the
//! rounds with the smallest and largest round (`…_range`).

use super::update::ratio_rows;
use super::{err, submit, us, Config, Meta, Res, Sink};
use crate::stats::{reps_for, summarize};
use seam::{Device, OpCall};
use std::time::Instant;

/// A raw anchor running the chain of `n` in-place `scale_add` kernels.
pub(crate) trait RawChain {
    /// Its name in comments ("raw driver", "raw ash").
    fn label(&self) -> String;
    /// Put `x0` in its buffer and record (capture) the chain of `n` kernels.
    fn setup(&mut self, x0: &[f32], n: u32, a: f32, b: f32) -> Res<()>;
    fn write(&mut self, x0: &[f32]) -> Res<()>;
    fn read(&mut self, k: usize) -> Res<Vec<f32>>;
    /// Queue one replay of the recorded chain.
    fn replay(&mut self) -> Res<()>;
    /// Queue the chain's kernels one by one; `None`: this anchor has no eager arm.
    fn eager(&mut self) -> Option<Res<()>>;
    fn wait(&mut self) -> Res<()>;
}

#[cfg(feature = "cuda")]
impl RawChain for crate::raw_cuda::RawCuda {
    fn label(&self) -> String {
        format!("raw driver ({}, {})", self.name, self.arch)
    }
    fn setup(&mut self, x0: &[f32], n: u32, a: f32, b: f32) -> Res<()> {
        self.chain(x0, n, a, b)
    }
    fn write(&mut self, x0: &[f32]) -> Res<()> {
        crate::raw_cuda::RawCuda::write(self, x0)
    }
    fn read(&mut self, k: usize) -> Res<Vec<f32>> {
        crate::raw_cuda::RawCuda::read(self, k)
    }
    fn replay(&mut self) -> Res<()> {
        crate::raw_cuda::RawCuda::replay(self)
    }
    fn eager(&mut self) -> Option<Res<()>> {
        Some(crate::raw_cuda::RawCuda::eager(self))
    }
    fn wait(&mut self) -> Res<()> {
        crate::raw_cuda::RawCuda::wait(self)
    }
}

#[cfg(feature = "vulkan")]
impl RawChain for crate::raw_vulkan::RawVulkan {
    fn label(&self) -> String {
        format!(
            "raw ash ({}, {} memory, DenormPreserve {}, waits on {})",
            self.name,
            if self.host_visible {
                "host-visible"
            } else {
                "device-local"
            },
            if self.denorm_preserve { "on" } else { "off" },
            self.wait_kind()
        )
    }
    fn setup(&mut self, x0: &[f32], n: u32, a: f32, b: f32) -> Res<()> {
        self.chain(x0, n, a, b)
    }
    fn write(&mut self, x0: &[f32]) -> Res<()> {
        crate::raw_vulkan::RawVulkan::write(self, x0)
    }
    fn read(&mut self, k: usize) -> Res<Vec<f32>> {
        crate::raw_vulkan::RawVulkan::read(self, k)
    }
    fn replay(&mut self) -> Res<()> {
        self.submit()
    }
    fn eager(&mut self) -> Option<Res<()>> {
        None
    }
    fn wait(&mut self) -> Res<()> {
        crate::raw_vulkan::RawVulkan::wait(self)
    }
}

/// The raw anchor for seam's backend `backend` (whose device is named
/// `seam_name`), or a comment saying why there is none.
pub(super) fn open_raw(
    backend: &str,
    seam_name: &str,
    out: &mut dyn Sink,
) -> Option<Box<dyn RawChain>> {
    let opened: Res<Box<dyn RawChain>> = match backend {
        #[cfg(feature = "cuda")]
        "cuda" => crate::raw_cuda::RawCuda::open().and_then(|r| {
            if r.name == seam_name {
                Ok(Box::new(r) as Box<dyn RawChain>)
            } else {
                Err(format!("device 0 is {}, seam's is {seam_name}", r.name))
            }
        }),
        #[cfg(feature = "vulkan")]
        "vulkan" => crate::raw_vulkan::RawVulkan::open().and_then(|r| {
            if r.name == seam_name {
                Ok(Box::new(r) as Box<dyn RawChain>)
            } else {
                Err(format!(
                    "the first Vulkan device is {}, seam's is {seam_name}",
                    r.name
                ))
            }
        }),
        _ => return None,
    };
    match opened {
        Ok(r) => {
            out.comment(&format!(
                "seam {backend}: in-process anchor {} (interleaved with seam)",
                r.label()
            ));
            Some(r)
        }
        Err(e) => {
            out.comment(&format!(
                "seam {backend}: in-process raw anchor not measured: {e}"
            ));
            None
        }
    }
}

/// (submit, e2e) of one iteration: `queue`, then `wait`.
fn timed(queue: &mut dyn FnMut() -> Res<()>, wait: &mut dyn FnMut() -> Res<()>) -> Res<(f64, f64)> {
    let t = Instant::now();
    queue()?;
    let s = us(t);
    wait()?;
    Ok((s, us(t)))
}

/// The chain (`calls` over seam's buffer, `x0` its input) run by seam and
/// by `raw` in interleaved rounds, replay and (where the anchor has one)
/// eager. `check` compares the first floats of a result with the host's.
#[allow(clippy::too_many_arguments)]
pub(super) fn versus_raw(
    dev: &Device,
    raw: &mut dyn RawChain,
    calls: &[OpCall],
    x0: &[f32],
    m: Meta,
    cfg: &Config,
    out: &mut dyn Sink,
    check: &dyn Fn(&str, Vec<f32>) -> Res<()>,
) -> Res<()> {
    let k = x0.len().min(256);
    raw.setup(x0, m.nodes as u32, 0.999, 0.001)?;
    raw.replay()?;
    raw.wait()?;
    check("raw replay", raw.read(k)?)?;
    let has_eager = {
        raw.write(x0)?;
        match raw.eager() {
            Some(r) => {
                r?;
                raw.wait()?;
                check("raw eager", raw.read(k)?)?;
                true
            }
            None => false,
        }
    };
    let scope = dev.capture().map_err(err)?;
    submit(dev, calls).map_err(err)?;
    let g = scope.end_graph().map_err(err)?;
    let raw = std::cell::RefCell::new(raw);
    let mut modes = vec!["graph"];
    if has_eager {
        modes.push("eager");
    }
    for mode in modes {
        let mut seam_q = || -> Res<()> {
            if mode == "graph" {
                g.replay().map_err(err)
            } else {
                submit(dev, calls).map_err(err)
            }
        };
        let mut seam_w = || dev.synchronize().map_err(err);
        let mut raw_q = || -> Res<()> {
            let mut r = raw.borrow_mut();
            if mode == "graph" {
                r.replay()
            } else {
                r.eager().unwrap_or_else(|| Err("no eager arm".into()))
            }
        };
        let mut raw_w = || raw.borrow_mut().wait();
        // warm-up and estimate
        let (mut est_s, mut est_r) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            est_s = est_s.min(timed(&mut seam_q, &mut seam_w)?.1);
            est_r = est_r.min(timed(&mut raw_q, &mut raw_w)?.1);
        }
        let rounds = cfg.rounds.max(1);
        // Two measurement budgets for the pair, split over the rounds.
        let per = reps_for(2.0 * cfg.budget_us / rounds as f64, est_s + est_r, 3, 500);
        // [seam, raw] × [submit, e2e], every iteration; per-round medians.
        let mut all: [[Vec<f64>; 2]; 2] = Default::default();
        let (mut x_e2e, mut x_sub, mut d_sub) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds {
            let mut this: [[Vec<f64>; 2]; 2] = Default::default();
            for side in [r % 2, 1 - r % 2] {
                for _ in 0..per {
                    let (s, e) = if side == 0 {
                        timed(&mut seam_q, &mut seam_w)?
                    } else {
                        timed(&mut raw_q, &mut raw_w)?
                    };
                    this[side][0].push(s);
                    this[side][1].push(e);
                }
            }
            let med = |v: &[f64]| summarize(v).median;
            let (ss, se) = (med(&this[0][0]), med(&this[0][1]));
            let (rs, re) = (med(&this[1][0]), med(&this[1][1]));
            x_e2e.push(se / re);
            x_sub.push(ss / rs);
            d_sub.push(ss - rs);
            for (side, v) in this.into_iter().enumerate() {
                for (i, w) in v.into_iter().enumerate() {
                    all[side][i].extend(w);
                }
            }
        }
        out.row(m.row(mode, "pair_submit_us", &all[0][0]));
        out.row(m.row(mode, "pair_e2e_us", &all[0][1]));
        out.row(m.row(mode, "raw_submit_us", &all[1][0]));
        out.row(m.row(mode, "raw_e2e_us", &all[1][1]));
        ratio_rows(&m, mode, "x_raw_e2e", &x_e2e, out);
        ratio_rows(&m, mode, "x_raw_submit", &x_sub, out);
        ratio_rows(&m, mode, "d_raw_submit_us", &d_sub, out);
        if m.device == "vulkan" {
            // The anchor as an arm of its own in the chain tables and plots.
            let raw_arm = Meta {
                arm: "raw-vulkan",
                ..m
            };
            out.row(raw_arm.row(mode, "submit_us", &all[1][0]));
            out.row(raw_arm.row(mode, "e2e_us", &all[1][1]));
        }
    }
    Ok(())
}
