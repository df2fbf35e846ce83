//! The stream backend's helpers on their own: the kernel table's user
//! entries, launch geometry for every kind of op, the argument array a
//! driver reads, a vendor launch's arguments, range checks, the runtime
//! compilers' inputs and logs, and switching device timing.

use crate::backend_tests::{add, gemm};
use crate::fake::FakeDriver;
use crate::launch::{check, check_range, launch_config, BLOCK, GEMM_TILE, MAX_BLOCKS};
use crate::rtc::{driver_result, log_buffer, log_text, user_compile_error, RtcInput};
use crate::tables::KernelTable;
use crate::{EventTimer, StreamDriver, VendorLaunch};
use seam::kernel::{CudaSource, Field, KernelDef};
use seam::ops::{Access, Binding};
use seam::testing::{Direct, NullBackend, RawCall};
use seam::{CaptureSupport, DType, ErrorKind, Kernel, Launch, OpKind, Params, RawView, Tolerance};
use std::ffi::CStr;

fn ones(p: &Params, out: &mut [u64]) {
    out.fill(u64::from(p.d0));
}

static USER: KernelDef = KernelDef {
    name: "unit_user",
    bindings: &[Binding::fixed("x", Access::Write, DType::F32)],
    reads: &[Field::D0],
    extents: ones,
    workgroup_size: [64, 1, 1],
    grid: |p| [p.d0.div_ceil(64), 2, 3],
    check: None,
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: None,
    cuda: None,
    cpu: None,
    samples: &[],
};

static OTHER: KernelDef = KernelDef {
    name: "unit_other",
    ..USER
};

#[allow(unsafe_code)] // a source never compiled: only its promise is read
static EARLY: KernelDef = KernelDef {
    name: "unit_early",
    // SAFETY: never compiled or launched on a device; the launches below
    // only read whether the source may start early.
    cuda: Some(unsafe { CudaSource::trusted("unit_early").starts_early() }),
    ..USER
};

/// A launch of `call` as core lowers it (against the null backend).
fn lower(call: &RawCall) -> Launch {
    let mut d = Direct::new(NullBackend::new(CaptureSupport::Native));
    for _ in 0..3 {
        d.alloc(1 << 24).unwrap();
    }
    d.lower(call).unwrap()
}

fn call(op: OpKind, d: [u32; 3], n: usize) -> RawCall {
    let buffers: Vec<seam::RawBuffer> = (0..n).map(|i| seam::RawBuffer(i as u64 + 1)).collect();
    RawCall::whole(
        op,
        DType::F32,
        &buffers,
        1 << 20,
        Params::dims(d[0], d[1], d[2]),
    )
}

#[test]
fn user_kernels_are_found_by_kernel_and_dtype_and_replaced_in_place() {
    let (user, other) = (
        OpKind::User(Kernel::new(&USER)),
        OpKind::User(Kernel::new(&OTHER)),
    );
    let mut t = KernelTable::new();
    t.insert(user, DType::F32, 1);
    t.insert(user, DType::F16, 2);
    t.insert(other, DType::F32, 3);
    assert_eq!(t.get(user, DType::F32), Some(&1));
    assert_eq!(t.get(user, DType::F16), Some(&2));
    assert_eq!(t.get(other, DType::F32), Some(&3));
    assert_eq!(t.get(other, DType::F16), None);
    t.insert(user, DType::F32, 4);
    assert_eq!(t.get(user, DType::F32), Some(&4), "replaced, not added");
    assert_eq!(t.get(user, DType::F16), Some(&2));
    assert_eq!(t.get(OpKind::Add, DType::F32), None);
    t.insert(OpKind::Add, DType::F32, 5);
    assert_eq!(t.get(OpKind::Add, DType::F32), Some(&5));
}

