//! CSV rows of every arm → a Markdown report (ratios to the raw-driver arm,
//! the targets' verdicts, break-even replay counts) and SVG plots.

use crate::csv::{self, Row};
use plotters::prelude::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Rows of every arm, and the comment lines (devices, skipped cases).
#[derive(Clone, Debug, Default)]
pub struct Input {
    pub rows: Vec<Row>,
    pub comments: Vec<String>,
}

impl Input {
    /// Parse each arm's CSV text (`name` only labels errors).
    pub fn parse(texts: &[(String, String)]) -> Result<Input, String> {
        let mut input = Input::default();
        for (name, text) in texts {
            input
                .rows
                .extend(csv::parse(text).map_err(|e| format!("{name}: {e}"))?);
            for c in text.lines().filter_map(|l| l.trim().strip_prefix('#')) {
                let c = c.trim().to_string();
                if !input.comments.contains(&c) {
                    input.comments.push(c);
                }
            }
        }
        Ok(input)
    }

    /// The median of one metric of one case.
    fn get(&self, s: &Series, case: &Case, metric: &str) -> Option<f64> {
        self.row(s, case, metric).map(|r| r.median_us)
    }

    fn row(&self, s: &Series, case: &Case, metric: &str) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.arm == s.arm
                && r.device == s.device
                && r.mode == s.mode
                && r.workload == case.workload
                && r.elems == case.elems
                && r.layers == case.layers
                && r.nodes == case.nodes
                && r.metric == metric
        })
    }

    /// Every (arm, device, mode) that measured this workload, raw first, then torch, then seam.
    fn series(&self, workload: &str) -> Vec<Series> {
        let set: BTreeSet<(u8, String, String, u8, String)> = self
            .rows
            .iter()
            .filter(|r| r.workload == workload && mode_rank(&r.mode) < 9)
            .map(|r| {
                (
                    arm_rank(&r.arm),
                    r.arm.clone(),
                    r.device.clone(),
                    mode_rank(&r.mode),
                    r.mode.clone(),
                )
            })
            .collect();
        set.into_iter()
            .map(|(_, arm, device, _, mode)| Series { arm, device, mode })
            .collect()
    }

    fn values(&self, pick: impl Fn(&Row) -> bool) -> Vec<u64> {
        let set: BTreeSet<u64> = self
            .rows
            .iter()
            .filter(|r| pick(r))
            .map(|r| r.nodes)
            .collect();
        set.into_iter().collect()
    }
}

fn arm_rank(arm: &str) -> u8 {
    match arm {
        "raw" => 0,
        "torch" => 1,
        "seam" => 2,
        _ => 3,
    }
}

fn mode_rank(mode: &str) -> u8 {
    match mode {
        "eager" => 0,
        "graph" => 1,
        "rerecord" => 2,
        _ => 9,
    }
}

/// One arm on one device in one mode.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Series {
    arm: String,
    device: String,
    mode: String,
}

impl Series {
    fn new(arm: &str, device: &str, mode: &str) -> Series {
        Series {
            arm: arm.into(),
            device: device.into(),
            mode: mode.into(),
        }
    }

    fn label(&self) -> String {
        let arm = match self.arm.as_str() {
            "raw" => "raw driver".to_string(),
            "torch" => "PyTorch".to_string(),
            "seam" => format!("seam {}", self.device),
            other => format!("{other} {}", self.device),
        };
        let mode = match (self.arm.as_str(), self.mode.as_str()) {
            ("raw", "eager") => "cuLaunchKernel",
            ("raw", "graph") => "cuGraphLaunch",
            ("torch", "graph") => "CUDAGraph",
            (_, "graph") => "replay",
            (_, "rerecord") => "re-record",
            (_, m) => m,
        };
        format!("{arm} {mode}")
    }

    /// The raw-driver series a ratio is taken against: the graph for
    /// replays, cuLaunchKernel for eager and re-recorded runs.
    fn raw(&self) -> Series {
        let mode = if self.mode == "graph" {
            "graph"
        } else {
            "eager"
        };
        Series::new("raw", "cuda", mode)
    }
}

/// One workload instance.
#[derive(Clone, Copy, Debug)]
struct Case {
    workload: &'static str,
    elems: u64,
    layers: u64,
    nodes: u64,
}

