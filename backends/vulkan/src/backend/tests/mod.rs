//! The backend's own unit checks on whatever Vulkan device is here
//! (lavapipe in CI; skipped, saying so, where there is none): what the
//! public API cannot reach.

mod recorded;

use super::VulkanBackend;
use seam::testing::Direct;
use seam::{OpKind, RawBuffer};

/// Say why a test has no device, or fail it where `SEAM_REQUIRE_DEVICES`
/// names lavapipe's `vulkan:0` (CI, the mutation judges): a test that
/// returns early there would pass without having run.
fn skipped(why: impl std::fmt::Display) {
    assert!(
        !seam::testing::is_required("vulkan:0"),
        "{} requires vulkan:0, but it did not open: {why}",
        seam::testing::REQUIRE_ENV
    );
    eprintln!("no Vulkan device ({why}): skipped");
}

fn words(v: u32) -> Vec<u8> {
    [v; 256].iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `out = a + c` over 256 u32.
fn add(a: RawBuffer, c: RawBuffer, out: RawBuffer) -> seam::testing::RawCall {
    use seam::{DType, Params};
    seam::testing::RawCall::whole(
        OpKind::Add,
        DType::U32,
        &[a, c, out],
        256,
        Params::dims(256, 0, 0),
    )
}

/// A zeroed accumulator of 256 u32 and the launch `acc += 1`, on `b`.
fn accumulate(b: &mut Direct<VulkanBackend>) -> (RawBuffer, seam::testing::RawCall) {
    use seam::{DType, Params};
    let (acc, one) = (b.alloc(1024).unwrap(), b.alloc(1024).unwrap());
    b.write(acc, 0, &words(0)).unwrap();
    b.write(one, 0, &words(1)).unwrap();
    let add = seam::testing::RawCall::whole(
        OpKind::Add,
        DType::U32,
        &[acc, one, acc],
        256,
        Params::dims(256, 0, 0),
    );
    (acc, add)
}

fn read(b: &mut Direct<VulkanBackend>, buf: RawBuffer) -> Vec<u8> {
    let mut out = vec![0u8; 1024];
    b.read(buf, 0, &mut out).unwrap();
    out
}

/// gemm's 16 × 32 workgroups run where the device allows 512 invocations
/// and 32 on y, and are refused, naming the op, the device and the limit,
/// where it allows fewer (no device here does: the limits are given).
/// Mutations (tried): `invocations <= max` → `<` → red at the 512 row;
/// the per-axis check left out → red at the y = 16 row.
#[test]
fn an_op_whose_workgroup_the_device_cannot_run_is_refused() {
    use super::pipelines::workgroup_fits;
    assert!(workgroup_fits(OpKind::Gemm, "big", 512, [1024, 32, 64]).is_ok());
    assert!(workgroup_fits(OpKind::Add, "small", 128, [128, 128, 64]).is_ok());
    for (max, size, limit) in [
        (256, [1024, 1024, 64], "maxComputeWorkGroupInvocations"),
        (1024, [1024, 16, 64], "maxComputeWorkGroupSize"),
    ] {
        match workgroup_fits(OpKind::Gemm, "small GPU", max, size) {
            Err(seam::ErrorKind::TooLarge { what, detail }) => {
                assert_eq!(what, "workgroup");
                assert!(
                    detail.contains("gemm") && detail.contains("small GPU"),
                    "{detail}"
                );
                assert!(
                    detail.contains(limit) && detail.contains("16×32×1"),
                    "{detail}"
                );
            }
            other => panic!("{max} / {size:?}: {other:?}"),
        }
    }
}

/// Buffers the host maps are in host-visible, coherent memory (device-local
/// first); buffers behind staging prefer device-local memory and take any
/// other. lavapipe has one memory type with every property, so only these
/// lists say which a discrete device's buffers would get.
#[test]
fn buffer_memory_preferences() {
    use ash::vk::MemoryPropertyFlags as M;
    let coherent = M::HOST_VISIBLE | M::HOST_COHERENT;
    assert_eq!(
        VulkanBackend::HOST_MEMORY,
        [M::DEVICE_LOCAL | coherent, coherent]
    );
    assert_eq!(VulkanBackend::DEVICE_MEMORY, [M::DEVICE_LOCAL, M::empty()]);
    assert_eq!(
        VulkanBackend::buffer_memory(true),
        VulkanBackend::HOST_MEMORY
    );
    assert_eq!(
        VulkanBackend::buffer_memory(false),
        VulkanBackend::DEVICE_MEMORY
    );
}

/// A switch is its one value alone (`SEAM_VULKAN_STAGING=1` asks for
/// staging, `SEAM_VULKAN_KEEP_VARIANTS=0` turns kept command buffers off);
/// unset or any other value is not.
#[test]
fn a_switch_is_its_one_value_alone() {
    use super::switch_is;
    for want in ["1", "0"] {
        assert!(switch_is(Some(want.into()), want), "{want}");
        assert!(!switch_is(Some(format!(" {want}").into()), want), "{want}");
        assert!(!switch_is(Some("".into()), want), "{want}");
        assert!(!switch_is(None, want), "{want}");
    }
    assert!(!switch_is(Some("0".into()), "1"));
    assert!(!switch_is(Some("1".into()), "0"));
}

/// Under validation, a device that saw a message fails its teardown, so a
/// message whose error a caller swallowed still fails (the suite's devices
/// live to the end of their process, so no trial drops one); without
/// validation, and with no message, teardown is quiet.
#[test]
fn teardown_fails_on_a_message_only_under_validation() {
    use crate::sys::Validation;
    let open = |v: Validation, raised: &[&str]| {
        VulkanBackend::open(0).map(|mut b| {
            b.validation = v;
            b.raised = raised.iter().map(|s| s.to_string()).collect();
            b
        })
    };
    let dropped = |b: VulkanBackend| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(b)))
            .map_err(|p| p.downcast_ref::<String>().cloned().unwrap_or_default())
    };
    let b = match open(Validation::Sync, &["VUID-x: a swallowed message"]) {
        Ok(b) => b,
        Err(e) => {
            skipped(e);
            return;
        }
    };
    let e = dropped(b).expect_err("a device that saw a message tore down quietly");
    assert!(
        e.contains("drop: validation: VUID-x: a swallowed message"),
        "{e}"
    );
    for (v, raised) in [
        (Validation::Off, &["VUID-x: not validating"][..]),
        (Validation::Sync, &[][..]),
    ] {
        let b = open(v, raised).unwrap();
        assert!(dropped(b).is_ok(), "{v:?} {raised:?}: teardown panicked");
    }
}

