//! What core decides alone, on a backend that runs nothing.
use super::*;
use crate::backend::CaptureSupport;
use crate::testing::NullBackend;

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
            assert!(reason.contains("does not time the nodes"), "{reason}")
        }
        k => panic!("{k:?}"),
    }
    d.set_node_timing(false).unwrap();
    d.set_tracing(true);
    let log = d.take_trace_log("t").unwrap();
    assert!(log.node_spans.is_empty());
    assert!(log.node_timing_unavailable.is_some());
}

fn k_extents(_: &crate::Params, out: &mut [u64]) {
    out.fill(4);
}
fn k_grid(_: &crate::Params) -> [u32; 3] {
    [1, 1, 1]
}
fn k_cpu(_: &crate::Params, _: &mut [Vec<u8>]) {}

/// A CPU-only user kernel named `name` (no WGSL to check).
macro_rules! kernel {
    ($name:literal) => {
        crate::kernel::KernelDef {
            name: $name,
            bindings: &[crate::ops::Binding::fixed(
                "y",
                crate::ops::Access::Write,
                DType::U32,
            )],
            reads: &[],
            extents: k_extents,
            workgroup_size: [64, 1, 1],
            grid: k_grid,
            check: None,
            allows_aliasing: false,
            tolerance: crate::Tolerance::BitExact,
            wgsl: None,
            cuda: None,
            cpu: Some(k_cpu),
            samples: &[],
        }
    };
}
static K1: crate::kernel::KernelDef = kernel!("k1");
static K2: crate::kernel::KernelDef = kernel!("k2");
static K1_AGAIN: crate::kernel::KernelDef = kernel!("k1");

/// Kernels of different names register side by side, a second
/// definition under a taken name is refused, and `prepare` takes a
/// registered kernel and refuses one that is not. Mutations: the name
/// check's `==` → `!=`, `prepare`'s `!registered` → `registered` → red.
#[test]
fn kernels_register_by_name_and_prepare_only_when_registered() {
    let d = device();
    let k2 = crate::kernel::Kernel::new(&K2);
    let e = d.prepare(&[(OpKind::User(k2), DType::U32)]).unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::KernelNotRegistered { .. }),
        "{e}"
    );
    d.register_kernel(&K1).unwrap();
    d.register_kernel(&K2).unwrap();
    d.register_kernel(&K1).unwrap();
    d.prepare(&[(OpKind::User(k2), DType::U32)]).unwrap();
    let e = d.register_kernel(&K1_AGAIN).unwrap_err();
    match e.kind {
        ErrorKind::BadKernel { reason, .. } => {
            assert!(reason.contains("another kernel of that name"), "{reason}")
        }
        k => panic!("{k:?}"),
    }
}

/// In checked mode a new buffer's guard is written with the canary (on
/// the CPU its poison is the canary's byte, so only the call shows it);
/// off, an allocation writes nothing; a catalogue op is never checked.
/// Mutations: `set_checked` → `()`, `guard > 0` → `guard < 0` in
/// `Device::alloc`, `checked_snapshot`'s second `||` → `&&` → red.
#[test]
fn checked_allocations_write_their_guard() {
    let backend = null(CaptureSupport::Native);
    let log = backend.log();
    let d = Device::new(Box::new(backend));
    let writes = || {
        log.lock()
            .unwrap()
            .iter()
            .filter(|c| **c == "write")
            .count()
    };
    d.alloc(DType::U32, 4).unwrap();
    assert_eq!(writes(), 0, "unchecked");
    d.set_checked(true);
    let b = d.alloc(DType::U32, 4).unwrap();
    assert_eq!(writes(), 1, "checked: the guard");
    // Only user kernels are checked: a catalogue op reads nothing back.
    let reads = || log.lock().unwrap().iter().filter(|c| **c == "read").count();
    d.launch(&crate::ops::fill(b, 4, 7)).unwrap();
    assert_eq!(reads(), 0, "a checked catalogue launch");
}

