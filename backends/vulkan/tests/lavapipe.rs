//! Backend-specific checks on whatever Vulkan device is here (lavapipe in
//! CI): edge shapes of every op (1 element, 300,000 elements, 70,000 rows)
//! eager and captured against the CPU reference, scale_add's exact fusion,
//! timestamp-query pool reuse, and views at odd offsets and user kernels
//! (`view_trials.rs`, shared with seam-wgpu). The contract itself (C1–C14) is the
//! conformance suite's, never copied here. Where there is no Vulkan device
//! each test is an ignored trial that says why (`harness = false`).

use libtest_mimic::Completion;
use seam::testing::Rng;
use seam::{ops, Change, DType, Device, OpCall, OpKind};

#[path = "../../device_trials.rs"]
mod device_trials;
#[path = "../../view_trials.rs"]
mod view_trials;

fn main() {
    device_trials::run(
        "vulkan:0",
        &[],
        vulkan,
        &[
            (
                "every_op_matches_the_cpu_eager_and_captured",
                every_op_matches_the_cpu_eager_and_captured,
            ),
            ("scale_add_is_fused_exactly", scale_add_is_fused_exactly),
            ("replays_get_device_spans", replays_get_device_spans),
            (
                "rebinds_rewrite_descriptor_sets_in_place",
                rebinds_rewrite_descriptor_sets_in_place,
            ),
            ("catalogue_ops_on_odd_views_keep_neighbours", |d| {
                view_trials::catalogue_ops_on_odd_views_keep_neighbours(&d);
                Completion::Completed
            }),
            ("user_kernel_runs_over_views", |d| {
                view_trials::user_kernel_runs_over_views(&d);
                Completion::Completed
            }),
            ("kernel_errors_name_the_kernel_and_line", |d| {
                view_trials::kernel_errors_name_the_kernel_and_line(&d);
                Completion::Completed
            }),
            (
                "a_rebind_records_nothing_where_update_after_bind",
                a_rebind_records_nothing_where_update_after_bind,
            ),
            (
                "a_graph_switching_back_swaps_kept_command_buffers",
                a_graph_switching_back_swaps_kept_command_buffers,
            ),
            (
                "staged_writes_reads_and_launches_round_trip",
                staged_writes_reads_and_launches_round_trip,
            ),
            ("lavapipe_names_its_driver", lavapipe_names_its_driver),
        ],
    )
}

fn vulkan() -> Result<Device, String> {
    seam_vulkan::device_count()?;
    let backend =
        seam_vulkan::open(0).map_err(|e| format!("vulkan:0 was found but does not open: {e}"))?;
    Ok(Device::new(backend))
}

/// Run one workload; returns the output bytes.
fn run(dev: &Device, op: OpKind, dtype: DType, dims: (u32, u32, u32), captured: bool) -> Vec<u8> {
    let index = OpKind::ALL
        .iter()
        .position(|o| *o == op)
        .expect("a catalogue op");
    let mut rng = Rng::new(index as u64);
    let (n, rows, cols) = dims;
    let (m, gn, k) = dims;
    let sig = op.signature();
    let lens: Vec<u32> = match op {
        OpKind::RmsNorm => vec![rows * cols, cols, rows * cols],
        OpKind::Softmax => vec![rows * cols; 2],
        OpKind::Gemm => vec![m * k, k * gn, m * gn],
        _ => vec![n; sig.len()],
    };
    let mut ids = Vec::new();
    for (b, &len) in sig.iter().zip(&lens) {
        let bd = if b.role == seam::ops::Role::Fixed(DType::F32) {
            DType::F32
        } else {
            dtype
        };
        let id = dev.alloc(bd, len as usize).unwrap();
        let data = if b.access == seam::ops::Access::Read {
            rng.bytes(bd, len as usize, 2.0)
        } else {
            vec![0x5A; len as usize * bd.size()]
        };
        dev.write_bytes(id, 0, &data).unwrap();
        ids.push(id);
    }
    let b = &ids;
    let call: OpCall = match op {
        OpKind::Fill => ops::fill(
            b[0],
            n,
            rng.next_u32() & if dtype.size() == 2 { 0xFFFF } else { !0 },
        ),
        OpKind::Copy => ops::copy(b[0], b[1], n),
        OpKind::ScaleAdd => ops::scale_add(b[0], b[1], n, 1.75, -0.3),
        OpKind::Add => ops::add(b[0], b[1], b[2], n),
        OpKind::Mul => ops::mul(b[0], b[1], b[2], n),
        OpKind::Silu => ops::silu(b[0], b[1], n),
        OpKind::RmsNorm => ops::rms_norm(b[0], b[1], b[2], rows, cols, 1e-5),
        OpKind::Softmax => ops::softmax(b[0], b[1], rows, cols),
        OpKind::Gemm => ops::gemm(b[0], b[1], b[2], m, gn, k),
        OpKind::User(_) => unreachable!("run() is given catalogue ops"),
    };
    if captured {
        let cap = dev.capture().unwrap();
        dev.launch(&call).unwrap();
        let g = cap.end_graph().unwrap();
        g.replay().unwrap();
    } else {
        dev.launch(&call).unwrap();
    }
    let out = sig
        .iter()
        .position(|b| b.access == seam::ops::Access::Write)
        .unwrap();
    let bytes = dev.read_bytes(ids[out]).unwrap();
    for id in ids {
        dev.free(id).unwrap();
    }
    bytes
}

