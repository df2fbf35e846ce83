//! The synthetic inputs the report's tests judge: raw, torch and seam
//! arms on the chain and the decode stack, and the graph-update modes.

use super::super::Input;
use crate::csv::Row;

#[allow(clippy::too_many_arguments)]
pub(super) fn r(
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
        hidden: if matches!(wl, "decode" | "read" | "partial" | "partial-chain") {
            elems
        } else {
            0
        },
        layers,
        nodes,
        metric: metric.into(),
        median_us: v,
        p99_us: v * 1.2,
        reps: 100,
    }
}

/// Synthetic rows: raw, torch and seam cuda/vulkan on the chain and the decode stack.
pub(super) fn synthetic() -> Input {
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
    // seam vs the in-process raw anchors, per-round ratios (range rows:
    // smallest round in the median column, largest in p99).
    let pair = |rows: &mut Vec<Row>, arm: &str, dev: &str, mode: &str, n: u64, m: &str, v: f64| {
        rows.push(r(arm, dev, mode, "chain", 1, 0, n, m, v));
        let mut range = r(
            arm,
            dev,
            mode,
            "chain",
            1,
            0,
            n,
            &format!("{m}_range"),
            v - 0.01,
        );
        range.p99_us = v + 0.02;
        rows.push(range);
    };
    pair(&mut rows, "seam", "cuda", "graph", 1000, "x_raw_e2e", 1.012);
    pair(
        &mut rows,
        "seam",
        "cuda",
        "graph",
        1000,
        "d_raw_submit_us",
        0.2,
    );
    pair(
        &mut rows,
        "seam",
        "cuda",
        "graph",
        100,
        "d_raw_submit_us",
        0.7,
    );
    pair(
        &mut rows,
        "seam",
        "cuda",
        "eager",
        1000,
        "x_raw_submit",
        1.146,
    );
    pair(
        &mut rows,
        "seam-cudaonly",
        "cuda",
        "eager",
        1000,
        "x_raw_submit",
        1.02,
    );
    pair(&mut rows, "seam", "vulkan", "graph", 100, "x_raw_e2e", 1.03);
    pair(
        &mut rows,
        "seam",
        "vulkan",
        "graph",
        1000,
        "x_raw_e2e",
        1.08,
    );
    for (m, v) in [("pair_e2e_us", 825.0), ("raw_e2e_us", 815.0)] {
        rows.push(r("seam", "cuda", "graph", "chain", 1, 0, 1000, m, v));
    }
    for (m, v) in [("pair_submit_us", 4.0), ("raw_submit_us", 3.8)] {
        rows.push(r("seam", "cuda", "graph", "chain", 1, 0, 1000, m, v));
    }
    // copy bandwidth, GB/s (the decode floor)
    for (dev, gbps) in [("cuda", 4000.0), ("vulkan", 3000.0)] {
        rows.push(r("seam", dev, "copy", "copy", 1 << 26, 0, 1, "gbps", gbps));
    }
    Input {
        rows,
        comments: vec!["seam cuda:0: NVIDIA H200".into()],
    }
}

/// A per-round ratio row and its range row (min in the median column, max
/// in the p99 column), as the arms print them.
fn ratio(arm: &str, dev: &str, mode: &str, metric: &str, x: f64, lo: f64, hi: f64) -> [Row; 2] {
    let mut a = r(arm, dev, mode, "chain", 1, 0, 1000, metric, x);
    a.reps = 15;
    let mut b = r(
        arm,
        dev,
        mode,
        "chain",
        1,
        0,
        1000,
        &format!("{metric}_range"),
        lo,
    );
    b.p99_us = hi;
    b.reps = 15;
    [a, b]
}

/// The synthetic rows plus the graph-update modes on the chain, N = 1000:
/// seam cuda meets every target, seam vulkan misses every one, wgpu has
/// none.
pub(super) fn with_updates() -> Input {
    let mut input = synthetic();
    let e2e = |arm: &str, dev: &str, mode: &str, v: f64| {
        r(arm, dev, mode, "chain", 1, 0, 1000, "e2e_us", v)
    };
    let rows = &mut input.rows;
    for (arm, dev) in [("seam", "cuda"), ("seam", "vulkan")] {
        let slow = if dev == "vulkan" { 3.0 } else { 1.0 };
        rows.push(e2e(arm, dev, "replay", 800.0 * slow));
        rows.push(e2e(arm, dev, "rebind", 880.0 * slow));
        rows.push(r(
            arm,
            dev,
            "rebind",
            "chain",
            1,
            0,
            1000,
            "update_us",
            30.0,
        ));
        rows.push(e2e(arm, dev, "recapture", 9000.0 * slow));
        // The update alone: cuda's re-capture 20× its rebind, vulkan's 5×.
        rows.push(r(
            arm,
            dev,
            "recapture",
            "chain",
            1,
            0,
            1000,
            "update_us",
            if dev == "vulkan" { 150.0 } else { 600.0 },
        ));
        rows.push(e2e(arm, dev, "copyin", 810.0 * slow));
    }
    rows.extend(ratio("seam", "cuda", "rebind", "x_replay", 1.1, 1.05, 1.18));
    rows.extend(ratio(
        "seam",
        "cuda",
        "recapture",
        "x_replay",
        11.25,
        11.0,
        11.6,
    ));
    rows.extend(ratio(
        "seam",
        "cuda",
        "recapture",
        "x_rebind",
        10.2,
        9.8,
        10.9,
    ));
    rows.extend(ratio("seam", "cuda", "copyin", "x_replay", 1.01, 1.0, 1.03));
    rows.extend(ratio("seam", "vulkan", "rebind", "x_replay", 1.5, 1.4, 1.7));
    rows.extend(ratio(
        "seam",
        "vulkan",
        "recapture",
        "x_rebind",
        3.0,
        2.5,
        3.2,
    ));
    rows.push(e2e("raw", "cuda", "replay", 790.0));
    rows.push(e2e("raw", "cuda", "setparams", 800.0));
    rows.push(e2e("raw", "cuda", "recapture", 9600.0));
    rows.extend(ratio(
        "raw",
        "cuda",
        "setparams",
        "x_replay",
        1.01,
        1.0,
        1.02,
    ));
    rows.extend(ratio(
        "raw",
        "cuda",
        "recapture",
        "x_setparams",
        12.0,
        11.5,
        12.5,
    ));
    rows.push(e2e("torch", "cuda", "replay", 1000.0));
    rows.push(e2e("torch", "cuda", "copyin", 1010.0));
    rows.extend(ratio(
        "torch", "cuda", "copyin", "x_replay", 1.01, 0.99, 1.04,
    ));
    input
}