/// An allocation of exactly `maxStorageBufferRange` bytes fits (a kernel
/// can bind all of it); one byte more is refused as too large, before the
/// driver sees it. Skipped where the range is too large to allocate here.
#[test]
fn the_storage_range_is_the_largest_allocation() {
    let b = match VulkanBackend::open(0) {
        Ok(b) => b,
        Err(e) => {
            skipped(e);
            return;
        }
    };
    let max = b.gpu.adapter().max_storage_buffer_range;
    if max > 1 << 30 || max % seam_kernels::BUFFER_ROUND != 0 {
        eprintln!("maxStorageBufferRange {max}: skipped");
        return;
    }
    let mut b = Direct::new(b);
    let buf = b
        .alloc(max as usize)
        .expect("an allocation of exactly maxStorageBufferRange");
    b.free(buf).unwrap();
    let e = b.alloc(max as usize + 1).expect_err("one byte more");
    assert!(
        matches!(e, seam::ErrorKind::TooLarge { .. }),
        "one byte more: {e}"
    );
}

/// The staging buffer is made once, at least 1 MiB, and reused while it is
/// large enough: a small transfer and one of exactly its size use the
/// first; only a larger one makes another, as large as it.
#[test]
fn the_staging_buffer_is_reused_while_large_enough() {
    let mut b = match VulkanBackend::open_staging(0) {
        Ok(b) => Direct::new(b),
        Err(e) => {
            skipped(e);
            return;
        }
    };
    const MIB: usize = 1 << 20;
    let buf = b.alloc(3 * MIB).unwrap();
    assert_eq!(b.staging_buffer(), (None, 0));
    b.write(buf, 0, &[1u8; 4096]).unwrap();
    assert_eq!(b.staging_buffer(), (Some(MIB as u64), 1), "a 4 KiB write");
    b.write(buf, 0, &vec![2u8; MIB]).unwrap();
    let mut out = vec![0u8; MIB];
    b.read(buf, 0, &mut out).unwrap();
    assert_eq!(b.staging_buffer(), (Some(MIB as u64), 1), "1 MiB each way");
    b.write(buf, 0, &vec![3u8; 2 * MIB]).unwrap();
    assert_eq!(
        b.staging_buffer(),
        (Some(2 * MIB as u64), 2),
        "a 2 MiB write"
    );
    b.free(buf).unwrap();
}

