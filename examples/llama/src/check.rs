//! `seam-llama check`: teacher-force a reference's input tokens through the
//! model on a device, eagerly and then captured, and compare every logit
//! the reference lists.

use crate::model::Model;
use crate::reference::Step;
use crate::step::{Llama, Mode};
use crate::Error;
use seam::Device;

/// How far a logit may be from the reference's: `|ours - ref| ≤ TOLERANCE ·
/// max(|ref|, 1)` (relative above 1, absolute below). f32 through another
/// summation order differs by about 1e-5 relative; a wrong position, token,
/// cache slot or stale launch moves logits by far more than 1e-4.
pub const TOLERANCE: f32 = 1e-4;

/// What a check found on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub device: String,
    pub steps: usize,
    /// Logits compared with the reference.
    pub logits: usize,
    /// The largest `|ours - ref| / max(|ref|, 1)` over them.
    pub max_rel: f32,
    /// Steps whose reference margin (first minus second logit) exceeds the
    /// tolerance twice over, so that the argmax must agree.
    pub argmax_checked: usize,
    pub argmax_agreed: usize,
    /// The largest `|eager - captured|` over every logit of every step (C4
    /// asks for 0).
    pub eager_vs_captured: f32,
    /// Launches changed by graph updates over the captured pass.
    pub updates: usize,
    /// What disagreed, one line each (empty: the check passed).
    pub failures: Vec<String>,
}

/// The most failures a report lists one line each (the count of logits
/// and argmaxes still covers every step).
pub const MAX_FAILURES: usize = 8;

impl Report {
    /// An empty report of `steps` steps on `device`.
    pub fn new(device: String, steps: usize) -> Report {
        Report {
            device,
            steps,
            logits: 0,
            max_rel: 0.0,
            argmax_checked: 0,
            argmax_agreed: 0,
            eager_vs_captured: 0.0,
            updates: 0,
            failures: Vec::new(),
        }
    }

    /// Judge one step's captured `logits` against the reference step `s`
    /// and the same step's `eager` logits.
    pub fn judge(&mut self, s: &Step, logits: &[f32], eager: &[f32]) {
        let diff = logits
            .iter()
            .zip(eager)
            .map(|(a, b)| apart(*a, *b))
            .fold(0f32, f32::max);
        self.eager_vs_captured = self.eager_vs_captured.max(diff);
        for &(token, want) in &s.top {
            let got = logits[token as usize];
            // A NaN logit counts as infinitely far.
            let rel = match (got - want).abs() / want.abs().max(1.0) {
                e if e.is_nan() => f32::INFINITY,
                e => e,
            };
            self.logits += 1;
            self.max_rel = self.max_rel.max(rel);
            if rel > TOLERANCE {
                self.fail(format!(
                    "position {}: logit of token {token} is {got}, the reference's {want}",
                    s.pos
                ));
            }
        }
        if s.margin() > 2.0 * TOLERANCE * s.top[0].1.abs().max(1.0) {
            self.argmax_checked += 1;
            let ours = argmax(logits);
            if ours == s.next {
                self.argmax_agreed += 1;
            } else {
                self.fail(format!(
                    "position {}: argmax {ours} where the reference chose {} by a margin of {}",
                    s.pos,
                    s.next,
                    s.margin()
                ));
            }
        }
    }

    /// After the last step: eager and captured must have been identical.
    pub fn finish(&mut self) {
        if self.eager_vs_captured != 0.0 {
            self.failures.push(format!(
                "eager and captured logits differ by up to {:e} (they must be identical)",
                self.eager_vs_captured
            ));
        }
    }

    fn fail(&mut self, line: String) {
        if self.failures.len() < MAX_FAILURES {
            self.failures.push(line);
        }
    }

    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// One line, e.g. `256 steps, 2048 logits, max rel err 2.1e-6, argmax
    /// 250/250, eager = captured, 6400 launches updated, ok`.
    pub fn describe(&self) -> String {
        let verdict = match self.failures.as_slice() {
            [] => "ok".to_string(),
            [one] => format!("FAILED: {one}"),
            [first, rest @ ..] => format!("FAILED: {first} (and {} more)", rest.len()),
        };
        let c4 = if self.eager_vs_captured == 0.0 {
            "eager = captured bit for bit".to_string()
        } else {
            format!(
                "eager vs captured max |diff| {:.1e}",
                self.eager_vs_captured
            )
        };
        format!(
            "{} steps, {} logits, max rel err {:.1e}, argmax {}/{} (margin > 2 × tolerance), \
             {c4}, {} launches updated, {verdict}",
            self.steps,
            self.logits,
            self.max_rel,
            self.argmax_agreed,
            self.argmax_checked,
            self.updates
        )
    }
}

