//! `seam-llama`: a Llama-architecture model (llama2.c checkpoint) through
//! seam, on one device or every device found.
//!
//! - `seam-llama check --model M --reference R [--device D]`: teacher-force
//!   the reference's tokens, eagerly and from one captured graph, and
//!   compare every logit it lists; exits non-zero past the tolerance.
//! - `seam-llama generate --model M --tokens N [--device D] [--eager]`:
//!   greedy tokens from BOS, and tokens per second.

use clap::{Parser, Subcommand};
use seam::Device;
use seam_example_llama::bench::{self, spread};
use seam_example_llama::check::TOLERANCE;
use seam_example_llama::{check, reference, Error, Llama, Mode, Model};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "seam-llama", about = "A Llama-architecture model through seam")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compare the model's logits with a reference's, on each device.
    Check {
        /// The llama2.c checkpoint.
        #[arg(long)]
        model: PathBuf,
        /// The reference: `pos input next id:logit …` per line.
        #[arg(long)]
        reference: PathBuf,
        /// Device ids (`cpu:0`, `vulkan:0,wgpu:0`, …); default: every device found.
        #[arg(long)]
        device: Option<String>,
        /// Only the first N steps of the reference (N ≥ 1).
        #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        steps: Option<usize>,
    },
    /// Time greedy decoding per device, eager and captured in alternating
    /// rounds, with where each token's host time goes.
    Bench {
        /// A llama2.c checkpoint…
        #[arg(long, conflicts_with = "shape", required_unless_present = "shape")]
        model: Option<PathBuf>,
        /// …or a known shape with random weights (`smollm2-135m`, `stories260k`).
        #[arg(long)]
        shape: Option<String>,
        #[arg(long, default_value_t = 128)]
        tokens: u32,
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        #[arg(long)]
        device: Option<String>,
        /// Append one CSV row per round to this file.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Also time K tokens per replay (K ≥ 1), the device's own loop
        /// choosing each (C14; on devices with conditional bodies).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        per_replay: Option<u32>,
    },
    /// Decode greedily from BOS and time it.
    Generate {
        #[arg(long)]
        model: PathBuf,
        /// Tokens to generate (at most the model's seq_len).
        #[arg(long, default_value_t = 64)]
        tokens: u32,
        #[arg(long)]
        device: Option<String>,
        /// Launch by launch instead of replaying the captured step.
        #[arg(long, conflicts_with = "per_replay")]
        eager: bool,
        /// K tokens per replay (K ≥ 1), the device's own loop choosing each (C14).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        per_replay: Option<u32>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check {
            model,
            reference,
            device,
            steps,
        } => run_check(&model, &reference, device.as_deref(), steps),
        Command::Generate {
            model,
            tokens,
            device,
            eager,
            per_replay,
        } => {
            let mode = match (eager, per_replay) {
                (true, _) => Mode::Eager,
                (false, Some(k)) => Mode::OnDevice { per_replay: k },
                (false, None) => Mode::Captured,
            };
            run_generate(&model, tokens, device.as_deref(), mode)
        }
        Command::Bench {
            model,
            shape,
            tokens,
            rounds,
            device,
            csv,
            per_replay,
        } => run_bench(
            model.as_deref(),
            shape.as_deref(),
            (tokens, rounds, per_replay),
            device.as_deref(),
            csv.as_deref(),
        ),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("seam-llama: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &Path) -> Result<Model, Error> {
    let t = Instant::now();
    let model = Model::load(path)?;
    let c = &model.config;
    eprintln!(
        "loaded {}: dim {}, hidden {}, {} layers, {} heads ({} kv), vocab {}, seq_len {} ({:.1} ms)",
        path.display(),
        c.dim,
        c.hidden_dim,
        c.n_layers,
        c.n_heads,
        c.n_kv_heads,
        c.vocab_size,
        c.seq_len,
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(model)
}

/// The devices asked for: by id (comma-separated), or every device found
/// (those that fail to open are listed and left out).
fn devices(want: Option<&str>) -> Result<Vec<Device>, Error> {
    let found = seam_backends::discover();
    if let Some(list) = want {
        return list.split(',').map(|id| one(&found, id.trim())).collect();
    }
    for m in &found.missing {
        eprintln!("{}: skipped: {}", m.backend, m.reason);
    }
    let mut out = Vec::new();
    for slot in &found.devices {
        match slot.device() {
            Ok(d) => out.push(d),
            Err(e) => eprintln!("{}: skipped: does not open: {e}", slot.id),
        }
    }
    Ok(out)
}

/// Device `id` of `found`, or why it is not there.
fn one(found: &seam_backends::Discovery, id: &str) -> Result<Device, Error> {
    let Some(slot) = found.devices.iter().find(|s| s.id == id) else {
        let ids: Vec<&str> = found.devices.iter().map(|s| s.id.as_str()).collect();
        let missing: Vec<String> = found
            .missing
            .iter()
            .map(|m| format!("{}: {}", m.backend, m.reason))
            .collect();
        return Err(Error::Input(format!(
            "no device {id}; found {}{}",
            ids.join(", "),
            if missing.is_empty() {
                String::new()
            } else {
                format!(" (not found: {})", missing.join("; "))
            }
        )));
    };
    Ok(slot.device()?)
}

fn run_check(
    model: &Path,
    refs: &Path,
    device: Option<&str>,
    steps: Option<usize>,
) -> Result<ExitCode, Error> {
    let model = load(model)?;
    let mut refs = reference::load(refs)?;
    refs.truncate(steps.unwrap_or(usize::MAX));
    if refs.len() > model.config.seq_len as usize {
        return Err(Error::Input(format!(
            "the reference has {} steps; the model takes {} positions",
            refs.len(),
            model.config.seq_len
        )));
    }
    let devs = devices(device)?;
    let (mut ok, mut failed) = (0, 0);
    for dev in &devs {
        let id = dev.info().id();
        let t = Instant::now();
        let n = refs.len();
        let report = check(dev, &model, &refs, |mode, i| {
            if (i + 1) % 64 == 0 && i + 1 < n {
                eprintln!("{id}: {mode:?} {}/{n}", i + 1);
            }
        });
        match report {
            Ok(r) => {
                println!(
                    "check on {id}: {} ({:.1} s)",
                    r.describe(),
                    t.elapsed().as_secs_f64()
                );
                if r.passed() {
                    ok += 1;
                } else {
                    failed += 1;
                    for f in &r.failures {
                        eprintln!("{id}: {f}");
                    }
                }
            }
            Err(e) => {
                println!("check on {id}: FAILED: {e}");
                failed += 1;
            }
        }
    }
    println!("check: {ok} devices within {TOLERANCE:e} of the reference, {failed} not");
    Ok(if failed > 0 || ok == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn run_generate(
    model: &Path,
    tokens: u32,
    device: Option<&str>,
    mode: Mode,
) -> Result<ExitCode, Error> {
    let model = load(model)?;
    if tokens == 0 || tokens > model.config.seq_len {
        return Err(Error::Input(format!(
            "--tokens {tokens}: the model takes 1 to {} positions",
            model.config.seq_len
        )));
    }
    for dev in devices(device)? {
        let id = dev.info().id();
        let mut llama = Llama::new(&dev, &model, tokens)?;
        // The first round compiles and captures; the second is timed.
        bench::generate(&mut llama, mode, tokens)?;
        let t0 = Instant::now();
        let out = bench::generate(&mut llama, mode, tokens)?;
        let secs = t0.elapsed().as_secs_f64();
        let ids: Vec<String> = out.iter().map(u32::to_string).collect();
        println!("generate on {id} ({mode:?}): {}", ids.join(" "));
        if let Some(vocab) = &model.vocab {
            println!(
                "generate on {id} ({mode:?}) as text: {:?}",
                vocab.text(&out)
            );
        }
        println!(
            "generate on {id} ({mode:?}): {:.0} tokens/s over {tokens} tokens (a second run; the first compiled and captured)",
            tokens as f64 / secs.max(1e-9),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_bench(
    model: Option<&Path>,
    shape: Option<&str>,
    (tokens, rounds, per_replay): (u32, u32, Option<u32>),
    device: Option<&str>,
    csv: Option<&Path>,
) -> Result<ExitCode, Error> {
    // Before any round runs: a CSV path that cannot take rows.
    if let Some(path) = csv {
        let folder = path.parent().filter(|f| !f.as_os_str().is_empty());
        if path.is_dir() || folder.is_some_and(|f| !f.is_dir()) {
            return Err(Error::Input(format!(
                "--csv {}: not a file in an existing folder",
                path.display()
            )));
        }
    }
    let (model, name) = match (model, shape) {
        (Some(path), _) => (
            load(path)?,
            path.file_stem()
                .map_or("model".into(), |s| s.to_string_lossy().into_owned()),
        ),
        (None, Some(s)) => {
            let cfg = bench::shape(s).ok_or_else(|| {
                Error::Input(format!(
                    "--shape {s}: known shapes are {}",
                    bench::SHAPES.join(", ")
                ))
            })?;
            let t = Instant::now();
            let m = Model::random(cfg, 0x5EA4);
            eprintln!(
                "{s}: random weights made in {:.1} s",
                t.elapsed().as_secs_f64()
            );
            (m, format!("{s}-random"))
        }
        (None, None) => return Err(Error::Input("give --model or --shape".into())),
    };
    if tokens == 0 || tokens > model.config.seq_len || rounds == 0 {
        return Err(Error::Input(format!(
            "--tokens {tokens} --rounds {rounds}: the model takes 1 to {} positions, and a round is needed",
            model.config.seq_len
        )));
    }
    let mut rows = String::new();
    for dev in devices(device)? {
        let id = dev.info().id();
        let mut modes = vec![Mode::Eager, Mode::Captured];
        let looped = per_replay.map(|k| Mode::OnDevice { per_replay: k });
        match (looped, dev.conditional_support()) {
            (Some(_), seam::ConditionalSupport::Unsupported(why)) => {
                println!("bench {name} on {id}: no K tokens per replay ({why})")
            }
            (Some(m), _) => modes.push(m),
            (None, _) => {}
        }
        let result = bench::bench(&dev, &model, tokens, rounds, &modes)?;
        let of = |mode: Mode| -> Vec<&bench::Round> {
            result.iter().filter(|r| r.mode == mode).collect()
        };
        for &mode in &modes {
            let r = of(mode);
            let (med, lo, hi) = spread(&r.iter().map(|r| r.tokens_per_s).collect::<Vec<_>>());
            let part =
                |f: fn(&bench::Round) -> f64| spread(&r.iter().map(|x| f(x)).collect::<Vec<_>>()).0;
            println!(
                "bench {name} on {id} {mode:?}: {med:.0} tokens/s ({lo:.0}–{hi:.0} over {rounds} rounds of {tokens}); \
                 per token: update {:.1} µs, submit {:.1} µs, read {:.1} µs",
                part(|x| x.update_us),
                part(|x| x.submit_us),
                part(|x| x.read_us)
            );
            for (i, x) in r.iter().enumerate() {
                rows.push_str(&format!(
                    "seam,{id},{name},{},{tokens},{i},{:.2},{:.2},{:.2},{:.2}\n",
                    mode.name(),
                    x.tokens_per_s,
                    x.update_us,
                    x.submit_us,
                    x.read_us
                ));
            }
        }
        // Each mode against the one before it (captured ÷ eager, K per
        // replay ÷ captured), round by round.
        for pair in modes.windows(2) {
            let ratios: Vec<f64> = of(pair[1])
                .iter()
                .zip(of(pair[0]))
                .map(|(a, b)| a.tokens_per_s / b.tokens_per_s)
                .collect();
            let (med, lo, hi) = spread(&ratios);
            println!(
                "bench {name} on {id}: {} ÷ {} {med:.2}× ({lo:.2}–{hi:.2}, round by round)",
                pair[1].name(),
                pair[0].name()
            );
        }
    }
    if let Some(path) = csv {
        use std::io::Write;
        let fresh = !path.exists();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::Input(format!("{}: cannot be written: {e}", path.display())))?;
        let header = if fresh { CSV_HEADER } else { "" };
        write!(f, "{header}{rows}")
            .map_err(|e| Error::Input(format!("{}: cannot be written: {e}", path.display())))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The bench's CSV columns (the PyTorch arm writes the same).
const CSV_HEADER: &str =
    "arm,device,model,mode,tokens,round,tokens_per_s,update_us,submit_us,read_us\n";
