//! C12 bad input: each a named error before any work is queued; nothing else changes.

use crate::{check, check_eq, expect_err, Case, Ctx, Rule, BOTH, ONCE};
use seam::{ops, BufferId, DType, ErrorKind, GraphRef, OpCall, OpKind, Params};

/// One row of the bad-launch catalogue: what it is, the launch, and the
/// error kind it must be refused with.
type BadLaunch = (&'static str, OpCall, fn(&ErrorKind) -> bool);

/// The buffers every bad launch is aimed at, with known contents.
struct Fixture {
    f: BufferId,
    g: BufferId,
    out: BufferId,
    i: BufferId,
    h: BufferId,
    small: BufferId,
    freed: BufferId,
}

fn fixture(cx: &Ctx) -> seam::Result<Fixture> {
    let d = &cx.dev;
    let mk = |dtype, len: usize, byte: u8| -> seam::Result<BufferId> {
        let id = d.alloc(dtype, len)?;
        d.write_bytes(id, 0, &vec![byte; len * DType::size(dtype)])?;
        Ok(id)
    };
    let fx = Fixture {
        f: mk(DType::F32, 64, 0x11)?,
        g: mk(DType::F32, 64, 0x22)?,
        out: mk(DType::F32, 64, 0x33)?,
        i: mk(DType::I32, 64, 0x44)?,
        h: mk(DType::F16, 64, 0x55)?,
        small: mk(DType::F32, 4, 0x66)?,
        freed: d.alloc(DType::F32, 8)?,
    };
    d.free(fx.freed)?;
    Ok(fx)
}

fn snapshot(cx: &Ctx, fx: &Fixture) -> seam::Result<Vec<Vec<u8>>> {
    [fx.f, fx.g, fx.out, fx.i, fx.h, fx.small]
        .iter()
        .map(|id| cx.dev.read_bytes(*id))
        .collect()
}

/// Every bad launch in the table is refused with its named error, in eager
/// mode and inside a capture (where it must not be recorded either); no
/// buffer changes and the device still runs a good launch.
///
/// Mutation: skip the `need > meta.len` check in `validate::lower` → red at
/// "n past the end: accepted". Traced, a refused launch leaves no launch
/// event and a capture that saw only refused launches records 0: make
/// `Device::launch` record its trace event before validating → red at
/// "unknown buffer: the refused launch was queued or recorded:
/// [TraceEvent { …, kind: Launch { op: Add, captured: false } }]".
pub const C12_BAD_LAUNCHES_REFUSED_BEFORE_WORK: Case = Case {
    name: "c12_bad_launches_refused_before_work",
    rule: Rule::C12,
    tags: &[],
    modes: BOTH,
    body: |cx| {
        let d = &cx.dev;
        let fx = fixture(cx)?;
        let before = snapshot(cx, &fx)?;
        let raw = |op, buffers: Vec<BufferId>| OpCall {
            op,
            buffers: buffers.into_iter().map(seam::View::from).collect(),
            params: Params {
                d0: 4,
                ..Default::default()
            },
        };
        let table: Vec<BadLaunch> = vec![
            (
                "unknown buffer",
                ops::add(fx.f, BufferId::unknown(), fx.out, 4),
                |k| matches!(k, ErrorKind::UnknownBuffer { .. }),
            ),
            ("freed buffer", ops::copy(fx.freed, fx.out, 4), |k| {
                matches!(k, ErrorKind::UnknownBuffer { .. })
            }),
            (
                "dtype mismatch f32+i32",
                ops::add(fx.f, fx.i, fx.out, 4),
                |k| matches!(k, ErrorKind::DtypeMismatch { binding: "b", .. }),
            ),
            (
                "dtype mismatch output",
                ops::add(fx.f, fx.g, fx.i, 4),
                |k| matches!(k, ErrorKind::DtypeMismatch { binding: "out", .. }),
            ),
            (
                "gemm output not f32",
                ops::gemm(fx.h, fx.h, fx.h, 2, 2, 2),
                |k| matches!(k, ErrorKind::DtypeMismatch { binding: "c", .. }),
            ),
            (
                "unsupported dtype silu/i32",
                ops::silu(fx.i, fx.i, 4),
                |k| matches!(k, ErrorKind::UnsupportedDtype { .. }),
            ),
            (
                "unsupported dtype softmax/f16",
                ops::softmax(fx.h, fx.h, 1, 4),
                |k| matches!(k, ErrorKind::UnsupportedDtype { .. }),
            ),
            ("too few buffers", raw(OpKind::Add, vec![fx.f, fx.g]), |k| {
                matches!(
                    k,
                    ErrorKind::ArityMismatch {
                        expected: 3,
                        found: 2,
                        ..
                    }
                )
            }),
            (
                "too many buffers",
                raw(OpKind::Fill, vec![fx.f, fx.g]),
                |k| matches!(k, ErrorKind::ArityMismatch { .. }),
            ),
            ("zero elements", ops::add(fx.f, fx.g, fx.out, 0), |k| {
                matches!(k, ErrorKind::ZeroSize { .. })
            }),
            ("zero rows", ops::softmax(fx.f, fx.out, 0, 4), |k| {
                matches!(k, ErrorKind::ZeroSize { what: "rows" })
            }),
            ("zero k", ops::gemm(fx.f, fx.g, fx.out, 2, 2, 0), |k| {
                matches!(k, ErrorKind::ZeroSize { what: "k" })
            }),
            ("n past the end", ops::add(fx.f, fx.g, fx.out, 65), |k| {
                matches!(k, ErrorKind::OutOfRange { .. })
            }),
            ("n past a small buffer", ops::copy(fx.f, fx.small, 8), |k| {
                matches!(k, ErrorKind::OutOfRange { binding: "dst", .. })
            }),
            (
                "rows x cols past the end",
                ops::softmax(fx.f, fx.out, 9, 8),
                |k| matches!(k, ErrorKind::OutOfRange { .. }),
            ),
            (
                "rms weight too short",
                ops::rms_norm(fx.f, fx.small, fx.out, 1, 8, 1e-5),
                |k| matches!(k, ErrorKind::OutOfRange { binding: "w", .. }),
            ),
            (
                "gemm k past b",
                ops::gemm(fx.f, fx.g, fx.out, 1, 8, 16),
                |k| matches!(k, ErrorKind::OutOfRange { binding: "b", .. }),
            ),
            (
                "overflowing dims",
                ops::gemm(fx.f, fx.g, fx.out, u32::MAX, u32::MAX, 1),
                |k| matches!(k, ErrorKind::TooLarge { .. }),
            ),
            (
                "eps zero",
                ops::rms_norm(fx.f, fx.g, fx.out, 1, 8, 0.0),
                |k| matches!(k, ErrorKind::InvalidParam { name: "eps", .. }),
            ),
            (
                "eps NaN",
                ops::rms_norm(fx.f, fx.g, fx.out, 1, 8, f32::NAN),
                |k| matches!(k, ErrorKind::InvalidParam { .. }),
            ),
            (
                "16-bit fill value too wide",
                ops::fill(fx.h, 4, 0x1_0000),
                |k| matches!(k, ErrorKind::InvalidParam { .. }),
            ),
            ("gemm in place", ops::gemm(fx.f, fx.g, fx.f, 2, 2, 2), |k| {
                matches!(k, ErrorKind::AliasNotAllowed { .. })
            }),
            ("softmax in place", ops::softmax(fx.f, fx.f, 2, 4), |k| {
                matches!(k, ErrorKind::AliasNotAllowed { .. })
            }),
            // Exactly the per-launch limit is not "too large": it is past the buffer.
            (
                "n at the per-launch limit",
                ops::add(fx.f, fx.g, fx.out, u32::MAX),
                |k| matches!(k, ErrorKind::OutOfRange { .. }),
            ),
            // Only the output (m·n = 2^33) is past the limit.
            (
                "a later binding past the limit",
                ops::gemm(fx.f, fx.g, fx.out, 1 << 31, 4, 1),
                |k| matches!(k, ErrorKind::TooLarge { what: "c", .. }),
            ),
        ];
        // Traced: a refused launch must leave no launch event, and a capture
        // that saw only a refused launch must end with 0 launches recorded.
        d.take_trace_log("c12")?;
        d.set_tracing(true);
        for (what, call, pred) in &table {
            let scope = match cx.mode {
                crate::Mode::Captured => Some(d.capture()?),
                crate::Mode::Eager => None,
            };
            match d.launch(call) {
                Ok(()) => return Err(crate::Failure(format!("{what}: accepted"))),
                Err(e) => {
                    check!(pred(&e.kind), "{what}: wrong error kind: {e}");
                    check!(
                        e.call == "launch" && e.site.device == d.id(),
                        "{what}: error does not name call and device: {e}"
                    );
                }
            }
            if let Some(s) = scope {
                let g = s.end_graph()?;
                g.replay()?;
            }
            let events = d.take_trace_log("c12")?.events;
            let recorded: Vec<_> = events
                .iter()
                .filter(|e| match e.kind {
                    seam::EventKind::Launch { .. } => true,
                    seam::EventKind::EndCaptureGraph { launches, .. } => launches != 0,
                    _ => false,
                })
                .collect();
            check!(
                recorded.is_empty(),
                "{what}: the refused launch was queued or recorded: {recorded:?}"
            );
        }
        d.set_tracing(false);
        d.synchronize()?;
        check!(
            snapshot(cx, &fx)? == before,
            "a refused launch changed a buffer"
        );
        d.launch(&ops::add(fx.f, fx.g, fx.out, 64))?;
        // The widest 16-bit fill value is legal (the bound is inclusive).
        d.launch(&ops::fill(fx.h, 4, 0xFFFF))?;
        d.synchronize()?;
        check!(
            snapshot(cx, &fx)? != before,
            "a good launch still runs afterwards"
        );
        Ok(())
    },
};

/// Bad host reads and writes: wrong host type, past the end, zero-length,
/// unknown buffer, bytes not a whole element. Named errors, nothing written.
///
/// Mutation: drop the `offset + count > len` check in `State::host_access_check` → red.
pub const C12_BAD_HOST_ACCESS_REFUSED: Case = Case {
    name: "c12_bad_host_access_refused",
    rule: Rule::C12,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let fx = fixture(cx)?;
        let before = snapshot(cx, &fx)?;
        expect_err!(
            d.write(fx.f, 0, &[1i32; 4]),
            ErrorKind::HostDtypeMismatch { .. }
        );
        expect_err!(d.write(fx.f, 0, &[1.0f32; 65]), ErrorKind::HostRange { .. });
        expect_err!(d.write(fx.f, 62, &[1.0f32; 3]), ErrorKind::HostRange { .. });
        expect_err!(
            d.write(fx.f, usize::MAX, &[1.0f32; 2]),
            ErrorKind::HostRange { .. }
        );
        expect_err!(d.write::<f32>(fx.f, 0, &[]), ErrorKind::ZeroSize { .. });
        expect_err!(
            d.write(fx.freed, 0, &[1.0f32]),
            ErrorKind::UnknownBuffer { .. }
        );
        expect_err!(
            d.write_bytes(fx.h, 0, &[1, 2, 3]),
            ErrorKind::SizeMismatch { .. }
        );
        // 7 bytes into f32: the error gives the nearest whole-element length.
        expect_err!(
            d.write_bytes(fx.f, 0, &[1; 7]),
            ErrorKind::SizeMismatch {
                expected: 4,
                found: 7,
                ..
            }
        );
        let e = expect_err!(
            d.write_bytes(fx.freed, 0, &[0; 4]),
            ErrorKind::UnknownBuffer { .. }
        );
        check_eq!(e.call, "write_bytes", "the error names the call");
        expect_err!(d.read::<i32>(fx.f), ErrorKind::HostDtypeMismatch { .. });
        expect_err!(
            d.read_range::<f32>(fx.f, 60, 5),
            ErrorKind::HostRange { .. }
        );
        let e = expect_err!(
            d.read::<f32>(BufferId::unknown()),
            ErrorKind::UnknownBuffer { .. }
        );
        check_eq!(e.call, "read", "the error names the call");
        d.synchronize()?;
        check!(
            snapshot(cx, &fx)? == before,
            "a refused host access changed a buffer"
        );
        Ok(())
    },
};

