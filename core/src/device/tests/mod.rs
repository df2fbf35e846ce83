//! What core decides alone, on a backend that runs nothing.
use super::*;
use crate::backend::CaptureSupport;
use crate::testing::NullBackend;
use crate::validate;

mod kernels;

fn null(support: CaptureSupport) -> NullBackend {
    NullBackend::new(support)
}

fn device() -> Device {
    Device::new(Box::new(null(CaptureSupport::Native)))
}

/// C9's plumbing on a backend that reports Unsupported (no real backend
/// does). Mutation: `is_supported -> true` → red.
#[test]
fn capture_support_is_reported_through_every_layer() {
    let no = null(CaptureSupport::Unsupported("none here".into()));
    assert!(!no.capture_support().is_supported());
    let yes = null(CaptureSupport::Emulated);
    assert!(yes.capture_support().is_supported());
    let d = Device::new(Box::new(no));
    assert!(!d.capture_support().is_supported());
    assert_eq!(
        d.low_level().begin_capture().unwrap_err().kind,
        ErrorKind::CaptureUnsupported {
            reason: "none here".into()
        }
    );
    assert!(device().capture_support().is_supported());
}

/// The allocation limit is inclusive: exactly MAX_ELEMENTS elements is
/// legal (the Null backend allocates nothing, so 16 GiB costs nothing).
/// Mutation: `>` → `>=` in `Device::alloc` → red.
#[test]
fn alloc_limit_is_inclusive() {
    let d = device();
    let max = validate::MAX_ELEMENTS as usize;
    d.alloc(DType::U32, max).unwrap();
    let e = d.alloc(DType::U32, max + 1).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::TooLarge { .. }), "{e}");
}

/// Timing markers bracket eager launches only while tracing, never
/// inside a capture. Mutation: `&&` → `||` in `Device::launch` → red.
#[test]
fn timing_markers_only_for_traced_eager_launches() {
    let backend = null(CaptureSupport::Native);
    let log = backend.log();
    let count = || {
        log.lock()
            .unwrap()
            .iter()
            .filter(|c| **c == "begin_timed")
            .count()
    };
    let d = Device::new(Box::new(backend));
    let b = d.alloc(DType::U32, 4).unwrap();
    d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
    assert_eq!(count(), 0, "tracing is off");
    d.set_tracing(true);
    d.low_level().begin_capture().unwrap();
    d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
    d.low_level().end_capture_into_current().unwrap();
    assert_eq!(count(), 0, "inside a capture");
    d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
    assert_eq!(count(), 1, "a traced eager launch");
}

/// Dropping the last handle tears down in dependency order: the open
/// capture aborted, queued work finished, graphs destroyed, then every
/// buffer freed. Mutation: `impl Drop for State` → `()` → red.
#[test]
fn drop_tears_down_in_dependency_order() {
    let backend = null(CaptureSupport::Native);
    let log = backend.log();
    let d = Device::new(Box::new(backend));
    let b = d.alloc(DType::U32, 4).unwrap();
    d.low_level().begin_capture().unwrap();
    d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
    let _g = d.low_level().end_capture_graph().unwrap();
    d.low_level().begin_capture().unwrap();
    log.lock().unwrap().clear();
    drop(d);
    assert_eq!(
        *log.lock().unwrap(),
        ["abort_capture", "synchronize", "destroy_graph", "free"]
    );
}

/// Mutation: `impl Debug for Device` → `Ok(Default::default())` → red.
#[test]
fn debug_names_the_device() {
    assert_eq!(format!("{:?}", device()), r#"Device { id: "null:0" }"#);
}

#[test]
fn tracing_is_off_by_default_and_records_nothing() {
    let d = device();
    let b = d.alloc(DType::U32, 4).unwrap();
    d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
    d.low_level().begin_capture().unwrap();
    let g = d.low_level().end_capture_graph().unwrap();
    d.replay(GraphRef::Handle(g)).unwrap();
    let log = d.take_trace_log("t").unwrap();
    assert!(log.events.is_empty() && log.device_spans.is_empty());
    assert!(log.device_timing_unavailable.unwrap().contains("null"));
}

#[test]
fn errors_name_backend_device_and_call() {
    let d = device();
    let e = d.alloc(DType::F32, 0).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("null device null:0 (null): alloc: "),
        "{msg}"
    );
}

