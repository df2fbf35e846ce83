//! What the backend refuses and reports: adapters it cannot use, sizes past
//! the device's limits, a user kernel wgpu refuses, errors raised outside
//! any call, validation messages at teardown; and the bind-group cache.

use super::{add, upload, view_trials};
use crate::backend::WgpuBackend;
use crate::gpu::Gpu;
use libtest_mimic::Completion;
use seam::kernel::KernelDef;
use seam::ops::{Access, Binding};
use seam::testing::Direct;
use seam::{Backend, DType, Device, ErrorKind, Tolerance};

/// An adapter is skipped, with the reason, without immediates, with fewer
/// immediate bytes than the block needs (exactly enough is enough), or
/// without compute shaders. Mutations: `unusable_with` → `None`, either
/// `!` deleted, `<` → `<=` / `>` / `==` → red.
pub fn adapters_without_immediates_or_compute_are_skipped() {
    use wgpu::{DownlevelFlags as D, Features as F};
    let need = crate::IMMEDIATE_BYTES;
    let unusable = crate::unusable_with;
    assert_eq!(unusable(F::IMMEDIATES, need, D::COMPUTE_SHADERS), None);
    assert_eq!(unusable(F::IMMEDIATES, 4 * need, D::all()), None);
    let why = unusable(F::empty(), need, D::COMPUTE_SHADERS).expect("no immediates");
    assert!(why.contains("IMMEDIATES"), "{why}");
    let why = unusable(F::IMMEDIATES, need - 1, D::COMPUTE_SHADERS).expect("too few bytes");
    assert!(why.contains(&format!("is {} bytes", need - 1)), "{why}");
    let why = unusable(F::IMMEDIATES, need, D::empty()).expect("no compute");
    assert_eq!(why, "no compute shaders");
}

/// A device held to limits below its adapter's: the largest allocation is
/// the smaller of `max_buffer_size` and `max_storage_buffer_binding_size`
/// (kernels bind whole buffers), each way round: exactly it is made, bound
/// and launched over; one byte past it refused naming both limits.
/// Mutations: `>` → `>=` / `==` in `alloc`, either limit left out → red.
pub fn limits_below_the_adapters_are_held(_: Direct<WgpuBackend>) -> Completion {
    const SMALL: u64 = 1 << 20;
    const LARGE: u64 = 2 << 20;
    for (buffer, binding) in [(LARGE, SMALL), (SMALL, LARGE)] {
        let mut b = Direct::new(limited(|l| wgpu::Limits {
            max_buffer_size: buffer,
            max_storage_buffer_binding_size: binding,
            ..l
        }));
        match b.alloc(SMALL as usize + 1) {
            Err(ErrorKind::TooLarge { what, detail }) => {
                assert_eq!(what, "allocation");
                assert!(
                    detail.contains(&format!(
                        "max_buffer_size {buffer}, max_storage_buffer_binding_size {binding}"
                    )),
                    "{detail}"
                );
            }
            other => panic!("one byte past the smaller limit: {other:?}"),
        }
        let one = upload(&mut b, &[1; 16]);
        let fits = b.alloc(SMALL as usize).expect("exactly the smaller limit");
        b.launch(&add(one, one, fits, 16))
            .expect("a binding of the largest buffer");
        b.synchronize().expect("synchronize");
    }
    Completion::Completed
}

/// wgpu:0 opened again, its device held to `limits` of the adapter's.
fn limited(limits: impl FnOnce(wgpu::Limits) -> wgpu::Limits) -> WgpuBackend {
    let instance = crate::instance().expect("an instance");
    let adapter = crate::enumerate(&instance)
        .into_iter()
        .find(|a| crate::unusable(a).is_none())
        .expect("the adapter the harness opened");
    let gpu = Gpu::request_with(&adapter, limits(adapter.limits())).expect("lower limits");
    WgpuBackend::open_with(0, &adapter, gpu).expect("open")
}

/// Launches over two sets of buffers keep two bind groups; launching over
/// either again makes none. Mutation: the cache cleared on every insert
/// (`>=` → `<` at its bound) → red.
pub fn bind_groups_are_kept_per_buffer_set(mut b: Direct<WgpuBackend>) -> Completion {
    let x = upload(&mut b, &[1; 16]);
    let y = upload(&mut b, &[2; 16]);
    let before = b.bind_group_count();
    b.launch(&add(x, x, y, 16)).expect("launch");
    b.launch(&add(y, y, x, 16)).expect("launch");
    assert_eq!(b.bind_group_count(), before + 2);
    b.launch(&add(x, x, y, 16)).expect("launch");
    assert_eq!(b.bind_group_count(), before + 2);
    b.synchronize().expect("synchronize");
    Completion::Completed
}

