//! The decode step's targets, judged across arms: replay against the copy
//! floor and the read floor (the GPU's bandwidth, measured in the same
//! run), seam vulkan and wgpu against seam cuda, and seam cuda against
//! PyTorch; each seam arm (the four-launch step, the fused one) on its own.

use super::parse::{Case, Input, Series};
use super::targets::{limit, Verdict};
use super::us;

/// The seam arms that measured the decode step on cuda (`seam`, its
/// fused-layer arm `seam-fused`, a variant build's), in series order: each
/// is judged on its own, with the other backends of the same arm.
fn cuda_seam_arms(input: &Input) -> Vec<String> {
    input
        .decode_arms()
        .into_iter()
        .filter(|(a, d)| a.starts_with("seam") && d == "cuda")
        .map(|(a, _)| a)
        .collect()
}

/// The hidden sizes of `workload` measured at `l` layers, H ≥ 4096.
fn large_hiddens(input: &Input, workload: &str, l: u64) -> Vec<u64> {
    input
        .rows
        .iter()
        .filter(|r| r.workload == workload && r.layers == l && r.hidden >= 4096)
        .map(|r| r.hidden)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The read-floor target at L = 32 and every H ≥ 4096 measured, for each
/// seam arm's cuda replay per step: ≤ 1.10× the run's read floor (the same
/// weights read by a kernel that does nothing else, the fastest
/// backend's); every other arm's ratio is shown beside it, judged by no
/// target.
pub(super) fn read_floor_verdicts(input: &Input) -> Vec<Verdict> {
    const BOUND: f64 = 1.10;
    let l = 32;
    let mut v = Vec::new();
    for h in large_hiddens(input, "read", l) {
        let Some((floor, by)) = input.read_floor_us(h, l) else {
            continue;
        };
        let replay = |arm: &str, device: &str| {
            input.get(
                &Series::new(arm, device, "graph"),
                &Case::decode(h, l),
                "e2e_us",
            )
        };
        for arm in cuda_seam_arms(input) {
            let Some(cu) = replay(&arm, "cuda") else {
                continue;
            };
            let others: Vec<String> = input
                .decode_arms()
                .iter()
                .filter(|(a, d)| !(a == &arm && d == "cuda"))
                .filter_map(|(a, d)| Some(format!("{a} {d} {:.2}×", replay(a, d)? / floor)))
                .collect();
            let target = format!(
                "decode L={l} H={h}: {arm} cuda replay ≤ {BOUND}× the read floor (same run)"
            );
            v.push(limit(&target, cu / floor, BOUND, "×", |x| {
                format!(
                    "{} vs {} µs (read by {by}) = {x:.3}×; {}",
                    us(cu),
                    us(floor),
                    others.join(", ")
                )
            }));
        }
    }
    v
}

/// The arms that run the layers of `arm` where one launch cannot split the
/// rows: in two launches each (`seam-fused` → `seam-split`) and in L + 1
/// launches, each finish folded into the next layer (`seam-fold`);
/// measured on every backend but cuda, and judged against `arm`'s cuda
/// replay.
fn split_siblings(arm: &str) -> Vec<String> {
    arm.strip_suffix("-fused")
        .map(|base| vec![format!("{base}-split"), format!("{base}-fold")])
        .unwrap_or_default()
}

/// The decode targets across backends, at L = 32 and every H ≥ 4096
/// measured, for each seam arm: its vulkan replay ≤ 1.10× its cuda one,
/// its wgpu replay ≤ 1.25× its cuda one (for a fused arm, its two-launch
/// siblings' vulkan and wgpu replays too, [`split_siblings`]), and its cuda
/// replay ≤ 0.90× PyTorch's CUDAGraph replay (a separate process:
/// cross-process ratio).
pub(super) fn cross_verdicts(input: &Input) -> Vec<Verdict> {
    let l = 32;
    let mut v = Vec::new();
    let replay = |arm: &str, device: &str, h: u64| {
        input.get(
            &Series::new(arm, device, "graph"),
            &Case::decode(h, l),
            "e2e_us",
        )
    };
    for h in large_hiddens(input, "decode", l) {
        for arm in cuda_seam_arms(input) {
            let Some(cu) = replay(&arm, "cuda", h) else {
                continue;
            };
            let arms = std::iter::once(arm.clone()).chain(split_siblings(&arm));
            for other_arm in arms {
                for (device, bound) in [("vulkan", 1.10), ("wgpu", 1.25)] {
                    if let Some(other) = replay(&other_arm, device, h) {
                        let t = format!(
                            "decode L={l} H={h}: {other_arm} {device} replay ≤ {bound}× {arm} cuda"
                        );
                        v.push(limit(&t, other / cu, bound, "×", |x| {
                            format!("{} vs {} µs = {x:.2}×", us(other), us(cu))
                        }));
                    }
                }
            }
            if let Some(pt) = replay("torch", "cuda", h) {
                let t = format!(
                    "decode L={l} H={h}: {arm} cuda replay ≤ 0.90× PyTorch CUDAGraph replay (cross-process)"
                );
                v.push(limit(&t, cu / pt, 0.90, "×", |x| {
                    format!("{} vs {} µs = {x:.3}×", us(cu), us(pt))
                }));
            }
        }
    }
    v
}

/// The decode floor target, for every seam arm and device that
/// measured the decode step: replay e2e per step at the largest step it
/// measured (most layers, then largest H) ≤ 1.25× its weight bytes ÷ the
/// best device-to-device copy bandwidth measured in the same run (the
/// GPU's, whichever backend's copy reached it).
pub(super) fn floor_verdicts(input: &Input) -> Vec<Verdict> {
    const BOUND: f64 = 1.25;
    let mut v = Vec::new();
    for (arm, device) in input.decode_arms() {
        if !arm.starts_with("seam") {
            continue;
        }
        let g = Series::new(&arm, &device, "graph");
        let largest = input
            .rows
            .iter()
            .filter(|r| {
                r.arm == arm
                    && r.device == device
                    && r.mode == "graph"
                    && r.workload == "decode"
                    && r.metric == "e2e_us"
            })
            .map(|r| (r.layers, r.hidden))
            .max();
        let Some((l, h)) = largest else { continue };
        let tag = if arm == "seam" {
            String::new()
        } else {
            format!("[{arm}] ")
        };
        let target = format!(
            "{tag}{device} decode replay per step (largest measured: L={l}, H={h}) ≤ {BOUND}× floor \
             (weight bytes ÷ device-to-device copy bandwidth, same run)"
        );
        let replay = input.get(&g, &Case::decode(h, l), "e2e_us");
        let best = input.best_copy_gbps();
        let own = input.copy_gbps(&arm, &device);
        let floor = input.decode_floor_us(&arm, &device, h, l);
        v.push(match (replay, best, floor) {
            (Some(a), Some((bw, by)), Some(f)) => limit(&target, a / f, BOUND, "×", |x| {
                let own = own.map_or(String::new(), |o| format!("; its own copy: {o:.0} GB/s"));
                format!(
                    "{} µs vs floor {} µs ({:.3} MiB at {bw:.1} GB/s, the run's best copy: {by}{own}) = {x:.3}×",
                    us(a),
                    us(f),
                    super::parse::weight_bytes(h, l) / f64::from(1u32 << 20)
                )
            }),
            _ => Verdict {
                target,
                measured: "–".into(),
                met: None,
                note: "no copy bandwidth measured in this run".into(),
            },
        });
    }
    v
}
