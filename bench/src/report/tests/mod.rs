//! The report on synthetic rows: every target judged, the tables' ratios and
//! break-even counts, one plot line per arm.

use super::*;
use input::{synthetic, with_updates};

mod input;

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
    // per-round ratio 1.012 (same process): met, shown with its rounds and medians
    let t1 = find("1.03×");
    assert_eq!(t1.met, Some(true));
    assert!(t1.measured.contains("rounds 1.00–1.03×"), "{}", t1.measured);
    assert!(
        t1.measured.contains("seam 825.0 vs raw 815.0 µs e2e"),
        "{}",
        t1.measured
    );
    // seam − raw submit, per round: 0.2 µs met at N=1000, 0.7 µs missed at N=100
    let t2 = find("N=1000: host submit");
    assert_eq!(t2.met, Some(true));
    assert!(t2.measured.starts_with("+0.20 µs"), "{}", t2.measured);
    let t2b = find("N=100: host submit");
    assert_eq!(t2b.met, Some(false));
    assert!(t2b.note.contains("0.20 µs"), "{}", t2b.note);
    // eager submit ratio 1.146: missed by 0.05× (4%)
    let t3 = find("cuLaunchKernel");
    assert_eq!(t3.met, Some(false));
    assert!(t3.note.contains("(4% over)"), "{}", t3.note);
    // seam vulkan vs raw ash: 1.03 met at N=100, 1.08 missed at N=1000
    assert_eq!(
        find("N=100 (1 element): e2e ≤ 1.05× raw ash").met,
        Some(true)
    );
    assert_eq!(
        find("N=1000 (1 element): e2e ≤ 1.05× raw ash").met,
        Some(false)
    );
    // decode floor, L=8 H=8192: 2 GiB of weights at the run's best copy
    // (cuda, 4000 GB/s) is 536.9 µs for every backend: cuda's 687.4 µs
    // replay is 1.28×, missed; vulkan's own copy (3000 GB/s) would have
    // given it an easier floor (715.8 µs, 0.96×) and does not.
    let fc = find("cuda decode replay per step");
    assert_eq!(fc.met, Some(false), "{}", fc.measured);
    assert!(fc.measured.contains("1.280×"), "{}", fc.measured);
    let fv = find("vulkan decode replay per step");
    assert_eq!(fv.met, Some(false), "{}", fv.measured);
    assert!(
        fv.measured.contains("the run's best copy: seam cuda")
            && fv.measured.contains("its own copy: 3000 GB/s"),
        "{}",
        fv.measured
    );
    // 825/1035 = 0.797, shown and not judged (cross-process)
    let torch = find("÷ PyTorch CUDAGraph");
    assert_eq!(torch.met, None);
    assert!(torch.measured.ends_with("= 0.797×"), "{}", torch.measured);
    assert_eq!(torch.note, "information");
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
    assert_eq!(tagged.met, Some(true), "1.02× per launch");
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
    // floor of H=8192 L=8 on cuda: 2 GiB at 4000 GB/s = 536.9 µs; 687.4 / 536.9 = 1.28×
    assert!(d.contains("| 536.9 | 1.28× |"), "{d}");
    // seam vs raw, same process: per-round ratio with its range, medians beside it
    assert!(md.contains("## seam vs the raw driver, same process"));
    let p = md
        .lines()
        .find(|l| l.starts_with("| seam cuda | replay | 1000 | 1 |"))
        .expect("same-process row");
    assert!(p.contains("| 825.0 | 815.0 | 1.01× (1.00–1.03) |"), "{p}");
    assert!(p.contains("+0.20 (+0.19…+0.22)"), "{p}");
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
    // every backend against its floor (the raw arm against the cuda floor of the same run)
    let svg = decode_floor_svg(&input, 8).unwrap();
    for label in [
        "seam cuda",
        "seam vulkan",
        "raw driver",
        "target: 1.25× floor",
    ] {
        assert!(svg.contains(label), "{label} missing from the floor plot");
    }
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
            "decode_floor_L1.svg",
            "decode_speedup_L8.svg",
            "decode_floor_L8.svg"
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn update_targets_are_judged_on_the_rounds_ratios() {
    let v = verdicts(&with_updates());
    let find = |s: &str| {
        v.iter()
            .find(|x| x.target.starts_with(s))
            .unwrap_or_else(|| panic!("no target {s}"))
    };
    let t = find("CUDA, chain N=1000: rebind + replay ≤ 1.2×");
    assert_eq!(t.met, Some(true), "{t:?}");
    assert_eq!(
        t.measured,
        "1.10× median of 15 rounds, rounds 1.05–1.18× (880.0 vs 800.0 µs e2e)"
    );
    let t = find("CUDA, chain N=1000: rebind + replay ≥ 10×");
    assert_eq!(t.met, Some(true), "{t:?}");
    assert!(t.measured.contains("(9000 vs 880.0 µs e2e)"), "{t:?}");
    let t = find("CUDA, chain N=1000: the update alone ≥ 10× cheaper");
    assert_eq!(t.met, Some(true), "{t:?}");
    assert_eq!(t.measured, "600.0 µs vs 30.00 µs = 20.00×");
    let t = find("Vulkan, chain N=1000: rebind + replay ≤ 1.1×");
    assert_eq!(t.met, Some(false));
    assert_eq!(t.note, "missed by 0.40× (36% over)");
    let t = find("Vulkan, chain N=1000: rebind + replay ≥ 10×");
    assert_eq!(t.met, Some(false));
    assert_eq!(t.note, "missed by 7.00× (70% short)");
    let t = find("Vulkan, chain N=1000: the update alone ≥ 10× cheaper");
    assert_eq!(t.met, Some(false));
    assert_eq!(t.note, "missed by 5.00× (50% short)");
    // not measured: wgpu, and the cuda-only build (it has other rows only)
    assert_eq!(find("wgpu, chain N=1000: rebind + replay ≤ 1.2×").met, None);
    assert_eq!(
        find("[seam-cudaonly] CUDA, chain N=1000: rebind + replay ≥ 10×").met,
        None
    );
    // a median exactly on the bound meets it
    let mut input = with_updates();
    for row in &mut input.rows {
        if row.device == "vulkan" && row.metric == "x_replay" {
            row.median_us = 1.1;
        }
    }
    let v = verdicts(&input);
    let t = v
        .iter()
        .find(|x| {
            x.target
                .starts_with("Vulkan, chain N=1000: rebind + replay ≤ 1.1×")
        })
        .unwrap();
    assert_eq!(t.met, Some(true));
}