/// Eager launches are recorded into a fixed ring of batches made at the
/// first launch: forty batches' worth of launches with no wait between
/// them (a batch whose last submission is still pending is waited for)
/// leave exactly the ring, and every launch ran, in order.
/// Mutations (tried): the ring filled to one more or one fewer → red;
/// a pending batch recorded again without its wait → red (a driver error,
/// or lost increments).
#[test]
fn eager_launches_cycle_through_a_fixed_ring_of_batches() {
    let mut b = match VulkanBackend::open(0) {
        Ok(b) => Direct::new(b),
        Err(e) => {
            skipped(e);
            return;
        }
    };
    assert_eq!(b.eager_batches(), 0, "before any launch");
    let (acc, add) = accumulate(&mut b);
    let launches = 40 * super::eager::EAGER_BATCH as u32;
    for _ in 0..launches {
        b.launch(&add).unwrap();
    }
    assert_eq!(b.eager_batches(), super::eager::EAGER_RING);
    assert_eq!(read(&mut b, acc), words(launches));
    assert_eq!(
        b.eager_batches(),
        super::eager::EAGER_RING,
        "after the read"
    );
}

/// The open eager batch is submitted on its own at its [`EAGER_BATCH`]th
/// launch, not before: until then it holds every launch so far; the next
/// launch opens a new one.
///
/// [`EAGER_BATCH`]: super::eager::EAGER_BATCH
#[test]
fn an_eager_batch_is_submitted_at_its_launch_count() {
    use super::eager::EAGER_BATCH;
    let mut b = match VulkanBackend::open(0) {
        Ok(b) => Direct::new(b),
        Err(e) => return skipped(e),
    };
    let (acc, add) = accumulate(&mut b);
    for i in 1..=EAGER_BATCH {
        b.launch(&add).unwrap();
        let open = b.eager.as_ref().map(|e| e.dispatches());
        let want = (i < EAGER_BATCH).then_some(i);
        assert_eq!(open, want, "after {i} launches");
    }
    b.launch(&add).unwrap();
    assert_eq!(b.eager.as_ref().map(|e| e.dispatches()), Some(1));
    assert_eq!(read(&mut b, acc), words(EAGER_BATCH as u32 + 1));
}

/// Where the instance and the device are both at Vulkan 1.2 or later
/// (lavapipe: 1.3), float controls and UPDATE_AFTER_BIND are what the
/// device reports (lavapipe reports neither), never the version gate's
/// refusal, and the driver is named from its driver properties.
#[test]
fn a_vulkan_1_2_device_answers_its_own_feature_queries() {
    use ash::vk;
    let b = match VulkanBackend::open(0) {
        Ok(b) => b,
        Err(e) => return skipped(e),
    };
    let a = b.gpu.adapter();
    let (instance, device) = a.api;
    if instance < vk::API_VERSION_1_2 || device < vk::API_VERSION_1_2 {
        return eprintln!("Vulkan {instance:#x} / {device:#x}: below 1.2, skipped");
    }
    for (what, answer) in [
        ("float controls", &a.denorm_preserve_f32),
        ("update after bind", &a.update_after_bind),
    ] {
        if let Err(why) = answer {
            assert!(
                why.starts_with("the device reports") || why.starts_with("SEAM_VULKAN"),
                "{what}: {why}"
            );
        }
    }
    assert!(!a.driver.starts_with("driver version"), "{}", a.driver);
}