fn compare(op: OpKind, dtype: DType, got: &[u8], want: &[u8]) -> Result<(), String> {
    let out = if op == OpKind::Gemm {
        DType::F32
    } else {
        dtype
    };
    seam::testing::compare(out, op.tolerance(dtype), got, want)
}

fn every_op_matches_the_cpu_eager_and_captured(dev: Device) -> Completion {
    let cpu = Device::new(Box::new(seam_cpu::CpuBackend::new(0)));
    let mut failures = Vec::new();
    for op in OpKind::ALL {
        for &dtype in op.dtypes() {
            let shapes: &[(u32, u32, u32)] = match op {
                OpKind::RmsNorm | OpKind::Softmax => &[(5, 5, 257), (3, 3, 1), (70_000, 70_000, 3)],
                OpKind::Gemm => &[(17, 33, 65), (1, 1, 1), (64, 48, 16)],
                _ => &[(1001, 0, 0), (1, 0, 0), (300_000, 0, 0)],
            };
            for &dims in shapes {
                let want = run(&cpu, op, dtype, dims, false);
                for captured in [false, true] {
                    let got = run(&dev, op, dtype, dims, captured);
                    if let Err(e) = compare(op, dtype, &got, &want) {
                        failures.push(format!("{op}/{dtype} {dims:?} captured={captured}: {e}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let live = dev.live();
    assert_eq!(live.backend.buffers, 0);
    Completion::Completed
}

/// scale_add is fused on every driver (lavapipe's own fma is not): random
/// bit patterns, subnormals, cancellations and overflow against mul_add.
/// This caught the NVIDIA driver flushing a subnormal factor in the float
/// arithmetic of the kernel's infinity path (fma(2.5e-40, inf, 3e-39) gave
/// NaN); that path now decides on the bits. Mutation: compute infinity
/// times a finite value in float again → red on NVIDIA (lavapipe keeps
/// subnormals either way).
fn scale_add_is_fused_exactly(dev: Device) -> Completion {
    let mut rng = Rng::new(12345);
    let mut xs: Vec<f32> = (0..20_000)
        .map(|i| match i % 4 {
            0 => f32::from_bits(rng.next_u32() << 16 | rng.next_u32() & 0xFFFF),
            1 => {
                f32::from_bits((rng.next_u32() & 0x807F_FFFF) | ((rng.next_u32() % 40 + 100) << 23))
            }
            2 => f32::from_bits(rng.next_u32() & 0x807F_FFFF), // subnormal
            _ => rng.next_f32(2.0),
        })
        .filter(|v| !v.is_nan())
        .collect();
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN_POSITIVE,
        1.0,
        -1.0,
    ]);
    let pairs = [
        (1.75f32, -0.3f32),
        (3.0, 0.0),
        (-1.0, 1.0),
        (1.0e-30, 1.0e-38),
        (f32::MAX, -f32::MAX),
        (0.1, -0.1),
        (1.0 + f32::EPSILON, -1.0),
        (0.0, -0.0),
        (-0.0, -0.0),
        (2.5e-40, 3.0e-39),
        (1.0e30, 1.0e38),
    ];
    let n = xs.len() as u32;
    let x = dev.buffer_from(&xs).unwrap();
    let y = dev.buffer::<f32>(xs.len()).unwrap();
    for (a, b) in pairs {
        dev.launch(&ops::scale_add(x.id(), y.id(), n, a, b))
            .unwrap();
        let got = y.read().unwrap();
        for (v, g) in xs.iter().zip(&got) {
            let want = a.mul_add(*v, b);
            assert!(
                want.to_bits() == g.to_bits() || (want.is_nan() && g.is_nan()),
                "fma({a:e}, {v:e}, {b:e}) = {want:e} ({:#x}), got {g:e} ({:#x})",
                want.to_bits(),
                g.to_bits()
            );
        }
    }
    Completion::Completed
}

/// Device timing with timestamp queries: every traced replay and eager launch
/// gets one span, spans follow queue order without overlapping (both markers
/// are BOTTOM_OF_PIPE), query pools grow past one pool (512 spans) and are
/// recycled across takes while tracing stays on, and again after it is
/// switched off and on.
fn replays_get_device_spans(dev: Device) -> Completion {
    let one = dev.buffer_from(&[1u32; 64]).unwrap();
    let dst = dev.buffer_from(&[0u32; 64]).unwrap();
    let cap = dev.capture().unwrap();
    dev.launch(&ops::add(one.id(), dst.id(), dst.id(), 64))
        .unwrap();
    let g = cap.end_graph().unwrap();
    let mut total = 0u32;
    // (replays, eager launches every k replays, tracing stays on for the take)
    for (round, (n, keep_on)) in [(700usize, true), (300, true), (40, false), (5, false)]
        .into_iter()
        .enumerate()
    {
        dev.set_tracing(true);
        for i in 0..n {
            g.replay().unwrap();
            if i % 97 == 0 {
                dev.launch(&ops::add(one.id(), dst.id(), dst.id(), 64))
                    .unwrap();
                total += 1;
            }
        }
        total += n as u32;
        if !keep_on {
            dev.set_tracing(false);
        }
        let log = dev.take_trace_log("timing").unwrap();
        if let Some(why) = &log.device_timing_unavailable {
            assert!(log.device_spans.is_empty());
            return Completion::ignored_with(format!("this Vulkan device is not timed: {why}"));
        }
        let timed: Vec<u64> = log
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    seam::EventKind::Replay { .. }
                        | seam::EventKind::Launch {
                            captured: false,
                            ..
                        }
                )
            })
            .map(|e| e.seq)
            .collect();
        let tags: Vec<u64> = log.device_spans.iter().map(|s| s.tag).collect();
        assert_eq!(
            tags, timed,
            "round {round}: one span per traced replay/launch, in order"
        );
        for w in log.device_spans.windows(2) {
            assert!(w[0].end_ns >= w[0].start_ns, "round {round}: {w:?}");
            assert!(
                w[1].start_ns >= w[0].end_ns,
                "round {round}: spans overlap or leave queue order: {w:?}"
            );
        }
        assert_eq!(dst.read().unwrap(), vec![total; 64]);
    }
    dev.set_tracing(false);
    assert!(dev.take_trace_log("off").unwrap().device_spans.is_empty());
    Completion::Completed
}

/// C13 on Vulkan: updates are applied by the backend (traced as native),
/// never re-captured by core, after the replays queued before them have
/// completed, which keep the old buffers: back-to-back rebinds with replays
/// queued between them, one that makes a launch read and write the same
/// buffer (the barrier audit is run again), a parameter update (push
/// constants: the backend records the graph's command buffer again from
/// its own log, the same descriptor sets), a rebind after it, and the
/// current exec. The conformance suite checks the contract (C13); this
/// checks that the backend's path is the one taken.
fn rebinds_rewrite_descriptor_sets_in_place(dev: Device) -> Completion {
    use seam::{EventKind, GraphRef, UpdateSupport};
    assert_eq!(dev.update_support(), UpdateSupport::Native);
    let natives = |dev: &Device| -> Vec<bool> {
        dev.take_trace_log("c13")
            .unwrap()
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Update { native, .. } => Some(native),
                _ => None,
            })
            .collect()
    };
    let one = dev.buffer_from(&[1u32; 256]).unwrap();
    let bufs: Vec<_> = (0..3)
        .map(|k| dev.buffer_from(&[100 * k; 256]).unwrap())
        .collect();
    let cap = dev.capture().unwrap();
    dev.launch(&ops::add(bufs[0].id(), one.id(), bufs[0].id(), 256))
        .unwrap();
    dev.launch(&ops::add(bufs[0].id(), one.id(), bufs[0].id(), 256))
        .unwrap();
    let g = cap.end_graph().unwrap();
    dev.set_tracing(true);
    // Replays queued between rebinds, no host call: 0 gets 2×4, 1 gets 2×3,
    // 2 gets 2×2, then 0 again 2×1.
    let mut at = 0;
    for (next, replays) in [(1, 4), (2, 3), (0, 2)] {
        for _ in 0..replays {
            g.replay().unwrap();
        }
        g.device()
            .update(&g, &Change::rebinds(&[(bufs[at].id(), bufs[next].id())]))
            .unwrap();
        at = next;
    }
    g.replay().unwrap();
    assert_eq!(bufs[0].read().unwrap(), vec![10u32; 256]);
    assert_eq!(bufs[1].read().unwrap(), vec![106u32; 256]);
    assert_eq!(bufs[2].read().unwrap(), vec![204u32; 256]);
    // `one` → 0: each launch adds 0 to itself (reads and writes one buffer).
    g.device()
        .update(&g, &Change::rebinds(&[(one.id(), bufs[0].id())]))
        .unwrap();
    g.replay().unwrap();
    assert_eq!(bufs[0].read().unwrap(), vec![40u32; 256]);
    assert_eq!(natives(&dev), vec![true; 4], "rebinds patched in place");

    // A parameter update: recorded again by the backend, and right.
    let p = ops::add(bufs[0].id(), bufs[0].id(), bufs[0].id(), 128).params;
    g.device()
        .update(
            &g,
            &[Change::Params {
                index: 1,
                params: p,
            }],
        )
        .unwrap();
    g.replay().unwrap();
    let got = bufs[0].read().unwrap();
    assert_eq!(&got[..128], &[160u32; 128][..]);
    assert_eq!(&got[128..], &[80u32; 128][..]);
    assert_eq!(natives(&dev), vec![true], "a params update, by the backend");
    // After it, a rebind patches the same command buffer again.
    g.device()
        .update(&g, &Change::rebinds(&[(bufs[0].id(), bufs[1].id())]))
        .unwrap();
    g.replay().unwrap();
    assert_eq!(&bufs[1].read().unwrap()[..2], &[424u32, 424][..]);
    assert_eq!(bufs[0].read().unwrap()[0], 160);

    // The current exec.
    dev.low_level().begin_capture().unwrap();
    dev.launch(&ops::add(bufs[2].id(), one.id(), bufs[2].id(), 256))
        .unwrap();
    dev.low_level().end_capture_into_current().unwrap();
    dev.replay(GraphRef::Current).unwrap();
    dev.update(
        GraphRef::Current,
        &Change::rebinds(&[(bufs[2].id(), one.id())]),
    )
    .unwrap();
    dev.replay(GraphRef::Current).unwrap();
    assert_eq!(bufs[2].read().unwrap(), vec![205u32; 256]);
    assert_eq!(one.read().unwrap(), vec![2u32; 256]);
    assert_eq!(
        natives(&dev),
        vec![true; 2],
        "the rebind after the params update, the current exec's"
    );
    dev.set_tracing(false);
    Completion::Completed
}

