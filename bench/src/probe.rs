//! One-off probes, not bench arms: `seam-bench probe <what>`
//! prints one line per measurement, for a device command that locates a
//! miss. Their figures go to `docs/results/bench/probes.md`.
//!
//! - `gemv`: WGSL GEMV and copy variants on the raw Vulkan device
//!   ([`crate::raw_vulkan::probe`]).
//! - `cuda-process`: the in-process raw CUDA chain (N = 1000, one element,
//!   replays back to back) in a process that holds nothing else, then after
//!   each step the seam bench takes before its own chain (a seam CUDA device
//!   opened, its kernels prepared, seam's chain captured and replayed), so
//!   the step after which the GPU's time per node grows is the one to look
//!   at; then a second anchor, and the first one again on fresh buffers
//!   (same stream and module) and on fresh buffers and streams. Both seam binaries' raw anchors ran 0.94 µs a node where the nvcc
//!   arm, in its own process, ran 0.77.

#[cfg(feature = "cuda")]
use crate::raw_cuda::RawCuda;
#[cfg(feature = "cuda")]
use std::time::Instant;

/// µs per node of `replays` back-to-back replays of the raw chain of
/// `nodes`, median over 5 trials.
#[cfg(feature = "cuda")]
fn raw_per_node(raw: &mut RawCuda, nodes: u32, replays: usize) -> Result<f64, String> {
    let mut t = Vec::new();
    for _ in 0..6 {
        raw.wait()?;
        let s = Instant::now();
        for _ in 0..replays {
            raw.replay()?;
        }
        raw.wait()?;
        t.push(s.elapsed().as_secs_f64() * 1e6 / (replays as f64 * f64::from(nodes)));
    }
    t.remove(0);
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// `seam-bench probe cuda-process`.
#[cfg(feature = "cuda")]
pub fn cuda_process(out: &mut dyn FnMut(String)) -> Result<(), String> {
    use seam::ops;
    const N: u32 = 1000;
    let x0 = [1.0f32];
    let mut raw = RawCuda::open()?;
    raw.chain(&x0, N, 0.999, 0.001)?;
    let step = |raw: &mut RawCuda, what: &str, out: &mut dyn FnMut(String)| match raw_per_node(
        raw, N, 3,
    ) {
        Ok(us) => out(format!(
            "cuda-process,raw chain N={N},{what},{us:.4} us/node"
        )),
        Err(e) => out(format!("cuda-process,raw chain N={N},{what},error {e}")),
    };
    step(&mut raw, "alone in the process", out);
    step(&mut raw, "alone, again", out);
    let found = seam_backends::discover();
    step(&mut raw, "after seam_backends::discover()", out);
    let Some(slot) = found.devices.iter().find(|s| s.backend == "cuda") else {
        out("cuda-process,no seam cuda device".into());
        return Ok(());
    };
    let dev = slot.device().map_err(|e| e.to_string())?;
    step(&mut raw, "after the seam cuda device opened", out);
    // The chain's op first, then the rest of what the bench prepares.
    let chain_op = (seam::OpKind::ScaleAdd, seam::DType::F32);
    dev.prepare(&[chain_op]).map_err(|e| e.to_string())?;
    step(&mut raw, "after prepare(scale_add)", out);
    let others: Vec<_> = crate::measure::BENCH_OPS
        .into_iter()
        .filter(|&o| o != chain_op)
        .collect();
    dev.prepare(&others).map_err(|e| e.to_string())?;
    step(
        &mut raw,
        "after prepare(the bench's other ops, gemm's cuBLAS)",
        out,
    );
    let x = dev.buffer_from(&x0).map_err(|e| e.to_string())?;
    let calls = vec![ops::scale_add(x.id(), x.id(), 1, 0.999, 0.001); N as usize];
    let scope = dev.capture().map_err(|e| e.to_string())?;
    for c in &calls {
        dev.launch(c).map_err(|e| e.to_string())?;
    }
    let g = scope.end_graph().map_err(|e| e.to_string())?;
    let mut seam_t = Vec::new();
    for _ in 0..6 {
        dev.synchronize().map_err(|e| e.to_string())?;
        let s = Instant::now();
        for _ in 0..3 {
            g.replay().map_err(|e| e.to_string())?;
        }
        dev.synchronize().map_err(|e| e.to_string())?;
        seam_t.push(s.elapsed().as_secs_f64() * 1e6 / (3.0 * f64::from(N)));
    }
    seam_t.remove(0);
    seam_t.sort_by(f64::total_cmp);
    out(format!(
        "cuda-process,seam chain N={N},its own graph,{:.4} us/node",
        seam_t[seam_t.len() / 2]
    ));
    step(&mut raw, "after seam's chain captured and replayed", out);
    drop(g);
    drop(dev);
    step(&mut raw, "after the seam device dropped", out);
    let mut fresh = RawCuda::open()?;
    fresh.chain(&x0, N, 0.999, 0.001)?;
    step(
        &mut fresh,
        "a second raw anchor (new stream, module, graph)",
        out,
    );
    // Which of the three it is: the first anchor again on fresh buffers
    // (same stream and module), then on fresh buffers and streams.
    for stream in [false, true] {
        for _ in 0..6 {
            raw.set_aside(stream)?;
            raw.chain(&x0, N, 0.999, 0.001)?;
            let what = format!(
                "first anchor, new buffer at {:#x}{}",
                raw.address(),
                if stream { " and a new stream" } else { "" }
            );
            step(&mut raw, &what, out);
        }
    }
    Ok(())
}