/// `write_bytes` writes whole elements of the buffer's type, up to its
/// end. Mutation: `bytes.len() / size` → `*` (the element count) → red.
#[test]
fn write_bytes_counts_elements_of_the_buffers_type() {
    let d = device();
    let b = d.alloc(DType::U32, 4).unwrap();
    assert_eq!(b.number(), 1, "a device numbers its ids from 1");
    d.write_bytes(b, 0, &[0u8; 16]).unwrap();
    d.write_bytes(b, 3, &[0u8; 4]).unwrap();
    assert!(d.write_bytes(b, 3, &[0u8; 8]).is_err());
    // Not a whole number of elements: refused, saying the largest that is.
    // Mutation: the message's `/ size` → `* size` → red.
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

fn grid_of_dims(p: &crate::Params) -> [u32; 3] {
    [p.d0, p.d1, p.d2]
}
static GRID: crate::kernel::KernelDef = crate::kernel::KernelDef {
    name: "grid",
    reads: &[
        crate::kernel::Field::D0,
        crate::kernel::Field::D1,
        crate::kernel::Field::D2,
    ],
    grid: grid_of_dims,
    ..kernel!("grid")
};

/// A user kernel's grid is checked axis by axis: a zero axis is a
/// `ZeroSize` naming it, an axis past `MAX_GRID_EDGE` is `TooLarge`, the
/// edge itself is legal; and a view whose offset plus extent passes
/// `MAX_ELEMENTS` is `TooLarge` though each alone does not. Mutations:
/// `dims`' user-kernel arm deleted, the grid edge's `>` → `>=` / `==`,
/// the element limit's `||` → `&&` or `+` → `*` → red.
#[test]
fn grids_and_element_ranges_are_bounded() {
    use crate::kernel::MAX_GRID_EDGE;
    let d = device();
    d.register_kernel(&GRID).unwrap();
    let y = d.alloc(DType::U32, 4).unwrap();
    let launch = |d0, d1, d2| {
        d.launch(&crate::ops::user(
            &GRID,
            &[y.into()],
            crate::Params::dims(d0, d1, d2),
        ))
    };
    launch(1, 1, 1).unwrap();
    launch(MAX_GRID_EDGE, 1, 1).unwrap();
    let e = launch(1, 0, 1).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ZeroSize { what: "grid y" }, "{e}");
    let e = launch(1, 1, MAX_GRID_EDGE + 1).unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::TooLarge { what: "grid z", .. }),
        "{e}"
    );
    let max = validate::MAX_ELEMENTS as usize;
    let big = d.alloc(DType::U32, max).unwrap();
    let past = crate::View {
        buffer: big,
        offset: 1,
        len: None,
    };
    let e = d
        .launch(&crate::ops::add(past, past, past, u32::MAX))
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::TooLarge { .. }), "{e}");
}

fn two_extents(p: &crate::Params, out: &mut [u64]) {
    out[0] = u64::from(p.d0);
    out[1] = u64::from(p.d1);
}
fn one_group(_: &crate::Params) -> [u32; 3] {
    [1, 1, 1]
}
static TWO_WRITES: crate::kernel::KernelDef = crate::kernel::KernelDef {
    name: "two_writes",
    bindings: &[
        crate::ops::Binding::fixed("w0", crate::ops::Access::Write, DType::U32),
        crate::ops::Binding::fixed("w1", crate::ops::Access::Write, DType::U32),
    ],
    reads: &[crate::kernel::Field::D0, crate::kernel::Field::D1],
    extents: two_extents,
    grid: one_group,
    ..kernel!("two_writes")
};

/// Views of one buffer that overlap are named by how: the same range is an
/// alias (`AliasNotAllowed`), so is a read starting where an op that may
/// not alias writes; any other overlap is `ViewsOverlap`, named from the
/// first write. Mutations in `lower`'s error choice (`||` ↔ `&&`, either
/// `==` → `!=`) → red.
#[test]
fn overlaps_are_named_by_how_they_overlap() {
    let d = device();
    d.register_kernel(&TWO_WRITES).unwrap();
    let b = d.alloc(DType::U32, 8).unwrap();
    let at = |offset| crate::View {
        buffer: b,
        offset,
        len: None,
    };
    let two = |w1: crate::View, d0, d1| {
        d.launch(&crate::ops::user(
            &TWO_WRITES,
            &[at(0), w1],
            crate::Params::dims(d0, d1, 0),
        ))
        .unwrap_err()
        .kind
    };
    let alias = ErrorKind::AliasNotAllowed {
        op: OpKind::User(crate::kernel::Kernel::new(&TWO_WRITES)),
        output: "w0",
        input: "w1",
    };
    let overlap = ErrorKind::ViewsOverlap {
        op: OpKind::User(crate::kernel::Kernel::new(&TWO_WRITES)),
        output: "w0",
        other: "w1",
    };
    assert_eq!(two(at(0), 4, 4), alias, "the same range");
    assert_eq!(
        two(at(0), 4, 2),
        overlap,
        "the same start, not the same end"
    );
    assert_eq!(
        two(at(2), 4, 2),
        overlap,
        "the same end, not the same start"
    );
    // rms_norm may not alias: its weight read from where its output starts.
    let x = d.alloc(DType::F32, 8).unwrap();
    let out = d.alloc(DType::F32, 8).unwrap();
    let e = d
        .launch(&crate::ops::rms_norm(x, out, out, 2, 4, 1e-5))
        .unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::AliasNotAllowed {
            op: OpKind::RmsNorm,
            output: "out",
            input: "w",
        },
        "{e}"
    );
}