/// A barrier before a dispatch only where it touches a buffer an access
/// since the last barrier touched, either of them writing (and before the
/// first dispatch of a command buffer); `SEAM_VULKAN_BARRIERS=every`, and a
/// node-timed capture, keep one before every dispatch. The results are the
/// dependent chain's either way. Mutations: the conflict test ignoring
/// writes, or ignoring reads, or the first-dispatch barrier dropped → the
/// counts (and the barrier audit) red.
#[test]
fn a_barrier_only_before_a_dispatch_that_depends_on_an_unbarriered_one() {
    use seam::{Backend, ReplayTarget};
    let mut b = match VulkanBackend::open(0) {
        Ok(b) => Direct::new(b),
        Err(e) => return skipped(e),
    };
    let bufs: Vec<RawBuffer> = (0..6).map(|_| b.alloc(1024).unwrap()).collect();
    let [one, x, y, z, w, r] = bufs[..] else {
        unreachable!()
    };
    for (buf, v) in [(one, 1), (x, 0), (y, 0), (z, 0), (w, 0), (r, 0)] {
        b.write(buf, 0, &words(v)).unwrap();
    }
    // (launch, barriers recorded after it): x and y independent; z reads
    // both (read after write); w reads what was only read; z += w writes
    // what was read and written.
    let program = [
        (add(one, one, x), 1),
        (add(one, one, y), 1),
        (add(x, y, z), 2),
        (add(one, one, w), 2),
        (add(z, w, z), 3),
        (add(one, one, r), 3),
    ];
    for (every, label) in [(false, "hazards"), (true, "every")] {
        b.every_barrier = every;
        for (k, (call, barriers)) in program.iter().enumerate() {
            b.launch(call).unwrap();
            let want = if every { k + 1 } else { *barriers };
            let got = b.eager.as_ref().map(|e| e.barriers());
            assert_eq!(got, Some(want), "{label}: after launch {k}");
        }
        assert_eq!(read(&mut b, z), words(6), "{label}");
        b.write(z, 0, &words(0)).unwrap();
    }
    // A capture records the same; a node-timed one a barrier before each.
    b.every_barrier = false;
    for node_timed in [false, true] {
        if node_timed && b.set_node_timing(true).is_err() {
            continue;
        }
        b.begin_capture().unwrap();
        for (call, _) in &program[..2] {
            b.launch(call).unwrap();
        }
        let got = b.capture.as_ref().map(|c| c.barriers());
        assert_eq!(
            got,
            Some(if node_timed { 2 } else { 1 }),
            "node timed: {node_timed}"
        );
        let g = b.end_capture_graph().unwrap();
        b.replay(ReplayTarget::Graph(g)).unwrap();
        b.destroy_graph(g).unwrap();
    }
    assert_eq!(read(&mut b, x), words(2));
}

/// `SEAM_VULKAN_BARRIERS`: unset or `hazards` elides, `every` does not,
/// anything else is refused naming the variable.
#[test]
fn the_barrier_setting_is_read_strictly() {
    use super::every_barrier_asked;
    let v = |s: &str| Some(std::ffi::OsString::from(s));
    assert_eq!(every_barrier_asked(None), Ok(false));
    assert_eq!(every_barrier_asked(v("hazards")), Ok(false));
    assert_eq!(every_barrier_asked(v("every")), Ok(true));
    let e = every_barrier_asked(v("all")).unwrap_err();
    assert!(e.starts_with("SEAM_VULKAN_BARRIERS=all"), "{e}");
}

/// Device timing keeps one query pool while a cycle's markers fit in it:
/// 300 timed eager launches (600 markers) use one pool and give 300 spans;
/// the pool is kept while timing is on and released once it is off and
/// read. Mutations: `mark` adding a pool when the marker's pool *does*
/// exist (`p == pools.len()` → `!=`: a pool per marker, the spans still
/// right), `take_marker_spans` releasing the pools while timing is on
/// (`delete !`) → red.
#[test]
fn device_timing_keeps_one_query_pool_per_1024_markers() {
    use seam::Backend;
    let mut b = match VulkanBackend::open(0) {
        Ok(b) => Direct::new(b),
        Err(e) => return skipped(e),
    };
    if let Err(why) = b.device_timing() {
        return skipped(why);
    }
    b.set_device_timing(true).unwrap();
    let (acc, add) = accumulate(&mut b);
    for tag in 0..300 {
        b.begin_timed(tag).unwrap();
        b.launch(&add).unwrap();
        b.end_timed(tag).unwrap();
    }
    assert_eq!(b.query_pools(), 1, "query pools for 600 markers");
    assert_eq!(b.take_device_spans().unwrap().len(), 300);
    assert_eq!(b.query_pools(), 1, "kept while timing is on");
    assert_eq!(read(&mut b, acc), words(300));
    b.set_device_timing(false).unwrap();
    assert!(b.take_device_spans().unwrap().is_empty());
    assert_eq!(b.query_pools(), 0, "released once timing is off and read");
}

