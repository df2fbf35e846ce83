//! C7 pre-warm (prepare before capture, vendor GEMM) and C8 destroy while in flight.

use crate::workloads::{self, compare};
use crate::{check, check_eq, Case, Failure, Rule, Tag, ONCE};
use seam::{ops, DType, GraphRef, OpKind};

/// After prepare, a captured GEMM (the vendor-library path where a backend
/// has one) allocates nothing visible and replays to the CPU reference's
/// result, for every GEMM input type.
///
/// Mutation: make the CPU backend's replay skip GEMM launches → red.
pub const C7_PREPARED_GEMM_CAPTURES_AND_REPLAYS: Case = Case {
    name: "c7_prepared_gemm_captures_and_replays",
    rule: Rule::C7,
    tags: &[Tag::NeedsCapture, Tag::NeedsHalf],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let oracle = (cx.reference)();
        for &dtype in OpKind::Gemm.dtypes() {
            d.prepare(&[(OpKind::Gemm, dtype)])?;
            let w = workloads::prepare(d, OpKind::Gemm, dtype, 3)?;
            let before = d.live().backend;
            let scope = d.capture()?;
            d.launch(&w.call)?;
            let g = scope.end_graph()?;
            let after = d.live().backend;
            check_eq!(
                after.buffers,
                before.buffers,
                "{dtype}: capture allocated a buffer"
            );
            g.replay()?;
            g.replay()?;
            let got = d.read_bytes(w.buffers[w.output])?;
            let r = workloads::prepare(&oracle, OpKind::Gemm, dtype, 3)?;
            oracle.launch(&r.call)?;
            let want = oracle.read_bytes(r.buffers[r.output])?;
            compare(DType::F32, OpKind::Gemm.tolerance(dtype), &got, &want)
                .map_err(|m| Failure(format!("gemm/{dtype} replayed vs CPU: {m}")))?;
            drop(g);
            for id in w.buffers {
                d.free(id)?;
            }
            cx.digest_bytes(&got);
        }
        Ok(())
    },
};

/// Capturing a vendor op that was never prepared either fails loudly (a named
/// error, no capture left open, nothing corrupted, device usable) or succeeds
/// with correct results. It must not silently corrupt. (A capture-safe
/// allocator may make the cold path succeed; the case does not demand failure.)
///
/// Mutation: make the CPU backend's `launch` zero a GEMM's input `a` while
/// recording it (corruption outside the graph) → red at "an input was corrupted".
pub const C7_COLD_VENDOR_OP_FAILS_LOUDLY_OR_SUCCEEDS: Case = Case {
    name: "c7_cold_vendor_op_fails_loudly_or_succeeds",
    rule: Rule::C7,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let w = workloads::prepare(d, OpKind::Gemm, DType::F32, 5)?;
        let sentinel = d.buffer_from(&[42u32; 16])?;
        let out_before = d.read_bytes(w.buffers[w.output])?;
        let inputs_before: Vec<Vec<u8>> = w.buffers[..2]
            .iter()
            .map(|id| d.read_bytes(*id))
            .collect::<Result<_, _>>()?;
        let attempt = (|| {
            let scope = d.capture()?;
            d.launch(&w.call)?;
            scope.end_graph()
        })();
        check!(!d.capturing(), "no capture may be left open");
        for (id, before) in w.buffers[..2].iter().zip(&inputs_before) {
            check!(&d.read_bytes(*id)? == before, "an input was corrupted");
        }
        check_eq!(
            sentinel.read()?,
            vec![42u32; 16],
            "an unrelated buffer was corrupted"
        );
        match attempt {
            Err(e) => {
                // Loud: a named error; the output is untouched, the device works.
                check!(
                    e.site.device == d.id()
                        && matches!(e.call, "begin_capture" | "launch" | "end_capture_graph"),
                    "the error must name this device and the call that failed: {e}"
                );
                check!(
                    d.read_bytes(w.buffers[w.output])? == out_before,
                    "the output was written by a failed capture"
                );
            }
            Ok(g) => {
                g.replay()?;
                let got = d.read_bytes(w.buffers[w.output])?;
                let oracle = (cx.reference)();
                let r = workloads::prepare(&oracle, OpKind::Gemm, DType::F32, 5)?;
                oracle.launch(&r.call)?;
                let want = oracle.read_bytes(r.buffers[r.output])?;
                compare(DType::F32, OpKind::Gemm.tolerance(DType::F32), &got, &want)
                    .map_err(|m| Failure(format!("cold gemm succeeded but is wrong: {m}")))?;
            }
        }
        // The device is usable afterwards, prepared GEMM included.
        d.prepare(&[(OpKind::Gemm, DType::F32)])?;
        d.launch(&w.call)?;
        d.synchronize()?;
        Ok(())
    },
};

/// Build a long dependent chain (`steps` × dst += one over `n` elements) so a
/// replay is still running when the host calls destroy.
fn long_chain(
    d: &seam::Device,
    n: usize,
    steps: usize,
) -> Result<(seam::Buffer<u32>, seam::Buffer<u32>), Failure> {
    let one = d.buffer_from(&vec![1u32; n])?;
    let dst = d.buffer_from(&vec![0u32; n])?;
    d.low_level().begin_capture()?;
    for _ in 0..steps {
        d.launch(&ops::add(one.id(), dst.id(), dst.id(), n as u32))?;
    }
    Ok((one, dst))
}

const N: usize = 1 << 18;
const STEPS: usize = 48;

/// Destroying a handle whose replays are still queued or running: every
/// replay completes with correct outputs and destroy returns without error.
///
/// Mutation: make the CPU queue drop queued replays of a graph whose handle is
/// gone (`Arc::strong_count == 1`) → red (96 of 144 adds ran).
pub const C8_DESTROY_WHILE_REPLAY_IN_FLIGHT: Case = Case {
    name: "c8_destroy_while_replay_in_flight",
    rule: Rule::C8,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let (_one, dst) = long_chain(d, N, STEPS)?;
        let g = d.low_level().end_capture_graph()?;
        for _ in 0..3 {
            d.replay(GraphRef::Handle(g))?;
        }
        d.destroy_graph(g)?;
        let got = dst.read()?;
        let want = (3 * STEPS) as u32;
        check!(
            got.iter().all(|v| *v == want),
            "expected every element {want}, got {:?}…",
            &got[..4]
        );
        check_eq!(
            d.live().backend.graphs,
            0,
            "the destroyed graph is released"
        );
        Ok(())
    },
};

/// Replacing the current exec (a new end_capture) while the old one's replay
/// is in flight: the old replay completes correctly, the new exec runs next.
///
/// Mutation: the same queue mutation as C8_DESTROY_WHILE_REPLAY_IN_FLIGHT
/// (queued replays of a replaced exec are dropped) → red (49 of 97).
pub const C8_REPLACE_CURRENT_EXEC_WHILE_IN_FLIGHT: Case = Case {
    name: "c8_replace_current_exec_while_in_flight",
    rule: Rule::C8,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let (one, dst) = long_chain(d, N, STEPS)?;
        d.low_level().end_capture_into_current()?;
        d.replay(GraphRef::Current)?;
        d.replay(GraphRef::Current)?;
        d.low_level().begin_capture()?;
        d.launch(&ops::add(one.id(), dst.id(), dst.id(), N as u32))?;
        d.low_level().end_capture_into_current()?;
        d.replay(GraphRef::Current)?;
        let got = dst.read()?;
        let want = (2 * STEPS + 1) as u32;
        check!(
            got.iter().all(|v| *v == want),
            "expected every element {want}, got {:?}…",
            &got[..4]
        );
        Ok(())
    },
};
