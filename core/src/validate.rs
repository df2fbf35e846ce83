//! Argument validation for launches (C12), done once in core: a launch that
//! reaches a backend is well-formed.

use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::kernel::{Field, KernelDef, MAX_BINDINGS, MAX_GRID_EDGE};
use crate::ops::{Access, Binding, Launch, OpCall, OpKind, Params, RawView, Role, View};
use crate::{BufferId, RawBuffer};

/// Largest element count a single launch may address: GPU kernels index with u32.
pub const MAX_ELEMENTS: u64 = u32::MAX as u64;

/// What core knows about a live buffer.
#[derive(Clone, Copy, Debug)]
pub struct BufferMeta {
    /// The backend's handle.
    pub raw: RawBuffer,
    /// Its element type.
    pub dtype: DType,
    /// Its length in elements.
    pub len: usize,
}

/// What the checks of one launch read of its op, derived once per launch
/// and handed to each: its bindings, the element types it accepts, whether
/// it may run in place and, for a user kernel, its definition.
#[derive(Clone, Copy)]
struct Shape {
    op: OpKind,
    bindings: &'static [Binding],
    dtypes: &'static [DType],
    in_place: bool,
    user: Option<&'static KernelDef>,
}

impl Shape {
    fn of(op: OpKind) -> Shape {
        Shape {
            op,
            bindings: op.signature(),
            dtypes: op.dtypes(),
            in_place: op.allows_aliasing(),
            user: op.user().map(|k| k.def()),
        }
    }
}

/// Elements each binding needs, in signature order (the first
/// `signature().len()` entries; the rest are 0).
pub(crate) fn needed(op: OpKind, p: &Params) -> [u64; MAX_BINDINGS] {
    needs(&Shape::of(op), p)
}

