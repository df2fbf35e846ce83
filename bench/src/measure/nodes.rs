//! What node timing costs (`seam-bench nodes`): replays of one graph with
//! tracing off, with tracing on (a device span per replay), and with node
//! timing on too (a device span per launch), interleaved round by round so
//! each ratio is of one round's arms.
//!
//! Arms, per workload (a chain of N dependent one-element `scale_add`
//! kernels, the launch-bound worst case; the decode step; and the decode
//! step fused to one launch a layer, where the device takes the fused
//! kernel):
//! - `off`: the graph captured with node timing off, tracing off;
//! - `stamps`: the graph captured with node timing on, tracing off (its
//!   timestamps or event nodes are in the graph; nothing is read);
//! - `traced`: the untimed graph, tracing on;
//! - `nodes`: the node-timed graph, tracing on; every replay's node spans
//!   are read, and counted (N per replay) after the clock stops.
//!
//! An arm's time is the wall time of `replays` replays and one
//! synchronize, per replay. Reported: each arm's median per replay, and
//! the ratios `stamps/off`, `traced/off` and `nodes/traced` as the median
//! over rounds with their min–max.

use super::workloads::Stack;
use super::{err, submit, Res, Sink};
use crate::measure::update::median;
use seam::{ops, Device, Graph, OpCall};
use seam_kernels::user::NORM_GEMV_SILU_ADD;
use std::time::Instant;

/// What `seam-bench nodes` measures.
pub struct NodeConfig {
    /// Backends (default: every GPU backend found).
    pub backends: Vec<String>,
    /// Chain lengths.
    pub ns: Vec<u64>,
    /// Decode step: hidden size and layers (4 launches a layer); 0 layers: none.
    pub decode: (u64, u64),
    /// Interleaved rounds.
    pub rounds: usize,
    /// Replays per arm per round.
    pub replays: usize,
    /// Where to write the trace of one node-timed decode-step replay per
    /// device (Chrome JSON), if anywhere.
    pub trace: Option<std::path::PathBuf>,
}

const ARMS: [&str; 4] = ["off", "stamps", "traced", "nodes"];

/// Run every workload on the first device of each wanted backend.
pub fn node_overhead(cfg: &NodeConfig, out: &mut dyn Sink) {
    let found = seam_backends::discover();
    let mut logs = Vec::new();
    let mut seen = Vec::new();
    out.comment("device | workload | launches | off µs | stamps µs | traced µs | nodes µs | stamps/off | traced/off | nodes/traced");
    for slot in &found.devices {
        let wanted = if cfg.backends.is_empty() {
            slot.backend != "cpu"
        } else {
            cfg.backends.iter().any(|b| b == slot.backend)
        };
        if !wanted || seen.contains(&slot.backend) {
            continue;
        }
        seen.push(slot.backend);
        let dev = match slot.device() {
            Ok(d) => d,
            Err(e) => {
                out.comment(&format!("{}: not measured: {e}", slot.id));
                continue;
            }
        };
        if let seam::NodeTiming::Unavailable(why) = dev.node_timing() {
            out.comment(&format!("{}: no node timing: {why}", slot.id));
            continue;
        }
        if let Err(e) = device(&dev, cfg, out, &mut logs) {
            out.comment(&format!("{}: stopped: {e}", slot.id));
        }
    }
    if let Some(path) = &cfg.trace {
        let json = seam::chrome_trace(&logs).to_string();
        match std::fs::write(path, json) {
            Ok(()) => out.comment(&format!(
                "trace of one node-timed decode-step replay per device written to {}",
                path.display()
            )),
            Err(e) => out.comment(&format!("writing {}: {e}", path.display())),
        }
        for line in seam::trace::node_table(&logs, 4, 8).lines() {
            out.comment(line);
        }
    }
}

fn device(
    dev: &Device,
    cfg: &NodeConfig,
    out: &mut dyn Sink,
    logs: &mut Vec<seam::TraceLog>,
) -> Res<()> {
    // Vendor ops (cuBLAS) are set up before any capture, as in `run`.
    dev.prepare(&super::BENCH_OPS).map_err(err)?;
    let x = dev.buffer_from(&[1.0f32]).map_err(err)?;
    for &n in &cfg.ns {
        let calls = vec![ops::scale_add(x.id(), x.id(), 1, 0.999, 0.001); n as usize];
        workload(dev, cfg, out, &format!("chain N={n}"), &calls)?;
    }
    let (h, layers) = cfg.decode;
    if layers > 0 {
        let stack = Stack::new(dev, h, layers)?;
        let mut steps = vec![(format!("decode h={h} L={layers}"), stack.calls(h, layers))];
        // The fused step (one launch a layer, a user kernel whose CUDA
        // launches may start early), where the device takes the kernel;
        // where it does not, a line says why.
        match dev.register_kernel(&NORM_GEMV_SILU_ADD) {
            Ok(()) => {
                let (calls, _) = stack.fused_calls(h, layers);
                steps.push((format!("decode fused h={h} L={layers}"), calls));
            }
            Err(e) => out.comment(&format!("decode fused h={h} L={layers}: not measured: {e}")),
        }
        for (name, calls) in steps {
            workload(dev, cfg, out, &name, &calls)?;
            if cfg.trace.is_some() {
                logs.push(trace_one(dev, &name, &calls)?);
            }
        }
    }
    Ok(())
}

