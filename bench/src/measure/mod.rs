//! The seam arms: every backend found, eager and replay, through the public
//! API only (`seam::Device`, `seam::ops`, capture scopes, `Graph::replay`).
//!
//! - [`arms`]: one case's eager, replay, pipelined and re-recorded runs, and
//!   the `--profile` split of a seam call into core and backend time;
//! - [`workloads`]: the chain and the decode stack, their call lists and
//!   the bit-exact checks before timing;
//! - [`update`]: the graph-update loop;
//! - [`paired`]: seam against the in-process raw anchors (`raw_cuda`,
//!   `raw_vulkan`), interleaved round by round.

mod arms;
mod loops;
mod nodes;
mod paired;
mod read;
mod update;
mod workloads;

pub use loops::{loop_overhead, LoopConfig};
pub use nodes::{node_overhead, NodeConfig};

use arms::{copy_bandwidth, profile};
use workloads::{chain, decode, decode_fold, decode_fused, decode_split, Stack};

use crate::csv::Row;
use crate::stats::summarize;
use seam::{DType, Device, OpCall, OpKind};
use seam_backends::DeviceSlot;
use std::time::Instant;

/// The ops (all f32) the seam arms launch: the chain's `scale_add`, the
/// decode stack's four, and the copy of the copy-bandwidth floor; each
/// backend prepares them before timing.
pub const BENCH_OPS: [(OpKind, DType); 6] = [
    (OpKind::ScaleAdd, DType::F32),
    (OpKind::RmsNorm, DType::F32),
    (OpKind::Gemm, DType::F32),
    (OpKind::Silu, DType::F32),
    (OpKind::Add, DType::F32),
    (OpKind::Copy, DType::F32),
];

/// What to measure, and for how long.
#[derive(Clone, Debug)]
pub struct Config {
    /// Time budget of one measurement (one metric of one mode of one case), µs.
    pub budget_us: f64,
    /// Chain lengths.
    pub ns: Vec<u64>,
    /// Chain element counts.
    pub elems: Vec<u64>,
    /// Decode hidden sizes.
    pub hiddens: Vec<u64>,
    /// Decode layer counts.
    pub layers: Vec<u64>,
    /// Backends to measure (empty: every GPU backend found).
    pub backends: Vec<String>,
    /// Largest decode hidden size on backends other than cuda.
    pub other_hidden_max: u64,
    /// Longest chain measured in `rerecord` and `recapture` modes.
    pub rerecord_max_nodes: u64,
    /// Interleaved rounds of the graph-update modes (per-round ratios).
    pub rounds: usize,
    /// Size of each buffer of the copy-bandwidth measurement, MiB (0: none).
    pub copy_mib: u64,
    /// Split seam calls into core and backend time (a second device per backend).
    pub profile: bool,
    /// The `arm` column (`seam`; another name for a variant build).
    pub arm: String,
}

/// Where rows and comments go (stdout in the binary, a Vec in tests).
pub trait Sink {
    fn row(&mut self, row: Row);
    fn comment(&mut self, text: &str);
}

pub(crate) type Res<T> = std::result::Result<T, String>;

pub(crate) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    arm: &'static str,
    device: &'static str,
    workload: &'static str,
    elems: u64,
    hidden: u64,
    layers: u64,
    nodes: u64,
}

impl Meta {
    pub(crate) fn row(&self, mode: &str, metric: &str, samples: &[f64]) -> Row {
        let s = summarize(samples);
        Row {
            arm: self.arm.into(),
            device: self.device.into(),
            mode: mode.into(),
            workload: self.workload.into(),
            elems: self.elems,
            hidden: self.hidden,
            layers: self.layers,
            nodes: self.nodes,
            metric: metric.into(),
            median_us: s.median,
            p99_us: s.p99,
            reps: s.reps as u64,
        }
    }
}

/// `a[i] / b[i]` per round: the median and, in brackets, the min–max.
pub(crate) fn ratio_text(a: &[f64], b: &[f64]) -> String {
    let v: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    format!("{:.3} ({lo:.3}–{hi:.3})", update::median(&v))
}

/// A sink that keeps every line, for the table commands' tests.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Lines(pub(crate) Vec<String>);

