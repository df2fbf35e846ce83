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

impl Report {
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
    let mut r = Report {
        device: dev.info().id(),
        steps: steps.len(),
        logits: 0,
        max_rel: 0.0,
        argmax_checked: 0,
        argmax_agreed: 0,
        eager_vs_captured: 0.0,
        updates: 0,
        failures: Vec::new(),
    };
    for (i, s) in steps.iter().enumerate() {
        let logits = llama.step(s.input, Mode::Captured)?;
        progress(Mode::Captured, i);
        let diff = logits
            .iter()
            .zip(&eager[i])
            .map(|(a, b)| apart(*a, *b))
            .fold(0f32, f32::max);
        r.eager_vs_captured = r.eager_vs_captured.max(diff);
        for &(token, want) in &s.top {
            let got = logits[token as usize];
            // A NaN logit counts as infinitely far.
            let rel = match (got - want).abs() / want.abs().max(1.0) {
                e if e.is_nan() => f32::INFINITY,
                e => e,
            };
            r.logits += 1;
            r.max_rel = r.max_rel.max(rel);
            if rel > TOLERANCE && r.failures.len() < 8 {
                r.failures.push(format!(
                    "position {}: logit of token {token} is {got}, the reference's {want}",
                    s.pos
                ));
            }
        }
        if s.margin() > 2.0 * TOLERANCE * s.top[0].1.abs().max(1.0) {
            r.argmax_checked += 1;
            let ours = argmax(&logits);
            if ours == s.next {
                r.argmax_agreed += 1;
            } else if r.failures.len() < 8 {
                r.failures.push(format!(
                    "position {}: argmax {ours} where the reference chose {} by a margin of {}",
                    s.pos,
                    s.next,
                    s.margin()
                ));
            }
        }
    }
    if r.eager_vs_captured != 0.0 {
        r.failures.push(format!(
            "eager and captured logits differ by up to {:e} (they must be identical)",
            r.eager_vs_captured
        ));
    }
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

    #[test]
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[4.0, 3.0]), 0);
        assert_eq!(argmax(&[-2.0, -1.0]), 1);
    }
}
