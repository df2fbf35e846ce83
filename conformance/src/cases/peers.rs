//! Behaviours every backend must share, pinned one by one: half types at
//! odd offsets (C2), trace events naming their graph (C10), the empty
//! capture, long cycles and concurrent captures (C6), many launches in one
//! capture (C1), eager GEMM between replays (C7), tracing neutral (C4).

use crate::workloads::{self, compare};
use crate::{check, check_eq, Case, Failure, Mode, Rule, Tag, BOTH, ONCE};
use seam::{ops, DType, Device, EventKind, GraphRef, OpKind};

const CAP: &[Tag] = &[Tag::NeedsCapture];

/// 16-bit host writes and `read_range` at odd element offsets and odd
/// counts, f16 and bf16: each write lands exactly where it is aimed and
/// both neighbours keep their values; a copy (eager, or captured and
/// replayed) carries the result, read back at odd offsets again.
///
/// Mutation: make the CPU queue align every write's byte offset down to a
/// 4-byte word (what a backend that writes whole words does) → red at
/// "f16: after writes at 3 (5), 10 (1) and 1 (2): element 0 is 0x4300,
/// want 0x3c00". On lavapipe: make the wgpu backend's unaligned write skip
/// reading back the tail word (`if false && aligned_end - ALIGN > start`)
/// → red on wgpu:0 at "… element 3 is 0x0000, want 0x4100".
pub const C2_HALF_HOST_ACCESS_AT_ODD_OFFSETS: Case = Case {
    name: "c2_half_host_access_at_odd_offsets",
    rule: Rule::C2,
    tags: &[Tag::NeedsHalf],
    modes: BOTH,
    body: |cx| {
        let d = &cx.dev;
        for dtype in [DType::F16, DType::Bf16] {
            // Element i holds bit pattern 0x3C00 + i (distinct, finite in both types).
            let len = 13usize;
            let bits = |v: u16| v.to_le_bytes();
            let mut want: Vec<u16> = (0..len as u16).map(|i| 0x3C00 + i).collect();
            let src = d.alloc(dtype, len)?;
            let dst = d.alloc(dtype, len)?;
            let all: Vec<u8> = want.iter().flat_map(|v| bits(*v)).collect();
            d.write_bytes(src, 0, &all)?;
            d.write_bytes(dst, 0, &vec![0; len * 2])?;
            for (off, vals) in [
                (3usize, vec![0x4100u16, 0x4101, 0x4102, 0x4103, 0x4104]),
                (10, vec![0x4200]),
                (1, vec![0x4300, 0x4301]),
            ] {
                let bytes: Vec<u8> = vals.iter().flat_map(|v| bits(*v)).collect();
                d.write_bytes(src, off, &bytes)?;
                want[off..off + vals.len()].copy_from_slice(&vals);
            }
            let as_bits = |b: Vec<u8>| -> Vec<u16> {
                b.chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect()
            };
            let got = as_bits(d.read_bytes(src)?);
            if let Some(i) = (0..len).find(|&i| got[i] != want[i]) {
                return Err(Failure(format!(
                    "{dtype}: after writes at 3 (5), 10 (1) and 1 (2): element {i} is {:#06x}, want {:#06x} (all: {got:04x?})",
                    got[i], want[i]
                )));
            }
            cx.run(|d| d.launch(&ops::copy(src, dst, len as u32)))?;
            for (off, count) in [(1usize, 7usize), (9, 3), (12, 1), (0, 13)] {
                let got: Vec<u16> = match dtype {
                    DType::F16 => d
                        .read_range::<seam::f16>(dst, off, count)?
                        .iter()
                        .map(|v| v.to_bits())
                        .collect(),
                    _ => d
                        .read_range::<seam::bf16>(dst, off, count)?
                        .iter()
                        .map(|v| v.to_bits())
                        .collect(),
                };
                check_eq!(
                    got,
                    want[off..off + count].to_vec(),
                    "{dtype}: read_range({off}, {count}) of the copy"
                );
            }
            d.free(src)?;
            d.free(dst)?;
        }
        Ok(())
    },
};