#[cfg(test)]
impl Sink for Lines {
    fn row(&mut self, row: crate::csv::Row) {
        self.0.push(row.to_string());
    }
    fn comment(&mut self, text: &str) {
        self.0.push(text.to_string());
    }
}

pub(crate) fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

pub(crate) fn submit(dev: &Device, calls: &[OpCall]) -> seam::Result<()> {
    for c in calls {
        dev.launch(c)?;
    }
    Ok(())
}

/// Deterministic pseudo-random floats in [lo, hi) (`seam::testing::Rng`).
pub fn randoms(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut rng = seam::testing::Rng::new(seed);
    (0..n).map(|_| lo + (hi - lo) * rng.next_unit()).collect()
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// Run every seam arm this machine has.
pub fn run(cfg: &Config, out: &mut dyn Sink) {
    let found = seam_backends::discover();
    for miss in &found.missing {
        out.comment(&format!(
            "seam {}: not measured: {}",
            miss.backend, miss.reason
        ));
    }
    let mut seen = Vec::new();
    for slot in &found.devices {
        let wanted = if cfg.backends.is_empty() {
            slot.backend != "cpu"
        } else {
            cfg.backends.iter().any(|b| b == slot.backend)
        };
        if !wanted {
            continue;
        }
        if seen.contains(&slot.backend) {
            out.comment(&format!(
                "seam {}: not measured (first device of each backend only)",
                slot.id
            ));
            continue;
        }
        seen.push(slot.backend);
        if let Err(e) = backend(slot, cfg, out) {
            out.comment(&format!("seam {}: stopped: {e}", slot.id));
        }
    }
    out.comment(&format!(
        "{} loaded: {}",
        cfg.arm,
        loaded_libraries().join(" ")
    ));
}

/// The GPU runtime libraries this process has mapped (which cuBLAS, which
/// Vulkan loader): arms that load different builds are not comparable.
pub fn loaded_libraries() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut libs: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            ["libcuda.", "libcublas", "libnvrtc", "libvulkan", "nvidia"]
                .iter()
                .any(|k| p.contains(k))
        })
        .map(str::to_string)
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

