//! Argument validation for launches (C12), done once in core: a launch that
//! reaches a backend is well-formed.

use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::kernel::{Field, MAX_BINDINGS, MAX_GRID_EDGE};
use crate::ops::{Access, Launch, OpCall, OpKind, RawView, Role, View};
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
fn needed(call: &OpCall) -> [u64; MAX_BINDINGS] {
    let p = &call.params;
    let (d0, d1, d2) = (p.d0 as u64, p.d1 as u64, p.d2 as u64);
    let mut out = [0; MAX_BINDINGS];
    let catalogue: [u64; 3] = match call.op {
        OpKind::Fill => [d0, 0, 0],
        OpKind::Copy | OpKind::ScaleAdd | OpKind::Silu => [d0, d0, 0],
        OpKind::Add | OpKind::Mul => [d0, d0, d0],
        OpKind::RmsNorm => [d0 * d1, d1, d0 * d1],
        OpKind::Softmax => [d0 * d1, d0 * d1, 0],
        OpKind::Gemm => [d0 * d2, d2 * d1, d0 * d1],
        OpKind::User(k) => {
            let def = k.def();
            (def.extents)(p, &mut out[..def.bindings.len()]);
            return out;
        }
    };
    out[..3].copy_from_slice(&catalogue);
    out
}

/// The dims an op uses, with their names, for zero-size checks: the first
/// of the returned count are used. A user kernel's are its grid's axes.
fn dims(call: &OpCall) -> ([(&'static str, u32); 3], usize) {
    let p = &call.params;
    match call.op {
        OpKind::RmsNorm | OpKind::Softmax => ([("rows", p.d0), ("cols", p.d1), ("", 0)], 2),
        OpKind::Gemm => ([("m", p.d0), ("n", p.d1), ("k", p.d2)], 3),
        OpKind::User(k) => {
            let [x, y, z] = (k.def().grid)(p);
            ([("grid x", x), ("grid y", y), ("grid z", z)], 3)
        }
        _ => ([("n", p.d0), ("", 0), ("", 0)], 1),
    }
}

/// The element range `[start, end)` binding `i` touches.
fn touched(view: &View, need: u64) -> (u64, u64) {
    (view.offset as u64, view.offset as u64 + need)
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
    // No op has more than MAX_BINDINGS bindings (the arity check above, and
    // `KernelDef::well_formed` at registration), so the metas live on the
    // stack: a launch allocates nothing here.
    let mut held = [None::<BufferMeta>; MAX_BINDINGS];
    for (slot, view) in held.iter_mut().zip(call.buffers.iter()) {
        *slot = Some(lookup(view.buffer)?);
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
            Role::Fixed(d) => d,
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

    // Each view lies inside its buffer; its length is what the op may use.
    let mut view_len = [0u64; MAX_BINDINGS];
    for (i, (binding, view)) in sig.iter().zip(call.buffers.iter()).enumerate() {
        let buffer_len = meta_of(i).len as u64;
        let (offset, len) = (view.offset as u64, view.len.map(|l| l as u64));
        let end = offset.checked_add(len.unwrap_or(0));
        if offset > buffer_len || end.is_none_or(|e| e > buffer_len) {
            return Err(ErrorKind::ViewOutOfRange {
                op,
                binding: binding.name,
                offset,
                len,
                buffer_len,
            });
        }
        view_len[i] = len.unwrap_or(buffer_len - offset);
    }

    if let OpKind::User(k) = op {
        let def = k.def();
        for f in Field::ALL {
            if !def.reads.contains(&f) && !f.is_zero(&call.params) {
                return Err(ErrorKind::InvalidParam {
                    op,
                    name: f.name(),
                    reason: format!("{} does not read {}; it must be 0", def.name, f.name()),
                });
            }
        }
        if let Some(check) = def.check {
            check(&call.params).map_err(|e| ErrorKind::InvalidParam {
                op,
                name: e.name,
                reason: e.reason,
            })?;
        }
    }

    let (dims, used) = dims(call);
    for &(what, d) in &dims[..used] {
        if d == 0 {
            return Err(ErrorKind::ZeroSize { what });
        }
    }
    if op.user().is_some() {
        for &(what, d) in &dims[..used] {
            if d > MAX_GRID_EDGE {
                return Err(ErrorKind::TooLarge {
                    what,
                    detail: format!("{d} workgroups exceed the portable {MAX_GRID_EDGE}"),
                });
            }
        }
    }
    let needs = needed(call);
    for ((binding, &need), view) in sig.iter().zip(&needs).zip(call.buffers.iter()) {
        if need > MAX_ELEMENTS || view.offset as u64 + need > MAX_ELEMENTS {
            return Err(ErrorKind::TooLarge {
                what: binding.name,
                detail: format!(
                    "{need} elements from element {} exceed the per-launch limit {MAX_ELEMENTS}",
                    view.offset
                ),
            });
        }
    }
    for (i, (binding, &need)) in sig.iter().zip(&needs).enumerate() {
        if need > view_len[i] {
            return Err(ErrorKind::OutOfRange {
                op,
                binding: binding.name,
                needed: need,
                len: view_len[i],
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

    // A written range may share elements with another binding's only where
    // the op runs in place, and then only as the very same range (element i
    // read and written by one invocation); two writes never overlap.
    for (wi, w) in sig
        .iter()
        .enumerate()
        .filter(|(_, b)| b.access == Access::Write)
    {
        let wv = &call.buffers[wi];
        let (ws, we) = touched(wv, needs[wi]);
        for (oi, o) in sig.iter().enumerate().filter(|&(oi, _)| oi != wi) {
            let ov = &call.buffers[oi];
            if ov.buffer != wv.buffer {
                continue;
            }
            let (os, oe) = touched(ov, needs[oi]);
            if ws >= oe || os >= we {
                continue;
            }
            let same = ws == os && o.access == Access::Read;
            if same && op.allows_aliasing() {
                continue;
            }
            if o.access == Access::Write && oi < wi {
                continue; // reported once, from the first write
            }
            return Err(if same || (ws == os && we == oe) {
                ErrorKind::AliasNotAllowed {
                    op,
                    output: w.name,
                    input: o.name,
                }
            } else {
                ErrorKind::ViewsOverlap {
                    op,
                    output: w.name,
                    other: o.name,
                }
            });
        }
    }

    Ok(Launch {
        op,
        dtype,
        buffers: call
            .buffers
            .iter()
            .enumerate()
            .map(|(i, view)| {
                let meta = meta_of(i);
                RawView {
                    buffer: meta.raw,
                    offset: view.offset as u32,
                    byte_offset: view.offset as u64 * meta.dtype.size() as u64,
                    len: view_len[i],
                }
            })
            .collect(),
        params: call.params,
    })
}
