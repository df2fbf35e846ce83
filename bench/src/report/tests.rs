//! The report on synthetic rows: every target judged, the tables' ratios and
//! break-even counts, one plot line per arm.

use super::*;
use crate::csv::Row;

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
        md.contains("| seam cuda | eager | 1000 | 5000 | 4600 | 400.0 | 0.400 | 4.60 | 4.32 | – |"),
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