impl Case {
    fn chain(elems: u64, n: u64) -> Case {
        Case {
            workload: "chain",
            elems,
            layers: 0,
            nodes: n,
        }
    }
    fn decode(hidden: u64, layers: u64) -> Case {
        Case {
            workload: "decode",
            elems: hidden,
            layers,
            nodes: 4 * layers,
        }
    }
}

/// A time in µs, to a precision that suits its size.
pub fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn ratio(v: Option<f64>, base: Option<f64>) -> String {
    match (v, base) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:.2}×", v / b),
        _ => "–".into(),
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(us).unwrap_or_else(|| "–".into())
}

/// One-time cost of the graph path (capture + instantiate + first replay) and
/// the number of runs after which capture-and-replay has cost less in total
/// than running eagerly every time. `None` when replay is not faster.
fn one_time(input: &Input, s: &Series, case: &Case) -> (Option<f64>, Option<u64>) {
    if s.mode != "graph" {
        return (None, None);
    }
    let cap = input.get(s, case, "capture_us");
    let first = input.get(s, case, "first_replay_us");
    let (Some(cap), Some(first)) = (cap, first) else {
        return (None, None);
    };
    // PyTorch instantiates inside its capture: it has no separate row.
    let total = cap + input.get(s, case, "instantiate_us").unwrap_or(0.0) + first;
    let eager = input.get(&Series::new(&s.arm, &s.device, "eager"), case, "e2e_us");
    let graph = input.get(s, case, "e2e_us");
    (Some(total), break_even(total, eager, graph))
}

/// Smallest n with `total + (n - 1)·graph <= n·eager`.
pub fn break_even(total: f64, eager: Option<f64>, graph: Option<f64>) -> Option<u64> {
    let (e, g) = (eager?, graph?);
    if e <= g {
        return None;
    }
    Some((((total - g) / (e - g)).ceil().max(1.0)) as u64)
}

/// A target's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub target: String,
    pub measured: String,
    pub met: Option<bool>,
    /// "met", "missed by …", or why it could not be judged.
    pub note: String,
}