#[test]
fn update_table_lists_every_arm_with_its_in_place_update() {
    let md = markdown(&with_updates());
    assert!(md.contains("## Graph update: rebind vs re-capture vs copy-in"));
    let line = |start: &str| {
        md.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start}"))
            .to_string()
    };
    assert_eq!(
        line("| seam cuda | chain N=1000, 1 el. |"),
        "| seam cuda | chain N=1000, 1 el. | 800.0 | 880.0, 1.10× (1.05–1.18) | 30.00 | \
         9000, 11.25× (11.00–11.60) | 10.20× (9.80–10.90) | 810.0, 1.01× (1.00–1.03) |"
    );
    // raw's in-place update is cuGraphExecKernelNodeSetParams
    let raw = line("| raw driver | chain N=1000, 1 el. |");
    assert!(raw.contains("| 800.0, 1.01× (1.00–1.02) |"), "{raw}");
    assert!(raw.contains("| 12.00× (11.50–12.50) |"), "{raw}");
    // PyTorch measures replay and copy-in only
    let torch = line("| PyTorch | chain N=1000, 1 el. |");
    assert!(
        torch.ends_with("| – | – | – | – | 1010, 1.01× (0.99–1.04) |"),
        "{torch}"
    );
    // raw first, then PyTorch, then seam
    let at = |s: &str| md.find(s).unwrap();
    assert!(at("| raw driver | chain N=1000") < at("| PyTorch | chain N=1000"));
    assert!(at("| PyTorch | chain N=1000") < at("| seam cuda | chain N=1000"));
    // the update modes stay out of the chain tables and plots
    assert!(!md.contains("| seam cuda rebind |"));
}