/// Bad memory calls: zero-size and oversize allocations, double free, freeing
/// a buffer a live graph reads. Named errors; counts unchanged.
///
/// Mutation: delete the `users_of` check in `Device::free` → red.
pub const C12_BAD_MEMORY_CALLS_REFUSED: Case = Case {
    name: "c12_bad_memory_calls_refused",
    rule: Rule::C12,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let fx = fixture(cx)?;
        let live = d.live();
        expect_err!(d.alloc(DType::F32, 0), ErrorKind::ZeroSize { .. });
        expect_err!(d.alloc(DType::F32, usize::MAX), ErrorKind::TooLarge { .. });
        expect_err!(d.free(fx.freed), ErrorKind::UnknownBuffer { .. });
        expect_err!(
            d.prepare(&[(OpKind::Softmax, DType::I32)]),
            ErrorKind::UnsupportedDtype { .. }
        );
        check_eq!(
            d.live(),
            live,
            "refused memory calls changed the live counts"
        );
        if d.capture_support().is_supported() {
            d.low_level().begin_capture()?;
            d.launch(&ops::copy(fx.f, fx.g, 4))?;
            let g = d.low_level().end_capture_graph()?;
            let e = expect_err!(d.free(fx.f), ErrorKind::BufferInUse { .. });
            check!(
                e.to_string().contains(&g.number().to_string()),
                "the error names the graph: {e}"
            );
            d.destroy_graph(g)?;
            d.free(fx.f)?;
        }
        Ok(())
    },
};