/// The targets, judged on the rows (benchmarks, not tests).
pub fn verdicts(input: &Input) -> Vec<Verdict> {
    let mut v = Vec::new();
    let seam = |dev: &str, mode: &str| Series::new("seam", dev, mode);
    let raw = |mode: &str| Series::new("raw", "cuda", mode);
    let torch = Series::new("torch", "cuda", "graph");
    let c1000 = Case::chain(1, 1000);
    let c100 = Case::chain(1, 100);
    let per_node = |s: &Series, c: &Case, m: &str| input.get(s, c, m).map(|x| x / c.nodes as f64);
    let missing = |target: &str| Verdict {
        target: target.into(),
        measured: "–".into(),
        met: None,
        note: "not measured in this run".into(),
    };

    // T1–T4 for every seam build that measured cuda (`seam`: every backend
    // compiled in; others, e.g. `seam-cudaonly`, are tagged).
    let mut cuda_arms: Vec<String> = Vec::new();
    for r in &input.rows {
        if r.arm.starts_with("seam") && r.device == "cuda" && !cuda_arms.contains(&r.arm) {
            cuda_arms.push(r.arm.clone());
        }
    }
    cuda_arms.sort_by_key(|a| a != "seam");
    if cuda_arms.is_empty() {
        cuda_arms.push("seam".into());
    }
    for arm in &cuda_arms {
        let tag = if arm == "seam" {
            String::new()
        } else {
            format!("[{arm}] ")
        };
        let cuda = |mode: &str| Series::new(arm, "cuda", mode);
        // T1: replay e2e per node ≤ 1.03× raw graph
        let t = format!(
            "{tag}CUDA replay, chain N=1000 (1 element): e2e per node ≤ 1.03× raw driver graph"
        );
        match (
            per_node(&cuda("graph"), &c1000, "e2e_us"),
            per_node(&raw("graph"), &c1000, "e2e_us"),
        ) {
            (Some(a), Some(b)) => v.push(limit(&t, a / b, 1.03, "×", |x| {
                format!("{} µs vs {} µs per node = {x:.3}×", us(a), us(b))
            })),
            _ => v.push(missing(&t)),
        }
        // T2: host submit per replay ≤ raw + 0.5 µs (N = 1000 and 100)
        for c in [c1000, c100] {
            let t = format!(
                "{tag}CUDA replay, chain N={}: host submit per replay ≤ raw + 0.5 µs",
                c.nodes
            );
            match (
                input.get(&cuda("graph"), &c, "submit_us"),
                input.get(&raw("graph"), &c, "submit_us"),
            ) {
                (Some(a), Some(b)) => v.push(limit(&t, a - b, 0.5, " µs over raw", |x| {
                    format!("{} µs vs {} µs ({x:+.2} µs)", us(a), us(b))
                })),
                _ => v.push(missing(&t)),
            }
        }
        // T3: eager host time per launch ≤ 1.10× raw cuLaunchKernel
        let t = format!(
            "{tag}CUDA eager, chain N=1000: host time per launch ≤ 1.10× raw cuLaunchKernel"
        );
        match (
            per_node(&cuda("eager"), &c1000, "submit_us"),
            per_node(&raw("eager"), &c1000, "submit_us"),
        ) {
            (Some(a), Some(b)) => v.push(limit(&t, a / b, 1.10, "×", |x| {
                format!("{} µs vs {} µs per launch = {x:.3}×", us(a), us(b))
            })),
            _ => v.push(missing(&t)),
        }
        // T4: replay per node ≥ 15% below PyTorch CUDAGraph
        let t = format!(
            "{tag}CUDA replay, chain N=1000: e2e per node ≥ 15% below PyTorch CUDAGraph (≤ 0.85×)"
        );
        match (
            per_node(&cuda("graph"), &c1000, "e2e_us"),
            per_node(&torch, &c1000, "e2e_us"),
        ) {
            (Some(a), Some(b)) => v.push(limit(&t, a / b, 0.85, "×", |x| {
                format!("{} µs vs {} µs per node = {x:.3}×", us(a), us(b))
            })),
            _ => v.push(missing(&t)),
        }
    }
    // T5: Vulkan replay ≤ 1.0 µs per dispatch at N = 1000
    let t = "Vulkan replay, chain N=1000: ≤ 1.0 µs per dispatch (e2e)";
    match per_node(&seam("vulkan", "graph"), &c1000, "e2e_us") {
        Some(a) => v.push(limit(t, a, 1.0, " µs", |x| {
            format!("{x:.3} µs per dispatch")
        })),
        None => v.push(missing(t)),
    }
    // T6: Vulkan replay ≥ 2× faster than re-recording at N = 100
    for (mode, what) in [
        ("eager", "eager (recorded anew every run)"),
        ("rerecord", "capture + end + replay every run"),
    ] {
        let t = format!("Vulkan, chain N=100: replay ≥ 2× faster than {what}");
        match (
            input.get(&seam("vulkan", mode), &c100, "e2e_us"),
            input.get(&seam("vulkan", "graph"), &c100, "e2e_us"),
        ) {
            (Some(a), Some(b)) => {
                let x = a / b;
                let met = x >= 2.0;
                v.push(Verdict {
                    target: t,
                    measured: format!("{} µs vs {} µs = {x:.2}×", us(a), us(b)),
                    met: Some(met),
                    note: if met {
                        "met".into()
                    } else {
                        format!(
                            "missed by {:.2}× ({:.0}% short)",
                            2.0 - x,
                            (1.0 - x / 2.0) * 100.0
                        )
                    },
                });
            }
            _ => v.push(missing(&t)),
        }
    }
    v
}

/// A "value ≤ bound" target.
fn limit(
    target: &str,
    value: f64,
    bound: f64,
    unit: &str,
    show: impl Fn(f64) -> String,
) -> Verdict {
    let met = value <= bound;
    Verdict {
        target: target.into(),
        measured: show(value),
        met: Some(met),
        note: if met {
            "met".into()
        } else if unit == "×" {
            format!(
                "missed by {:.3}× ({:.1}% over)",
                value - bound,
                (value / bound - 1.0) * 100.0
            )
        } else {
            format!("missed by {:.2}{unit}", value - bound)
        },
    }
}

