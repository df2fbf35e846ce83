//! The one CSV schema every arm prints.
//!
//! `arm,device,mode,workload,elems,hidden,layers,nodes,metric,median_us,p99_us,reps`
//!
//! - `arm`: `raw` (CUDA driver API, nvcc program), `torch` (PyTorch), `seam`
//!   (or a variant build's name), `raw-vulkan` (the in-process raw ash anchor);
//! - `device`: the backend (`cuda`, `vulkan`, `wgpu`, ...);
//! - `mode`: `eager`, `graph` (replay of a captured graph), `rerecord`
//!   (capture, end, replay and sync every iteration), `profile`; the
//!   graph-update modes, measured in one interleaved loop per case:
//!   `replay` (plain replay), `rebind` (seam `Graph::rebind` to the other
//!   buffer set, then replay), `setparams` (raw
//!   `cuGraphExecKernelNodeSetParams`, then replay), `recapture` (capture
//!   anew, instantiate, replay), `copyin` (copy a fresh input into the
//!   captured buffer, then replay);
//! - `workload`: `chain` (N dependent tiny kernels over `elems` floats) or
//!   `decode` (`layers` × rms_norm → gemm → silu → add at hidden size
//!   `hidden`; `elems` = `hidden`);
//! - `nodes`: kernels per iteration (N, or 4·layers);
//! - `metric` (all per iteration, microseconds): `submit_us` (host time to
//!   queue it), `e2e_us` (queue + wait), `pipe_us` (queued back to back, one
//!   wait per batch), one-time `capture_us`, `instantiate_us` (end of capture
//!   into an executable graph, upload included), `first_replay_us`; profile
//!   rows `core_us` / `backend_us` / `total_us` split the seam call;
//!   `update_us` (the update part of an update-mode iteration alone).
//!   Dimensionless, not µs: `x_replay` (an update mode's e2e ÷ the plain
//!   replay's), `x_rebind` / `x_setparams` (re-capture ÷ the in-place
//!   update), each the median and p99 over the rounds of a per-round ratio
//!   of medians (`reps` = rounds), and `<ratio>_range`, the smallest round
//!   in the median column and the largest in the p99 column. Seam vs the
//!   in-process raw anchor (same rounds, interleaved): `pair_e2e_us` /
//!   `pair_submit_us` (seam), `raw_e2e_us` / `raw_submit_us` (raw),
//!   `x_raw_e2e` / `x_raw_submit` (per-round seam ÷ raw) and
//!   `d_raw_submit_us` (per-round seam − raw, µs), each with `_range`.
//!   Mode and workload `copy`: `e2e_us` per device-to-device copy of
//!   `elems` floats and `gbps` (read + write bytes per ns).
//!
//! Lines starting with `#` are comments (device names, skipped cases).

use serde::{Deserialize, Serialize};
use std::fmt;

pub const HEADER: &str =
    "arm,device,mode,workload,elems,hidden,layers,nodes,metric,median_us,p99_us,reps";

/// One measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub arm: String,
    pub device: String,
    pub mode: String,
    pub workload: String,
    pub elems: u64,
    pub hidden: u64,
    pub layers: u64,
    pub nodes: u64,
    pub metric: String,
    pub median_us: f64,
    pub p99_us: f64,
    pub reps: u64,
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{},{},{},{},{},{},{},{:.4},{:.4},{}",
            self.arm,
            self.device,
            self.mode,
            self.workload,
            self.elems,
            self.hidden,
            self.layers,
            self.nodes,
            self.metric,
            self.median_us,
            self.p99_us,
            self.reps
        )
    }
}

/// Parse one arm's CSV output: the header (anywhere, any number of times),
/// comments and blank lines are skipped; anything else must be a row.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line == HEADER {
            continue;
        }
        rows.push(parse_row(line).map_err(|e| format!("line {}: {e}: {line}", i + 1))?);
    }
    Ok(rows)
}

fn parse_row(line: &str) -> Result<Row, String> {
    let f: Vec<&str> = line.split(',').collect();
    if f.len() != 12 {
        return Err(format!("{} fields, expected 12", f.len()));
    }
    let int = |i: usize| {
        f[i].parse::<u64>()
            .map_err(|e| format!("field {}: {e}", i + 1))
    };
    let num = |i: usize| {
        f[i].parse::<f64>()
            .map_err(|e| format!("field {}: {e}", i + 1))
    };
    Ok(Row {
        arm: f[0].into(),
        device: f[1].into(),
        mode: f[2].into(),
        workload: f[3].into(),
        elems: int(4)?,
        hidden: int(5)?,
        layers: int(6)?,
        nodes: int(7)?,
        metric: f[8].into(),
        median_us: num(9)?,
        p99_us: num(10)?,
        reps: int(11)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row {
            arm: "seam".into(),
            device: "cuda".into(),
            mode: "graph".into(),
            workload: "chain".into(),
            elems: 1,
            hidden: 0,
            layers: 0,
            nodes: 1000,
            metric: "e2e_us".into(),
            median_us: 812.5,
            p99_us: 900.25,
            reps: 50,
        }
    }

    #[test]
    fn rows_round_trip_through_text() {
        let text = format!("{HEADER}\n# a comment\n\n{}\n", row());
        assert_eq!(parse(&text).unwrap(), vec![row()]);
    }

    #[test]
    fn bad_rows_are_named() {
        let e = parse("raw,cuda,eager\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("3 fields"), "{e}");
        let e = parse(&row().to_string().replace("812.5000", "x")).unwrap_err();
        assert!(e.contains("field 10"), "{e}");
    }
}
