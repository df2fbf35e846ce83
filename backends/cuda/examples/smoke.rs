//! A quick check on a machine with an NVIDIA GPU (the conformance suite is
//! the real test): C1 through a captured graph, then every op × dtype once
//! eagerly and once captured, each compared with the CPU reference.
//!
//! `cargo run --release -p seam-cuda --example smoke` (exits 1 on any mismatch;
//! prints why and exits 0 when there is no CUDA device).

use seam::{ops, DType, Device, GraphRef, OpCall, OpKind, Tolerance};
use seam_cpu::CpuBackend;
use std::process::ExitCode;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let count = match seam_cuda::device_count() {
        Ok(0) => {
            println!("no CUDA device: driver found, no device");
            return ExitCode::SUCCESS;
        }
        Ok(n) => n,
        Err(reason) => {
            println!("no CUDA device: {reason}");
            return ExitCode::SUCCESS;
        }
    };
    let mut failures = 0;
    for index in 0..count {
        match run(index) {
            Ok(f) => failures += f,
            Err(e) => {
                println!("cuda:{index}: error: {e}");
                failures += 1;
            }
        }
    }
    println!(
        "nvrtc compiles in this process: {} (one per op at most)",
        seam_cuda::nvrtc_compiles()
    );
    if failures == 0 {
        println!("smoke: all passed");
        ExitCode::SUCCESS
    } else {
        println!("smoke: {failures} failure(s)");
        ExitCode::FAILURE
    }
}

fn run(index: usize) -> Res<usize> {
    let dev = Device::new(seam_cuda::open(index)?);
    let cpu = Device::new(Box::new(CpuBackend::new(0)));
    println!(
        "{}: {} — {} — capture {:?}",
        dev.id(),
        dev.info().name,
        dev.info().driver,
        dev.capture_support()
    );
    let mut failures = 0;

    // C1: dst += a captured once; 17, 34, then 35 after a host write of a = 1.
    let a = dev.buffer_from(&[17.0f32])?;
    let dst = dev.buffer_from(&[0.0f32])?;
    dev.begin_capture()?;
    dev.launch(&ops::add(a.id(), dst.id(), dst.id(), 1))?;
    let g = dev.end_capture_graph()?;
    let mut seen = Vec::new();
    dev.replay(GraphRef::Handle(g))?;
    seen.push(dst.read()?[0]);
    dev.replay(GraphRef::Handle(g))?;
    seen.push(dst.read()?[0]);
    a.write(&[1.0])?;
    dev.replay(GraphRef::Handle(g))?;
    seen.push(dst.read()?[0]);
    dev.destroy_graph(g)?;
    let ok = seen == [17.0, 34.0, 35.0];
    println!(
        "C1 replay re-executes: {seen:?} {}",
        if ok { "ok" } else { "FAIL" }
    );
    failures += usize::from(!ok);

    for op in OpKind::ALL {
        for &dtype in op.dtypes() {
            for captured in [false, true] {
                match check_op(&dev, &cpu, op, dtype, captured) {
                    Ok(None) => {}
                    Ok(Some(msg)) => {
                        failures += 1;
                        println!("FAIL {op}/{dtype} captured={captured}: {msg}");
                    }
                    Err(e) => {
                        failures += 1;
                        println!("FAIL {op}/{dtype} captured={captured}: error {e}");
                    }
                }
            }
        }
    }
    println!(
        "{}: every op × dtype checked eager and captured against the CPU",
        dev.id()
    );
    let live = dev.live();
    println!("live at the end: {live:?}");
    Ok(failures)
}

/// Shapes with odd tails and more than one block's worth of work.
fn call_for(op: OpKind, dtype: DType, ids: &[seam::BufferId]) -> (OpCall, Vec<usize>, usize) {
    let (n, rows, cols, m, nn, k) = (1031u32, 5u32, 777u32, 37u32, 29u32, 70u32);
    let bits = if dtype.size() == 2 {
        0x3c01
    } else {
        0xdead_beef
    };
    match op {
        OpKind::Fill => (ops::fill(ids[0], n, bits), vec![n as usize], 0),
        OpKind::Copy => (ops::copy(ids[0], ids[1], n), vec![n as usize; 2], 1),
        OpKind::ScaleAdd => (
            ops::scale_add(ids[0], ids[1], n, 1.5, -0.25),
            vec![n as usize; 2],
            1,
        ),
        OpKind::Add => (ops::add(ids[0], ids[1], ids[2], n), vec![n as usize; 3], 2),
        OpKind::Mul => (ops::mul(ids[0], ids[1], ids[2], n), vec![n as usize; 3], 2),
        OpKind::Silu => (ops::silu(ids[0], ids[1], n), vec![n as usize; 2], 1),
        OpKind::RmsNorm => (
            ops::rms_norm(ids[0], ids[1], ids[2], rows, cols, 1e-5),
            vec![
                (rows * cols) as usize,
                cols as usize,
                (rows * cols) as usize,
            ],
            2,
        ),
        OpKind::Softmax => (
            ops::softmax(ids[0], ids[1], rows, cols),
            vec![(rows * cols) as usize; 2],
            1,
        ),
        OpKind::Gemm => (
            ops::gemm(ids[0], ids[1], ids[2], m, nn, k),
            vec![(m * k) as usize, (k * nn) as usize, (m * nn) as usize],
            2,
        ),
    }
}

