//! `seam-bench run`: the seam arms, as CSV on stdout.
//! `seam-bench report`: the arms' CSVs → Markdown + SVG.
//! `seam-bench probe gemv|vulkan-stamps|wgpu-submit|cuda-process`: one-off probes (`seam_bench::probe`).
//! `seam-bench nodes`, `seam-bench loops`: what node timing and device loops cost.

use clap::{Parser, Subcommand};
use seam_bench::csv::{Row, HEADER};
use seam_bench::measure::{self, Config, Sink};
use seam_bench::report::{self, Input};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "seam-bench",
    about = "Eager vs replay on every seam backend found"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Measure the seam arms; CSV rows on stdout.
    Run {
        /// Time budget of one measurement, in milliseconds.
        #[arg(long, default_value_t = 60.0)]
        budget_ms: f64,
        /// Chain lengths.
        #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000")]
        ns: Vec<u64>,
        /// Chain element counts.
        #[arg(long, value_delimiter = ',', default_value = "1,1048576")]
        elems: Vec<u64>,
        /// Decode hidden sizes.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "256,512,1024,2048,4096,8192"
        )]
        hiddens: Vec<u64>,
        /// Decode layer counts.
        #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
        layers: Vec<u64>,
        /// Only these backends (default: every GPU backend found).
        #[arg(long, value_delimiter = ',')]
        backend: Vec<String>,
        /// Largest decode hidden size on backends other than cuda.
        #[arg(long, default_value_t = 8192)]
        other_hidden_max: u64,
        /// Longest chain (kernels per iteration) measured re-recorded every run.
        #[arg(long, default_value_t = 1000)]
        rerecord_max_nodes: u64,
        /// Interleaved rounds of the graph-update modes (replay, rebind,
        /// recapture, copyin); ratios are per round.
        #[arg(long, default_value_t = 15)]
        rounds: usize,
        /// Buffer size of the device-to-device copy that measures each
        /// backend's bandwidth (the decode stack's floor), MiB; 0: none.
        #[arg(long, default_value_t = 256)]
        copy_mib: u64,
        /// Also split seam calls into core and backend time.
        #[arg(long)]
        profile: bool,
        /// The CSV's `arm` column (e.g. `seam-cudaonly` for a build with only the cuda backend).
        #[arg(long, default_value = "seam")]
        arm: String,
    },
    /// A one-off probe that locates a miss (lines on stdout).
    Probe {
        /// `gemv` (WGSL GEMV and copy variants on the raw Vulkan device)
        /// or `cuda-process` (the raw CUDA chain as the process fills).
        what: String,
        /// Hidden sizes of the GEMV probe.
        #[arg(long, value_delimiter = ',', default_value = "4096,8192")]
        hiddens: Vec<u32>,
        /// Distinct weights the GEMV probe rotates over.
        #[arg(long, default_value_t = 8)]
        weights: usize,
        /// How the GEMV probe allocates its weights: plain, dedicated or pooled.
        #[arg(long, default_value = "plain")]
        alloc: String,
        /// Candidate `gemm.wgsl` files the GEMV probe also times.
        #[arg(long, value_delimiter = ',')]
        candidates: Vec<PathBuf>,
    },
    /// What node timing costs: replays with tracing off, on, and with node
    /// timing on too (a table on stdout; bench/src/measure/nodes.rs).
    Nodes {
        /// Only these backends (default: every GPU backend found).
        #[arg(long, value_delimiter = ',')]
        backend: Vec<String>,
        /// Chain lengths.
        #[arg(long, value_delimiter = ',', default_value = "1,100,1000")]
        ns: Vec<u64>,
        /// Decode step hidden size.
        #[arg(long, default_value_t = 4096)]
        hidden: u64,
        /// Decode step layers (0: no decode step).
        #[arg(long, default_value_t = 8)]
        layers: u64,
        /// Interleaved rounds.
        #[arg(long, default_value_t = 15)]
        rounds: usize,
        /// Replays per arm per round.
        #[arg(long, default_value_t = 50)]
        replays: usize,
        /// Write a trace of one node-timed decode-step replay per device here.
        #[arg(long)]
        trace: Option<PathBuf>,
    },
    /// What a loop decided on the device costs per iteration: a WHILE
    /// body (C14) against the host's loop of replays (a table on stdout;
    /// bench/src/measure/loops.rs).
    Loops {
        /// Only these backends (default: every backend found).
        #[arg(long, value_delimiter = ',')]
        backend: Vec<String>,
        /// Iteration counts.
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        ks: Vec<u32>,
        /// Interleaved rounds.
        #[arg(long, default_value_t = 15)]
        rounds: usize,
    },
    /// Turn the arms' CSVs into results.md and SVG plots.
    Report {
        /// CSV files (raw, torch, seam: any order, any number).
        #[arg(long = "csv", required = true)]
        csvs: Vec<PathBuf>,
        /// Output folder.
        #[arg(long, default_value = "docs/results/bench")]
        out: PathBuf,
    },
}

