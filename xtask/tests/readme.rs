//! Every command and flag README.md documents, run as a user runs it (the
//! `cargo xtask` alias included), with its output checked: a feature whose
//! output is empty or wrong fails here, not in a user's hands.
//!
//! - the main job with its filters (`--backend`, `--case`), its reports
//!   (JSON, JUnit, Markdown beside the JSON) and `--trace`, in the default
//!   isolated mode: a replay slice for every replay on every device that
//!   times the device, and every replay as a host event on every device;
//! - `cargo xtask report merge` over that report;
//! - certification from an outside crate (`outside/queue-backend`, its own
//!   workspace) with `SEAM_CONFORMANCE_REPORT`;
//! - "Run a model": `seam-llama check` and `generate` with the README's
//!   flags, on a small random model and its own reference written here (the
//!   real model's check is examples/llama/tests/models.rs), in a debug
//!   build like the main job.
//!
//! The main job runs with `--debug` (the README's flag for a debug build):
//! a release build of every backend is minutes of CI for no other check.
//! The README's code block runs in `backends/tests/readme_using_it.rs`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = root()
        .join("target/readme-claims")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `cargo <args>` in `dir`, as a user types it; panics with its output
/// unless it exits 0.
fn cargo(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("`cargo {}` could not start: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "`cargo {}` failed ({}):\n{}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The flags and commands this file runs are the ones README.md documents:
/// a README change that drops or renames one fails here first.
#[test]
fn readme_documents_what_this_file_runs() {
    let text = readme();
    for claim in [
        "cargo xtask conformance ",
        "cargo test --workspace",
        "--backend",
        "cpu,cuda",
        "--case c1_",
        "is refused before any trial runs, with exit status 2",
        "--trace out.json",
        "SEAM_NODE_TIMING=1",
        "target/conformance/report.{json,xml,md}",
        "cargo xtask report merge <reports…>",
        "SEAM_CONFORMANCE_REPORT=target/seam cargo test --test conformance",
        "report.json, report.xml (JUnit), report.md",
        "seam_conformance::harness::certify(&[&my_backend::REGISTRATION]);",
        "cargo run -p seam-example-llama --release -- check --model stories260K.bin --reference reference.txt",
        "cargo run -p seam-example-llama --release -- generate --model stories260K.bin --tokens 64",
    ] {
        assert!(
            text.contains(claim),
            "README.md no longer says `{claim}`: update it or this test"
        );
    }
}

/// `cargo xtask conformance --backend cpu,vulkan,wgpu --case c1_ --trace
/// t.json`: the reports land beside the JSON, hold only the filtered
/// trials, and the trace holds every device's replays, each as a slice.
/// (Vulkan and wgpu are devices where lavapipe is installed, as in CI, and
/// ignored trials elsewhere.)
#[test]
fn the_main_job_filters_reports_and_traces_every_replay_on_every_device() {
    let dir = scratch("main-job");
    let json = dir.join("report.json");
    let trace = dir.join("t.json");
    let out = cargo(
        &root(),
        &[
            "xtask",
            "conformance",
            "--debug",
            "--backend",
            "cpu,vulkan,wgpu",
            "--case",
            "c1_",
            "--json",
            json.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("conformance: "))
        .unwrap_or_else(|| panic!("no summary line:\n{stdout}"));
    assert!(summary.contains(" 0 failed"), "{summary}");

    let report = read_json(&json);
    let trials = report["trials"].as_array().unwrap();
    assert!(!trials.is_empty(), "no trials in the report");
    for t in trials {
        let name = t["name"].as_str().unwrap();
        let backend = name.split(':').next().unwrap();
        assert!(
            ["cpu", "vulkan", "wgpu"].contains(&backend),
            "{name}: outside --backend"
        );
        assert!(name.contains("::c1_"), "{name}: outside --case c1_");
    }
    let devices: Vec<&str> = report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert!(devices.contains(&"cpu:0"), "{devices:?}");
    for ext in ["xml", "md"] {
        let beside = json.with_extension(ext);
        let text = std::fs::read_to_string(&beside)
            .unwrap_or_else(|e| panic!("{} was not written: {e}", beside.display()));
        assert!(
            text.contains("c1_replay_reexecutes"),
            "{}: no trial in it",
            beside.display()
        );
    }

    // The trace: one named process per device, and on each device as many
    // replay slices (device track) as replay submissions (host track).
    let trace = read_json(&trace);
    let events = trace["traceEvents"].as_array().unwrap();
    let pid_of = |device: &str| {
        events
            .iter()
            .find(|e| {
                e["ph"] == "M"
                    && e["name"] == "process_name"
                    && e["args"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with(&format!("{device} (")))
            })
            .map(|e| e["pid"].clone())
            .unwrap_or_else(|| panic!("no process for {device} in the trace"))
    };
    for device in &devices {
        let pid = pid_of(device);
        let replays = |ph: &str| {
            events
                .iter()
                .filter(|e| {
                    e["pid"] == pid
                        && e["ph"] == ph
                        && e["name"].as_str().unwrap().starts_with("replay")
                })
                .count()
        };
        let (submitted, slices) = (replays("i"), replays("X"));
        assert!(submitted > 0, "{device}: no replay in the trace");
        // A backend that does not time the device says so on every device
        // track (wgpu on an adapter without timestamps inside passes); its
        // replays are host events only.
        let tracks: Vec<&str> = events
            .iter()
            .filter(|e| e["pid"] == pid && e["ph"] == "M" && e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| n.contains(" device"))
            .collect();
        let untimed = tracks.iter().filter(|n| n.contains("(not timed: ")).count();
        assert!(
            untimed == 0 || untimed == tracks.len(),
            "{device}: timed on some trials only: {tracks:?}"
        );
        let want = if untimed == 0 { submitted } else { 0 };
        assert_eq!(
            slices, want,
            "{device}: {submitted} replays submitted, {slices} replay slices ({tracks:?})"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `SEAM_NODE_TIMING=1 cargo xtask conformance --backend cpu,vulkan,wgpu
/// --case c1_dependent --trace t.json`: inside every replay slice of each
/// device that times nodes, a `node` slice per launch, on the same track
/// and within the replay's slice; the run prints the table of the nodes
/// that took the most time. (Vulkan and wgpu where lavapipe is installed,
/// as in CI.)
#[test]
fn node_timing_puts_a_slice_per_launch_inside_every_replay() {
    let dir = scratch("node-timing");
    let trace = dir.join("t.json");
    let out = cargo(
        &root(),
        &[
            "xtask",
            "conformance",
            "--debug",
            "--backend",
            "cpu,vulkan,wgpu",
            "--case",
            "c1_dependent",
            "--trace",
            trace.to_str().unwrap(),
        ],
        &[("SEAM_NODE_TIMING", "1")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(" 0 failed"), "{stdout}");
    assert!(
        stdout.contains("the nodes that took the most device time"),
        "no node table:\n{stdout}"
    );
    let trace = read_json(&trace);
    let events = trace["traceEvents"].as_array().unwrap();
    let slice = |e: &Value| {
        let ts = e["ts"].as_f64().unwrap();
        (
            e["pid"].clone(),
            e["tid"].clone(),
            ts,
            ts + e["dur"].as_f64().unwrap(),
        )
    };
    let replays: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"].as_str().unwrap().starts_with("replay"))
        .map(slice)
        .collect();
    let nodes: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "node")
        .map(slice)
        .collect();
    assert!(!replays.is_empty(), "no replay slices");
    // c1_dependent_chain replays a graph of several launches.
    assert!(
        nodes.len() > replays.len(),
        "{} node slices for {} replays",
        nodes.len(),
        replays.len()
    );
    for (pid, tid, start, end) in &nodes {
        // Microsecond floats: allow a nanosecond of rounding.
        let inside = replays
            .iter()
            .any(|(p, t, s, e)| p == pid && t == tid && *s <= start + 1e-3 && *end <= e + 1e-3);
        assert!(
            inside,
            "a node slice ({start}..{end} µs) outside every replay slice of its track"
        );
    }
    for (pid, tid, ..) in &replays {
        assert!(
            nodes.iter().any(|(p, t, ..)| p == pid && t == tid),
            "a device track with replays and no node slices"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `SEAM_REQUIRE_DEVICES=hip:0 cargo xtask conformance --backend hip
/// --case c1_replay_reexecutes`: no HIP device here (CI has none), so the
/// trial that would be ignored fails, the run fails, and the verdict names
/// the variable and the device.
#[test]
fn a_required_device_that_is_missing_fails_the_run() {
    let dir = scratch("require");
    let json = dir.join("r.json");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root())
        .args([
            "xtask",
            "conformance",
            "--debug",
            "--backend",
            "hip",
            "--case",
            "c1_replay_reexecutes",
            "--json",
            json.to_str().unwrap(),
        ])
        .env("SEAM_REQUIRE_DEVICES", "hip:0")
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "a missing required device passed:\n{stdout}"
    );
    let report = read_json(&json);
    let failed: Vec<String> = report["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["name"]
                .as_str()
                .unwrap()
                .starts_with("hip:0::c1_replay_reexecutes")
        })
        .map(|t| format!("{} {}", t["verdict"], t["detail"]))
        .collect();
    assert!(
        !failed.is_empty(),
        "no hip:0 trial in the report:\n{stdout}"
    );
    for v in &failed {
        assert!(
            v.starts_with("\"failed\"") && v.contains("SEAM_REQUIRE_DEVICES requires hip:0"),
            "{v}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// "A filter that selects nothing … is refused before any trial runs":
/// a misspelt backend, a `--case` no case name contains and a `--device`
/// the `--backend` leaves out each exit 2 naming what is wrong, and no
/// trial runs. (A report path with no folder: the binary's own test;
/// xtask makes the JSON report's folder.)
#[test]
fn a_filter_that_selects_nothing_is_refused() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for (args, says) in [
        (
            &["--backend", "vulkn"][..],
            "--backend vulkn: no such backend (known: ",
        ),
        (
            &["--case", "c1_no_such_case"][..],
            "--case c1_no_such_case: no case name contains it",
        ),
        (
            &["--backend", "cpu", "--device", "vulkan:0"][..],
            "--device vulkan:0: its backend is not among --backend cpu",
        ),
    ] {
        let out = Command::new(&cargo)
            .current_dir(root())
            .args(["xtask", "conformance", "--debug"])
            .args(args)
            .output()
            .expect("cargo runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}:\n{stdout}\n{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(
            !stdout.contains("conformance: "),
            "{args:?} ran trials: {stdout}"
        );
    }
}

/// `cargo xtask report merge <report>`: the matrix in Markdown and HTML,
/// with the report's trials in it.
#[test]
fn report_merge_writes_the_matrix() {
    let dir = scratch("merge");
    let json = dir.join("r.json");
    cargo(
        &root(),
        &[
            "xtask",
            "conformance",
            "--debug",
            "--backend",
            "cpu",
            "--case",
            "c6_",
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
    );
    let out_dir = dir.join("merged");
    cargo(
        &root(),
        &[
            "xtask",
            "report",
            "merge",
            json.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[],
    );
    for f in ["matrix.md", "matrix.html"] {
        let text = std::fs::read_to_string(out_dir.join(f))
            .unwrap_or_else(|e| panic!("{f} was not written: {e}"));
        assert!(text.contains("c6_nested_begin_refused"), "{f}: {text}");
        assert!(text.contains("cpu:0"), "{f}");
        assert!(!text.contains("INCOMPLETE"), "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// "Certify your backend": the outside crate's `cargo test` (its
/// `tests/conformance.rs` is the README's) with `SEAM_CONFORMANCE_REPORT`
/// passes and writes the three reports, whose trials are the outside
/// backend's. This is CI's run of the outside crate.
#[test]
fn an_outside_crate_certifies_its_backend_and_writes_the_reports() {
    let dir = scratch("outside");
    let crate_dir = root().join("outside/queue-backend");
    // The workspace's own target folder: the registry crates it shares
    // with the workspace's build are not compiled again.
    let target = root().join("target");
    let out = cargo(
        &crate_dir,
        &["test", "--locked"],
        &[
            ("SEAM_CONFORMANCE_REPORT", dir.to_str().unwrap()),
            ("CARGO_TARGET_DIR", target.to_str().unwrap()),
            // Its own discovery finds its own devices only: what this run
            // requires (CI: cpu:0 and lavapipe's) is not its to find.
            ("SEAM_REQUIRE_DEVICES", ""),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("test result: ok."),
        "no passing libtest summary:\n{stdout}"
    );
    let report = read_json(&dir.join("report.json"));
    let trials = report["trials"].as_array().unwrap();
    assert!(trials.len() >= 78, "{} trials", trials.len());
    assert!(trials
        .iter()
        .all(|t| t["name"].as_str().unwrap().starts_with("queue:")));
    assert_eq!(report["summary"]["failed"], 0);
    for f in ["report.xml", "report.md"] {
        let text = std::fs::read_to_string(dir.join(f))
            .unwrap_or_else(|e| panic!("{f} was not written: {e}"));
        assert!(text.contains("c1_replay_reexecutes"), "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `seam-llama check --model M --reference R` and `seam-llama generate
/// --model M --tokens N` as README.md writes them (every device found): a
/// model's own reference passes on each device, the same reference with
/// one logit moved by 1 % fails the run, and generation prints the tokens
/// of the greedy path the reference took.
#[test]
fn the_model_commands_check_and_generate_on_every_device() {
    use seam_example_llama::{reference, Config, Model};
    let dir = scratch("llama");
    let cfg = Config {
        dim: 32,
        hidden_dim: 48,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        vocab_size: 40,
        seq_len: 16,
        own_classifier: false,
        eps: 1e-5,
        rope_theta: 10_000.0,
    };
    let model = Model::random(cfg, 7);
    std::fs::write(dir.join("stories260K.bin"), model.to_bytes()).unwrap();
    // The greedy path from BOS, teacher-forced: its inputs are its choices.
    let mut tokens = vec![1u32];
    for _ in 0..7 {
        let steps = reference::own(&model, &tokens, 1).unwrap();
        tokens.push(steps.last().unwrap().next);
    }
    let steps = reference::own(&model, &tokens, 8).unwrap();
    std::fs::write(dir.join("reference.txt"), reference::format(&steps)).unwrap();
    let run = |args: &[&str]| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        Command::new(cargo)
            .current_dir(&dir)
            .args(["run", "--quiet", "--manifest-path"])
            .arg(root().join("Cargo.toml"))
            .args(["-p", "seam-example-llama", "--"])
            .args(args)
            .output()
            .expect("cargo runs")
    };
    let check = [
        "check",
        "--model",
        "stories260K.bin",
        "--reference",
        "reference.txt",
    ];
    let out = run(&check);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("check on cpu:0: 8 steps, 64 logits") && stdout.contains(" 0 not"),
        "{stdout}"
    );
    for line in stdout.lines().filter(|l| l.starts_with("check on ")) {
        assert!(
            line.contains("eager = captured bit for bit") && line.contains(", ok ("),
            "{line}"
        );
    }
    let mut moved = steps.clone();
    moved[5].top[1].1 *= 1.01;
    std::fs::write(dir.join("reference.txt"), reference::format(&moved)).unwrap();
    let out = run(&check);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a moved logit passed:\n{stdout}");
    assert!(
        stdout.contains("check on cpu:0: 8 steps") && stdout.contains("FAILED: position 5"),
        "{stdout}"
    );
    let out = run(&["generate", "--model", "stories260K.bin", "--tokens", "8"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path: Vec<String> = tokens[1..].iter().map(u32::to_string).collect();
    let want = format!(
        "generate on cpu:0 (Captured): {} {}",
        path.join(" "),
        steps[7].next
    );
    assert!(stdout.contains(&want), "{want}\nnot in:\n{stdout}");
    assert!(stdout.contains("tokens/s over 8 tokens"), "{stdout}");
    // K tokens per replay, the device's own loop choosing them: the same
    // path on the CPU reference (conditional bodies: Native).
    let out = run(&[
        "generate",
        "--model",
        "stories260K.bin",
        "--tokens",
        "8",
        "--per-replay",
        "3",
        "--device",
        "cpu:0",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = want.replace("(Captured)", "(OnDevice { per_replay: 3 })");
    assert!(stdout.contains(&want), "{want}\nnot in:\n{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
