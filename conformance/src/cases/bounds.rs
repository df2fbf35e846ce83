//! C12 bounds generated from the op catalogue: for every op, dtype and
//! binding, the exact size is accepted and one element short is refused;
//! every named dimension at zero is refused.

use crate::{check, check_eq, Case, Failure, Rule, ONCE};
use seam::{BufferId, DType, ErrorKind, OpCall, OpKind, Params};

/// The dimensions an op names, with the `Params` slot each is carried in,
/// and the values the case uses: all different, so a rule that multiplies
/// the wrong two shows.
fn dims(op: OpKind) -> Vec<(&'static str, usize, u32)> {
    match op {
        OpKind::Fill
        | OpKind::Copy
        | OpKind::ScaleAdd
        | OpKind::Add
        | OpKind::Mul
        | OpKind::Silu => vec![("n", 0, 37)],
        OpKind::RmsNorm | OpKind::Softmax => vec![("rows", 0, 3), ("cols", 1, 5)],
        OpKind::Gemm => vec![("m", 0, 3), ("n", 1, 5), ("k", 2, 7)],
        // Generated for the catalogue; user kernels have their own C12 case.
        OpKind::User(_) => vec![],
    }
}

/// Elements binding `name` of `op` needs, written here from the op
/// definitions (ops.rs doc comments), not taken from core's validation.
fn elements(op: OpKind, name: &str, dim: impl Fn(&str) -> u64) -> Result<u64, Failure> {
    Ok(match (op, name) {
        (OpKind::RmsNorm, "w") => dim("cols"),
        (OpKind::RmsNorm | OpKind::Softmax, _) => dim("rows") * dim("cols"),
        (OpKind::Gemm, "a") => dim("m") * dim("k"),
        (OpKind::Gemm, "b") => dim("k") * dim("n"),
        (OpKind::Gemm, "c") => dim("m") * dim("n"),
        (OpKind::Gemm, _) => return Err(Failure(format!("no size rule for gemm's {name}"))),
        _ => dim("n"),
    })
}

/// For every op of the catalogue (`OpKind::ALL`), every dtype it accepts
/// (`op.dtypes()`) and every binding of its signature (`op.signature()`):
/// buffers of exactly the size the op needs are accepted (and the launch
/// runs); the same launch with that one binding a buffer one element short
/// is refused with `OutOfRange` naming the binding, the size needed and the
/// length; each named dimension at zero is refused with `ZeroSize` naming
/// it. The sizes come from this case's own formula, so a wrong rule in
/// `core/src/validate.rs` is not its own oracle.
///
/// Mutation: make `validate::needed` give GEMM's `c` m·k elements instead
/// of m·n → red at "gemm/f32: exact sizes [21, 35, 15] refused: … gemm:
/// binding `c` needs 21 elements, buffer holds 15". Also `>=` for `>` in
/// `validate::lower`'s range check (an off-by-one the other way) → red at
/// "fill/f32: exact sizes [37] refused: … binding `dst` needs 37 elements,
/// buffer holds 37".
pub const C12_BOUNDS_FROM_THE_RULES: Case = Case {
    name: "c12_bounds_from_the_rules",
    rule: Rule::C12,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let mut rows = 0;
        for op in OpKind::ALL {
            let dims = dims(op);
            let sig = op.signature();
            for &dtype in op.dtypes() {
                if !cx.registration.has(seam::Capability::Half) && dtype.size() == 2 {
                    continue;
                }
                let dim = |n: &str| {
                    dims.iter()
                        .find(|(name, _, _)| *name == n)
                        .map_or(0, |(_, _, v)| *v as u64)
                };
                let sizes: Vec<u64> = sig
                    .iter()
                    .map(|b| elements(op, b.name, dim))
                    .collect::<Result<_, _>>()?;
                let types: Vec<DType> = sig
                    .iter()
                    .map(|b| match b.role {
                        seam::ops::Role::Input => dtype,
                        seam::ops::Role::Fixed(d) => d,
                    })
                    .collect();
                let alloc = |len: u64, t: DType| -> seam::Result<BufferId> {
                    let id = d.alloc(t, len as usize)?;
                    d.write_bytes(id, 0, &vec![0; len as usize * t.size()])?;
                    Ok(id)
                };
                let exact: Vec<BufferId> = sizes
                    .iter()
                    .zip(&types)
                    .map(|(l, t)| alloc(*l, *t))
                    .collect::<Result<_, _>>()?;
                let mut params = Params {
                    s0: 0.5,
                    s1: 0.25,
                    ..Default::default()
                };
                for (_, slot, v) in &dims {
                    *[&mut params.d0, &mut params.d1, &mut params.d2][*slot] = *v;
                }
                let call = |buffers: Vec<BufferId>, params: Params| OpCall {
                    op,
                    buffers: buffers.into_iter().map(seam::View::from).collect(),
                    params,
                };
                d.launch(&call(exact.clone(), params)).map_err(|e| {
                    Failure(format!("{op}/{dtype}: exact sizes {sizes:?} refused: {e}"))
                })?;
                rows += 1;
                for (i, b) in sig.iter().enumerate() {
                    let short = alloc(sizes[i] - 1, types[i])?;
                    let mut bufs = exact.clone();
                    bufs[i] = short;
                    match d.launch(&call(bufs, params)) {
                        Err(e) => match e.kind {
                            ErrorKind::OutOfRange {
                                binding,
                                needed,
                                len,
                                ..
                            } => check!(
                                binding == b.name && needed == sizes[i] && len == sizes[i] - 1,
                                "{op}/{dtype}: {} one short: refused as {binding} needing \
                                 {needed} of {len}, want {} needing {} of {}",
                                b.name,
                                b.name,
                                sizes[i],
                                sizes[i] - 1
                            ),
                            _ => {
                                return Err(Failure(format!(
                                    "{op}/{dtype}: {} one short: wrong error: {e}",
                                    b.name
                                )))
                            }
                        },
                        Ok(()) => {
                            return Err(Failure(format!(
                                "{op}/{dtype}: {} one element short ({} of {}): accepted",
                                b.name,
                                sizes[i] - 1,
                                sizes[i]
                            )))
                        }
                    }
                    d.free(short)?;
                    rows += 1;
                }
                for (name, slot, _) in &dims {
                    let mut p = params;
                    *[&mut p.d0, &mut p.d1, &mut p.d2][*slot] = 0;
                    match d.launch(&call(exact.clone(), p)) {
                        Err(e) if matches!(e.kind, ErrorKind::ZeroSize { what } if what == *name) =>
                            {}
                        Err(e) => {
                            return Err(Failure(format!(
                                "{op}/{dtype}: {name} = 0: wrong error: {e}"
                            )))
                        }
                        Ok(()) => {
                            return Err(Failure(format!("{op}/{dtype}: {name} = 0: accepted")))
                        }
                    }
                    rows += 1;
                }
                d.synchronize()?;
                for id in exact {
                    d.free(id)?;
                }
            }
        }
        // 9 ops: 24 (op, dtype) pairs, 54 (pair, binding) rows, 33 (pair, dim) rows.
        if cx.registration.has(seam::Capability::Half) {
            check_eq!(rows, 24 + 54 + 33, "rows generated from the catalogue");
        }
        Ok(())
    },
};
