//! Buffer views on the catalogue: every op over views at an odd element
//! offset agrees with the CPU reference over whole buffers (C11) and
//! touches nothing outside its views; the C12 rows of views generated from
//! each op's signature and bounds.

use super::GUARD;
use crate::workloads::{all_pairs, compare, prepare_at};
use crate::{check, Case, Failure, Rule, Tag, BOTH, ONCE};
use seam::ops::{Access, Role};
use seam::{DType, ErrorKind, OpCall, OpKind, View};

fn dtype_of(op: OpKind, dtype: DType, k: usize) -> DType {
    match op.signature()[k].role {
        Role::Input => dtype,
        Role::Fixed(d) => d,
    }
}

/// Every (op, dtype) with binding k a view [`GUARD`] + k elements into its
/// buffer (16-bit views start mid-word, and neighbouring bindings at
/// offsets of different parity) gives, within the op's
/// tolerance, what the CPU reference gives over whole buffers, eager and
/// captured; the guard elements of every binding keep their 0xA5 pattern.
///
/// Mutation: make the CPU backend read every binding from byte 0 (its
/// worker's `&b[v.byte_offset as usize..]` → `&b[..]`) → red on cpu:0,
/// eager and captured (tried); the CPU worker reading every input from
/// binding 0's offset → red on cpu:0 at "add/f32 … `out`: bit-exact
/// mismatch" (tried; invisible while every binding had the same offset);
/// on a GPU backend, an offset word left out
/// of a kernel (e.g. `x[p.o0 + i]` → `x[i]` in a WGSL kernel) is the same
/// fault on vulkan:0 and wgpu:0.
pub const C11_VIEWS_AT_ODD_OFFSETS_AGREE_WITH_CPU: Case = Case {
    name: "c11_views_at_odd_offsets_agree_with_cpu",
    rule: Rule::C11,
    tags: &[Tag::NeedsHalf],
    modes: BOTH,
    body: |cx| {
        let d = &cx.dev;
        let oracle = (cx.reference)();
        let pairs = all_pairs();
        d.prepare(&pairs)?;
        for (op, dtype) in pairs {
            let what = format!(
                "{op}/{dtype} over views at offsets {GUARD}, {}, …",
                GUARD + 1
            );
            let w = prepare_at(d, op, dtype, 7, GUARD)?;
            let before: Vec<Vec<u8>> = w
                .buffers
                .iter()
                .map(|&b| d.read_bytes(b))
                .collect::<seam::Result<_>>()?;
            cx.run(|d| d.launch(&w.call))
                .map_err(|f| Failure(format!("{what}: {f}")))?;
            let r = prepare_at(&oracle, op, dtype, 7, 0)?;
            oracle.launch(&r.call)?;
            for (k, b) in op.signature().iter().enumerate() {
                let dt = dtype_of(op, dtype, k);
                let got = d.read_bytes(w.buffers[k])?;
                let view = w.call.buffers[k];
                let lo = view.offset * dt.size();
                let hi = lo + view.len.unwrap_or(0) * dt.size();
                check!(
                    got[..lo] == before[k][..lo] && got[hi..] == before[k][hi..],
                    "{what}: binding `{}` changed outside its view",
                    b.name
                );
                if b.access == Access::Write {
                    let want = oracle.read_bytes(r.buffers[k])?;
                    compare(dt, op.tolerance(dtype), &got[lo..hi], &want)
                        .map_err(|m| Failure(format!("{what}: `{}`: {m}", b.name)))?;
                    cx.digest_bytes(&got[lo..hi]);
                } else {
                    check!(got == before[k], "{what}: input `{}` changed", b.name);
                }
            }
            w.buffers.into_iter().try_for_each(|b| d.free(b))?;
            r.buffers.into_iter().try_for_each(|b| oracle.free(b))?;
        }
        Ok(())
    },
};