fn stray_extents(p: &crate::Params, out: &mut [u64]) {
    out.fill(u64::from(p.d0));
}
/// `y[i] = x[i] + 1` for `i < n`; with `d1 == 0` also `y[n]` (one past its
/// extent), with `d1 == 1` also `x[0] = 42` (a write into a read binding).
fn stray_cpu(p: &crate::Params, b: &mut [Vec<u8>]) {
    let n = p.d0 as usize + usize::from(p.d1 == 0);
    for i in 0..n {
        let x = f32::from_le_bytes(b[0][4 * i..4 * i + 4].try_into().unwrap());
        b[1][4 * i..4 * i + 4].copy_from_slice(&(x + 1.0).to_le_bytes());
    }
    if p.d1 == 1 {
        b[0][..4].copy_from_slice(&42f32.to_le_bytes());
    }
}
static STRAY: crate::kernel::KernelDef = crate::kernel::KernelDef {
    name: "stray",
    bindings: &[
        crate::ops::Binding::fixed("x", crate::ops::Access::Read, DType::F32),
        crate::ops::Binding::fixed("y", crate::ops::Access::Write, DType::F32),
    ],
    reads: &[crate::kernel::Field::D0, crate::kernel::Field::D1],
    extents: stray_extents,
    grid: one_group,
    cpu: Some(stray_cpu),
    ..kernel!("stray")
};

