//! Host cost of N dependent tiny launches, eager against one emulated replay,
//! on `wgpu:0`: what the emulated graph saves (resolving each launch) and
//! what it does not (encoding and submitting every dispatch).
//!
//! `cargo run --release -p seam-wgpu --example replay_cost [N] [ROUNDS]`

use seam::{ops, Device, GraphRef};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(20);
    seam_wgpu::device_count()?;
    let d = Device::new(seam_wgpu::open(0)?);
    println!("{} — {}", d.info().name, d.info().driver);
    let one = d.buffer_from(&[1u32; 64])?;
    let dst = d.buffer_from(&[0u32; 64])?;
    let call = ops::add(one.id(), dst.id(), dst.id(), 64);

    // Warm up: pipelines and the bind group exist before anything is timed.
    d.launch(&call)?;
    d.synchronize()?;

    let (mut eager_host, mut eager_e2e) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..n {
            d.launch(&call)?;
        }
        // launch() only resolves and batches; synchronize() encodes and submits.
        d.synchronize()?;
        eager_e2e += t.elapsed();
        let t = Instant::now();
        for _ in 0..n {
            d.launch(&call)?;
        }
        eager_host += t.elapsed();
        d.synchronize()?;
    }

    d.low_level().begin_capture()?;
    for _ in 0..n {
        d.launch(&call)?;
    }
    let g = d.low_level().end_capture_graph()?;
    let (mut replay_host, mut replay_e2e) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let t = Instant::now();
        d.replay(GraphRef::Handle(g))?;
        replay_host += t.elapsed();
        d.synchronize()?;
        replay_e2e += t.elapsed();
    }
    d.destroy_graph(g)?;
    let want = (1 + 2 * n * rounds + n * rounds) as u32;
    let got = dst.read()?;
    assert!(got.iter().all(|v| *v == want), "wrong result {}", got[0]);

    let us = |t: Duration, per: usize| t.as_secs_f64() * 1e6 / (rounds * per) as f64;
    println!("N = {n} dependent dispatches, {rounds} rounds");
    println!(
        "eager : launch calls {:8.2} µs/dispatch (resolve only) | launch+encode+submit+wait {:9.1} µs/round",
        us(eager_host, n),
        us(eager_e2e, 1)
    );
    println!(
        "replay: replay call   {:8.2} µs/dispatch (encode+submit) | replay+wait             {:9.1} µs/round",
        us(replay_host, n),
        us(replay_e2e, 1)
    );
    Ok(())
}