/// The trace of one node-timed replay of `calls`: a node span per launch.
fn trace_one(dev: &Device, name: &str, calls: &[OpCall]) -> Res<seam::TraceLog> {
    let g = capture(dev, calls, true)?;
    dev.set_tracing(true);
    g.replay().map_err(err)?;
    dev.set_tracing(false);
    let log = dev.take_trace_log(name).map_err(err)?;
    if log.node_spans.len() != calls.len() {
        return Err(format!(
            "{name} trace: {} node spans for {} launches",
            log.node_spans.len(),
            calls.len()
        ));
    }
    Ok(log)
}

fn capture(dev: &Device, calls: &[OpCall], nodes: bool) -> Res<Graph> {
    dev.set_node_timing(nodes).map_err(err)?;
    let scope = dev.capture().map_err(err)?;
    submit(dev, calls).map_err(err)?;
    let g = scope.end_graph().map_err(err)?;
    dev.set_node_timing(false).map_err(err)?;
    Ok(g)
}

/// One workload's rounds and its line.
fn workload(
    dev: &Device,
    cfg: &NodeConfig,
    out: &mut dyn Sink,
    name: &str,
    calls: &[OpCall],
) -> Res<()> {
    let untimed = capture(dev, calls, false)?;
    let timed = capture(dev, calls, true)?;
    // Warm both (first replays upload and compile lazily on some drivers).
    for g in [&untimed, &timed] {
        g.replay().map_err(err)?;
    }
    dev.synchronize().map_err(err)?;
    let r = cfg.replays.max(1);
    let mut per_arm: [Vec<f64>; 4] = Default::default();
    for _ in 0..cfg.rounds.max(1) {
        for (arm, samples) in per_arm.iter_mut().enumerate() {
            let (g, traced) = match ARMS[arm] {
                "off" => (&untimed, false),
                "stamps" => (&timed, false),
                "traced" => (&untimed, true),
                _ => (&timed, true),
            };
            dev.set_tracing(traced);
            let t = Instant::now();
            for _ in 0..r {
                g.replay().map_err(err)?;
            }
            dev.synchronize().map_err(err)?;
            samples.push(t.elapsed().as_secs_f64() * 1e6 / r as f64);
            dev.set_tracing(false);
            let log = dev.take_trace_log("nodes").map_err(err)?;
            let want = if ARMS[arm] == "nodes" {
                r * calls.len()
            } else {
                0
            };
            if log.node_spans.len() != want {
                return Err(format!(
                    "{name}, arm {}: {} node spans, want {want}",
                    ARMS[arm],
                    log.node_spans.len()
                ));
            }
        }
    }
    let ratio = |a: usize, b: usize| super::ratio_text(&per_arm[a], &per_arm[b]);
    out.comment(&format!(
        "{} | {name} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {}",
        dev.id(),
        calls.len(),
        median(&per_arm[0]),
        median(&per_arm[1]),
        median(&per_arm[2]),
        median(&per_arm[3]),
        ratio(1, 0),
        ratio(2, 0),
        ratio(3, 2),
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::measure::Lines;

    /// On the CPU reference (no timing asserted): a line per workload with
    /// every arm measured and the node spans counted, the decode trace's
    /// node table, nothing stopped.
    #[test]
    fn every_workload_gets_its_line_on_the_cpu() {
        let trace =
            std::env::temp_dir().join(format!("seam-bench-nodes-{}.json", std::process::id()));
        let cfg = NodeConfig {
            backends: vec!["cpu".into()],
            ns: vec![1, 3],
            decode: (64, 1),
            rounds: 2,
            replays: 2,
            trace: Some(trace.clone()),
        };
        let mut out = Lines::default();
        node_overhead(&cfg, &mut out);
        let text = out.0.join("\n");
        std::fs::remove_file(&trace).ok();
        assert!(
            !text.contains("stopped") && !text.contains("not measured"),
            "{text}"
        );
        for w in [
            "| chain N=1 | 1 |",
            "| chain N=3 | 3 |",
            "| decode h=64 L=1 | 4 |",
        ] {
            assert!(text.contains(&format!("cpu:0 {w}")), "{w}: {text}");
        }
        assert!(
            text.contains("cpu:0 decode h=64 L=1"),
            "the node table: {text}"
        );
    }
}