/// Grid and block of each kind of op: elementwise ops a block per 256
/// items, a row op a block per row, GEMM a tile per 16 × 16 outputs (at
/// most 65 535 row tiles), a user kernel its own.
#[test]
fn every_kind_of_op_gets_its_grid_and_block() {
    let shape = |c: &RawCall| launch_config(&lower(c)).unwrap();
    assert_eq!(
        shape(&call(OpKind::Silu, [1000, 0, 0], 2)),
        ((4, 1, 1), (BLOCK, 1, 1))
    );
    assert_eq!(
        shape(&call(OpKind::Softmax, [7, 64, 0], 2)),
        ((7, 1, 1), (BLOCK, 1, 1))
    );
    let rms = RawCall {
        params: Params::dims(5, 64, 0).with_scalars(1e-5, 0.0),
        ..call(OpKind::RmsNorm, [5, 64, 0], 3)
    };
    assert_eq!(shape(&rms), ((5, 1, 1), (BLOCK, 1, 1)));
    assert_eq!(
        shape(&call(OpKind::Gemm, [33, 17, 8], 3)),
        ((2, 3, 1), (GEMM_TILE, GEMM_TILE, 1))
    );
    let user = RawCall::whole(
        OpKind::User(Kernel::new(&USER)),
        DType::F32,
        &[seam::RawBuffer(1)],
        1 << 20,
        Params::dims(200, 0, 0),
    );
    assert_eq!(shape(&user), ((4, 2, 3), (64, 1, 1)));
    // GEMM's row tiles: 65 535 fit, one more does not.
    let rows = |m: u32| {
        let mut l = lower(&call(OpKind::Gemm, [1, 1, 1], 3));
        l.params.d0 = m;
        launch_config(&l)
    };
    assert_eq!(rows(65_535 * GEMM_TILE).unwrap().0, (1, 65_535, 1));
    assert!(matches!(
        rows(65_535 * GEMM_TILE + 1),
        Err(ErrorKind::TooLarge { .. })
    ));
    // An elementwise grid is clamped to MAX_BLOCKS (the kernels stride).
    let mut big = lower(&call(OpKind::Silu, [16, 0, 0], 2));
    big.params.d0 = u32::MAX;
    assert_eq!(launch_config(&big).unwrap().0, (MAX_BLOCKS as u32, 1, 1));
}

/// The array a driver reads: one pointer per buffer, then the params
/// block, each pointing at its value.
#[test]
fn the_argument_array_points_at_each_value() {
    let d = FakeDriver::new();
    let mem: Vec<_> = (0..3).map(|_| d.alloc(4096).unwrap()).collect();
    let x = seam::RawBuffer(1);
    let l = lower(&RawCall {
        buffers: [
            RawView::at(x, 3, 4, 16),
            RawView::whole(x, 16),
            RawView::whole(x, 16),
        ]
        .into(),
        ..add(x, x, x, 16)
    });
    let f = crate::fake::FakeFunction::named("add");
    let launch = crate::KernelLaunch::new(&d, &f, &l, mem.iter().collect()).unwrap();
    assert_eq!(launch.byte_offsets(), [12, 0, 0]);
    let mut args = launch.args(&d);
    let addresses: Vec<u64> = args.addresses().to_vec();
    let mut ptrs = args.pointers();
    assert_eq!(ptrs.len(), 4);
    assert!(!ptrs.is_empty());
    let raw = ptrs.as_mut_ptr();
    for (i, want) in addresses.iter().enumerate() {
        // SAFETY: `raw` holds `len()` pointers, the first three to u64 values
        // in `args`, which lives for this scope.
        #[allow(unsafe_code)]
        let got = unsafe { *(*raw.add(i) as *const u64) };
        assert_eq!(got, *want, "argument {i}");
    }
    drop(launch);
    mem.into_iter().for_each(|m| d.free(m));
}

/// A launch may start early exactly where its kernel's CUDA source says
/// so: not a catalogue op, not a user kernel without CUDA C or with CUDA C
/// that did not say so. Mutation: `early_start` → `true` / `false` → red.
#[test]
fn a_launch_starts_early_only_where_its_cuda_source_says_so() {
    let d = FakeDriver::new();
    let mem: Vec<_> = (0..3).map(|_| d.alloc(4096).unwrap()).collect();
    let f = crate::fake::FakeFunction::named("k");
    let x = seam::RawBuffer(1);
    for (l, early) in [
        (lower(&add(x, x, x, 16)), false),
        (
            lower(&call(OpKind::User(Kernel::new(&USER)), [16, 0, 0], 1)),
            false,
        ),
        (
            lower(&call(OpKind::User(Kernel::new(&EARLY)), [16, 0, 0], 1)),
            true,
        ),
    ] {
        let n = l.buffers.len();
        let launch = crate::KernelLaunch::new(&d, &f, &l, mem[..n].iter().collect()).unwrap();
        assert_eq!(launch.early_start(), early, "{:?}", l.op);
    }
    mem.into_iter().for_each(|m| d.free(m));
}