/// Two live handles and the current exec replayed interleaved with
/// tracing on: every replay event carries its own graph id (and `None`
/// for the current exec) and its own per-target index, in issue order.
///
/// Mutation: make `Device::replay` record the replay event under the most
/// recently made handle's id → red at "replay events (graph, index):
/// [(Some(4), 0), (Some(4), 0), (Some(4), 1), …] != [(Some(3), 0),
/// (Some(4), 0), (Some(3), 1), …]".
pub const C10_REPLAY_EVENTS_NAME_THEIR_GRAPH: Case = Case {
    name: "c10_replay_events_name_their_graph",
    rule: Rule::C10,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 4])?;
        let dst = d.buffer_from(&[0u32; 4])?;
        let mk = || -> seam::Result<seam::Graph> {
            let s = d.capture()?;
            d.launch(&ops::add(one.id(), dst.id(), dst.id(), 4))?;
            s.end_graph()
        };
        let (a, b) = (mk()?, mk()?);
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), dst.id(), dst.id(), 4))?;
        s.end_into_current()?;
        d.set_tracing(true);
        d.take_trace_log("c10")?;
        let order = [Some(&a), Some(&b), Some(&a), None, Some(&b), Some(&a), None];
        for g in order {
            match g {
                Some(g) => g.replay()?,
                None => d.replay(GraphRef::Current)?,
            }
        }
        d.set_tracing(false);
        let got: Vec<(Option<u64>, u64)> = d
            .take_trace_log("c10")?
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Replay { graph, index } => Some((graph, index)),
                _ => None,
            })
            .collect();
        let (ai, bi) = (a.id().number(), b.id().number());
        check_eq!(
            got,
            vec![
                (Some(ai), 0),
                (Some(bi), 0),
                (Some(ai), 1),
                (None, 0),
                (Some(bi), 1),
                (Some(ai), 2),
                (None, 1)
            ],
            "replay events (graph, index)"
        );
        check_eq!(dst.read()?, vec![7u32; 4], "seven replays ran");
        Ok(())
    },
};

/// An empty capture (zero launches) is a replayable no-op on every backend
/// (docs/contract.md, C6): ending it into a handle and into the current
/// exec succeeds, each replays (several times) without error, changes no
/// buffer, is counted and traced as a replay, and destroys cleanly. The
/// end event records 0 launches.
///
/// Mutation: make the CPU backend's `end_capture_graph` refuse an empty
/// recording (as a driver that cannot instantiate an empty graph would) →
/// red at "unexpected error: cpu device cpu:0 (seam CPU reference):
/// end_capture_graph: driver call instantiate failed: an empty graph".
pub const C6_EMPTY_CAPTURE_IS_A_REPLAYABLE_NO_OP: Case = Case {
    name: "c6_empty_capture_is_a_replayable_no_op",
    rule: Rule::C6,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let x = d.buffer_from(&[5u32; 8])?;
        let before = d.live();
        d.set_tracing(true);
        d.take_trace_log("c6")?;
        let g = d.capture()?.end_graph()?;
        d.capture()?.end_into_current()?;
        for _ in 0..3 {
            g.replay()?;
            d.replay(GraphRef::Current)?;
        }
        d.synchronize()?;
        d.set_tracing(false);
        let events = d.take_trace_log("c6")?.events;
        check!(
            events.iter().any(|e| e.kind
                == EventKind::EndCaptureGraph {
                    graph: g.id().number(),
                    launches: 0
                }),
            "the end of the empty capture records 0 launches: {events:?}"
        );
        let replays = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Replay { .. }))
            .count();
        check_eq!(replays, 6, "replays of the empty graphs traced");
        check_eq!(g.replay_count()?, 3, "handle replays counted");
        check_eq!(
            d.replay_count(GraphRef::Current)?,
            3,
            "current replays counted"
        );
        check_eq!(x.read()?, vec![5u32; 8], "an empty replay changes nothing");
        check_eq!(
            d.live().backend.graphs,
            before.backend.graphs + 2,
            "the handle and the current exec are live"
        );
        drop(g);
        check_eq!(
            d.live().backend.graphs,
            before.backend.graphs + 1,
            "the empty handle destroyed"
        );
        Ok(())
    },
};