/// The whole Markdown report.
pub fn markdown(input: &Input) -> String {
    let mut md = String::new();
    md.push_str("# seam benchmark: results\n\n");
    md.push_str(
        "Generated by `cargo xtask bench report` from `raw.csv`, `torch.csv`, `seam.csv` and \
         `seam_cuda.csv`, all measured in one device command (see docs/bench.md for the method). \
         Times are medians in µs (p99 in brackets where shown); \
         ratios (×) are to the raw-driver arm in the same mode \
         (replay vs cuGraphLaunch, eager and re-record vs cuLaunchKernel).\n\n",
    );
    if !input.comments.is_empty() {
        md.push_str("Devices and notes from the run:\n\n");
        for c in &input.comments {
            md.push_str(&format!("- {c}\n"));
        }
        md.push('\n');
    }
    md.push_str("## Targets\n\n| target | measured | verdict |\n|---|---|---|\n");
    for v in verdicts(input) {
        let mark = match v.met {
            Some(true) => "✅ ",
            Some(false) => "❌ ",
            None => "",
        };
        md.push_str(&format!(
            "| {} | {} | {mark}{} |\n",
            v.target, v.measured, v.note
        ));
    }
    md.push('\n');
    let elems: BTreeSet<u64> = input
        .rows
        .iter()
        .filter(|r| r.workload == "chain")
        .map(|r| r.elems)
        .collect();
    for e in elems {
        chain_table(input, e, &mut md);
    }
    decode_table(input, &mut md);
    profile_table(input, &mut md);
    md
}