/// The index of the largest logit (the first of equals).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in logits.iter().enumerate() {
        if *v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// How far apart an eager and a captured logit are, for "eager = captured
/// bit for bit": 0 only where their bits are equal; where they differ, at
/// least the smallest normal f32 (so `-0` against `+0` is not 0 apart) and
/// infinite where either is NaN (which `f32::max` would otherwise drop).
pub fn apart(a: f32, b: f32) -> f32 {
    if a.to_bits() == b.to_bits() {
        return 0.0;
    }
    match (a - b).abs() {
        d if d.is_nan() => f32::INFINITY,
        d => d.max(f32::MIN_POSITIVE),
    }
}

/// Run `steps` (teacher-forced: each step's input token, at its position)
/// through `model` on `dev`, eagerly and then replayed from one captured
/// graph, and compare. `progress` is told each step done (pass, step).
pub fn check(
    dev: &Device,
    model: &Model,
    steps: &[Step],
    mut progress: impl FnMut(Mode, usize),
) -> Result<Report, Error> {
    let mut llama = Llama::new(dev, model, steps.len() as u32)?;
    let vocab = model.config.vocab_size;
    if let Some(s) = steps
        .iter()
        .find(|s| s.input >= vocab || s.next >= vocab || s.top.iter().any(|(t, _)| *t >= vocab))
    {
        return Err(Error::Reference(format!(
            "the reference's step {} names a token past the model's vocabulary ({vocab})",
            s.pos
        )));
    }
    let mut eager = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        eager.push(llama.step(s.input, Mode::Eager)?);
        progress(Mode::Eager, i);
    }
    llama.reset();
    let mut r = Report::new(dev.info().id(), steps.len());
    for (i, s) in steps.iter().enumerate() {
        let logits = llama.step(s.input, Mode::Captured)?;
        progress(Mode::Captured, i);
        r.judge(s, &logits, &eager[i]);
    }
    r.finish();
    r.updates = llama.updates();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_equal_bits_are_zero_apart() {
        assert_eq!(apart(1.5, 1.5), 0.0);
        assert_eq!(apart(f32::NAN, f32::NAN), 0.0, "the same NaN bits");
        assert_eq!(apart(1.0, 1.25), 0.25);
        assert_eq!(apart(-0.0, 0.0), f32::MIN_POSITIVE);
        assert_eq!(apart(1.0, f32::NAN), f32::INFINITY);
        assert_eq!(apart(f32::NAN, -f32::NAN), f32::INFINITY, "another NaN");
        assert_eq!(apart(f32::INFINITY, f32::INFINITY), 0.0);
        assert_eq!(apart(f32::INFINITY, f32::NEG_INFINITY), f32::INFINITY);
        // What the check folds: a NaN anywhere is not lost.
        let worst = [0.0, f32::NAN, 2.0]
            .iter()
            .zip(&[0.0, 0.0, 2.0])
            .map(|(a, b)| apart(*a, *b))
            .fold(0f32, f32::max);
        assert_eq!(worst, f32::INFINITY);
    }

    fn step(top: &[(u32, f32)]) -> Step {
        Step {
            pos: 7,
            input: 1,
            next: top[0].0,
            top: top.to_vec(),
        }
    }

    fn judged(s: &Step, logits: &[f32]) -> Report {
        let mut r = Report::new("cpu:0".into(), 1);
        r.judge(s, logits, logits);
        r.finish();
        r
    }

    #[test]
    fn a_logit_is_judged_relative_above_one_and_absolute_below() {
        // |ours - ref| / max(|ref|, 1): 0.002 / 4 above one; 1e-4 / 1 below.
        let s = step(&[(2, 4.0), (0, 0.0)]);
        let r = judged(&s, &[0.0, -7.0, 4.002]);
        assert_eq!(r.logits, 2);
        assert_eq!(r.max_rel, (4.002f32 - 4.0) / 4.0);
        assert!(!r.passed());
        assert!(r.failures[0].contains("position 7: logit of token 2 is 4.002"));
        // Exactly the tolerance away passes; a NaN is infinitely far.
        let r = judged(&s, &[TOLERANCE, -7.0, 4.0]);
        assert!(r.passed(), "{:?}", r.failures);
        assert_eq!(r.max_rel, TOLERANCE);
        let r = judged(&s, &[f32::NAN, -7.0, 4.0]);
        assert_eq!(r.max_rel, f32::INFINITY);
        assert!(
            r.failures[0].starts_with("position 7: logit of token 0 is NaN"),
            "{:?}",
            r.failures
        );
    }

    #[test]
    fn the_argmax_is_held_only_where_the_margin_is_past_twice_the_tolerance() {
        // Margin 0.01 under 2 · 1e-4 · 100 = 0.02: another argmax passes.
        let near = step(&[(0, 100.0), (1, 99.99)]);
        let r = judged(&near, &[100.0, 99.99, 100.005]);
        assert_eq!((r.argmax_checked, r.argmax_agreed), (0, 0));
        assert!(r.passed(), "{:?}", r.failures);
        // Margin exactly the bound (2 · 1e-4 · 1, top logit 0): not held.
        let bound = 2.0 * TOLERANCE;
        let at = step(&[(0, 0.0), (1, -bound)]);
        assert_eq!(at.margin(), bound);
        let r = judged(&at, &[0.0, -bound, 1.0]);
        assert_eq!(r.argmax_checked, 0);
        assert!(r.passed(), "{:?}", r.failures);
        // Past it: held, agreed or not.
        let far = step(&[(0, 3.0), (1, 1.0)]);
        let r = judged(&far, &[3.0, 1.0, 0.0]);
        assert_eq!((r.argmax_checked, r.argmax_agreed), (1, 1));
        let mut r = Report::new("cpu:0".into(), 2);
        r.judge(&far, &[3.0, 1.0, 0.0], &[3.0, 1.0, 0.0]);
        r.judge(&far, &[3.0, 1.0, 0.0], &[3.0, 1.0, 0.0]);
        assert_eq!((r.argmax_checked, r.argmax_agreed), (2, 2));
        let r = judged(&far, &[3.0, 1.0, 5.0]);
        assert_eq!((r.argmax_checked, r.argmax_agreed), (1, 0));
        assert_eq!(
            r.failures,
            ["position 7: argmax 2 where the reference chose 0 by a margin of 2"]
        );
    }

    #[test]
    fn failures_are_listed_up_to_the_cap_and_counted_in_full() {
        let top: Vec<(u32, f32)> = (0..12).map(|t| (t, 20.0 - t as f32)).collect();
        let s = step(&top);
        let wrong: Vec<f32> = (0..12).map(|t| 100.0 + t as f32).collect();
        let mut r = Report::new("cpu:0".into(), 1);
        r.judge(&s, &wrong, &wrong);
        assert_eq!(r.logits, 12);
        assert_eq!(r.failures.len(), MAX_FAILURES);
        // Full: the argmax's failure is counted, not listed.
        assert_eq!((r.argmax_checked, r.argmax_agreed), (1, 0));
        let mut r = Report::new("cpu:0".into(), 1);
        let seven: Vec<f32> = (0..12)
            .map(|t| {
                if t < 7 {
                    100.0 + t as f32
                } else {
                    20.0 - t as f32
                }
            })
            .collect();
        r.judge(&s, &seven, &seven);
        assert_eq!(r.failures.len(), MAX_FAILURES, "7 logits, then the argmax");
        assert!(r.failures[7].contains("argmax 6 where"), "{:?}", r.failures);
    }

    #[test]
    fn eager_and_captured_must_be_identical() {
        let s = step(&[(0, 1.0)]);
        let mut r = Report::new("cpu:0".into(), 1);
        r.judge(&s, &[1.0, 0.0], &[1.0, -0.0]);
        r.finish();
        assert_eq!(r.eager_vs_captured, f32::MIN_POSITIVE);
        assert!(r.failures[0].starts_with("eager and captured logits differ by up to"));
    }

    #[test]
    fn the_description_says_the_verdict() {
        let s = step(&[(0, 3.0), (1, 1.0)]);
        let r = judged(&s, &[3.0, 1.0]);
        assert_eq!(
            r.describe(),
            "1 steps, 2 logits, max rel err 0.0e0, argmax 1/1 (margin > 2 × tolerance), \
             eager = captured bit for bit, 0 launches updated, ok"
        );
        let mut r = Report::new("cpu:0".into(), 1);
        r.judge(&s, &[3.0, 1.0], &[3.0, 1.5]);
        r.finish();
        assert!(r.describe().contains(
            "eager vs captured max |diff| 5.0e-1, 0 launches updated, FAILED: eager and captured"
        ));
        let r = judged(&s, &[1.0, 3.0]);
        assert!(
            r.describe().ends_with(
                "FAILED: position 7: logit of token 0 is 1, the reference's 3 (and 2 more)"
            ),
            "{}",
            r.describe()
        );
    }

    #[test]
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[4.0, 3.0]), 0);
        assert_eq!(argmax(&[-2.0, -1.0]), 1);
    }
}