/// Capture/replay/destroy cycles: each cycle allocates a scratch buffer,
/// captures a prepared GEMM and an add into a handle (and, every other
/// cycle, into the current exec), replays it twice, destroys it and frees
/// the scratch. Live resources — core's and the backend's buffers, graphs
/// and device bytes — are the same after the second cycle and after the
/// last, and the last replay's result is right. 500 cycles (debug build:
/// 0.4 s on cpu:0 and vulkan:0, 2.1 s on wgpu:0, lavapipe).
///
/// Mutation: make the CPU backend's `destroy_graph` keep a graph's 4 KiB of
/// device bytes (a per-graph workspace never given back) → red at "backend
/// resources after cycle 2 and after the last: ResourceCounts { buffers: 4,
/// graphs: 1, bytes: 2048064 } != ResourceCounts { buffers: 4, graphs: 1,
/// bytes: 8256 }" (only the bytes show it).
pub const C6_CAPTURE_CYCLES_KEEP_RESOURCES_FLAT: Case = Case {
    name: "c6_capture_cycles_keep_resources_flat",
    rule: Rule::C6,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let cycles = 500;
        d.prepare(&[(OpKind::Gemm, DType::F32)])?;
        let a = d.buffer_from(&[1.0f32, 2.0, 3.0, 4.0])?;
        let b = d.buffer_from(&[5.0f32, 6.0, 7.0, 8.0])?;
        let c = d.buffer_from(&[0.0f32; 4])?;
        let mut first = None;
        for i in 0..cycles {
            let scratch = d.buffer_from(&[i as f32; 4])?;
            let s = d.capture()?;
            d.launch(&ops::gemm(a.id(), b.id(), c.id(), 2, 2, 2))?;
            d.launch(&ops::add(c.id(), scratch.id(), c.id(), 4))?;
            let g = s.end_graph()?;
            g.replay()?;
            g.replay()?;
            if i % 2 == 1 {
                let s = d.capture()?;
                d.launch(&ops::add(c.id(), scratch.id(), c.id(), 4))?;
                s.end_into_current()?;
                d.replay(GraphRef::Current)?;
            }
            drop(g);
            drop(scratch);
            d.synchronize()?;
            let live = d.live();
            match first {
                None if i >= 1 => first = Some(live),
                Some(f) if i == cycles - 1 => {
                    check_eq!(
                        live.backend,
                        f.backend,
                        "backend resources after cycle 2 and after the last"
                    );
                    check_eq!(
                        (live.buffers, live.graphs, live.bytes),
                        (f.buffers, f.graphs, f.bytes),
                        "core's buffers, graphs and bytes after cycle 2 and after the last"
                    );
                }
                _ => {}
            }
        }
        let v = (cycles - 1) as f32;
        check_eq!(
            c.read()?,
            vec![
                19.0 + 2.0 * v,
                22.0 + 2.0 * v,
                43.0 + 2.0 * v,
                50.0 + 2.0 * v
            ],
            "the last cycle: gemm + scratch, then + scratch (replayed current exec)"
        );
        Ok(())
    },
};

/// 10,000 launches in one capture replay, twice: the graph holds every one
/// of them, each with its own parameters (launch i is `x = 1·x + b`,
/// scale_add, with b = (i mod 7) + 1: a backend that keeps parameters in
/// memory blocks, as the Vulkan backend does, must keep 10,000 of them
/// apart; 7 does not divide any block count a backend groups them by).
/// The same launches run eager first, with the same sum.
///
/// Mutations: make the CPU backend keep only the first 4,096 recorded
/// launches of a graph (a fixed-size recording) → red at "x after one
/// replay: [16381.0, …] != [39994.0, …]"; make the Vulkan backend put
/// every dispatch's parameter block in its first parameter buffer
/// (`params::slot`'s buffer index 0: blocks 1024 apart shared) → red on
/// vulkan:0 (lavapipe); make its eager batches write every dispatch's
/// block to the first one → red on vulkan:0 at "x after the launches
/// eager" (the suite's other eager launches of several parameters in one
/// batch: only `c4_decode_stack_eager_and_captured_identical` saw it).
pub const C1_TEN_THOUSAND_LAUNCHES_IN_ONE_CAPTURE: Case = Case {
    name: "c1_ten_thousand_launches_in_one_capture",
    rule: Rule::C1,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let launches: u32 = 10_000;
        let b = |i: u32| (i % 7 + 1) as f32;
        // Σ b over one replay: exact in f32 (every partial sum < 2^24).
        let sum: f32 = (0..launches).map(b).sum();
        let x = d.buffer_from(&[0.0f32; 4])?;
        // The same launches eager first: a device that batches eager
        // launches keeps each one's parameters apart in a batch too.
        for i in 0..launches {
            d.launch(&ops::scale_add(x.id(), x.id(), 4, 1.0, b(i)))?;
        }
        check_eq!(x.read()?, vec![sum; 4], "x after the launches eager");
        let x = d.buffer_from(&[0.0f32; 4])?;
        let s = d.capture()?;
        for i in 0..launches {
            d.launch(&ops::scale_add(x.id(), x.id(), 4, 1.0, b(i)))?;
        }
        let g = s.end_graph()?;
        g.replay()?;
        check_eq!(x.read()?, vec![sum; 4], "x after one replay");
        g.replay()?;
        check_eq!(x.read()?, vec![2.0 * sum; 4], "x after two replays");
        Ok(())
    },
};

