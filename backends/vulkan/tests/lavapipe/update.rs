//! C13 on the Vulkan backend, checked where the backend's own counts show
//! which path an update took: descriptor sets rewritten in place, the
//! command buffer recorded again, or a kept command buffer swapped in. The
//! contract itself is the conformance suite's.

use libtest_mimic::Completion;
use seam::testing::{Direct, RawCall};
use seam::{ops, Change, DType, Device, OpKind, Params, RawBuffer, RawView};
use seam_vulkan::VulkanBackend;

/// `x += y` over the first `n` words (u32), as a raw call.
fn add_into(x: RawBuffer, y: RawBuffer, n: u32) -> RawCall {
    RawCall {
        op: OpKind::Add,
        dtype: DType::U32,
        buffers: [x, y, x].map(|r| RawView::whole(r, n as u64)).into(),
        params: Params {
            d0: n,
            ..Params::default()
        },
    }
}

/// 256 words of `v`, as bytes.
fn words(v: u32) -> Vec<u8> {
    [v; 256].iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A buffer of 256 words of `v` on `b`.
fn filled(b: &mut Direct<VulkanBackend>, v: u32) -> RawBuffer {
    let buf = b.alloc(1024).unwrap();
    b.write(buf, 0, &words(v)).unwrap();
    buf
}

/// The 256 words of `buf`, as bytes.
fn read(b: &mut Direct<VulkanBackend>, buf: RawBuffer) -> Vec<u8> {
    let mut out = vec![0u8; 1024];
    b.read(buf, 0, &mut out).unwrap();
    out
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
pub fn rebinds_rewrite_descriptor_sets_in_place(dev: Device) -> Completion {
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
pub fn a_rebind_records_nothing_where_update_after_bind(_dev: Device) -> Completion {
    use seam::ReplayTarget;
    let mut b = Direct::new(VulkanBackend::open(0).unwrap());
    let add = add_into;
    let [x, one, z] = [10, 1, 20].map(|v| filled(&mut b, v));
    b.begin_capture().unwrap();
    b.launch(&add(x, one, 256)).unwrap();
    let g = ReplayTarget::Graph(b.end_capture_graph().unwrap());
    b.replay(g).unwrap();
    b.update_launches(g, &[(0, add(z, one, 256))]).unwrap();
    b.replay(g).unwrap();
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
/// `forget_variants` doing nothing → red at "after the free".
pub fn a_graph_switching_back_swaps_kept_command_buffers(_dev: Device) -> Completion {
    use seam::ReplayTarget;
    if std::env::var_os("SEAM_VULKAN_KEEP_VARIANTS").is_some_and(|v| v == "0") {
        return Completion::ignored_with("SEAM_VULKAN_KEEP_VARIANTS=0 turns kept variants off");
    }
    let mut b = Direct::new(VulkanBackend::open(0).unwrap());
    // x += one, twice per graph (a dependent pair: a barrier between).
    let add = |x: RawBuffer, y: RawBuffer| add_into(x, y, 256);
    let read = |b: &mut Direct<VulkanBackend>, buf: RawBuffer| -> u32 {
        let out = read(b, buf);
        assert!(
            out.chunks(4).all(|w| w == &out[..4]),
            "one value throughout"
        );
        u32::from_le_bytes(out[..4].try_into().unwrap())
    };
    let [x, one, z, w] = [10, 1, 20, 30].map(|v| filled(&mut b, v));
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
    Completion::Completed
}

/// A node-timed graph is only patched in place (its timestamps are in
/// query pools of its own): switching it back and forth makes no command
/// buffer and swaps none. Ignored, saying why, where the device has no node
/// timing or kept variants are off. Mutation: kept variants planned for a
/// node-timed graph → red at "a node-timed graph" (`variant` refuses a
/// command buffer with timestamps).
pub fn a_node_timed_graph_is_only_patched_in_place(_dev: Device) -> Completion {
    use seam::Backend as _;
    use seam::{NodeTiming, ReplayTarget};
    if std::env::var_os("SEAM_VULKAN_KEEP_VARIANTS").is_some_and(|v| v == "0") {
        return Completion::ignored_with("SEAM_VULKAN_KEEP_VARIANTS=0 turns kept variants off");
    }
    let mut b = Direct::new(VulkanBackend::open(0).unwrap());
    if let NodeTiming::Unavailable(why) = b.node_timing() {
        return Completion::ignored_with(format!("no node timing on this device: {why}"));
    }
    let add = |x: RawBuffer, y: RawBuffer| add_into(x, y, 256);
    let [one, z, w] = [1, 20, 30].map(|v| filled(&mut b, v));
    b.set_node_timing(true).unwrap();
    b.begin_capture().unwrap();
    b.launch(&add(z, one)).unwrap();
    let timed = ReplayTarget::Graph(b.end_capture_graph().unwrap());
    b.set_node_timing(false).unwrap();
    for to in [w, z, w, z] {
        b.update_launches(timed, &[(0, add(to, one))]).unwrap();
        b.replay(timed).unwrap();
    }
    let c = b.update_counts();
    assert_eq!(
        (c.fresh, c.swapped, c.in_place + c.rerecorded),
        (0, 0, 4),
        "a node-timed graph: {c:?}"
    );
    assert_eq!(b.kept_variants(timed), Ok(0));
    // z + 1 (first replay, over w) ... : z got 2 adds, w 2.
    assert_eq!(read(&mut b, z), words(22));
    assert_eq!(read(&mut b, w), words(32));
    Completion::Completed
}