/// Where the device has UPDATE_AFTER_BIND storage buffers
/// (`VulkanBackend::rebind_in_place`; lavapipe has them), a rebind rewrites
/// the graph's descriptor sets and records nothing; a replay queued before
/// it still runs the old buffers and the next one the new. A params update
/// (push constants) still records the command buffer again. Without the
/// feature (`SEAM_VULKAN_UPDATE_AFTER_BIND=0`) both re-record. A new
/// value alone is written in place on every device. Drives the
/// backend directly (its counts are not on `Device`). Mutations: make
/// `Inner::rerecords` ignore `rebind_in_place` → red at "rebind in place";
/// the in-place count not counted → red at "a new value alone".
fn a_rebind_records_nothing_where_update_after_bind(_dev: Device) -> Completion {
    use seam::testing::{Direct, RawCall};
    use seam::{Params, RawBuffer, RawView, ReplayTarget};
    let mut b = Direct::new(seam_vulkan::VulkanBackend::open(0).unwrap());
    let add = |x: RawBuffer, y: RawBuffer, n: u32| RawCall {
        op: OpKind::Add,
        dtype: DType::U32,
        buffers: [x, y, x].map(|r| RawView::whole(r, n as u64)).into(),
        params: Params {
            d0: n,
            ..Params::default()
        },
    };
    let words = |v: u32| -> Vec<u8> { [v; 256].iter().flat_map(|w| w.to_le_bytes()).collect() };
    let [x, one, z] = [10, 1, 20].map(|v| {
        let buf = b.alloc(1024).unwrap();
        b.write(buf, 0, &words(v)).unwrap();
        buf
    });
    b.begin_capture().unwrap();
    b.launch(&add(x, one, 256)).unwrap();
    let g = ReplayTarget::Graph(b.end_capture_graph().unwrap());
    b.replay(g).unwrap();
    b.update_launches(g, &[(0, add(z, one, 256))]).unwrap();
    b.replay(g).unwrap();
    let read = |b: &mut Direct<seam_vulkan::VulkanBackend>, buf: RawBuffer| {
        let mut out = vec![0u8; 1024];
        b.read(buf, 0, &mut out).unwrap();
        out
    };
    assert_eq!(
        read(&mut b, x),
        words(11),
        "the replay queued before the rebind"
    );
    assert_eq!(read(&mut b, z), words(21), "the replay after it");
    let in_place = b.rebind_in_place();
    eprintln!("rebind in place: {in_place:?}");
    let counts = |in_place: u64, rerecorded: u64| seam_vulkan::UpdateCounts {
        in_place,
        rerecorded,
        ..seam_vulkan::UpdateCounts::default()
    };
    let rebind = if in_place.is_ok() { (1, 0) } else { (0, 1) };
    assert_eq!(
        b.update_counts(),
        counts(rebind.0, rebind.1),
        "rebind in place: {in_place:?}"
    );
    // New workgroup counts are in the command buffer: recorded again.
    b.update_launches(g, &[(0, add(z, one, 128))]).unwrap();
    b.replay(g).unwrap();
    let got = read(&mut b, z);
    assert_eq!(
        (&got[..512], &got[512..]),
        (&words(22)[..512], &words(21)[512..])
    );
    assert_eq!(
        b.update_counts(),
        counts(rebind.0, rebind.1 + 1),
        "a params update"
    );
    // The same launch again: nothing to do, on every device.
    b.update_launches(g, &[(0, add(z, one, 128))]).unwrap();
    assert_eq!(
        b.update_counts(),
        counts(rebind.0, rebind.1 + 1),
        "an update that changes nothing"
    );
    // A new value alone (a fill's bits: the workgroups stay) is written to
    // the dispatch's parameter block, in place, on every device.
    let fill = |bits: u32| RawCall {
        op: OpKind::Fill,
        dtype: DType::U32,
        buffers: [RawView::whole(z, 256)].into(),
        params: Params {
            d0: 256,
            bits,
            ..Params::default()
        },
    };
    b.begin_capture().unwrap();
    b.launch(&fill(5)).unwrap();
    let f = ReplayTarget::Graph(b.end_capture_graph().unwrap());
    b.update_launches(f, &[(0, fill(7))]).unwrap();
    b.replay(f).unwrap();
    assert_eq!(read(&mut b, z), words(7), "the new value");
    assert_eq!(
        b.update_counts(),
        counts(rebind.0 + 1, rebind.1 + 1),
        "a new value alone"
    );
    Completion::Completed
}