fn backend(slot: &DeviceSlot, cfg: &Config, out: &mut dyn Sink) -> Res<()> {
    let device = leak(slot.backend);
    let arm = leak(&cfg.arm);
    let t = Instant::now();
    let dev = slot.device().map_err(err)?;
    let info = dev.info();
    out.comment(&format!(
        "seam {}: {} ({}), capture {:?}, update {:?}, opened in {:.0} us",
        slot.id,
        info.name,
        info.driver,
        dev.capture_support(),
        dev.update_support(),
        us(t)
    ));
    dev.prepare(&BENCH_OPS).map_err(err)?;
    let mut raw = paired::open_raw(device, &info.name, out);
    for &elems in &cfg.elems {
        for &n in &cfg.ns {
            let m = Meta {
                arm,
                device,
                workload: "chain",
                elems,
                hidden: 0,
                layers: 0,
                nodes: n,
            };
            if let Err(e) = chain(&dev, m, cfg, out, raw.as_mut()) {
                out.comment(&format!(
                    "seam {device} chain elems={elems} N={n}: skipped: {e}"
                ));
            }
        }
    }
    if cfg.copy_mib > 0 && !cfg.hiddens.is_empty() {
        // The floor of the decode step: its weight bytes at this bandwidth.
        let elems = cfg.copy_mib * (1 << 20) / 4;
        let m = Meta {
            arm,
            device,
            workload: "copy",
            elems,
            hidden: 0,
            layers: 0,
            nodes: 1,
        };
        if let Err(e) = copy_bandwidth(&dev, m, cfg, out) {
            out.comment(&format!(
                "seam {device} copy bandwidth ({} MiB): skipped: {e}",
                cfg.copy_mib
            ));
        }
    }
    let lmax = cfg.layers.iter().copied().max().unwrap_or(0);
    // The decode step with each layer one launch of a fused user kernel:
    // its own arm, so every table and target sees it beside the four-launch
    // step.
    let fused_arm = leak(&format!("{arm}-fused"));
    let fused_kernel = if cfg.hiddens.is_empty() {
        false
    } else {
        match dev.register_kernel(&seam_kernels::user::NORM_GEMV_SILU_ADD) {
            Ok(()) => true,
            Err(e) => {
                out.comment(&format!("{fused_arm} {device}: not measured: {e}"));
                false
            }
        }
    };
    // The same layers in two launches each, where one launch cannot split
    // the rows (every backend but CUDA), and in L + 1 launches, each
    // layer's finish folded into the next layer's partial sums.
    let split_arm = leak(&format!("{arm}-split"));
    let fold_arm = leak(&format!("{arm}-fold"));
    let split_kernels = device != "cuda"
        && !cfg.hiddens.is_empty()
        && match dev
            .register_kernel(&seam_kernels::user::LAYER_PARTIAL)
            .and_then(|()| dev.register_kernel(&seam_kernels::user::LAYER_FINISH))
            .and_then(|()| dev.register_kernel(&seam_kernels::user::LAYER_FOLD))
        {
            Ok(()) => true,
            Err(e) => {
                out.comment(&format!("{split_arm} {device}: not measured: {e}"));
                false
            }
        };
    for &h in &cfg.hiddens {
        if device != "cuda" && h > cfg.other_hidden_max {
            out.comment(&format!(
                "seam {device} decode H={h}: not measured (above --other-hidden-max {})",
                cfg.other_hidden_max
            ));
            continue;
        }
        let stack = match Stack::new(&dev, h, lmax) {
            Ok(s) => s,
            Err(e) => {
                out.comment(&format!("seam {device} decode H={h}: skipped: {e}"));
                continue;
            }
        };
        for &l in &cfg.layers {
            let m = Meta {
                arm,
                device,
                workload: "decode",
                elems: h,
                hidden: h,
                layers: l,
                nodes: 4 * l,
            };
            if let Err(e) = decode(&dev, &stack, m, cfg, out) {
                out.comment(&format!("seam {device} decode H={h} L={l}: skipped: {e}"));
            }
            let fused = Meta {
                arm: fused_arm,
                nodes: l,
                ..m
            };
            if fused_kernel {
                if let Err(e) = decode_fused(&dev, &stack, fused, cfg, out) {
                    out.comment(&format!(
                        "{fused_arm} {device} decode H={h} L={l}: skipped: {e}"
                    ));
                }
            }
            if split_kernels {
                let split = Meta {
                    arm: split_arm,
                    nodes: 2 * l,
                    ..m
                };
                if let Err(e) = decode_split(&dev, &stack, split, cfg, out) {
                    out.comment(&format!(
                        "{split_arm} {device} decode H={h} L={l}: skipped: {e}"
                    ));
                }
                let fold = Meta {
                    arm: fold_arm,
                    nodes: l + 1,
                    ..m
                };
                if let Err(e) = decode_fold(&dev, &stack, fold, cfg, out) {
                    out.comment(&format!(
                        "{fold_arm} {device} decode H={h} L={l}: skipped: {e}"
                    ));
                }
                let gemv = Meta {
                    workload: "partial",
                    nodes: l,
                    ..split
                };
                if let Err(e) = read::layer_gemv(&dev, &stack, gemv, cfg, out) {
                    out.comment(&format!(
                        "{split_arm} {device} layer GEMV H={h} L={l}: skipped: {e}"
                    ));
                }
            }
            let m = Meta {
                workload: "read",
                nodes: l,
                ..m
            };
            if let Err(e) = read::read_floor(&dev, &stack, m, cfg, out) {
                out.comment(&format!(
                    "seam {device} read floor H={h} L={l}: skipped: {e}"
                ));
            }
        }
    }
    drop(dev);
    if cfg.profile {
        for &n in &cfg.ns {
            let m = Meta {
                arm,
                device,
                workload: "chain",
                elems: 1,
                hidden: 0,
                layers: 0,
                nodes: n,
            };
            if let Err(e) = profile(slot, m, cfg, out) {
                out.comment(&format!("seam {device} profile N={n}: skipped: {e}"));
            }
        }
    }
    Ok(())
}