fn needs(shape: &Shape, p: &Params) -> [u64; MAX_BINDINGS] {
    let (d0, d1, d2) = (p.d0 as u64, p.d1 as u64, p.d2 as u64);
    let mut out = [0; MAX_BINDINGS];
    let catalogue: [u64; 3] = match shape.op {
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
fn dims(shape: &Shape, p: &Params) -> ([(&'static str, u32); 3], usize) {
    if let Some(def) = shape.user {
        let [x, y, z] = (def.grid)(p);
        return ([("grid x", x), ("grid y", y), ("grid z", z)], 3);
    }
    match shape.op {
        OpKind::RmsNorm | OpKind::Softmax => ([("rows", p.d0), ("cols", p.d1), ("", 0)], 2),
        OpKind::Gemm => ([("m", p.d0), ("n", p.d1), ("k", p.d2)], 3),
        _ => ([("n", p.d0), ("", 0), ("", 0)], 1),
    }
}

/// The element range `[start, end)` binding `i` touches.
fn touched(view: &View, need: u64) -> (u64, u64) {
    (view.offset as u64, view.offset as u64 + need)
}

/// The element type of binding 0, once every binding's type (`dtype_of`,
/// in signature order) is one the op accepts there.
fn check_dtypes(shape: &Shape, dtype_of: impl Fn(usize) -> DType) -> Result<DType, ErrorKind> {
    let op = shape.op;
    let dtype = dtype_of(0);
    if !shape.dtypes.contains(&dtype) {
        return Err(ErrorKind::UnsupportedDtype { op, dtype });
    }
    for (i, binding) in shape.bindings.iter().enumerate() {
        let expected = match binding.role {
            Role::Input => dtype,
            Role::Fixed(d) => d,
        };
        let found = dtype_of(i);
        if found != expected {
            return Err(ErrorKind::DtypeMismatch {
                op,
                binding: binding.name,
                expected,
                found,
            });
        }
    }
    Ok(dtype)
}

/// Everything about a launch that depends on its op, parameters and views
/// but not on which buffers they are: the parameters themselves, the dims,
/// and that each binding `i` (in signature order), `offsets[i]` elements
/// into its buffer with `view_len[i]` elements from there, holds what the
/// op indexes. The elements each binding needs.
fn check_extents(
    shape: &Shape,
    dtype: DType,
    p: &Params,
    offsets: &[u64; MAX_BINDINGS],
    view_len: &[u64; MAX_BINDINGS],
) -> Result<[u64; MAX_BINDINGS], ErrorKind> {
    let (op, sig) = (shape.op, shape.bindings);
    if let Some(def) = shape.user {
        for f in Field::ALL {
            if !def.reads.contains(&f) && !f.is_zero(p) {
                return Err(ErrorKind::InvalidParam {
                    op,
                    name: f.name(),
                    reason: format!("{} does not read {}; it must be 0", def.name, f.name()),
                });
            }
        }
        if let Some(check) = def.check {
            check(p).map_err(|e| ErrorKind::InvalidParam {
                op,
                name: e.name,
                reason: e.reason,
            })?;
        }
    }

    let (dims, used) = dims(shape, p);
    for &(what, d) in &dims[..used] {
        if d == 0 {
            return Err(ErrorKind::ZeroSize { what });
        }
    }
    if shape.user.is_some() {
        for &(what, d) in &dims[..used] {
            if d > MAX_GRID_EDGE {
                return Err(ErrorKind::TooLarge {
                    what,
                    detail: format!("{d} workgroups exceed the portable {MAX_GRID_EDGE}"),
                });
            }
        }
    }
    let needs = needs(shape, p);
    for ((binding, &need), &offset) in sig.iter().zip(&needs).zip(offsets) {
        if need > MAX_ELEMENTS || offset + need > MAX_ELEMENTS {
            return Err(ErrorKind::TooLarge {
                what: binding.name,
                detail: format!(
                    "{need} elements from element {offset} exceed the per-launch limit {MAX_ELEMENTS}"
                ),
            });
        }
    }
    for ((binding, &need), &len) in sig.iter().zip(&needs).zip(view_len) {
        if need > len {
            return Err(ErrorKind::OutOfRange {
                op,
                binding: binding.name,
                needed: need,
                len,
            });
        }
    }

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
    Ok(needs)
}

/// `lower`'s checks of a launch already lowered, against the sizes of the
/// allocations behind it: for a backend, which can be called directly and
/// not only through core, to hold a [`Launch`] to what its driver's kernel
/// call relies on before making it. Binding `i` is `bytes(i)` bytes of its
/// signature type (the launch's dtype for an input), viewed from its
/// `offset` to the end of the allocation (what memory safety needs); the
/// result is what lowering such a call over distinct buffers would give
/// (the same checks, in the same order, with the same errors; the aliasing
/// rule, about results and not memory, is core's alone), and the launch's
/// dtype must be the one its bindings make it. Allocates nothing.
pub fn check_launch(l: &Launch, bytes: impl Fn(usize) -> usize) -> Result<(), ErrorKind> {
    let shape = Shape::of(l.op);
    let (op, sig) = (shape.op, shape.bindings);
    if l.buffers.len() != sig.len() {
        return Err(ErrorKind::ArityMismatch {
            op,
            expected: sig.len(),
            found: l.buffers.len(),
        });
    }
    let dtype_of = |i: usize| match sig[i].role {
        Role::Fixed(d) => d,
        Role::Input => l.dtype,
    };
    let dtype = check_dtypes(&shape, dtype_of)?;
    let mut offsets = [0u64; MAX_BINDINGS];
    let mut view_len = [0u64; MAX_BINDINGS];
    for (i, (binding, view)) in sig.iter().zip(l.buffers.iter()).enumerate() {
        let buffer_len = (bytes(i) / dtype_of(i).size()) as u64;
        let offset = u64::from(view.offset);
        if offset > buffer_len {
            return Err(ErrorKind::ViewOutOfRange {
                op,
                binding: binding.name,
                offset,
                len: None,
                buffer_len,
            });
        }
        // A backend advances its pointers by `byte_offset`: it must be the
        // element offset that was checked, in bytes (a `Launch` made by
        // hand could say otherwise).
        let want = offset * dtype_of(i).size() as u64;
        if view.byte_offset != want {
            return Err(ErrorKind::InvalidParam {
                op,
                name: "byte_offset",
                reason: format!(
                    "binding `{}`: {} bytes for element {offset} of {}: must be {want}",
                    binding.name,
                    view.byte_offset,
                    dtype_of(i)
                ),
            });
        }
        offsets[i] = offset;
        view_len[i] = buffer_len - offset;
    }
    check_extents(&shape, dtype, &l.params, &offsets, &view_len)?;
    if dtype != l.dtype {
        return Err(ErrorKind::UnsupportedDtype { op, dtype: l.dtype });
    }
    Ok(())
}

/// Check `call` against the live buffers and lower it to a backend [`Launch`].
/// Nothing is queued when this fails. `read_only`: the bindings (bit `i`
/// for binding `i`) a user kernel's WGSL declares `var<storage, read>`; no
/// buffer bound to one of them may also be bound to a binding it does not
/// (in place, or over disjoint ranges alike): WebGPU refuses a buffer used
/// read-only and read-write in one dispatch, so it is refused here, on
/// every device, and the contract is one. 0 for a catalogue op.
pub(crate) fn lower(
    call: &OpCall,
    read_only: u8,
    lookup: impl Fn(BufferId) -> Result<BufferMeta, ErrorKind>,
) -> Result<Launch, ErrorKind> {
    let shape = Shape::of(call.op);
    let (op, sig) = (shape.op, shape.bindings);
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

    let dtype = check_dtypes(&shape, |i| meta_of(i).dtype)?;

    // Each view lies inside its buffer; its length is what the op may use.
    let mut offsets = [0u64; MAX_BINDINGS];
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
        offsets[i] = offset;
        view_len[i] = len.unwrap_or(buffer_len - offset);
    }
    let needs = check_extents(&shape, dtype, &call.params, &offsets, &view_len)?;

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
            if same && shape.in_place {
                continue;
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

    if let Some(def) = shape.user {
        for (ri, r) in sig.iter().enumerate() {
            if read_only & (1 << ri) == 0 {
                continue;
            }
            let shared = sig.iter().enumerate().find(|&(oi, _)| {
                read_only & (1 << oi) == 0 && call.buffers[oi].buffer == call.buffers[ri].buffer
            });
            if let Some((_, other)) = shared {
                return Err(ErrorKind::ReadOnlyShared {
                    kernel: def.name,
                    read_only: r.name,
                    other: other.name,
                });
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Kernel, KernelDef, ParamError};
    use crate::ops::Binding;
    use crate::Tolerance;

    fn extents(p: &Params, out: &mut [u64]) {
        out[0] = u64::from(p.d0) * u64::from(p.d1);
        out[1] = u64::from(p.d1);
    }
    fn grid(p: &Params) -> [u32; 3] {
        [p.d0, p.d1, 1]
    }
    fn even(p: &Params) -> Result<(), ParamError> {
        match p.d1 % 2 {
            0 => Ok(()),
            _ => Err(ParamError {
                name: "d1",
                reason: "odd".into(),
            }),
        }
    }
    /// Bindings of two fixed types, a parameter check, a grid of the dims.
    static MIXED: KernelDef = KernelDef {
        name: "mixed",
        bindings: &[
            Binding::fixed("x", Access::Write, DType::F32),
            Binding::fixed("i", Access::Read, DType::U32),
        ],
        reads: &[Field::D0, Field::D1],
        extents,
        workgroup_size: [1, 1, 1],
        grid,
        check: Some(even),
        allows_aliasing: false,
        tolerance: Tolerance::BitExact,
        wgsl: None,
        cuda: None,
        cpu: None,
        samples: &[],
    };

    /// `check_launch` is `lower` over views to the end of distinct
    /// allocations of the given sizes (what the stream backend ran before
    /// it): the same result, error for error, over every op and dtype,
    /// zero, small and too-large dims, bad scalars, offsets past the end and
    /// allocations of every size around what the ops need. Mutations: an
    /// off-by-one in `check_launch`'s view range, its dtype check dropped,
    /// `check_extents` skipped → red.
    #[test]
    fn check_launch_is_lower_over_whole_allocations() {
        let mixed = OpKind::User(Kernel::new(&MIXED));
        let ops = OpKind::ALL.into_iter().chain([mixed]);
        let dims = [0u32, 1, 2, 3, 8, 1 << 16];
        let mut checked = 0;
        for op in ops {
            let arity = op.signature().len();
            for dtype in DType::ALL {
                for (d0, d1, d2) in dims.iter().flat_map(|&a| {
                    dims.iter()
                        .flat_map(move |&b| [0u32, 3].map(move |c| (a, b, c)))
                }) {
                    for (bits, s0) in [(0, 1e-5f32), (0x1_0000, 0.0), (1, f32::NAN)] {
                        let params = Params {
                            d0,
                            d1,
                            d2,
                            bits,
                            s0,
                            ..Default::default()
                        };
                        for offset in [0u32, 2, 9] {
                            for elements in [0usize, 3, 8, 11, 24, 64, 73] {
                                let size = |i: usize| match op.signature()[i].role {
                                    Role::Fixed(d) => d.size(),
                                    Role::Input => dtype.size(),
                                };
                                let bytes = |i: usize| (elements + i) * size(i) + i % 2;
                                let launch = Launch {
                                    op,
                                    dtype,
                                    buffers: (0..arity)
                                        .map(|i| RawView {
                                            buffer: RawBuffer(i as u64),
                                            offset,
                                            byte_offset: u64::from(offset) * size(i) as u64,
                                            len: 0,
                                        })
                                        .collect(),
                                    params,
                                };
                                let call = OpCall {
                                    op,
                                    buffers: (0..arity)
                                        .map(|i| {
                                            BufferId {
                                                device: 1,
                                                n: i as u64,
                                            }
                                            .from_offset(offset as usize)
                                        })
                                        .collect(),
                                    params,
                                };
                                let meta = |id: BufferId| {
                                    let i = id.n as usize;
                                    let d = match op.signature()[i].role {
                                        Role::Fixed(d) => d,
                                        Role::Input => dtype,
                                    };
                                    Ok(BufferMeta {
                                        raw: RawBuffer(id.n),
                                        dtype: d,
                                        len: bytes(i) / d.size(),
                                    })
                                };
                                let want = lower(&call, 0, meta).and_then(|l| match l.dtype {
                                    d if d == dtype => Ok(()),
                                    _ => Err(ErrorKind::UnsupportedDtype { op, dtype }),
                                });
                                let got = check_launch(&launch, bytes);
                                assert_eq!(got, want, "{op}/{dtype} {params:?} at {offset}");
                                checked += usize::from(got.is_ok());
                            }
                        }
                    }
                }
            }
        }
        assert!(
            checked > 1000,
            "{checked} launches passed: too few to compare"
        );
        // A wrong arity, as lowering refuses it.
        let short = Launch {
            op: OpKind::Add,
            dtype: DType::F32,
            buffers: [RawView::whole(RawBuffer(0), 8)].into(),
            params: Params::dims(8, 0, 0),
        };
        assert!(matches!(
            check_launch(&short, |_| 64),
            Err(ErrorKind::ArityMismatch { found: 1, .. })
        ));
        // A byte offset that is not the element offset in bytes: refused,
        // where the element offset alone would pass (mutation: the check
        // left out → red here).
        let view = |offset: u32, byte_offset: u64| RawView {
            buffer: RawBuffer(0),
            offset,
            byte_offset,
            len: 8,
        };
        let mut skewed = Launch {
            op: OpKind::Add,
            dtype: DType::F32,
            buffers: [view(2, 8), view(2, 8), view(2, 8)].into(),
            params: Params::dims(8, 0, 0),
        };
        assert_eq!(check_launch(&skewed, |_| 64), Ok(()));
        skewed.buffers[1] = view(2, 60);
        assert!(matches!(
            check_launch(&skewed, |_| 64),
            Err(ErrorKind::InvalidParam {
                name: "byte_offset",
                ..
            })
        ));
    }
}
