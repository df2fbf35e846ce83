//! The reference logits: one line per step, `pos input_token next_token`
//! then the largest logits as `id:logit`, largest first (what llama2.c's
//! `run.c` printed for stories260K, decoding greedily from BOS).

use crate::Error;
use std::path::Path;

/// One step of the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The position fed.
    pub pos: u32,
    /// The token fed at it.
    pub input: u32,
    /// The reference's greedy choice (its largest logit).
    pub next: u32,
    /// The largest logits, `(token, logit)`, largest first.
    pub top: Vec<(u32, f32)>,
}

impl Step {
    /// The reference's margin between its first and second logit.
    pub fn margin(&self) -> f32 {
        match self.top.as_slice() {
            [(_, a), (_, b), ..] => a - b,
            _ => f32::INFINITY,
        }
    }
}

/// Read a reference file.
pub fn load(path: &Path) -> Result<Vec<Step>, Error> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Reference(format!("{file}: cannot be read: {e}")))?;
    parse(&file, &text)
}

/// Parse a reference's text (`file` names it in errors). Positions must
/// count up from 0, one per line.
pub fn parse(file: &str, text: &str) -> Result<Vec<Step>, Error> {
    let mut steps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |what: String| Error::Reference(format!("{file}: line {}: {what}", i + 1));
        let mut fields = line.split_whitespace();
        let mut int = |name: &str| -> Result<u32, Error> {
            let f = fields
                .next()
                .ok_or_else(|| bad(format!("no `{name}` field")))?;
            f.parse()
                .map_err(|_| bad(format!("`{name}` is `{f}`, not a token or position")))
        };
        let (pos, input, next) = (int("pos")?, int("input_token")?, int("next_token")?);
        let mut top = Vec::new();
        for f in fields {
            let pair = f
                .split_once(':')
                .and_then(|(id, v)| Some((id.parse::<u32>().ok()?, v.parse::<f32>().ok()?)))
                .filter(|(_, v)| v.is_finite())
                .ok_or_else(|| bad(format!("`{f}` is not `id:logit`")))?;
            top.push(pair);
        }
        if top.is_empty() {
            return Err(bad("no logits listed".into()));
        }
        if top.windows(2).any(|w| w[0].1 < w[1].1) {
            return Err(bad("the logits are not listed largest first".into()));
        }
        if top[0].0 != next {
            return Err(bad(format!(
                "next_token {next} is not the largest listed logit's token {}",
                top[0].0
            )));
        }
        if pos as usize != steps.len() {
            return Err(bad(format!(
                "position {pos} where {} was expected (one line per position from 0)",
                steps.len()
            )));
        }
        steps.push(Step {
            pos,
            input,
            next,
            top,
        });
    }
    if steps.is_empty() {
        return Err(Error::Reference(format!("{file}: no steps")));
    }
    Ok(steps)
}

/// The steps as a reference file's text (what [`parse`] reads back).
pub fn format(steps: &[Step]) -> String {
    let mut out = String::new();
    for s in steps {
        out.push_str(&std::format!("{} {} {}", s.pos, s.input, s.next));
        for (id, v) in &s.top {
            out.push_str(&std::format!(" {id}:{v:.6}"));
        }
        out.push('\n');
    }
    out
}

/// The reference a model gives itself on the CPU reference device: its
/// eager logits for `tokens` fed from position 0, the `top` largest of each
/// step (for checking another device, or a reference file of one's own).
pub fn own(model: &crate::Model, tokens: &[u32], top: usize) -> Result<Vec<Step>, Error> {
    let dev = seam::Device::new(Box::new(seam_backends::CpuBackend::new(0)));
    let mut l = crate::Llama::new(&dev, model, tokens.len() as u32)?;
    let mut steps = Vec::with_capacity(tokens.len());
    for (pos, &t) in tokens.iter().enumerate() {
        let logits = l.step(t, crate::Mode::Eager)?;
        let mut best: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u32, *v))
            .collect();
        best.sort_by(|a, b| b.1.total_cmp(&a.1));
        best.truncate(top.max(1));
        steps.push(Step {
            pos: pos as u32,
            input: t,
            next: best[0].0,
            top: best,
        });
    }
    Ok(steps)
}