/// A buffer or graph id of one device is refused by another by name, with
/// the owner in the message, and nothing reaches the backend; once the
/// owner frees it, the id is merely unknown. Mutations: `NEXT_ID` replaced
/// by a per-device counter (ids collide again), or `foreign_owner` → `None`
/// → red.
#[test]
fn a_foreign_id_is_named_and_never_reaches_the_backend() {
    let a = device();
    let b_backend = null(CaptureSupport::Native);
    let b_log = b_backend.log();
    let b = Device::new(Box::new(b_backend));
    let mine = b.alloc(DType::U32, 4).unwrap();
    let theirs = a.alloc(DType::U32, 4).unwrap();
    assert_ne!(mine, theirs, "ids carry their device");
    b_log.lock().unwrap().clear();
    let e = b.launch(&crate::ops::fill(theirs, 4, 1)).unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::ForeignBuffer {
            id: theirs.number(),
            owner: "null:0 (a separately opened Device)".into()
        }
    );
    let e = b.write(theirs, 0, &[1u32]).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::ForeignBuffer { .. }), "{e}");
    assert!(
        b_log.lock().unwrap().is_empty(),
        "nothing reached b's backend"
    );
    a.low_level().begin_capture().unwrap();
    let g = a.low_level().end_capture_graph().unwrap();
    let e = b.replay(GraphRef::Handle(g)).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::ForeignGraph { .. }), "{e}");
    // Freed on its device, an id still names that device while it lives;
    // once it is gone, the id is unknown.
    a.free(theirs).unwrap();
    let e = b.free(theirs).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::ForeignBuffer { .. }), "{e}");
    drop(a);
    let e = b.free(theirs).unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::UnknownBuffer {
            id: theirs.number()
        }
    );
}

/// `BufferInUse` names what holds the buffer. Mutation: drop the
/// `GraphUser::Current` push in `users_of` → red.
#[test]
fn buffer_in_use_names_its_users() {
    let d = device();
    let b = d.alloc(DType::U32, 4).unwrap();
    d.low_level().begin_capture().unwrap();
    d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
    d.low_level().end_capture_into_current().unwrap();
    let e = d.free(b).unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::BufferInUse {
            id: b.number(),
            users: vec![crate::error::GraphUser::Current]
        }
    );
    assert!(e.to_string().contains("the current graph"), "{e}");
}

/// WGSL is checked at registration on every device, one that runs no WGSL
/// (a CPU-only machine) included: a kernel whose WGSL declares `array<u32>`
/// for an f32 binding is refused by name, and nothing is registered.
/// Mutation: drop the `wgsl::compile` call in `register_kernel` → red.
#[test]
fn a_device_that_runs_no_wgsl_still_checks_it() {
    use crate::kernel::{Field, KernelDef};
    use crate::ops::{Access, Binding};
    use crate::{Params, Tolerance};
    fn extents(p: &Params, out: &mut [u64]) {
        out.fill(p.d0 as u64);
    }
    fn grid(p: &Params) -> [u32; 3] {
        [p.d0.div_ceil(64).max(1), 1, 1]
    }
    fn cpu(_: &Params, _: &mut [Vec<u8>]) {}
    static WORDS: KernelDef = KernelDef {
        name: "words_as_floats",
        bindings: &[
            Binding::fixed("x", Access::Read, DType::F32),
            Binding::fixed("y", Access::Write, DType::F32),
        ],
        reads: &[Field::D0],
        extents,
        workgroup_size: [64, 1, 1],
        grid,
        check: None,
        allows_aliasing: false,
        tolerance: Tolerance::BitExact,
        wgsl: Some(
            "@group(0) @binding(0) var<storage, read> x: array<u32>;\n\
             @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn words_as_floats(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                 y[g.x] = f32(x[g.x]);\n\
             }\n",
        ),
        cuda: None,
        cpu: Some(cpu),
        samples: &[],
    };
    let d = device();
    let e = d.register_kernel(&WORDS).unwrap_err();
    assert!(
        matches!(&e.kind, ErrorKind::KernelCompile { kernel: "words_as_floats", log, .. }
            if log.contains("array of f32")),
        "{e}"
    );
    let x = d.alloc(DType::F32, 4).unwrap();
    let call = crate::ops::user(&WORDS, &[x.into(), x.into()], Params::dims(4, 0, 0));
    assert!(matches!(
        d.launch(&call).unwrap_err().kind,
        ErrorKind::KernelNotRegistered { .. }
    ));
}