/// Two `Device`s of the same backend capture concurrently from two
/// threads: both captures are open at once (a barrier inside them), each
/// records only its own thread's launches, and each graph replays to its
/// own result.
///
/// Mutation: make the CPU backend refuse a second capture while another
/// device's is open (a process-wide capture mode, as CUDA's global stream
/// capture mode is) → red at "unexpected error: cpu device cpu:0 (seam CPU
/// reference): begin_capture: driver call begin_capture failed: another
/// thread's capture is open (global capture mode)".
pub const C6_TWO_DEVICES_CAPTURE_CONCURRENTLY: Case = Case {
    name: "c6_two_devices_capture_concurrently",
    rule: Rule::C6,
    tags: &[Tag::NeedsCapture, Tag::Threads],
    modes: ONCE,
    body: |cx| {
        let index = cx.dev.info().index;
        let other = Device::new(
            (cx.registration.open)(index)
                .map_err(|e| Failure(format!("opening a second device: {e}")))?,
        );
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let work = |d: Device, add: u32, barrier: std::sync::Arc<std::sync::Barrier>| {
            move || -> Result<Vec<u32>, String> {
                let v = d.buffer_from(&[add; 16]).map_err(|e| e.to_string())?;
                let x = d.buffer_from(&[0u32; 16]).map_err(|e| e.to_string())?;
                // Both captures are open between the two waits; a thread
                // whose begin failed still meets both, so neither hangs.
                let begun = d.low_level().begin_capture();
                barrier.wait();
                let recorded = begun.and_then(|()| {
                    (0..50).try_for_each(|_| d.launch(&ops::add(x.id(), v.id(), x.id(), 16)))
                });
                barrier.wait();
                let r = recorded.and_then(|()| {
                    let g = d.low_level().end_capture_graph()?;
                    d.replay(GraphRef::Handle(g))?;
                    d.replay(GraphRef::Handle(g))?;
                    let out = x.read()?;
                    d.destroy_graph(g)?;
                    Ok(out)
                });
                if d.capturing() {
                    let _ = d.low_level().abort_capture();
                }
                r.map_err(|e| e.to_string())
            }
        };
        let t1 = std::thread::spawn(work(cx.dev.clone(), 1, barrier.clone()));
        let t2 = std::thread::spawn(work(other.clone(), 3, barrier));
        let join = |t: std::thread::JoinHandle<Result<Vec<u32>, String>>| {
            t.join()
                .map_err(|_| Failure("a capturing thread panicked".into()))?
                .map_err(|e| Failure(format!("unexpected error: {e}")))
        };
        let (r1, r2) = (join(t1), join(t2));
        check_eq!(r1?, vec![100u32; 16], "device 1: 2 replays of 50 × (+1)");
        check_eq!(r2?, vec![300u32; 16], "device 2: 2 replays of 50 × (+3)");
        Ok(())
    },
};

