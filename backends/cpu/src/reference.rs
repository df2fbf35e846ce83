//! Every op of the catalogue in plain Rust, written for clarity first: this
//! is the oracle other backends are compared against (C11).
//!
//! Each op reads its inputs into owned vectors, computes, and returns the
//! output's bytes, so in-place launches (out aliasing an input) are trivially
//! correct.

use seam::ops::{Access, Role};
use seam::{DType, KernelDef, Launch, OpKind};

fn load_f32(bytes: &[u8], dtype: DType, n: usize) -> Vec<f32> {
    match dtype {
        DType::F32 => bytes[..n * 4]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => bytes[..n * 2]
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::Bf16 => bytes[..n * 2]
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::I32 | DType::U32 => unreachable!("integer buffers are not read as floats"),
    }
}

fn store_f32(values: &[f32], dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F16 => values
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect(),
        DType::Bf16 => values
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect(),
        DType::I32 | DType::U32 => unreachable!("integer buffers are not written as floats"),
    }
}

fn load_u32(bytes: &[u8], n: usize) -> Vec<u32> {
    bytes[..n * 4]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Elementwise binary op: f32 in IEEE arithmetic, i32/u32 wrapping.
fn binary(dtype: DType, a: &[u8], b: &[u8], n: usize, op: OpKind) -> Vec<u8> {
    match dtype {
        DType::F32 => {
            let (a, b) = (load_f32(a, dtype, n), load_f32(b, dtype, n));
            let out: Vec<f32> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| if op == OpKind::Add { x + y } else { x * y })
                .collect();
            store_f32(&out, dtype)
        }
        DType::I32 | DType::U32 => {
            // Two's complement wrapping add/mul give the same bits for i32 and u32.
            let (a, b) = (load_u32(a, n), load_u32(b, n));
            a.iter()
                .zip(&b)
                .map(|(x, y)| {
                    if op == OpKind::Add {
                        x.wrapping_add(*y)
                    } else {
                        x.wrapping_mul(*y)
                    }
                })
                .flat_map(|v| v.to_le_bytes())
                .collect()
        }
        _ => unreachable!("validated: {op} does not take {dtype}"),
    }
}

/// Run one launch. `inputs[i]` is the current content of binding i (read
/// bindings only are consulted). Returns `(binding index, byte offset, bytes)`
/// of the one output.
pub fn execute(launch: &Launch, inputs: &[&[u8]]) -> (usize, Vec<u8>) {
    let p = &launch.params;
    let dt = launch.dtype;
    let n = p.d0 as usize;
    match launch.op {
        OpKind::Fill => {
            let bytes = &p.bits.to_le_bytes()[..dt.size()];
            (0, bytes.repeat(n))
        }
        OpKind::Copy => (1, inputs[0][..n * dt.size()].to_vec()),
        OpKind::ScaleAdd => {
            let x = load_f32(inputs[0], dt, n);
            let y: Vec<f32> = x.iter().map(|v| p.s0.mul_add(*v, p.s1)).collect();
            (1, store_f32(&y, dt))
        }
        OpKind::Add | OpKind::Mul => (2, binary(dt, inputs[0], inputs[1], n, launch.op)),
        OpKind::Silu => {
            let x = load_f32(inputs[0], dt, n);
            let y: Vec<f32> = x.iter().map(|v| v / (1.0 + (-v).exp())).collect();
            (1, store_f32(&y, dt))
        }
        OpKind::RmsNorm => {
            let (rows, cols) = (p.d0 as usize, p.d1 as usize);
            let x = load_f32(inputs[0], dt, rows * cols);
            let w = load_f32(inputs[1], dt, cols);
            let mut out = vec![0f32; rows * cols];
            for r in 0..rows {
                let row = &x[r * cols..(r + 1) * cols];
                let mean_sq = row.iter().map(|v| v * v).sum::<f32>() / cols as f32;
                let inv = 1.0 / (mean_sq + p.s0).sqrt();
                for c in 0..cols {
                    out[r * cols + c] = row[c] * inv * w[c];
                }
            }
            (2, store_f32(&out, dt))
        }
        OpKind::Softmax => {
            let (rows, cols) = (p.d0 as usize, p.d1 as usize);
            let x = load_f32(inputs[0], dt, rows * cols);
            let mut out = vec![0f32; rows * cols];
            for r in 0..rows {
                let row = &x[r * cols..(r + 1) * cols];
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let exps: Vec<f32> = row.iter().map(|v| (v - max).exp()).collect();
                let sum: f32 = exps.iter().sum();
                for c in 0..cols {
                    out[r * cols + c] = exps[c] / sum;
                }
            }
            (1, store_f32(&out, dt))
        }
        OpKind::Gemm => {
            let (m, nn, k) = (p.d0 as usize, p.d1 as usize, p.d2 as usize);
            let a = load_f32(inputs[0], dt, m * k);
            let b = load_f32(inputs[1], dt, k * nn);
            let mut c = vec![0f32; m * nn];
            for i in 0..m {
                for j in 0..nn {
                    let mut acc = 0f32;
                    for l in 0..k {
                        acc += a[i * k + l] * b[l * nn + j];
                    }
                    c[i * nn + j] = acc;
                }
            }
            (2, store_f32(&c, DType::F32))
        }
        OpKind::User(k) => unreachable!(
            "reference::execute runs catalogue ops; user kernel {} runs through execute_user",
            k.name()
        ),
    }
}

/// Run user kernel `def` (its [`KernelDef::cpu`]) over the launch's views:
/// binding `i` lies in `mem[at[i]]` (two bindings may share a buffer). Each
/// view's bytes are copied out, the function runs, and the written
/// bindings' bytes are copied back. An error says what went wrong (it
/// becomes the queue's sticky error).
pub fn execute_user(
    def: &KernelDef,
    launch: &Launch,
    mem: &mut [impl std::ops::DerefMut<Target = Vec<u8>>],
    at: &[usize],
) -> Result<(), String> {
    let cpu = def
        .cpu
        .ok_or_else(|| format!("kernel {} has no CPU implementation", def.name))?;
    let sig = launch.op.signature();
    let mut ranges = Vec::with_capacity(sig.len());
    let mut bytes = Vec::with_capacity(sig.len());
    for ((binding, view), &i) in sig.iter().zip(launch.buffers.iter()).zip(at) {
        let size = match binding.role {
            Role::Fixed(d) => d.size(),
            Role::Input => launch.dtype.size(),
        };
        let (start, len) = (view.byte_offset as usize, view.len as usize * size);
        bytes.push(mem[i][start..start + len].to_vec());
        ranges.push((i, start, len));
    }
    // The bindings are copies: a panic here (caught by the queue thread,
    // `run_caught`) keeps nothing the function wrote.
    cpu(&launch.params, &mut bytes);
    for ((binding, (i, start, len)), out) in sig.iter().zip(ranges).zip(&bytes) {
        if out.len() != len {
            return Err(format!(
                "kernel {}: its CPU implementation resized binding `{}` from {len} to {} bytes",
                def.name,
                binding.name,
                out.len()
            ));
        }
        if binding.access == Access::Write {
            mem[i][start..start + len].copy_from_slice(out);
        }
    }
    Ok(())
}

/// What a panic said, as text (its `&str` or `String` payload).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