/// Node timing on a device that cannot time nodes: turning it on is
/// refused with the backend's reason (off is accepted), and its trace says
/// why it has no node spans. Mutations: `set_node_timing` accepting `on`
/// on an unavailable device, or the trace's reason dropped → red.
#[test]
fn node_timing_unavailable_is_refused_and_named() {
    let d = device();
    assert!(matches!(d.node_timing(), NodeTiming::Unavailable(_)));
    let e = d.set_node_timing(true).unwrap_err();
    match &e.kind {
        ErrorKind::Unavailable { reason } => {
            assert!(reason.contains("times nothing"), "{reason}")
        }
        k => panic!("{k:?}"),
    }
    d.set_node_timing(false).unwrap();
    d.set_tracing(true);
    let log = d.take_trace_log("t").unwrap();
    assert!(log.node_spans.is_empty());
    assert!(log.node_timing_unavailable.is_some());
}

/// `write_bytes` writes whole elements of the buffer's type, up to its
/// end. The element count is checked only for zero where the write is
/// checked (the range is checked in `calls.rs` from the bytes), so a wrong
/// count shows in the refusal's message, which is computed from it:
/// mutations of `count`'s `/` (→ `*`, `%`) → red at `expected: 4` below.
#[test]
fn write_bytes_counts_elements_of_the_buffers_type() {
    let d = device();
    let b = d.alloc(DType::U32, 4).unwrap();
    assert_eq!(b.number(), 1, "a device numbers its ids from 1");
    d.write_bytes(b, 0, &[0u8; 16]).unwrap();
    d.write_bytes(b, 3, &[0u8; 4]).unwrap();
    assert!(d.write_bytes(b, 3, &[0u8; 8]).is_err());
    // Not a whole number of elements: refused, saying the largest that is.
    // Mutation: the message's `* size` → `/ size` or `+ size` → red.
    let e = d.write_bytes(b, 0, &[0u8; 6]).unwrap_err();
    assert!(
        matches!(
            e.kind,
            ErrorKind::SizeMismatch {
                expected: 4,
                found: 6,
                ..
            }
        ),
        "{e}"
    );
    // Ids number what the device made, in order. Mutations:
    // `BufferId::number` → 1, `new_buffer_id`'s `- 1` → `+ 1` / `/ 1` → red.
    let c = d.alloc(DType::U32, 4).unwrap();
    assert_eq!(c.number(), b.number() + 1);
    // Graph ids come from the same count. Mutation: `new_graph_id`'s `- 1`
    // → `+ 1` / `/ 1` → red.
    d.low_level().begin_capture().unwrap();
    let g = d.low_level().end_capture_graph().unwrap();
    assert_eq!(g.number(), 3);
}

/// Dropping a device with a current graph replaces that graph with an
/// empty capture (the backend has no call to destroy it), then frees the
/// buffers; the replacement's capture is never aborted. Mutations in
/// `State::drop` (its `&&` → `||`, its `!` deleted) → red.
#[test]
fn drop_replaces_the_current_graph_then_frees() {
    let backend = null(CaptureSupport::Native);
    let log = backend.log();
    let d = Device::new(Box::new(backend));
    let b = d.alloc(DType::U32, 4).unwrap();
    d.low_level().begin_capture().unwrap();
    d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
    d.low_level().end_capture_into_current().unwrap();
    log.lock().unwrap().clear();
    drop(d);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "synchronize",
            "begin_capture",
            "end_capture_into_current",
            "free"
        ]
    );
}

/// A device that cannot capture has nothing to update, and says why.
/// Mutation: `update_support`'s `Unsupported` arm deleted → red.
#[test]
fn no_capture_no_update() {
    let d = Device::new(Box::new(null(CaptureSupport::Unsupported("none".into()))));
    match d.update_support() {
        crate::UpdateSupport::Unsupported(why) => assert!(why.contains("none"), "{why}"),
        u => panic!("{u:?}"),
    }
}