/// The C12 rows of views, generated for every op from its signature: the
/// exact views at an odd offset are accepted; for each binding a view one
/// element short is `OutOfRange`, one reaching past its buffer
/// `ViewOutOfRange`; where a written and a read binding have the same
/// type and size, the same view for both is accepted exactly when the op
/// runs in place (`allows_aliasing`, else `AliasNotAllowed`) and views one
/// element apart are `ViewsOverlap`. Every refusal leaves the buffers as
/// they were.
///
/// Mutation: let partly overlapping views through in `validate::lower`
/// (`if ws >= oe || os >= we` → `… || ws != os`) → red on cpu:0 (tried:
/// "copy/f32: `dst` one element before `src`: accepted").
pub const C12_VIEW_RULES_FROM_THE_SIGNATURES: Case = Case {
    name: "c12_view_rules_from_the_signatures",
    rule: Rule::C12,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let mut rows = 0;
        for op in OpKind::ALL {
            let dtype = if op.dtypes().contains(&DType::F32) {
                DType::F32
            } else {
                op.dtypes()[0]
            };
            let w = prepare_at(d, op, dtype, 3, GUARD)?;
            let sig = op.signature();
            let lens: Vec<usize> = w.call.buffers.iter().map(|v| v.len.unwrap_or(0)).collect();
            let offs: Vec<usize> = w.call.buffers.iter().map(|v| v.offset).collect();
            let before: Vec<Vec<u8>> = w
                .buffers
                .iter()
                .map(|&b| d.read_bytes(b))
                .collect::<seam::Result<_>>()?;
            let with = |changes: &[(usize, View)]| {
                let mut call: OpCall = w.call.clone();
                for &(k, v) in changes {
                    call.buffers[k] = v;
                }
                call
            };
            let refuse =
                |call: OpCall, what: String, ok: fn(&ErrorKind) -> bool| match d.launch(&call) {
                    Ok(()) => Err(Failure(format!("{op}/{dtype}: {what}: accepted"))),
                    Err(e) if ok(&e.kind) => Ok(()),
                    Err(e) => Err(Failure(format!("{op}/{dtype}: {what}: wrong error: {e}"))),
                };
            for (k, b) in sig.iter().enumerate() {
                let id = w.buffers[k];
                rows += 2;
                refuse(
                    with(&[(k, id.view(offs[k], lens[k] - 1))]),
                    format!("`{}` one element short", b.name),
                    |e| matches!(e, ErrorKind::OutOfRange { .. }),
                )?;
                refuse(
                    with(&[(k, id.view(offs[k] + GUARD + 1, lens[k]))]),
                    format!("`{}` reaching past its buffer", b.name),
                    |e| matches!(e, ErrorKind::ViewOutOfRange { .. }),
                )?;
            }
            for (wi, wb) in sig
                .iter()
                .enumerate()
                .filter(|(_, b)| b.access == Access::Write)
            {
                for (ri, rb) in sig
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.access == Access::Read)
                {
                    if dtype_of(op, dtype, wi) != dtype_of(op, dtype, ri) || lens[wi] != lens[ri] {
                        continue;
                    }
                    let shared = w.buffers[ri];
                    let same = with(&[(wi, shared.view(offs[ri], lens[ri]))]);
                    rows += 2;
                    if op.allows_aliasing() {
                        d.launch(&same).map_err(|e| {
                            Failure(format!(
                                "{op}/{dtype}: `{}` in place on `{}`: {e}",
                                wb.name, rb.name
                            ))
                        })?;
                        // In place changed the input: restore it.
                        d.write_bytes(shared, 0, &before[ri])?;
                    } else {
                        refuse(
                            same,
                            format!("`{}` the same view as `{}`", wb.name, rb.name),
                            |e| matches!(e, ErrorKind::AliasNotAllowed { .. }),
                        )?;
                    }
                    refuse(
                        with(&[(wi, shared.view(offs[ri] - 1, lens[ri]))]),
                        format!("`{}` one element before `{}`", wb.name, rb.name),
                        |e| matches!(e, ErrorKind::ViewsOverlap { .. }),
                    )?;
                }
            }
            d.synchronize()?;
            for (k, &b) in w.buffers.iter().enumerate() {
                check!(
                    d.read_bytes(b)? == before[k],
                    "{op}/{dtype}: a refused launch changed `{}`",
                    sig[k].name
                );
            }
            d.launch(&w.call)?;
            d.synchronize()?;
            w.buffers.into_iter().try_for_each(|b| d.free(b))?;
        }
        check!(rows > 0, "no rows generated");
        Ok(())
    },
};
