//! SVG plots (plotters): per-node e2e time against chain length, and the
//! decode step's replay speedup against hidden size.

use super::parse::{Case, Input, Series};
use plotters::prelude::*;
use std::collections::BTreeSet;

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
    for (arm, device) in input.decode_arms() {
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
            lines.push((g.arm_label(), p));
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

/// Decode replay per step against the floor (weight bytes ÷ the copy
/// bandwidth measured on the same backend in the same run) vs hidden size:
/// one line per arm, replay e2e ÷ floor (1 = at the floor; target ≤ 1.25).
pub fn decode_floor_svg(input: &Input, layers: u64) -> Result<String, String> {
    let hs: BTreeSet<u64> = input
        .rows
        .iter()
        .filter(|r| r.workload == "decode" && r.layers == layers)
        .map(|r| r.hidden)
        .collect();
    let mut lines = Vec::new();
    for (arm, device) in input.decode_arms() {
        let g = Series::new(&arm, &device, "graph");
        let p: Vec<(f64, f64)> = hs
            .iter()
            .filter_map(|&h| {
                let replay = input.get(&g, &Case::decode(h, layers), "e2e_us")?;
                let floor = input.decode_floor_us(&arm, &device, h, layers)?;
                Some((h as f64, replay / floor))
            })
            .collect();
        if !p.is_empty() {
            lines.push((g.arm_label(), p));
        }
    }
    if let Some(&(lo, hi)) = hs.first().zip(hs.last()).as_ref() {
        lines.push((
            "target: 1.25× floor".to_string(),
            vec![(*lo as f64, 1.25), (*hi as f64, 1.25)],
        ));
    }
    plot(
        &format!(
            "Decode step, L = {layers}: replay ÷ floor (weight bytes ÷ measured copy bandwidth)"
        ),
        "hidden size H",
        "replay e2e / floor",
        &lines,
        true,
    )
}
