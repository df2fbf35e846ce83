//! The arms' CSV text → [`Input`], and the queries the report makes of it:
//! one [`Series`] (arm, device, mode) on one [`Case`] (workload instance).

use crate::csv::{self, Row};
use std::collections::BTreeSet;

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
    pub(super) fn get(&self, s: &Series, case: &Case, metric: &str) -> Option<f64> {
        self.row(s, case, metric).map(|r| r.median_us)
    }

    pub(super) fn row(&self, s: &Series, case: &Case, metric: &str) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.arm == s.arm
                && r.device == s.device
                && r.mode == s.mode
                && r.workload == case.workload
                && r.elems == case.elems
                && r.layers == case.layers
                // A decode step is its (H, L): its launches are 4·L, or L
                // in the fused arm.
                && (r.nodes == case.nodes || r.workload == "decode")
                && r.metric == metric
        })
    }

    /// Every (arm, device, mode) that measured this workload, raw first, then torch, then seam.
    pub(super) fn series(&self, workload: &str) -> Vec<Series> {
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

    /// Every element count a chain was measured at, ascending.
    pub(super) fn chain_elems(&self) -> BTreeSet<u64> {
        self.rows
            .iter()
            .filter(|r| r.workload == "chain")
            .map(|r| r.elems)
            .collect()
    }

    /// Every (arm, device) that measured the decode step, in series order.
    pub(super) fn decode_arms(&self) -> Vec<(String, String)> {
        let mut arms: Vec<(String, String)> = Vec::new();
        for s in self.series("decode") {
            let k = (s.arm, s.device);
            if !arms.contains(&k) {
                arms.push(k);
            }
        }
        arms
    }

    /// The copy bandwidth (GB/s, median) measured on `device` by `arm`, or
    /// else by any seam arm on that device (the raw and PyTorch anchors
    /// measure none: they share the seam arm's device).
    pub(super) fn copy_gbps(&self, arm: &str, device: &str) -> Option<f64> {
        let of = |a: &str| {
            self.rows
                .iter()
                .find(|r| {
                    r.arm == a && r.device == device && r.mode == "copy" && r.metric == "gbps"
                })
                .map(|r| r.median_us)
        };
        of(arm).or_else(|| {
            self.rows
                .iter()
                .find(|r| {
                    r.arm.starts_with("seam")
                        && r.device == device
                        && r.mode == "copy"
                        && r.metric == "gbps"
                })
                .map(|r| r.median_us)
        })
    }

    /// The best device-to-device copy bandwidth measured in the run, GB/s,
    /// and the arm/device that measured it. A run measures one GPU (every
    /// backend on the same device), so this is that GPU's floor: a backend
    /// whose own copy kernel is slower does not get an easier one.
    pub(super) fn best_copy_gbps(&self) -> Option<(f64, String)> {
        self.rows
            .iter()
            .filter(|r| r.mode == "copy" && r.metric == "gbps" && r.median_us > 0.0)
            .map(|r| (r.median_us, format!("{} {}", r.arm, r.device)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The decode step's floor, µs: its weight bytes (L·H·H f32) at the
    /// best copy bandwidth measured in the same run ([`Self::best_copy_gbps`]).
    pub(super) fn decode_floor_us(
        &self,
        _arm: &str,
        _device: &str,
        hidden: u64,
        layers: u64,
    ) -> Option<f64> {
        let (gbps, _) = self.best_copy_gbps()?;
        Some(weight_bytes(hidden, layers) / (gbps * 1e3))
    }

    /// The decode step's read floor, µs, and who measured it: the fastest
    /// replay of the same weights read by a kernel that does nothing else
    /// (workload `read`: every seam arm measures it on its own backend),
    /// over every seam arm and device of the run. A run measures one GPU,
    /// so this is that GPU's read floor for the step's bytes.
    pub(super) fn read_floor_us(&self, hidden: u64, layers: u64) -> Option<(f64, String)> {
        self.rows
            .iter()
            .filter(|r| {
                r.arm.starts_with("seam")
                    && r.workload == "read"
                    && r.mode == "graph"
                    && r.metric == "e2e_us"
                    && r.hidden == hidden
                    && r.layers == layers
                    && r.median_us > 0.0
            })
            .map(|r| (r.median_us, format!("{} {}", r.arm, r.device)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }

    pub(super) fn values(&self, pick: impl Fn(&Row) -> bool) -> Vec<u64> {
        let set: BTreeSet<u64> = self
            .rows
            .iter()
            .filter(|r| pick(r))
            .map(|r| r.nodes)
            .collect();
        set.into_iter().collect()
    }
}

/// Bytes of the decode step's weights: one H×H f32 matrix per layer.
pub(super) fn weight_bytes(hidden: u64, layers: u64) -> f64 {
    4.0 * (hidden * hidden * layers) as f64
}

pub(super) fn arm_rank(arm: &str) -> u8 {
    match arm {
        "raw" | "raw-vulkan" => 0,
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
pub(super) struct Series {
    pub(super) arm: String,
    pub(super) device: String,
    pub(super) mode: String,
}

impl Series {
    pub(super) fn new(arm: &str, device: &str, mode: &str) -> Series {
        Series {
            arm: arm.into(),
            device: device.into(),
            mode: mode.into(),
        }
    }

    pub(super) fn label(&self) -> String {
        let arm = match self.arm.as_str() {
            "raw" => "raw driver".to_string(),
            "torch" => "PyTorch".to_string(),
            "raw-vulkan" => "raw ash".to_string(),
            "seam" => format!("seam {}", self.device),
            other => format!("{other} {}", self.device),
        };
        let mode = match (self.arm.as_str(), self.mode.as_str()) {
            ("raw", "eager") => "cuLaunchKernel",
            ("raw", "graph") => "cuGraphLaunch",
            ("raw-vulkan", "graph") => "vkQueueSubmit",
            ("torch", "graph") => "CUDAGraph",
            (_, "graph") => "replay",
            (_, "rerecord") => "re-record",
            (_, m) => m,
        };
        format!("{arm} {mode}")
    }

    /// The label without its mode's name: one row or line for both modes.
    pub(super) fn arm_label(&self) -> String {
        self.label()
            .replace(" replay", "")
            .replace(" cuGraphLaunch", "")
            .replace(" vkQueueSubmit", "")
            .replace(" CUDAGraph", "")
    }

    /// The raw-driver series a ratio is taken against: the graph for
    /// replays, cuLaunchKernel for eager and re-recorded runs.
    pub(super) fn raw(&self) -> Series {
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
pub(super) struct Case {
    pub(super) workload: &'static str,
    pub(super) elems: u64,
    pub(super) layers: u64,
    pub(super) nodes: u64,
}

impl Case {
    pub(super) fn chain(elems: u64, n: u64) -> Case {
        Case {
            workload: "chain",
            elems,
            layers: 0,
            nodes: n,
        }
    }
    pub(super) fn decode(hidden: u64, layers: u64) -> Case {
        Case {
            workload: "decode",
            elems: hidden,
            layers,
            nodes: 4 * layers,
        }
    }
}