/// The read floor is the fastest `read` replay of the run for the step's
/// (L, H), whichever seam backend measured it: seam cuda's decode replay
/// is judged against it (≤ 1.10×) with every other arm's ratio shown, and
/// the decode table gets the floor and each arm's ratio. Mutations: take
/// the slowest read (`min_by` → `max_by`), take an empty row's 0 µs
/// (`> 0.0` → `>= 0.0`), or judge vulkan's replay → red.
#[test]
fn the_read_floor_is_the_fastest_read_of_the_same_weights() {
    let (l, h) = (32, 8192);
    let mut rows = Vec::new();
    for (arm, dev, us) in [
        ("seam", "cuda", 2400.0),
        ("seam", "vulkan", 2700.0),
        ("torch", "cuda", 2402.0),
    ] {
        rows.push(input::r(
            arm,
            dev,
            "graph",
            "decode",
            h,
            l,
            4 * l,
            "e2e_us",
            us,
        ));
    }
    for (dev, us) in [("cuda", 2000.0), ("vulkan", 2100.0)] {
        rows.push(input::r(
            "seam", dev, "graph", "read", h, l, l, "e2e_us", us,
        ));
    }
    // A read of another step is not this step's floor, nor is a row that
    // measured nothing (a median of 0).
    rows.push(input::r(
        "seam", "cuda", "graph", "read", 4096, l, l, "e2e_us", 10.0,
    ));
    rows.push(input::r(
        "seam-cudaonly",
        "cuda",
        "graph",
        "read",
        h,
        l,
        l,
        "e2e_us",
        0.0,
    ));
    let input = Input {
        rows,
        comments: Vec::new(),
    };
    assert_eq!(
        input.read_floor_us(h, l),
        Some((2000.0, "seam cuda".to_string()))
    );
    let v = verdicts(&input);
    let t = v
        .iter()
        .find(|x| {
            x.target
                .contains("H=8192: seam cuda replay ≤ 1.1× the read floor")
        })
        .unwrap_or_else(|| panic!("{:?}", v.iter().map(|x| &x.target).collect::<Vec<_>>()));
    assert_eq!(t.met, Some(false), "{}", t.measured);
    assert!(t.measured.contains("= 1.200×"), "{}", t.measured);
    assert!(t.measured.contains("read by seam cuda"), "{}", t.measured);
    assert!(
        t.measured.contains("seam vulkan 1.35×") && t.measured.contains("torch cuda 1.20×"),
        "{}",
        t.measured
    );
    let md = markdown(&input);
    assert!(md.contains("read floor | replay ÷ read floor |"), "{md}");
    assert!(
        md.contains("| 2000.0 | 1.35× |") || md.contains("| 2000 | 1.35× |"),
        "{md}"
    );
}

