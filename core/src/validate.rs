//! Argument validation for launches (C12), done once in core: a launch that
//! reaches a backend is well-formed.

use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::ops::{Access, Launch, OpCall, OpKind, Role};
use crate::{BufferId, RawBuffer};

/// Largest element count a single launch may address: GPU kernels index with u32.
pub const MAX_ELEMENTS: u64 = u32::MAX as u64;

/// What core knows about a live buffer.
#[derive(Clone, Copy, Debug)]
pub struct BufferMeta {
    pub raw: RawBuffer,
    pub dtype: DType,
    pub len: usize,
}

/// Elements each binding needs, in signature order (the first
/// `signature().len()` entries; the rest are 0).
fn needed(call: &OpCall) -> [u64; 3] {
    let p = &call.params;
    let (d0, d1, d2) = (p.d0 as u64, p.d1 as u64, p.d2 as u64);
    match call.op {
        OpKind::Fill => [d0, 0, 0],
        OpKind::Copy | OpKind::ScaleAdd | OpKind::Silu => [d0, d0, 0],
        OpKind::Add | OpKind::Mul => [d0, d0, d0],
        OpKind::RmsNorm => [d0 * d1, d1, d0 * d1],
        OpKind::Softmax => [d0 * d1, d0 * d1, 0],
        OpKind::Gemm => [d0 * d2, d2 * d1, d0 * d1],
    }
}

/// The dims an op uses, with their names, for zero-size checks: the first
/// of the returned count are used.
fn dims(call: &OpCall) -> ([(&'static str, u32); 3], usize) {
    let p = &call.params;
    match call.op {
        OpKind::RmsNorm | OpKind::Softmax => ([("rows", p.d0), ("cols", p.d1), ("", 0)], 2),
        OpKind::Gemm => ([("m", p.d0), ("n", p.d1), ("k", p.d2)], 3),
        _ => ([("n", p.d0), ("", 0), ("", 0)], 1),
    }
}

/// Check `call` against the live buffers and lower it to a backend [`Launch`].
/// Nothing is queued when this fails.
pub fn lower(
    call: &OpCall,
    lookup: impl Fn(BufferId) -> Result<BufferMeta, ErrorKind>,
) -> Result<Launch, ErrorKind> {
    let op = call.op;
    let sig = op.signature();
    if call.buffers.len() != sig.len() {
        return Err(ErrorKind::ArityMismatch {
            op,
            expected: sig.len(),
            found: call.buffers.len(),
        });
    }
    // No op has more than three bindings (the arity check above), so the
    // metas live on the stack: a launch allocates nothing here.
    let mut held = [None::<BufferMeta>; 3];
    for (slot, &id) in held.iter_mut().zip(call.buffers.iter()) {
        *slot = Some(lookup(id)?);
    }
    let metas = &held[..sig.len()];
    let meta_of = |i: usize| metas[i].expect("looked up above");

    let dtype = meta_of(0).dtype;
    if !op.dtypes().contains(&dtype) {
        return Err(ErrorKind::UnsupportedDtype { op, dtype });
    }
    for (i, binding) in sig.iter().enumerate() {
        let meta = meta_of(i);
        let expected = match binding.role {
            Role::Input => dtype,
            Role::F32Only => DType::F32,
        };
        if meta.dtype != expected {
            return Err(ErrorKind::DtypeMismatch {
                op,
                binding: binding.name,
                expected,
                found: meta.dtype,
            });
        }
    }

    let (dims, used) = dims(call);
    for &(what, d) in &dims[..used] {
        if d == 0 {
            return Err(ErrorKind::ZeroSize { what });
        }
    }
    let needs = needed(call);
    for (binding, &need) in sig.iter().zip(&needs) {
        if need > MAX_ELEMENTS {
            return Err(ErrorKind::TooLarge {
                what: binding.name,
                detail: format!("{need} elements exceeds the per-launch limit {MAX_ELEMENTS}"),
            });
        }
    }
    for (i, (binding, &need)) in sig.iter().zip(&needs).enumerate() {
        let meta = meta_of(i);
        if need > meta.len as u64 {
            return Err(ErrorKind::OutOfRange {
                op,
                binding: binding.name,
                needed: need,
                len: meta.len as u64,
            });
        }
    }

    let p = &call.params;
    match op {
        OpKind::Fill if dtype.size() == 2 && p.bits > 0xFFFF => {
            return Err(ErrorKind::InvalidParam {
                op,
                name: "value_bits",
                reason: format!("{:#x} does not fit a 16-bit {dtype}", p.bits),
            });
        }
        OpKind::RmsNorm if !(p.s0.is_finite() && p.s0 > 0.0) => {
            return Err(ErrorKind::InvalidParam {
                op,
                name: "eps",
                reason: format!("{} is not a finite positive number", p.s0),
            });
        }
        _ => {}
    }

    if !op.allows_aliasing() {
        for (wi, w) in sig
            .iter()
            .enumerate()
            .filter(|(_, b)| b.access == Access::Write)
        {
            for (ri, r) in sig
                .iter()
                .enumerate()
                .filter(|(_, b)| b.access == Access::Read)
            {
                if call.buffers[wi] == call.buffers[ri] {
                    return Err(ErrorKind::AliasNotAllowed {
                        op,
                        output: w.name,
                        input: r.name,
                    });
                }
            }
        }
    }

    Ok(Launch {
        op,
        dtype,
        buffers: metas
            .iter()
            .map(|m| m.expect("looked up above").raw)
            .collect(),
        params: call.params,
    })
}