fn chain_table(input: &Input, elems: u64, md: &mut String) {
    md.push_str(&format!(
        "## Chain of N dependent tiny kernels, {elems} element{}\n\n",
        if elems == 1 { "" } else { "s" }
    ));
    md.push_str(
        "| arm | N | submit / iter | submit / node | e2e / iter (p99) | e2e / node | × raw | \
         pipelined / node | × raw | one-time (capture + inst. + 1st) | break-even runs |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let ns = input.values(|r| r.workload == "chain" && r.elems == elems);
    for s in input.series("chain") {
        for &n in &ns {
            let c = Case::chain(elems, n);
            let Some(e2e) = input.row(&s, &c, "e2e_us") else {
                continue;
            };
            let nf = n as f64;
            let sub = input.get(&s, &c, "submit_us");
            let pipe = input.get(&s, &c, "pipe_us");
            let raw = s.raw();
            let (once, even) = one_time(input, &s, &c);
            md.push_str(&format!(
                "| {} | {n} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} |\n",
                s.label(),
                opt(sub),
                opt(sub.map(|x| x / nf)),
                us(e2e.median_us),
                us(e2e.p99_us),
                us(e2e.median_us / nf),
                ratio(Some(e2e.median_us), input.get(&raw, &c, "e2e_us")),
                opt(pipe.map(|x| x / nf)),
                ratio(pipe, input.get(&raw, &c, "pipe_us")),
                opt(once),
                break_even_text(&s, even),
            ));
        }
    }
    md.push('\n');
}

fn break_even_text(s: &Series, even: Option<u64>) -> String {
    match (s.mode.as_str(), even) {
        ("graph", Some(n)) => n.to_string(),
        ("graph", None) => "never".into(),
        _ => "".into(),
    }
}

fn decode_table(input: &Input, md: &mut String) {
    let cases: BTreeSet<(u64, u64)> = input
        .rows
        .iter()
        .filter(|r| r.workload == "decode")
        .map(|r| (r.layers, r.hidden))
        .collect();
    if cases.is_empty() {
        return;
    }
    md.push_str(
        "## Decode step: L × (rms_norm → gemm 1×H·H×H → silu → add), batch 1\n\n\
         Speedup = eager e2e / replay e2e per step (both with a wait after each step).\n\n\
         | arm | L | H | eager e2e / step | replay e2e / step (p99) | speedup | replay × raw | \
         eager pipelined | replay pipelined | one-time | break-even runs |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let arms: Vec<(String, String)> = {
        let mut seen: Vec<(String, String)> = Vec::new();
        for s in input.series("decode") {
            let k = (s.arm.clone(), s.device.clone());
            if !seen.contains(&k) {
                seen.push(k);
            }
        }
        seen
    };
    for (arm, device) in &arms {
        let eager = Series::new(arm, device, "eager");
        let graph = Series::new(arm, device, "graph");
        for &(l, h) in &cases {
            let c = Case::decode(h, l);
            let e = input.get(&eager, &c, "e2e_us");
            let Some(g) = input.row(&graph, &c, "e2e_us") else {
                if let Some(e) = e {
                    md.push_str(&format!(
                        "| {} | {l} | {h} | {} | – | – | – | – | – | – | – |\n",
                        eager.label(),
                        us(e)
                    ));
                }
                continue;
            };
            let (once, even) = one_time(input, &graph, &c);
            md.push_str(&format!(
                "| {} | {l} | {h} | {} | {} ({}) | {} | {} | {} | {} | {} | {} |\n",
                graph
                    .label()
                    .replace(" replay", "")
                    .replace(" cuGraphLaunch", "")
                    .replace(" CUDAGraph", ""),
                opt(e),
                us(g.median_us),
                us(g.p99_us),
                ratio(e, Some(g.median_us)),
                ratio(
                    Some(g.median_us),
                    input.get(&Series::new("raw", "cuda", "graph"), &c, "e2e_us")
                ),
                opt(input.get(&eager, &c, "pipe_us")),
                opt(input.get(&graph, &c, "pipe_us")),
                opt(once),
                break_even_text(&graph, even),
            ));
        }
    }
    md.push('\n');
}

fn profile_table(input: &Input, md: &mut String) {
    let rows: Vec<&Row> = input
        .rows
        .iter()
        .filter(|r| r.metric == "prof_total_us")
        .collect();
    if rows.is_empty() {
        return;
    }
    md.push_str(
        "## Where the seam host time goes (`--profile`)\n\n\
         A second device wrapped in a timing backend: `backend` is the time inside the \
         backend's `launch`/`replay` (driver call included), `core` the rest of the seam call \
         (lock, validation, lowering, bookkeeping). The wrapper's own two clock reads per call \
         land in `backend`.\n\n\
         | arm | mode | N | seam total / iter | backend / iter | core / iter | core / node | \
         backend / node | raw submit / node | raw + cuCtxSetCurrent / node |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let c = Case::chain(r.elems, r.nodes);
        let s = Series::new(&r.arm, &r.device, &r.mode);
        let n = r.nodes as f64;
        let b = input.get(&s, &c, "prof_backend_us");
        let core = input.get(&s, &c, "prof_core_us");
        let raw = input.get(&s.raw(), &c, "submit_us");
        let ctx_mode = format!("{}_ctx", s.raw().mode);
        let raw_ctx = input.get(&Series::new("raw", "cuda", &ctx_mode), &c, "submit_us");
        let per = |v: Option<f64>, d: f64| opt(v.map(|x| x / d));
        let d = if r.mode == "graph" { 1.0 } else { n };
        md.push_str(&format!(
            "| {} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.arm,
            r.device,
            r.mode,
            r.nodes,
            us(r.median_us),
            opt(b),
            opt(core),
            per(core, d),
            per(b, d),
            per(raw, d),
            per(raw_ctx, d),
        ));
    }
    md.push('\n');
}

const COLORS: [RGBColor; 16] = [
    RGBColor(0, 0, 0),
    RGBColor(130, 130, 130),
    RGBColor(214, 39, 40),
    RGBColor(255, 152, 150),
    RGBColor(31, 119, 180),
    RGBColor(120, 180, 230),
    RGBColor(44, 160, 44),
    RGBColor(152, 223, 138),
    RGBColor(148, 103, 189),
    RGBColor(197, 176, 213),
    RGBColor(255, 127, 14),
    RGBColor(255, 187, 120),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

type Line = (String, Vec<(f64, f64)>);

/// A log-log (or log-x) line plot as an SVG string.
fn plot(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    log_y: bool,
) -> Result<String, String> {
    let pts = lines.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
    }
    let (x0, x1) = (x0 / 1.3, x1 * 1.3);
    // Ticks at the measured x values (powers of ten or two), as integers.
    let keys: BTreeSet<u64> = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0 as u64))
        .collect();
    let keys: Vec<f64> = keys.into_iter().map(|k| k as f64).collect();
    let x_axis = (x0..x1).log_scale().with_key_points(keys);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 680)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_label_formatter(&|x| format!("{x:.0}"))
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .draw()
                    .map_err(|e| e.to_string())?;
                for (i, (name, p)) in lines.iter().enumerate() {
                    let color = COLORS[i % COLORS.len()];
                    let style = ShapeStyle::from(&color).stroke_width(2);
                    chart
                        .draw_series(LineSeries::new(p.iter().copied(), style))
                        .map_err(|e| e.to_string())?
                        .label(name.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                    chart
                        .draw_series(p.iter().map(|&q| Circle::new(q, 3, color.filled())))
                        .map_err(|e| e.to_string())?;
                }
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .border_style(BLACK)
                    .background_style(WHITE.mix(0.85))
                    .draw()
                    .map_err(|e| e.to_string())?;
            }};
        }
        if log_y {
            // Headroom above the data for the legend.
            let (y0, y1) = (y0 / 1.5, y1 * 40.0);
            draw!(b
                .build_cartesian_2d(x_axis, (y0..y1).log_scale())
                .map_err(|e| e.to_string())?);
        } else {
            let (y0, y1) = (0.0f64.min(y0), y1 * 1.15);
            draw!(b
                .build_cartesian_2d(x_axis, y0..y1)
                .map_err(|e| e.to_string())?);
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// Per-node e2e time vs chain length, one line per arm and mode.
pub fn chain_svg(input: &Input, elems: u64) -> Result<String, String> {
    let ns = input.values(|r| r.workload == "chain" && r.elems == elems);
    let lines: Vec<Line> = input
        .series("chain")
        .into_iter()
        .map(|s| {
            let p = ns
                .iter()
                .filter_map(|&n| {
                    input
                        .get(&s, &Case::chain(elems, n), "e2e_us")
                        .map(|v| (n as f64, v / n as f64))
                })
                .collect();
            (s.label(), p)
        })
        .filter(|(_, p): &Line| !p.is_empty())
        .collect();
    plot(
        &format!(
            "Chain of N tiny kernels ({elems} element{}): e2e per node",
            if elems == 1 { "" } else { "s" }
        ),
        "N (kernels per iteration)",
        "µs per node (wait after each iteration)",
        &lines,
        true,
    )
}

/// Replay speedup (eager e2e / replay e2e) vs hidden size, one line per arm.
pub fn decode_svg(input: &Input, layers: u64) -> Result<String, String> {
    let hs: BTreeSet<u64> = input
        .rows
        .iter()
        .filter(|r| r.workload == "decode" && r.layers == layers)
        .map(|r| r.hidden)
        .collect();
    let mut lines = Vec::new();
    let mut arms: Vec<(String, String)> = Vec::new();
    for s in input.series("decode") {
        let k = (s.arm.clone(), s.device.clone());
        if !arms.contains(&k) {
            arms.push(k);
        }
    }
    for (arm, device) in arms {
        let e = Series::new(&arm, &device, "eager");
        let g = Series::new(&arm, &device, "graph");
        let p: Vec<(f64, f64)> = hs
            .iter()
            .filter_map(|&h| {
                let c = Case::decode(h, layers);
                Some((
                    h as f64,
                    input.get(&e, &c, "e2e_us")? / input.get(&g, &c, "e2e_us")?,
                ))
            })
            .collect();
        if !p.is_empty() {
            lines.push((
                g.label()
                    .replace(" replay", "")
                    .replace(" cuGraphLaunch", "")
                    .replace(" CUDAGraph", ""),
                p,
            ));
        }
    }
    plot(
        &format!("Decode step, L = {layers}: replay speedup over eager vs hidden size"),
        "hidden size H",
        "eager e2e / replay e2e",
        &lines,
        false,
    )
}

/// Write `results.md` and every plot into `dir`; returns the files written.
pub fn write_all(input: &Input, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = vec![(dir.join("results.md"), markdown(input))];
    let elems: BTreeSet<u64> = input
        .rows
        .iter()
        .filter(|r| r.workload == "chain")
        .map(|r| r.elems)
        .collect();
    for e in elems {
        files.push((
            dir.join(format!("chain_per_node_{e}.svg")),
            chain_svg(input, e)?,
        ));
    }
    let layers: BTreeSet<u64> = input
        .rows
        .iter()
        .filter(|r| r.workload == "decode")
        .map(|r| r.layers)
        .collect();
    for l in layers {
        files.push((
            dir.join(format!("decode_speedup_L{l}.svg")),
            decode_svg(input, l)?,
        ));
    }
    let mut written = Vec::new();
    for (path, text) in files {
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn r(
        arm: &str,
        dev: &str,
        mode: &str,
        wl: &str,
        elems: u64,
        layers: u64,
        nodes: u64,
        metric: &str,
        v: f64,
    ) -> Row {
        Row {
            arm: arm.into(),
            device: dev.into(),
            mode: mode.into(),
            workload: wl.into(),
            elems,
            hidden: if wl == "decode" { elems } else { 0 },
            layers,
            nodes,
            metric: metric.into(),
            median_us: v,
            p99_us: v * 1.2,
            reps: 100,
        }
    }

    /// Synthetic rows: raw, torch and seam cuda/vulkan on the chain and the decode stack.
    fn synthetic() -> Input {
        let mut rows = Vec::new();
        // (arm, device, eager per node, graph per node, submit per replay)
        let arms = [
            ("raw", "cuda", 4.8, 0.81, 3.8),
            ("torch", "cuda", 10.1, 1.03, 6.1),
            ("seam", "cuda", 5.5, 0.82, 4.0),
            ("seam", "vulkan", 3.0, 2.2, 30.0),
        ];
        for (arm, dev, e, g, sub) in arms {
            for n in [1u64, 10, 100, 1000] {
                let nf = n as f64;
                for elems in [1u64, 1 << 20] {
                    rows.push(r(
                        arm,
                        dev,
                        "eager",
                        "chain",
                        elems,
                        0,
                        n,
                        "submit_us",
                        e * nf * 0.9,
                    ));
                    rows.push(r(arm, dev, "eager", "chain", elems, 0, n, "e2e_us", e * nf));
                    rows.push(r(
                        arm,
                        dev,
                        "eager",
                        "chain",
                        elems,
                        0,
                        n,
                        "pipe_us",
                        e * nf * 0.95,
                    ));
                    rows.push(r(arm, dev, "graph", "chain", elems, 0, n, "submit_us", sub));
                    rows.push(r(
                        arm,
                        dev,
                        "graph",
                        "chain",
                        elems,
                        0,
                        n,
                        "e2e_us",
                        g * nf + 5.0,
                    ));
                    rows.push(r(
                        arm,
                        dev,
                        "graph",
                        "chain",
                        elems,
                        0,
                        n,
                        "pipe_us",
                        g * nf,
                    ));
                    rows.push(r(
                        arm,
                        dev,
                        "graph",
                        "chain",
                        elems,
                        0,
                        n,
                        "capture_us",
                        2.0 * nf,
                    ));
                    if arm != "torch" {
                        rows.push(r(
                            arm,
                            dev,
                            "graph",
                            "chain",
                            elems,
                            0,
                            n,
                            "instantiate_us",
                            3.0 * nf,
                        ));
                    }
                    rows.push(r(
                        arm,
                        dev,
                        "graph",
                        "chain",
                        elems,
                        0,
                        n,
                        "first_replay_us",
                        g * nf + 20.0,
                    ));
                }
            }
            for h in [256u64, 1024, 8192] {
                for l in [1u64, 8] {
                    let base = h as f64 / 100.0 * l as f64;
                    rows.push(r(
                        arm,
                        dev,
                        "eager",
                        "decode",
                        h,
                        l,
                        4 * l,
                        "e2e_us",
                        base + 20.0 * l as f64,
                    ));
                    rows.push(r(
                        arm,
                        dev,
                        "graph",
                        "decode",
                        h,
                        l,
                        4 * l,
                        "e2e_us",
                        base + 4.0 * l as f64,
                    ));
                    rows.push(r(
                        arm,
                        dev,
                        "graph",
                        "decode",
                        h,
                        l,
                        4 * l,
                        "capture_us",
                        50.0,
                    ));
                    rows.push(r(
                        arm,
                        dev,
                        "graph",
                        "decode",
                        h,
                        l,
                        4 * l,
                        "first_replay_us",
                        base,
                    ));
                }
            }
        }
        rows.push(r(
            "seam", "vulkan", "rerecord", "chain", 1, 0, 100, "e2e_us", 500.0,
        ));
        rows.push(r(
            "seam",
            "cuda",
            "eager",
            "chain",
            1,
            0,
            1000,
            "prof_total_us",
            5000.0,
        ));
        rows.push(r(
            "seam",
            "cuda",
            "eager",
            "chain",
            1,
            0,
            1000,
            "prof_backend_us",
            4600.0,
        ));
        rows.push(r(
            "seam",
            "cuda",
            "eager",
            "chain",
            1,
            0,
            1000,
            "prof_core_us",
            400.0,
        ));
        rows.push(r(
            "seam-cudaonly",
            "cuda",
            "eager",
            "chain",
            1,
            0,
            1000,
            "submit_us",
            4300.0,
        ));
        Input {
            rows,
            comments: vec!["seam cuda:0: NVIDIA H200".into()],
        }
    }

    #[test]
    fn break_even_counts_runs() {
        // 100 µs once, then 10 µs a replay vs 20 µs eager: 9 runs cost 180 both ways.
        assert_eq!(break_even(100.0, Some(20.0), Some(10.0)), Some(9));
        assert_eq!(break_even(5.0, Some(20.0), Some(10.0)), Some(1));
        assert_eq!(break_even(100.0, Some(10.0), Some(10.0)), None);
        assert_eq!(break_even(100.0, None, Some(10.0)), None);
    }

    #[test]
    fn verdicts_judge_every_target() {
        let v = verdicts(&synthetic());
        let find = |s: &str| v.iter().find(|x| x.target.contains(s)).unwrap();
        // (0.82·1000+5)/(0.81·1000+5) = 1.012: met
        assert_eq!(find("1.03×").met, Some(true));
        // 4.0 - 3.8 = 0.2 µs: met
        assert_eq!(find("N=1000: host submit").met, Some(true));
        // eager submit 5.5/4.8 = 1.146: missed by 4.2%
        let t3 = find("cuLaunchKernel");
        assert_eq!(t3.met, Some(false));
        assert!(t3.note.contains("4.2% over"), "{}", t3.note);
        // 825/1035 = 0.797: met
        assert_eq!(find("PyTorch").met, Some(true));
        // vulkan (2.2·1000+5)/1000 = 2.205 µs per dispatch: missed by 1.21 µs
        let t5 = find("per dispatch");
        assert_eq!(t5.met, Some(false));
        assert!(
            t5.note.contains("1.20 µs") || t5.note.contains("1.21 µs"),
            "{}",
            t5.note
        );
        // eager 300 vs replay 225: 1.33×, missed
        assert_eq!(find("than eager").met, Some(false));
        // rerecord 500 vs 225 = 2.22×: met
        assert_eq!(find("capture + end + replay").met, Some(true));
        // a second seam build is judged on its own, tagged; what it lacks is "not measured"
        let tagged = find("[seam-cudaonly] CUDA eager");
        assert_eq!(tagged.met, Some(true), "4.3 / 4.32 per launch");
        assert_eq!(
            find("[seam-cudaonly] CUDA replay, chain N=1000 (1").met,
            None
        );
    }

    #[test]
    fn markdown_has_targets_ratios_and_break_even() {
        let md = markdown(&synthetic());
        assert!(md.contains("## Targets"));
        assert!(md.contains("- seam cuda:0: NVIDIA H200"));
        // seam cuda replay at N=1000, 1 element: e2e 825 µs, 0.825 µs per node, ratio to raw 825/815.
        let line = md
            .lines()
            .find(|l| l.starts_with("| seam cuda replay | 1000 |"))
            .expect("seam replay row");
        assert!(line.contains("| 0.825 |"), "{line}");
        assert!(line.contains("| 1.01× |"), "{line}");
        // one-time 2000 + 3000 + 840 = 5840; break-even ceil((5840-825)/(5500-825)) = 2
        assert!(line.contains("| 5840 | 2 |"), "{line}");
        // torch has no instantiate row: capture + first replay only
        let torch = md
            .lines()
            .find(|l| l.starts_with("| PyTorch CUDAGraph | 1000 |"))
            .expect("torch row");
        assert!(torch.contains("| 3050 |"), "{torch}");
        assert!(md.contains("## Decode step"));
        // decode H=8192 L=8 seam cuda: eager 81.92·8+160 = 815.4, graph 687.4: speedup 1.19×
        let d = md
            .lines()
            .find(|l| l.starts_with("| seam cuda | 8 | 8192 |"))
            .expect("decode row");
        assert!(d.contains("| 1.19× |"), "{d}");
        assert!(md.contains("## Where the seam host time goes"));
        assert!(
            md.contains(
                "| seam cuda | eager | 1000 | 5000 | 4600 | 400.0 | 0.400 | 4.60 | 4.32 | – |"
            ),
            "{md}"
        );
    }

    #[test]
    fn plots_are_svg_with_one_line_per_arm() {
        let input = synthetic();
        let svg = chain_svg(&input, 1).unwrap();
        assert!(svg.starts_with("<svg") || svg.contains("<svg"));
        for label in [
            "raw driver cuGraphLaunch",
            "PyTorch CUDAGraph",
            "seam vulkan replay",
            "seam vulkan re-record",
        ] {
            assert!(svg.contains(label), "{label} missing from the legend");
        }
        let svg = decode_svg(&input, 8).unwrap();
        assert!(svg.contains("seam cuda") && svg.contains("raw driver"));
        let dir = std::env::temp_dir().join(format!("seam-bench-report-{}", std::process::id()));
        let files = write_all(&input, &dir).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "results.md",
                "chain_per_node_1.svg",
                "chain_per_node_1048576.svg",
                "decode_speedup_L1.svg",
                "decode_speedup_L8.svg"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