/// A graph rebound back and forth between two buffers (`update.rs`, kept
/// variants): the first move patches in place, the first move back makes a
/// command buffer for the launches the graph ran, and every switch after
/// that swaps kept command buffers, writing nothing; each replay, queued
/// before or after a switch, runs the buffers it was queued with. Freeing
/// a buffer a kept command buffer binds drops it. Drives the backend
/// directly (its counts are not on `Device`). Mutations: `Runs::swap`
/// leaving the current command buffer in place, or `variant` recording
/// the old bindings of a changed dispatch → red at "after switch";
/// `forget_variants` doing nothing → red at "after the free"; kept
/// variants planned for a node-timed graph → red at "a node-timed graph".
fn a_graph_switching_back_swaps_kept_command_buffers(_dev: Device) -> Completion {
    use seam::testing::{Direct, RawCall};
    use seam::Backend as _;
    use seam::{Params, RawBuffer, RawView, ReplayTarget};
    let mut b = Direct::new(seam_vulkan::VulkanBackend::open(0).unwrap());
    if std::env::var_os("SEAM_VULKAN_KEEP_VARIANTS").is_some_and(|v| v == "0") {
        return Completion::ignored_with("SEAM_VULKAN_KEEP_VARIANTS=0 turns kept variants off");
    }
    let n = 256u32;
    // x += one, twice per graph (a dependent pair: a barrier between).
    let add = |x: RawBuffer, y: RawBuffer| RawCall {
        op: OpKind::Add,
        dtype: DType::U32,
        buffers: [x, y, x].map(|r| RawView::whole(r, n as u64)).into(),
        params: Params {
            d0: n,
            ..Params::default()
        },
    };
    let words = |v: u32| -> Vec<u8> { [v; 256].iter().flat_map(|w| w.to_le_bytes()).collect() };
    let read = |b: &mut Direct<seam_vulkan::VulkanBackend>, buf: RawBuffer| -> u32 {
        let mut out = vec![0u8; 1024];
        b.read(buf, 0, &mut out).unwrap();
        assert!(
            out.chunks(4).all(|w| w == &out[..4]),
            "one value throughout"
        );
        u32::from_le_bytes(out[..4].try_into().unwrap())
    };
    let [x, one, z, w] = [10, 1, 20, 30].map(|v| {
        let buf = b.alloc(1024).unwrap();
        b.write(buf, 0, &words(v)).unwrap();
        buf
    });
    b.begin_capture().unwrap();
    b.launch(&add(x, one)).unwrap();
    b.launch(&add(x, one)).unwrap();
    let g = ReplayTarget::Graph(b.end_capture_graph().unwrap());
    let both = |to: RawBuffer| [(0, add(to, one)), (1, add(to, one))];
    let mut want = [(x, 10u32), (z, 20)];
    // Queued, then each switch: x, z, x, z, x, z.
    for (step, (to, from)) in [(z, x), (x, z), (z, x), (x, z), (z, x)].iter().enumerate() {
        b.replay(g).unwrap();
        b.update_launches(g, &both(*to)).unwrap();
        b.replay(g).unwrap();
        for (buf, v) in want.iter_mut() {
            if *buf == *from || *buf == *to {
                *v += 2;
            }
        }
        for (buf, v) in want {
            assert_eq!(read(&mut b, buf), v, "after switch {step}");
        }
    }
    let c = b.update_counts();
    assert_eq!(
        (c.in_place + c.rerecorded, c.fresh, c.swapped),
        (1, 1, 3),
        "one patch, one fresh command buffer, then swaps: {c:?}"
    );
    // The graph runs z; its spare, x. Freeing x drops the spare.
    assert_eq!(b.kept_variants(g), Ok(1));
    b.update_launches(g, &both(w)).unwrap();
    b.replay(g).unwrap();
    assert_eq!(read(&mut b, w), 32, "w, patched in place");
    assert_eq!(b.kept_variants(g), Ok(1), "no fresh command buffer for w");
    b.free(x).unwrap();
    assert_eq!(b.kept_variants(g), Ok(0), "after the free");
    // A node-timed graph is only patched in place (its timestamps are in
    // query pools of its own): switching back makes no command buffer.
    if b.node_timing() == seam::NodeTiming::Native {
        b.set_node_timing(true).unwrap();
        b.begin_capture().unwrap();
        b.launch(&add(z, one)).unwrap();
        let timed = ReplayTarget::Graph(b.end_capture_graph().unwrap());
        b.set_node_timing(false).unwrap();
        let before = b.update_counts();
        for to in [w, z, w, z] {
            b.update_launches(timed, &[(0, add(to, one))]).unwrap();
            b.replay(timed).unwrap();
        }
        let c = b.update_counts();
        assert_eq!(
            (c.fresh, c.swapped, c.in_place + c.rerecorded),
            (
                before.fresh,
                before.swapped,
                before.in_place + before.rerecorded + 4
            ),
            "a node-timed graph: {c:?}"
        );
        assert_eq!(b.kept_variants(timed), Ok(0));
    }
    Completion::Completed
}