/// One body whose unrolling passes the step bound while each of its
/// copies is within the copies bound (a WHILE of 65,536 over 64 launches:
/// 4,259,840 steps): the body closes, the capture's end is refused with
/// `TooLarge`, and the device goes on (a capture after it replays).
/// Mutation: the failure kept from the capture's end (`failed` never
/// returned by `finish_capture`) → red (a graph without the body).
#[test]
fn a_body_past_the_step_bound_is_refused_when_the_capture_ends() {
    let b = match VulkanBackend::open(0) {
        Ok(b) => b,
        Err(e) => return skipped(e),
    };
    let d = seam::Device::new(Box::new(b));
    let flag = d.buffer_from(&[0u32]).unwrap();
    let x = d.buffer_from(&[1.0f32]).unwrap();
    let step = seam::ops::scale_add(x.id(), x.id(), 1, 1.0, 1.0);
    let scope = d.capture().unwrap();
    scope
        .run_while(flag.id(), 1 << 16, || {
            for _ in 0..64 {
                d.launch(&step)?;
            }
            Ok(())
        })
        .unwrap();
    let Err(e) = scope.end_graph() else {
        panic!("a body of 4,259,840 steps was taken");
    };
    assert!(matches!(e.kind, seam::ErrorKind::TooLarge { .. }), "{e}");
    let scope = d.capture().unwrap();
    d.launch(&step).unwrap();
    scope.end_graph().unwrap().replay().unwrap();
    assert_eq!(x.read().unwrap(), vec![2.0]);
}

/// An unrolled body's barriers: with the hazard rule, one before the
/// control words' update, then per copy one before the gate and one
/// before the first dispatch after it, none between two independent
/// dispatches; where every dispatch has one (`every`, a node-timed
/// capture) one before each step. The results are the body's either way.
/// Mutations: the rule's `every` taken from one setting alone (`||` →
/// `&&`), the barrier after the gate dropped, the one before the gate
/// dropped → red (counts; the audit too for the last two).
#[test]
fn a_body_has_barriers_at_its_gates_and_hazards_only() {
    use seam::{Backend, Conditional, ConditionalKind, ReplayTarget};
    let mut b = match VulkanBackend::open(0) {
        Ok(b) => Direct::new(b),
        Err(e) => return skipped(e),
    };
    let bufs: Vec<RawBuffer> = (0..4).map(|_| b.alloc(1024).unwrap()).collect();
    let [one, x, y, cond] = bufs[..] else {
        unreachable!()
    };
    let body = Conditional {
        kind: ConditionalKind::While { max_iterations: 2 },
        cond,
        byte_offset: 0,
    };
    for (every, node_timed, want) in [(false, false, 5), (true, false, 7), (false, true, 7)] {
        b.every_barrier = every;
        if b.set_node_timing(node_timed).is_err() {
            continue;
        }
        for (buf, v) in [(one, 1), (x, 0), (y, 0), (cond, 1)] {
            b.write(buf, 0, &words(v)).unwrap();
        }
        b.begin_capture().unwrap();
        b.begin_conditional(&body).unwrap();
        b.launch(&add(one, one, x)).unwrap();
        b.launch(&add(one, one, y)).unwrap();
        b.end_conditional().unwrap();
        let got = b.capture.as_ref().map(|c| c.barriers());
        let label = format!("every {every}, node timed {node_timed}");
        assert_eq!(got, Some(want), "{label}");
        let g = b.end_capture_graph().unwrap();
        b.replay(ReplayTarget::Graph(g)).unwrap();
        b.destroy_graph(g).unwrap();
        // The condition stays 1: both copies ran (x = y = 1 + 1 each).
        assert_eq!(
            (read(&mut b, x), read(&mut b, y)),
            (words(2), words(2)),
            "{label}"
        );
    }
}
