//! Trace a window of replays on one device and write the Chrome trace
//! (the check: a window of N replays shows N device-timed slices).
//!
//! `cargo run --release -p seam-conformance --example trace_replays -- cuda:0 128 trace.json`

use seam::ops;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [device, n, out] = args.as_slice() else {
        eprintln!("usage: trace_replays <device-id> <replays> <out.json>");
        return ExitCode::FAILURE;
    };
    match run(device, n, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trace_replays: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(device: &str, n: &str, out: &str) -> Result<(), String> {
    let n: u32 = n.parse().map_err(|e| format!("replays `{n}`: {e}"))?;
    let found = seam_backends::discover();
    let slot = found
        .devices
        .iter()
        .find(|s| s.id == device)
        .ok_or_else(|| {
            format!(
                "no device {device}; found {:?}",
                found.devices.iter().map(|s| &s.id).collect::<Vec<_>>()
            )
        })?;
    let dev = slot.device().map_err(|e| e.to_string())?;
    let one = dev
        .buffer_from(&vec![1u32; 1 << 16])
        .map_err(|e| e.to_string())?;
    let acc = dev
        .buffer_from(&vec![0u32; 1 << 16])
        .map_err(|e| e.to_string())?;
    let scope = dev.capture().map_err(|e| e.to_string())?;
    for _ in 0..4 {
        dev.launch(&ops::add(one.id(), acc.id(), acc.id(), 1 << 16))
            .map_err(|e| e.to_string())?;
    }
    let graph = scope.end_graph().map_err(|e| e.to_string())?;
    dev.set_tracing(true);
    for _ in 0..n {
        graph.replay().map_err(|e| e.to_string())?;
    }
    dev.set_tracing(false);
    let log = dev
        .take_trace_log(&format!("{n} replays"))
        .map_err(|e| e.to_string())?;
    let got = acc.read().map_err(|e| e.to_string())?;
    if got.iter().any(|v| *v != 4 * n) {
        return Err(format!("expected every element {}, got {}", 4 * n, got[0]));
    }
    std::fs::write(
        out,
        seam::chrome_trace(std::slice::from_ref(&log)).to_string(),
    )
    .map_err(|e| format!("writing {out}: {e}"))?;
    println!(
        "{device}: {} replays counted, {} host events, {} device spans{} → {out}",
        graph.replay_count().map_err(|e| e.to_string())?,
        log.events.len(),
        log.device_spans.len(),
        log.device_timing_unavailable
            .map(|w| format!(" (device not timed: {w})"))
            .unwrap_or_default()
    );
    Ok(())
}