/// A buffer or graph of another `Device` is refused by name
/// (`ForeignBuffer` / `ForeignGraph`, naming the owner), eagerly and inside
/// a capture, with nothing queued or recorded and both devices' buffers
/// unchanged. The other device is a fresh CPU reference: with ids counted
/// per device (the fault this case was written for), its first buffer has
/// the same number as this device's first, so the launch ran on this
/// device's own buffer without an error.
///
/// Mutation: `State::new_buffer_id` leaving the device out of the id
/// (`device: self.serial` → `device: 0`) → red at "d.launch(&ops::fill(theirs.id(), 4,
/// 1)): expected ErrorKind::ForeignBuffer { .. }, but it succeeded".
pub const C12_FOREIGN_IDS_REFUSED: Case = Case {
    name: "c12_foreign_ids_refused",
    rule: Rule::C12,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let other = (cx.reference)();
        let mine = d.buffer_from(&[7u32; 4])?;
        let theirs = other.buffer_from(&[9u32; 4])?;
        let e = expect_err!(
            d.launch(&ops::fill(theirs.id(), 4, 1)),
            ErrorKind::ForeignBuffer { .. }
        );
        check!(
            e.to_string().contains(&other.id()) && e.call == "launch",
            "the error names the owner and the call: {e}"
        );
        expect_err!(
            d.launch(&ops::add(mine.id(), theirs.id(), mine.id(), 4)),
            ErrorKind::ForeignBuffer { .. }
        );
        expect_err!(
            d.write(theirs.id(), 0, &[1u32]),
            ErrorKind::ForeignBuffer { .. }
        );
        expect_err!(d.read::<u32>(theirs.id()), ErrorKind::ForeignBuffer { .. });
        expect_err!(d.free(theirs.id()), ErrorKind::ForeignBuffer { .. });
        check!(
            mine.id() != theirs.id(),
            "two devices handed out the same id {:?}",
            mine.id()
        );
        if d.capture_support().is_supported() {
            let s = other.capture()?;
            other.launch(&ops::fill(theirs.id(), 4, 2))?;
            let g = s.end_graph()?;
            expect_err!(
                d.replay(GraphRef::Handle(g.id())),
                ErrorKind::ForeignGraph { .. }
            );
            expect_err!(d.destroy_graph(g.id()), ErrorKind::ForeignGraph { .. });
            let s = d.capture()?;
            expect_err!(
                d.launch(&ops::fill(theirs.id(), 4, 1)),
                ErrorKind::ForeignBuffer { .. }
            );
            let empty = s.end_graph()?;
            empty.replay()?;
        }
        d.synchronize()?;
        check_eq!(mine.read()?, vec![7u32; 4], "this device's buffer");
        check_eq!(theirs.read()?, vec![9u32; 4], "the other device's buffer");
        Ok(())
    },
};