/// On a device opened with every buffer behind a staging buffer (as on a
/// discrete GPU; lavapipe's memory is host-visible, so the suite's default
/// pass never stages): writes at odd offsets and reads come back as
/// written, and a launch between them sees and leaves what it should.
/// Mutation: the command buffer's copy recording nothing
/// (`CommandBuffer::copy` → `Ok(())`) → red.
fn staged_writes_reads_and_launches_round_trip(_: Device) -> Completion {
    let backend = seam_vulkan::VulkanBackend::open_staging(0).expect("vulkan:0 staged");
    assert!(
        backend.stages(),
        "open_staging opened a device that maps its buffers"
    );
    // lavapipe's memory is host-visible and coherent: a device opened
    // plainly there maps its buffers, unless SEAM_VULKAN_STAGING=1 asks.
    let plain = seam_vulkan::VulkanBackend::open(0).expect("vulkan:0");
    if seam::Backend::info(&plain).name.contains("llvmpipe") {
        let asked = std::env::var("SEAM_VULKAN_STAGING").is_ok_and(|v| v == "1");
        assert_eq!(
            plain.stages(),
            asked,
            "lavapipe stages (SEAM_VULKAN_STAGING=1: {asked})"
        );
    }
    drop(plain);
    let dev = Device::new(Box::new(backend));
    let n = 3 * 1024 + 7;
    let x: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
    let a = dev.buffer_from(&x).unwrap();
    assert_eq!(a.read().unwrap(), x, "a staged write read back");
    dev.write(a.id(), 1001, &[7u32, 8, 9]).unwrap();
    let b = dev.buffer_from(&vec![0u32; n]).unwrap();
    dev.launch(&ops::copy(a.id(), b.id(), n as u32)).unwrap();
    let mut want = x;
    want[1001..1004].copy_from_slice(&[7, 8, 9]);
    assert_eq!(b.read().unwrap(), want, "a copy of a staged write");
    assert_eq!(
        dev.read_range::<u32>(b.id(), 1000, 5).unwrap(),
        want[1000..1005],
        "a staged read at an offset"
    );
    Completion::Completed
}

/// The device names its driver from the driver properties (Vulkan 1.2),
/// which lavapipe reports: `llvmpipe Mesa <version> (LLVM <version>)`, then
/// the API version. Elsewhere the driver's name is not known here.
fn lavapipe_names_its_driver(dev: Device) -> Completion {
    let info = dev.info();
    if !info.name.contains("llvmpipe") {
        return Completion::ignored_with(format!("{} is not lavapipe", info.name));
    }
    assert!(
        info.driver.starts_with("llvmpipe Mesa ") && info.driver.contains("(LLVM "),
        "{}",
        info.driver
    );
    Completion::Completed
}