/// Each seam arm that measured the decode step on cuda (the four-launch
/// step, the fused one) is judged on its own: its cuda replay against the
/// read floor and PyTorch (≤ 0.90×), its vulkan and wgpu replays against
/// its own cuda replay (≤ 1.10×, ≤ 1.25×), never against another arm's;
/// the fused arm's siblings (`seam-split`, `seam-fold`, no cuda replay of
/// their own) against the fused arm's cuda replay.
#[test]
fn each_seam_arm_is_judged_against_its_own_cuda_replay() {
    let (l, h) = (32, 4096);
    let mut rows = Vec::new();
    for (arm, dev, us) in [
        ("seam", "cuda", 2400.0),
        ("seam", "vulkan", 2700.0),
        ("seam-fused", "cuda", 2100.0),
        ("seam-fused", "vulkan", 2300.0),
        ("seam-fused", "wgpu", 2700.0),
        ("seam-split", "vulkan", 2400.0),
        ("seam-split", "wgpu", 2500.0),
        ("seam-fold", "vulkan", 2300.0),
        ("torch", "cuda", 2400.0),
    ] {
        rows.push(input::r(arm, dev, "graph", "decode", h, l, l, "e2e_us", us));
    }
    rows.push(input::r(
        "seam", "cuda", "graph", "read", h, l, l, "e2e_us", 2000.0,
    ));
    let input = Input {
        rows,
        comments: Vec::new(),
    };
    let v = verdicts(&input);
    let met = |target: &str| {
        v.iter()
            .find(|x| x.target.contains(target))
            .unwrap_or_else(|| {
                panic!(
                    "no {target}: {:?}",
                    v.iter().map(|x| &x.target).collect::<Vec<_>>()
                )
            })
            .met
    };
    assert_eq!(
        met("seam-fused cuda replay ≤ 1.1× the read floor"),
        Some(true)
    );
    assert_eq!(
        met("H=4096: seam cuda replay ≤ 1.1× the read floor"),
        Some(false)
    );
    assert_eq!(
        met("seam-fused vulkan replay ≤ 1.1× seam-fused cuda"),
        Some(true)
    );
    assert_eq!(
        met("seam-fused wgpu replay ≤ 1.25× seam-fused cuda"),
        Some(false)
    );
    assert_eq!(met("seam vulkan replay ≤ 1.1× seam cuda"), Some(false));
    // The layers in two launches each, against the fused arm's cuda step.
    assert_eq!(
        met("seam-split vulkan replay ≤ 1.1× seam-fused cuda"),
        Some(false)
    );
    assert_eq!(
        met("seam-split wgpu replay ≤ 1.25× seam-fused cuda"),
        Some(true)
    );
    // And in L + 1 launches, each finish folded into the next layer.
    assert_eq!(
        met("seam-fold vulkan replay ≤ 1.1× seam-fused cuda"),
        Some(true)
    );
    assert_eq!(met("seam-fused cuda replay ≤ 0.90× PyTorch"), Some(true));
    assert_eq!(met("H=4096: seam cuda replay ≤ 0.90× PyTorch"), Some(false));
    assert!(
        !v.iter().any(|x| x
            .target
            .contains("seam-fused vulkan replay ≤ 1.1× seam cuda")),
        "an arm judged against another arm's cuda replay"
    );
    // The chain's per-build targets go to builds that measured the chain.
    assert!(
        !v.iter()
            .any(|x| x.target.contains("chain") && x.target.contains("seam-fused")),
        "the fused decode arm judged on the chain"
    );
}

/// The two-launch layer's split table: one line per arm, device and step
/// with the GEMV free and chained, the device's own read of the same
/// weights (not another device's), the rounds' ratio, the barrier and the
/// finish per layer. Mutations: read another device's read, swap the
/// per-layer differences, drop the table → red.
#[test]
fn the_two_launch_layer_is_taken_apart_per_device() {
    let (l, h) = (32, 4096);
    let mut rows = vec![
        input::r("seam", "cuda", "graph", "read", h, l, l, "e2e_us", 700.0),
        input::r("seam", "vulkan", "graph", "read", h, l, l, "e2e_us", 750.0),
        input::r(
            "seam-split",
            "vulkan",
            "graph",
            "decode",
            h,
            l,
            2 * l,
            "e2e_us",
            1100.0,
        ),
        input::r(
            "seam-split",
            "vulkan",
            "graph",
            "partial",
            h,
            l,
            l,
            "e2e_us",
            810.0,
        ),
    ];
    rows.push(input::r(
        "seam-split",
        "vulkan",
        "graph",
        "partial-chain",
        h,
        l,
        l,
        "e2e_us",
        906.0,
    ));
    let mut ratio = input::r(
        "seam-split",
        "vulkan",
        "graph",
        "partial-chain",
        h,
        l,
        l,
        "x_free",
        1.118,
    );
    ratio.p99_us = 1.2;
    rows.push(ratio);
    let md = markdown(&Input {
        rows,
        comments: Vec::new(),
    });
    assert!(md.contains("## The two-launch layer, taken apart"), "{md}");
    assert!(
        md.contains(
            "| seam-split vulkan | 32 | 4096 | 750.0 | 810.0 | 1.08× | 906.0 | 1.118× (1.200×) | 3.00 | 1100 | 6.06 |"
        ),
        "{md}"
    );
    let none = markdown(&Input {
        rows: Vec::new(),
        comments: Vec::new(),
    });
    assert!(!none.contains("taken apart"), "{none}");
}
