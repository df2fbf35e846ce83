//! stories260K (a trained Llama-architecture model, read from outside the
//! repository at run time) against the logits of llama2.c's `run.c`, on
//! every device found: one trial per device, teacher-forcing all 256 steps
//! of the reference eagerly and from one captured graph.
//!
//! A trial is *ignored* with the reason where the model is not at hand or
//! the device does not open, and fails where `SEAM_REQUIRE_DEVICES` names
//! the device. The model's folder: `SEAM_STORIES260K`, else
//! `../shared/models/stories260K` beside the checkout.

use libtest_mimic::{Arguments, Completion, Trial};
use seam_example_llama::{check, reference, Model};
use std::path::PathBuf;

/// Where the model and its reference are looked for.
fn folder() -> PathBuf {
    match std::env::var_os("SEAM_STORIES260K") {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models/stories260K")
        }
    }
}

fn run(slot: Option<&seam_backends::DeviceSlot>, id: &str) -> Result<Completion, String> {
    let dir = folder();
    let (model, refs) = (
        dir.join("stories260K.bin"),
        dir.join("reference-greedy-from-bos.txt"),
    );
    if !model.exists() || !refs.exists() {
        return Ok(Completion::ignored_with(format!(
            "stories260K not found in {} (set SEAM_STORIES260K to its folder)",
            dir.display()
        )));
    }
    let dev = match slot.map(|s| s.device()) {
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
    let r = check(&dev, &model, &refs, |_, _| {}).map_err(|e| e.to_string())?;
    eprintln!("check on {id}: {}", r.describe());
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

fn main() {
    let (rest, filters) = seam::testing::split_filters(std::env::args());
    let mut args = Arguments::from_iter(rest);
    let found = seam_backends::discover();
    let mut ids: Vec<String> = found.devices.iter().map(|s| s.id.clone()).collect();
    for want in seam::testing::required_devices() {
        if !ids.contains(&want) {
            ids.push(want);
        }
    }
    let trials: Vec<Trial> = ids
        .into_iter()
        .map(|id| {
            let name = format!("{id}::stories260k_agrees_with_llama2c");
            Trial::ignorable_test(name, move || {
                let found = seam_backends::discover();
                let slot = found.devices.iter().find(|s| s.id == id);
                run(slot, &id).map_err(Into::into)
            })
        })
        .collect();
    let (one, trials) = seam::testing::apply_filters(&filters, args.exact, trials, Trial::name);
    args.filter = one;
    libtest_mimic::run(&args, trials).exit()
}