/// 64 invocations a workgroup: naga and core accept it, wgpu refuses the
/// pipeline on a device held to 32 (`limited`).
static WIDE: KernelDef = KernelDef {
    name: "seam_test_wide",
    bindings: &[Binding::fixed("y", Access::Write, DType::U32)],
    reads: &[],
    extents: view_trials::one_extents,
    workgroup_size: [64, 1, 1],
    grid: view_trials::one_grid,
    check: None,
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: Some(
        "@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn seam_test_wide(@builtin(local_invocation_index) i: u32) {
    if i == 0u {
        y[p.o0] = 1u;
    }
}
",
    ),
    cuda: None,
    cpu: None,
    samples: &[],
};

/// A user kernel that naga accepts and wgpu refuses (a workgroup wider
/// than the device allows) is a compile error of that kernel, with wgpu's
/// message, not a driver error. Mutation: the `OpKind::User` arm of
/// `compile_error` deleted → red.
pub fn user_kernel_wgpu_refuses_is_a_compile_error(_: Direct<WgpuBackend>) -> Completion {
    let dev = Device::new(Box::new(limited(|l| wgpu::Limits {
        max_compute_workgroup_size_x: 32,
        max_compute_invocations_per_workgroup: 32,
        ..l
    })));
    let e = dev.register_kernel(&WIDE).unwrap_err();
    match &e.kind {
        ErrorKind::KernelCompile {
            kernel,
            compiler,
            log,
        } => {
            assert_eq!(*kernel, "seam_test_wide");
            assert_eq!(compiler, "wgpu");
            assert!(log.to_lowercase().contains("workgroup"), "{log}");
        }
        other => panic!("{e}: {other:?}"),
    }
    Completion::Completed
}

/// A wgpu error raised outside every error scope reaches the uncaptured
/// handler and fails the next call that looks, naming that call; then it
/// is gone. Mutation: `take_uncaptured` → `Ok(())` → red.
pub fn errors_outside_a_call_fail_the_next_one(b: Direct<WgpuBackend>) -> Completion {
    // MAP_READ with STORAGE needs a feature this device was not given.
    let _ = b.gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    match b.gpu.take_uncaptured("seam test call") {
        Err(ErrorKind::Driver { driver_call, .. }) => assert_eq!(driver_call, "seam test call"),
        other => panic!("the uncaptured error was not reported: {other:?}"),
    }
    b.gpu
        .take_uncaptured("seam test call")
        .expect("reported once");
    Completion::Completed
}

/// A validation message a call returned fails the device's teardown too,
/// naming the call, even where the caller swallowed the error. Mutations:
/// `Teardown::drop` → `()`, either `!` in it deleted → red.
pub fn teardown_fails_on_a_message_a_call_returned(b: Direct<WgpuBackend>) -> Completion {
    let mut backend = b.into_inner();
    backend.validate_from_now();
    let _ = crate::validation::take();
    crate::validation::tests::raise("VUID-seam-teardown-test");
    let swallowed = backend.alloc(16);
    assert!(swallowed.is_err(), "the raised message failed no call");
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(backend)));
    let payload = dropped.expect_err("the teardown passed with a message on record");
    let text = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        text.contains("drop: validation: wgpu::Device::create_buffer: ")
            && text.contains("VUID-seam-teardown-test"),
        "{text}"
    );
    Completion::Completed
}

/// The device validates exactly where `SEAM_WGPU_VALIDATION=1` asks (the
/// mutation judge and CI's validated pass run with it). Mutations:
/// `requested` → `false`, `==` → `!=` in it → red where it is asked
/// (`true`: `validation::validation_is_off_unless_asked`).
pub fn validation_is_on_exactly_when_asked(b: Direct<WgpuBackend>) -> Completion {
    let asked = std::env::var(crate::validation::ENV).as_deref() == Ok("1");
    assert_eq!(b.gpu.validating, asked);
    Completion::Completed
}