struct Stdout;

impl Sink for Stdout {
    fn row(&mut self, row: Row) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{row}");
        let _ = o.flush();
    }
    fn comment(&mut self, text: &str) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "# {text}");
        let _ = o.flush();
    }
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Cmd::Loops {
            backend,
            ks,
            rounds,
        } => {
            measure::loop_overhead(
                &measure::LoopConfig {
                    backends: backend,
                    ks,
                    rounds,
                },
                &mut Stdout,
            );
            ExitCode::SUCCESS
        }
        Cmd::Nodes {
            backend,
            ns,
            hidden,
            layers,
            rounds,
            replays,
            trace,
        } => {
            measure::node_overhead(
                &measure::NodeConfig {
                    backends: backend,
                    ns,
                    decode: (hidden, layers),
                    rounds,
                    replays,
                    trace,
                },
                &mut Stdout,
            );
            ExitCode::SUCCESS
        }
        Cmd::Run {
            budget_ms,
            ns,
            elems,
            hiddens,
            layers,
            backend,
            other_hidden_max,
            rerecord_max_nodes,
            rounds,
            copy_mib,
            profile,
            arm,
        } => {
            println!("{HEADER}");
            let cfg = Config {
                budget_us: budget_ms * 1000.0,
                ns,
                elems,
                hiddens,
                layers,
                backends: backend,
                other_hidden_max,
                rerecord_max_nodes,
                rounds,
                copy_mib,
                profile,
                arm,
            };
            measure::run(&cfg, &mut Stdout);
            ExitCode::SUCCESS
        }
        Cmd::Probe {
            what,
            hiddens,
            weights,
            alloc,
            candidates,
        } => {
            let mut print = |line: String| println!("{line}");
            let result = match what.as_str() {
                #[cfg(feature = "vulkan")]
                "gemv" => candidates
                    .iter()
                    .map(|p| {
                        let text = std::fs::read_to_string(p)
                            .map_err(|e| format!("{}: {e}", p.display()))?;
                        seam_bench::raw_vulkan::probe::candidate(&p.display().to_string(), text)
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .and_then(|c| {
                        let alloc = alloc.parse()?;
                        seam_bench::raw_vulkan::probe::run(&hiddens, weights, alloc, c, &mut print)
                    }),
                #[cfg(feature = "vulkan")]
                "vulkan-stamps" => seam_bench::raw_vulkan::stamps::run(1000, 9, &mut print),
                #[cfg(feature = "wgpu")]
                "wgpu-submit" => seam_bench::raw_wgpu::run(&mut print),
                #[cfg(feature = "cuda")]
                "cuda-process" => seam_bench::probe::cuda_process(&mut print),
                other => Err(format!(
                    "no probe `{other}` in this build (gemv and vulkan-stamps need the vulkan feature, wgpu-submit the wgpu one, cuda-process the cuda one)"
                )),
            };
            let _ = (hiddens, weights, alloc, candidates);
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("seam-bench probe {what}: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Report { csvs, out } => {
            let mut texts = Vec::new();
            for p in &csvs {
                match std::fs::read_to_string(p) {
                    Ok(t) => texts.push((p.display().to_string(), t)),
                    Err(e) => {
                        eprintln!("seam-bench: {}: {e}", p.display());
                        return ExitCode::FAILURE;
                    }
                }
            }
            let result = Input::parse(&texts).and_then(|input| report::write_all(&input, &out));
            match result {
                Ok(files) => {
                    for f in files {
                        println!("wrote {}", f.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("seam-bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