/// After an update of whole launches, the graph holds exactly the buffers
/// its launches now use: one no launch uses any more frees, one a launch
/// now uses is in use, whether the update moves one of a launch's views
/// to another buffer, all of them, or none (new parameters, a view moved
/// within its buffer). Mutations: `replace_launches`' `*at == i` → `!=`
/// (the graph's buffers taken from the wrong launches), its same-buffers
/// shortcut taken when a changed launch binds other buffers (`==` → `!=`)
/// → red.
#[test]
fn a_graph_holds_the_buffers_its_updated_launches_use() {
    let d = device();
    let [a, b, c, o, p, q] = [0; 6].map(|_| d.alloc(DType::U32, 4).unwrap());
    d.low_level().begin_capture().unwrap();
    d.launch(&crate::ops::copy(a, o, 4)).unwrap();
    d.launch(&crate::ops::copy(b, o, 4)).unwrap();
    d.launch(&crate::ops::copy(o, p, 4)).unwrap();
    let g = d.low_level().end_capture_graph().unwrap();
    let update = |index: usize, call: crate::OpCall| {
        d.update(
            GraphRef::Handle(g),
            &crate::Change::launches(&[(index, call)]),
        )
        .unwrap()
    };
    let in_use = |ids: &[crate::BufferId]| {
        for &used in ids {
            let e = d.free(used).unwrap_err();
            assert!(matches!(e.kind, ErrorKind::BufferInUse { .. }), "{e}");
        }
    };
    update(1, crate::ops::copy(c, o, 4));
    d.free(b).unwrap();
    in_use(&[a, c, o, p]);
    // Every view of launch 2 moved: p is free, q in use.
    update(2, crate::ops::copy(a, q, 4));
    d.free(p).unwrap();
    in_use(&[a, c, o, q]);
    // The same buffers, other views: nothing changes hands.
    update(2, crate::ops::copy(a, q, 2));
    in_use(&[a, c, o, q]);
}

/// A graph re-recorded by an update (emulated) keeps the node timing it
/// was captured with: the backend's is switched to the graph's for the
/// re-record and back after it, and left alone when they agree. Mutation:
/// `rerecord`'s `keep == st.node_timing` → `!=` → red.
#[test]
fn a_rerecorded_graph_keeps_its_node_timing() {
    let backend = null(CaptureSupport::Native).timing_nodes();
    let log = backend.log();
    let d = Device::new(Box::new(backend));
    let b = d.alloc(DType::U32, 4).unwrap();
    let capture = |timed: bool| {
        d.set_node_timing(timed).unwrap();
        d.low_level().begin_capture().unwrap();
        d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
        let g = d.low_level().end_capture_graph().unwrap();
        d.set_node_timing(false).unwrap();
        g
    };
    let timed = capture(true);
    let untimed = capture(false);
    let switches = |g| {
        log.lock().unwrap().clear();
        d.update(
            GraphRef::Handle(g),
            &[crate::Change::Params {
                index: 0,
                params: crate::Params {
                    bits: 2,
                    ..crate::Params::dims(4, 0, 0)
                },
            }],
        )
        .unwrap();
        log.lock()
            .unwrap()
            .iter()
            .filter(|c| c.starts_with("set_node_timing") || c.starts_with("begin_capture"))
            .copied()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        switches(timed),
        ["set_node_timing:on", "begin_capture", "set_node_timing:off"]
    );
    assert_eq!(switches(untimed), ["begin_capture"]);
}

/// A traced replay names its launches (a `Nodes` event) only for a graph
/// captured with node timing on. Mutation: `Device::replay`'s
/// `timed && entry.node_timed` → `||` → red.
#[test]
fn only_node_timed_graphs_are_described() {
    let d = Device::new(Box::new(null(CaptureSupport::Native).timing_nodes()));
    let b = d.alloc(DType::U32, 4).unwrap();
    let capture = |timed: bool| {
        d.set_node_timing(timed).unwrap();
        d.low_level().begin_capture().unwrap();
        d.launch(&crate::ops::fill(b, 4, 1)).unwrap();
        d.low_level().end_capture_graph().unwrap()
    };
    let (untimed, timed) = (capture(false), capture(true));
    d.set_tracing(true);
    d.replay(GraphRef::Handle(untimed)).unwrap();
    d.replay(GraphRef::Handle(timed)).unwrap();
    let described: Vec<Option<u64>> = d
        .take_trace_log("t")
        .unwrap()
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Nodes { graph, nodes } => {
                assert_eq!(nodes.len(), 1);
                Some(*graph)
            }
            _ => None,
        })
        .collect();
    assert_eq!(described, [Some(timed.number())]);
}
