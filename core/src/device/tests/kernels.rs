//! User kernels on a device whose backend runs nothing (or, in checked
//! mode, runs a kernel's CPU implementation over its whole buffers, as a
//! GPU could): registration, grids and element ranges, overlapping views,
//! and checked mode's stray writes.

use super::*;

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