/// Checked mode on a device whose kernels can stray (the null backend
/// runs a kernel over its buffers to their end, as a GPU would): a write
/// one past a binding's extent inside its buffer, one into the guard past
/// the buffer's end, and one into a read binding are each named (binding,
/// element, guard), and every buffer is put back; a kernel within its
/// extents runs and keeps its results; off, nothing is checked. Mutations
/// in `read_allocation` (a constant, the size's `*`), `write_allocation`
/// (→ `Ok(())`, its `+`) and `check_writes` → red.
#[test]
fn checked_mode_names_stray_writes_and_puts_buffers_back() {
    let d = device();
    d.register_kernel(&STRAY).unwrap();
    d.set_checked(true);
    let x = d
        .buffer_from(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
        .unwrap();
    let y = d.buffer_from(&[0.0f32; 8]).unwrap();
    assert!(!y.is_empty() && y.len() == 8);
    let stray = |n: u32, d1: u32| {
        d.launch(&crate::ops::user(
            &STRAY,
            &[x.id().into(), y.id().into()],
            crate::Params::dims(n, d1, 0),
        ))
    };
    let named = |e: crate::Error| match e.kind {
        ErrorKind::WroteOutsideExtents {
            kernel,
            binding,
            element,
            detail,
        } => (kernel, binding, element, detail),
        k => panic!("{k:?}"),
    };
    let (kernel, binding, element, detail) = named(stray(4, 0).unwrap_err());
    assert_eq!((kernel, binding, element), ("stray", "y", 4), "{detail}");
    assert!(!detail.contains("guard"), "{detail}");
    assert_eq!(y.read().unwrap(), [0.0; 8], "put back");
    let (_, binding, element, detail) = named(stray(8, 0).unwrap_err());
    assert_eq!((binding, element), ("y", 8));
    assert!(
        detail.contains("past the buffer's 8 (its guard)"),
        "{detail}"
    );
    assert_eq!(y.read().unwrap(), [0.0; 8], "put back");
    let (_, binding, element, _) = named(stray(2, 1).unwrap_err());
    assert_eq!((binding, element), ("x", 0));
    assert_eq!(x.read().unwrap()[0], 1.0, "put back");
    stray(3, 2).unwrap();
    assert_eq!(y.read().unwrap(), [2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    d.set_checked(false);
    stray(4, 0).unwrap();
    assert_eq!(
        y.read().unwrap()[4],
        6.0,
        "unchecked: the stray write stays"
    );
}

fn apart_extents(p: &crate::Params, out: &mut [u64]) {
    out[0] = u64::from(p.d0);
    out[1] = u64::from(p.d1);
}
/// Writes its two outputs, then one element `d2` of their buffer that
/// neither declares (through whichever binding's view reaches it).
fn apart_cpu(p: &crate::Params, b: &mut [Vec<u8>]) {
    let e = p.d2 as usize;
    let (k, at) = if e >= 20 { (1, e - 20) } else { (0, e - 3) };
    b[k][4 * at..4 * at + 4].copy_from_slice(&9f32.to_le_bytes());
}
static APART: crate::kernel::KernelDef = crate::kernel::KernelDef {
    name: "apart",
    bindings: &[
        crate::ops::Binding::fixed("w0", crate::ops::Access::Write, DType::F32),
        crate::ops::Binding::fixed("w1", crate::ops::Access::Write, DType::F32),
    ],
    reads: &[
        crate::kernel::Field::D0,
        crate::kernel::Field::D1,
        crate::kernel::Field::D2,
    ],
    extents: apart_extents,
    grid: one_group,
    cpu: Some(apart_cpu),
    ..kernel!("apart")
};

/// A stray write is named after the written binding of its buffer nearest
/// to it: `w0` declares elements 3..5 and `w1` element 20 of one buffer;
/// strays at 5, 12, 13, 19 and 22 are nearest `w0`, `w0` (7 against 8),
/// `w1` (7 against 8), `w1` and `w1`. Mutations in `check_writes`' choice
/// of the binding (the buffer or access filter's `==`, the end's `+`, the
/// before-or-after `<`, the distance's `-`) → red.
#[test]
fn a_stray_write_is_named_after_the_nearest_written_binding() {
    let d = device();
    d.register_kernel(&APART).unwrap();
    d.set_checked(true);
    let y = d.buffer_from(&[0.0f32; 24]).unwrap();
    let at = |offset| crate::View {
        buffer: y.id(),
        offset,
        len: None,
    };
    // 60: past the buffer's 24 elements, deep in the guard (which checked
    // mode compares whole: mutation `read_allocation`'s `*` → `+` → red).
    for (stray, want) in [
        (5, "w0"),
        (12, "w0"),
        (13, "w1"),
        (19, "w1"),
        (22, "w1"),
        (60, "w1"),
    ] {
        let e = d
            .launch(&crate::ops::user(
                &APART,
                &[at(3), at(20)],
                crate::Params::dims(2, 1, stray),
            ))
            .unwrap_err();
        match e.kind {
            ErrorKind::WroteOutsideExtents {
                binding, element, ..
            } => assert_eq!((binding, element), (want, u64::from(stray))),
            k => panic!("stray {stray}: {k:?}"),
        }
    }
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
/// now uses is in use. Mutation: `replace_launches`' `*at == i` → `!=`
/// (the graph's buffers taken from the wrong launches) → red.
#[test]
fn a_graph_holds_the_buffers_its_updated_launches_use() {
    let d = device();
    let [a, b, c, o] = [0; 4].map(|_| d.alloc(DType::U32, 4).unwrap());
    d.low_level().begin_capture().unwrap();
    d.launch(&crate::ops::copy(a, o, 4)).unwrap();
    d.launch(&crate::ops::copy(b, o, 4)).unwrap();
    let g = d.low_level().end_capture_graph().unwrap();
    d.update(
        GraphRef::Handle(g),
        &crate::Change::launches(&[(1, crate::ops::copy(c, o, 4))]),
    )
    .unwrap();
    d.free(b).unwrap();
    for used in [a, c, o] {
        let e = d.free(used).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::BufferInUse { .. }), "{e}");
    }
}