/// Eager GEMMs (other shapes, other buffers) between replays of a captured,
/// prepared GEMM: each replay and each eager GEMM matches the CPU
/// reference, so nothing a GEMM caches (a vendor plan, a workspace, a bound
/// descriptor) leaks from one into the other.
///
/// Mutation: make an eager GEMM on the CPU backend also replace the
/// GEMM of every live graph (a plan cache keyed by op) → red at "replay 1
/// after an eager gemm: element 0: 15365221879119872 vs reference
/// -9.603538513183594 (…)".
pub const C7_EAGER_GEMM_BETWEEN_REPLAYS: Case = Case {
    name: "c7_eager_gemm_between_replays",
    rule: Rule::C7,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let oracle = (cx.reference)();
        d.prepare(&[(OpKind::Gemm, DType::F32)])?;
        let want = |seed: u64| -> Result<Vec<u8>, Failure> {
            let r = workloads::prepare(&oracle, OpKind::Gemm, DType::F32, seed)?;
            oracle.launch(&r.call)?;
            Ok(oracle.read_bytes(r.buffers[r.output])?)
        };
        let tol = OpKind::Gemm.tolerance(DType::F32);
        let cap = workloads::prepare(d, OpKind::Gemm, DType::F32, 21)?;
        let s = d.capture()?;
        d.launch(&cap.call)?;
        let g = s.end_graph()?;
        // A 4×3·3×2 eager GEMM on its own buffers.
        let ea = d.buffer_from(&[
            1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0,
        ])?;
        let eb = d.buffer_from(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0])?;
        let ec = d.buffer_from(&[0.0f32; 8])?;
        let out = cap.buffers[cap.output];
        let want_cap = want(21)?;
        for round in 0..3 {
            d.write_bytes(out, 0, &vec![0x5A; want_cap.len()])?;
            g.replay()?;
            compare(DType::F32, tol, &d.read_bytes(out)?, &want_cap)
                .map_err(|m| Failure(format!("replay {round} after an eager gemm: {m}")))?;
            d.write(ec.id(), 0, &[0.0f32; 8])?;
            d.launch(&ops::gemm(ea.id(), eb.id(), ec.id(), 4, 2, 3))?;
            check_eq!(
                ec.read()?,
                vec![4.0f32, 5.0, 10.0, 11.0, 16.0, 17.0, 22.0, 23.0],
                "eager 4x3 gemm after replay {round}"
            );
        }
        Ok(())
    },
};

/// The C1–C4 workloads give byte-identical outputs with tracing on and
/// off: the decode stack eager and captured, a replayed dependent chain,
/// and every (op, dtype) workload captured and replayed.
///
/// Mutation: make `Device::replay` submit a traced replay twice (once more
/// for its timing) → red at "dependent chain: traced output differs from
/// untraced".
pub const C4_TRACING_DOES_NOT_CHANGE_OUTPUTS: Case = Case {
    name: "c4_tracing_does_not_change_outputs",
    rule: Rule::C4,
    tags: &[Tag::NeedsCapture, Tag::NeedsHalf],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let pairs = workloads::all_pairs();
        d.prepare(&pairs)?;
        let run = |traced: bool| -> Result<Vec<(String, Vec<u8>)>, Failure> {
            d.set_tracing(traced);
            let mut outs = Vec::new();
            // C1: a dependent chain replayed twice.
            let x = d.buffer_from(&[1.5f32; 33])?;
            let y = d.buffer_from(&[0.0f32; 33])?;
            let s = d.capture()?;
            d.launch(&ops::scale_add(x.id(), y.id(), 33, 2.0, 1.0))?;
            d.launch(&ops::mul(y.id(), y.id(), x.id(), 33))?;
            let g = s.end_graph()?;
            g.replay()?;
            g.replay()?;
            outs.push(("dependent chain".to_string(), d.read_bytes(x.id())?));
            // C4: every workload, eager and captured.
            for (op, dtype) in &pairs {
                for mode in [Mode::Eager, Mode::Captured] {
                    let w = workloads::prepare(d, *op, *dtype, 13)?;
                    crate::run_in_mode(d, mode, |d| d.launch(&w.call))?;
                    outs.push((
                        format!("{op}/{dtype} {mode}"),
                        d.read_bytes(w.buffers[w.output])?,
                    ));
                    for id in w.buffers {
                        d.free(id)?;
                    }
                }
            }
            d.set_tracing(false);
            d.take_trace_log("c4")?;
            Ok(outs)
        };
        let off = run(false)?;
        let on = run(true)?;
        let on_again = run(true)?;
        for ((what, a), (_, b)) in off.iter().zip(&on) {
            check!(a == b, "{what}: traced output differs from untraced");
        }
        check!(on == on_again, "two traced runs differ");
        check_eq!(on.len(), off.len(), "outputs compared");
        Ok(())
    },
};