/// Deterministic input bytes for `len` elements of `dtype`.
fn input(dtype: DType, len: usize, salt: u32) -> Vec<u8> {
    let mut x = 0x9e37_79b9u32 ^ salt;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    (0..len)
        .flat_map(|_| {
            let r = next();
            let f = (r % 2000) as f32 / 250.0 - 4.0;
            match dtype {
                DType::F32 => f.to_le_bytes().to_vec(),
                DType::F16 => seam::f16::from_f32(f).to_le_bytes().to_vec(),
                DType::Bf16 => seam::bf16::from_f32(f).to_le_bytes().to_vec(),
                DType::I32 | DType::U32 => r.to_le_bytes().to_vec(),
            }
        })
        .collect()
}

fn run_on(dev: &Device, op: OpKind, dtype: DType, captured: bool) -> Res<Vec<u8>> {
    let sig = op.signature();
    let placeholder: Vec<seam::BufferId> = vec![seam::BufferId(0); sig.len()];
    let (_, lens, out) = call_for(op, dtype, &placeholder);
    let mut ids = Vec::new();
    for (i, (b, len)) in sig.iter().zip(&lens).enumerate() {
        let dt = match b.role {
            seam::ops::Role::Input => dtype,
            seam::ops::Role::F32Only => DType::F32,
        };
        let id = dev.alloc(dt, *len)?;
        dev.write_bytes(id, 0, &input(dt, *len, i as u32 + 1))?;
        ids.push(id);
    }
    let (call, _, _) = call_for(op, dtype, &ids);
    if op == OpKind::Gemm {
        dev.prepare(&[(op, dtype)])?;
    }
    if captured {
        dev.begin_capture()?;
        dev.launch(&call)?;
        let g = dev.end_capture_graph()?;
        dev.replay(GraphRef::Handle(g))?;
        dev.destroy_graph(g)?;
    } else {
        dev.launch(&call)?;
    }
    let bytes = dev.read_bytes(ids[out])?;
    for id in ids {
        dev.free(id)?;
    }
    Ok(bytes)
}

fn check_op(
    dev: &Device,
    cpu: &Device,
    op: OpKind,
    dtype: DType,
    captured: bool,
) -> Res<Option<String>> {
    let got = run_on(dev, op, dtype, captured)?;
    let want = run_on(cpu, op, dtype, false)?;
    let out_dtype = if op == OpKind::Gemm {
        DType::F32
    } else {
        dtype
    };
    Ok(compare(out_dtype, op.tolerance(dtype), &got, &want))
}

fn compare(dtype: DType, tol: Tolerance, got: &[u8], want: &[u8]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} bytes vs {}", got.len(), want.len()));
    }
    let (rel, abs) = match tol {
        Tolerance::BitExact => {
            return (got != want).then(|| {
                let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
                format!("bytes differ first at byte {i}")
            })
        }
        Tolerance::Relative { rel, abs } => (rel, abs),
    };
    let to_f32 = |c: &[u8]| -> f32 {
        match dtype {
            DType::F16 => seam::f16::from_le_bytes([c[0], c[1]]).to_f32(),
            DType::Bf16 => seam::bf16::from_le_bytes([c[0], c[1]]).to_f32(),
            _ => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
        }
    };
    let size = dtype.size();
    for (i, (g, w)) in got.chunks(size).zip(want.chunks(size)).enumerate() {
        let (g, w) = (to_f32(g), to_f32(w));
        if (g - w).abs() > abs + rel * w.abs() || g.is_nan() != w.is_nan() {
            return Some(format!("element {i}: {g} vs {w}"));
        }
    }
    None
}