/// A vendor launch carries the op, dtype, every buffer, each view's
/// offset and the params as core lowered them.
#[test]
fn a_vendor_launch_carries_what_the_library_needs() {
    let d = FakeDriver::new();
    let mem: Vec<_> = (0..3).map(|_| d.alloc(1 << 22).unwrap()).collect();
    let x = seam::RawBuffer(1);
    let mut c = gemm(x, x, x);
    c.buffers = [
        RawView::at(x, 1, 4, 4),
        RawView::at(x, 2, 4, 4),
        RawView::whole(x, 4),
    ]
    .into();
    let l = lower(&c);
    let v = VendorLaunch::new(&d, &l, mem.iter().collect()).unwrap();
    assert_eq!((v.op(), v.dtype()), (OpKind::Gemm, DType::F32));
    assert_eq!(v.byte_offsets(), [4, 8, 0]);
    assert_eq!(v.buffers().len(), 3);
    assert_eq!(*v.params(), l.params);
    drop(v);
    mem.into_iter().for_each(|m| d.free(m));
}

/// Host ranges and launch buffers are checked against the allocation.
#[test]
fn ranges_and_launch_buffers_are_checked_against_the_allocation() {
    assert_eq!(check_range("w", 8, 8, 16), Ok(()));
    assert!(check_range("w", 8, 9, 16).is_err());
    assert!(check_range("w", usize::MAX, 1, 16).is_err());
    let d = FakeDriver::new();
    let small = d.alloc(8).unwrap();
    let big = d.alloc(4096).unwrap();
    let x = seam::RawBuffer(1);
    let l = lower(&add(x, x, x, 16));
    assert!(check(&d, &l, &[&big, &big, &big]).is_ok());
    assert!(check(&d, &l, &[&big, &small, &big]).is_err());
    d.free(small);
    d.free(big);
}

/// What the runtime compilers take and give back.
#[test]
fn compiler_inputs_and_logs_round_trip() {
    let input = RtcInput::new("nvrtc", "src", "k.cu", &["-a".into(), "-bc".into()]).unwrap();
    // SAFETY: each pointer is a NUL-terminated string owned by `input`.
    #[allow(unsafe_code)]
    let (source, name, options) = unsafe {
        let opts = std::slice::from_raw_parts(input.options(), input.option_count() as usize);
        (
            CStr::from_ptr(input.source()).to_str().unwrap().to_string(),
            CStr::from_ptr(input.name()).to_str().unwrap().to_string(),
            opts.iter()
                .map(|o| CStr::from_ptr(*o).to_str().unwrap().to_string())
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!((source.as_str(), name.as_str()), ("src", "k.cu"));
    assert_eq!(options, ["-a", "-bc"]);
    assert!(RtcInput::new("nvrtc", "a\0b", "k", &[]).is_err());
    assert_eq!(log_buffer(0).len(), 1);
    assert_eq!(log_buffer(5), vec![0; 5]);
    assert_eq!(log_text(b"error here\0junk"), "error here");
    assert_eq!(log_text(b"no nul"), "no nul");
    assert_eq!(driver_result("c", true, || "x".into()), Ok(()));
    assert_eq!(
        driver_result("c", false, || "x".into()),
        Err(ErrorKind::driver("c", "x"))
    );
    let failed = || ErrorKind::driver("nvrtcCompileProgram", "log");
    let user = OpKind::User(Kernel::new(&USER));
    assert!(matches!(
        user_compile_error(user, "NVRTC", failed()),
        ErrorKind::KernelCompile {
            kernel: "unit_user",
            ..
        }
    ));
    assert_eq!(user_compile_error(OpKind::Add, "NVRTC", failed()), failed());
    let other = ErrorKind::driver("nvrtcCreateProgram", "oom");
    assert_eq!(user_compile_error(user, "NVRTC", other.clone()), other);
}

/// Switching timing off drops an open start; an end of another tag, or
/// after timing was switched off, records nothing.
#[test]
fn timing_switched_off_or_mismatched_records_no_span() {
    let d = FakeDriver::new();
    let mut t = EventTimer::<FakeDriver>::new();
    t.set(true);
    t.begin(&d, 1).unwrap();
    t.set(false);
    t.set(true);
    t.end(&d, 1).unwrap();
    assert!(t.take(&d).unwrap().is_empty(), "the open start was dropped");
    t.begin(&d, 2).unwrap();
    t.end(&d, 3).unwrap();
    assert!(t.take(&d).unwrap().is_empty(), "another tag");
    t.begin(&d, 4).unwrap();
    t.set(true);
    t.end(&d, 4).unwrap();
    assert_eq!(t.take(&d).unwrap().len(), 1, "switching on again keeps it");
    t.release_all(&d);
}
