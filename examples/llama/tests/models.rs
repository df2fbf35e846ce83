//! Trained models against the logits of implementations not written here,
//! on every device found: one trial per device and model, teacher-forcing
//! every step of the reference eagerly and from one captured graph.
//!
//! - `stories260k_agrees_with_llama2c`: stories260K (llama2.c checkpoint)
//!   against llama2.c's `run.c`, 256 steps. Its folder: `SEAM_STORIES260K`.
//! - `smollm2_135m_agrees_with_transformers`: SmolLM2-135M-Instruct (Q4_1
//!   GGUF) against Hugging Face transformers on the CPU, 32 steps
//!   (`reference/`). The file: `SEAM_SMOLLM2` (`fetch-smollm2.sh` fetches
//!   it); minutes a device in a debug build, so only where asked for.
//! - `stories260k_decodes_k_tokens_per_replay`: stories260K decoded 8
//!   greedy tokens per replay by a WHILE on the device (C14), 64 tokens
//!   from BOS, against one replay per token with the argmax on the host
//!   (the same tokens, the same last logits, bit for bit) and against
//!   llama2.c's greedy tokens. Ignored, with the reason, on a device
//!   without conditional bodies.
//!
//! A trial is *ignored* with the reason where its model is not at hand or
//! the device does not open, and fails where `SEAM_REQUIRE_DEVICES` names
//! the device.

use libtest_mimic::{Arguments, Completion, Trial};
use seam::Device;
use seam_example_llama::check::argmax;
use seam_example_llama::reference::Step;
use seam_example_llama::{check, reference, Llama, Mode, Model};
use std::path::PathBuf;

/// A model, its reference, where to find them, and what is run.
struct Case {
    name: &'static str,
    /// The model file and the reference, or why they are not at hand.
    files: fn() -> Result<(PathBuf, PathBuf), String>,
    run: fn(&Device, &Model, &[Step]) -> Result<Completion, String>,
}

fn stories() -> Result<(PathBuf, PathBuf), String> {
    let Some(dir) = std::env::var_os("SEAM_STORIES260K").map(PathBuf::from) else {
        return Err("set SEAM_STORIES260K to the folder holding stories260K.bin and reference-greedy-from-bos.txt".into());
    };
    let (model, refs) = (
        dir.join("stories260K.bin"),
        dir.join("reference-greedy-from-bos.txt"),
    );
    match model.exists() && refs.exists() {
        true => Ok((model, refs)),
        false => Err(format!(
            "stories260K not found in {} (set SEAM_STORIES260K to its folder)",
            dir.display()
        )),
    }
}

fn smollm2() -> Result<(PathBuf, PathBuf), String> {
    let refs = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("reference/smollm2-135m-q4_1-greedy-from-bos.txt");
    match std::env::var_os("SEAM_SMOLLM2").map(PathBuf::from) {
        Some(model) if model.exists() => Ok((model, refs)),
        Some(model) => Err(format!("SEAM_SMOLLM2: {} does not exist", model.display())),
        None => Err("set SEAM_SMOLLM2 to SmolLM2-135M-Instruct.Q4_1.gguf (examples/llama/fetch-smollm2.sh fetches it)".into()),
    }
}

const CASES: &[Case] = &[
    Case {
        name: "stories260k_agrees_with_llama2c",
        files: stories,
        run: teacher_forced,
    },
    Case {
        name: "smollm2_135m_agrees_with_transformers",
        files: smollm2,
        run: teacher_forced,
    },
    Case {
        name: "stories260k_decodes_k_tokens_per_replay",
        files: stories,
        run: k_per_replay,
    },
];

fn run(case: &Case, id: &str) -> Result<Completion, String> {
    let (model, refs) = match (case.files)() {
        Ok(files) => files,
        Err(why) => return Ok(Completion::ignored_with(why)),
    };
    let found = seam_backends::discover();
    let dev = match found
        .devices
        .iter()
        .find(|s| s.id == id)
        .map(|s| s.device())
    {
        Some(Ok(dev)) => dev,
        other => {
            let why = match other {
                Some(Err(e)) => format!("did not open: {e}"),
                _ => "not found".to_string(),
            };
            if seam::testing::is_required(id) {
                return Err(format!(
                    "{} requires {id}, but it {why}",
                    seam::testing::REQUIRE_ENV
                ));
            }
            return Ok(Completion::ignored_with(why));
        }
    };
    let model = Model::load(&model).map_err(|e| e.to_string())?;
    let refs = reference::load(&refs).map_err(|e| e.to_string())?;
    (case.run)(&dev, &model, &refs)
}

/// Every step of the reference, teacher-forced, eagerly and replayed.
fn teacher_forced(dev: &Device, model: &Model, refs: &[Step]) -> Result<Completion, String> {
    let id = dev.info().id();
    let r = check(dev, model, refs, |_, _| {}).map_err(|e| e.to_string())?;
    eprintln!("on {id}: {}", r.describe());
    if !r.passed() {
        return Err(format!("{id}: {}", r.failures.join("; ")));
    }
    // Every step after the first moves both RoPEs, the V copy and attention
    // in each layer, and the embedding copy unless the token repeats: at
    // least 4 launches a layer.
    let least = (refs.len() - 1) * 4 * model.config.n_layers as usize;
    if r.updates < least || r.argmax_checked < refs.len() / 2 {
        return Err(format!(
            "{id}: {} launches updated (at least {least} expected), {} argmaxes checked",
            r.updates, r.argmax_checked
        ));
    }
    Ok(Completion::Completed)
}

/// 64 greedy tokens from the reference's first input, 8 per replay by the
/// device's own loop, against one replay per token with the argmax on the
/// host and against the reference's choices.
fn k_per_replay(dev: &Device, model: &Model, refs: &[Step]) -> Result<Completion, String> {
    let id = dev.info().id();
    if let seam::ConditionalSupport::Unsupported(why) = dev.conditional_support() {
        return Ok(Completion::ignored_with(format!(
            "conditional bodies unsupported: {why}"
        )));
    }
    let n = refs.len().min(64);
    let e = |e: seam_example_llama::Error| e.to_string();
    let mut host = Llama::new(dev, model, n as u32).map_err(e)?;
    let mut want = Vec::with_capacity(n);
    let mut token = refs[0].input;
    for _ in 0..n {
        token = argmax(&host.step(token, Mode::Captured).map_err(e)?);
        want.push(token);
    }
    let mut looped = Llama::new(dev, model, n as u32).map_err(e)?;
    let mut got = Vec::with_capacity(n);
    let mut token = refs[0].input;
    while got.len() < n {
        let made = looped.decode_on_device(token, 8, None).map_err(e)?;
        token = *made
            .last()
            .ok_or_else(|| format!("{id}: a replay made no token"))?;
        got.extend(made);
    }
    if got != want {
        return Err(format!(
            "{id}: 8 per replay {got:?} != one per replay {want:?}"
        ));
    }
    if looped.logits().map_err(e)? != host.logits().map_err(e)? {
        return Err(format!(
            "{id}: the last logits differ between the two loops"
        ));
    }
    let reference: Vec<u32> = refs[..n].iter().map(|s| s.next).collect();
    if got != reference {
        return Err(format!("{id}: {got:?} != the reference's {reference:?}"));
    }
    eprintln!("on {id}: {n} tokens, 8 per replay, as one per replay and the reference");
    Ok(Completion::Completed)
}

fn main() {
    let (rest, filters) = seam::testing::split_filters(std::env::args());
    let mut args = Arguments::from_iter(rest);
    let mut ids: Vec<String> = seam_backends::discover()
        .devices
        .iter()
        .map(|s| s.id.clone())
        .collect();
    for want in seam::testing::required_devices() {
        if !ids.contains(&want) {
            ids.push(want);
        }
    }
    let trials: Vec<Trial> = ids
        .iter()
        .flat_map(|id| {
            CASES.iter().map(move |case| {
                let id = id.clone();
                Trial::ignorable_test(format!("{id}::{}", case.name), move || {
                    run(case, &id).map_err(Into::into)
                })
            })
        })
        .collect();
    let (one, trials) = seam::testing::apply_filters(&filters, args.exact, trials, Trial::name);
    args.filter = one;
    libtest_mimic::run(&args, trials).exit()
}
