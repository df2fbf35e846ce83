//! A user kernel's CPU implementation that panics (here: one that writes
//! past its binding, the mistake a kernel with too small declared extents
//! makes) is an error of the work that ran it, surfaced like a GPU fault at
//! the next call that waits; the queue thread lives on, the device stays
//! usable and no buffer keeps anything the kernel wrote. Mutation: drop the
//! `catch_unwind` around the kernel in `reference::execute_user` → red
//! ("the queue thread has exited").

use seam::kernel::{Field, KernelDef};
use seam::ops::{Access, Binding};
use seam::{ops, DType, Device, Params, Tolerance};

fn extents(p: &Params, out: &mut [u64]) {
    out.fill(p.d0 as u64);
}
fn grid(p: &Params) -> [u32; 3] {
    [p.d0.div_ceil(64), 1, 1]
}
/// Writes one element more than its declared extent: past the view.
fn overrun(p: &Params, b: &mut [Vec<u8>]) {
    let n = p.d0 as usize + 1;
    b[1][..n * 4].fill(0xff);
}

static OVERRUN: KernelDef = KernelDef {
    name: "overrun_f32",
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
    wgsl: None,
    cuda: None,
    cpu: Some(overrun),
    samples: &[],
};

fn device() -> Device {
    Device::new(Box::new(seam_cpu::CpuBackend::new(0)))
}

#[test]
fn a_panicking_cpu_kernel_is_an_error_and_the_device_lives_on() {
    let dev = device();
    dev.register_kernel(&OVERRUN).unwrap();
    let x = dev.buffer_from(&[1.0f32; 8]).unwrap();
    let y = dev.buffer_from(&[2.0f32; 8]).unwrap();
    let call = ops::user(
        &OVERRUN,
        &[x.id().into(), y.id().view(0, 4)],
        Params::dims(4, 0, 0),
    );
    // Queued: the launch itself returns before the kernel runs.
    dev.launch(&call).unwrap();
    let e = dev.synchronize().unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("overrun_f32")
            && text.contains("panicked")
            && text.contains("out of range for slice"),
        "the error names the kernel, what happened and what the panic said: {text}"
    );
    // Reported once; the queue thread still runs work.
    dev.synchronize().unwrap();
    assert_eq!(
        y.read().unwrap(),
        vec![2.0; 8],
        "nothing the kernel wrote was kept"
    );
    dev.launch(&ops::add(x.id(), x.id(), y.id(), 8)).unwrap();
    assert_eq!(y.read().unwrap(), vec![2.0; 8]);
    // Captured, each replay's panic is reported and the graph stays usable.
    let scope = dev.capture().unwrap();
    dev.launch(&call).unwrap();
    let g = scope.end_graph().unwrap();
    for _ in 0..2 {
        g.replay().unwrap();
        let e = dev.synchronize().unwrap_err();
        assert!(e.to_string().contains("overrun_f32"), "{e}");
    }
    dev.launch(&ops::fill(y.id(), 8, 0)).unwrap();
    assert_eq!(y.read().unwrap(), vec![0.0; 8]);
}

/// A copy with WGSL only: every GPU backend can run it, the CPU cannot.
static NO_CPU: KernelDef = KernelDef {
    name: "no_cpu_f32",
    wgsl: Some(
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn no_cpu_f32(@builtin(global_invocation_id) g: vec3<u32>) {\n\
             if (g.x < p.d0) { y[p.o1 + g.x] = x[p.o0 + g.x]; }\n\
         }\n",
    ),
    cpu: None,
    ..OVERRUN
};

/// A user kernel without a Rust implementation cannot run on the CPU: its
/// registration is refused by name, and nothing of it is kept. Mutation:
/// `prepare` accepting every op → red.
#[test]
fn a_kernel_without_a_cpu_implementation_is_refused_at_registration() {
    let dev = device();
    let e = dev.register_kernel(&NO_CPU).unwrap_err();
    assert!(
        matches!(
            e.kind,
            seam::ErrorKind::KernelSourceMissing {
                kernel: "no_cpu_f32",
                ..
            }
        ),
        "{e}"
    );
    dev.register_kernel(&OVERRUN).unwrap();
}

/// Copies `x` into `y`, as a CPU implementation should: in its extent.
fn copy(p: &Params, b: &mut [Vec<u8>]) {
    let n = p.d0 as usize * 4;
    let x = b[0][..n].to_vec();
    b[1][..n].copy_from_slice(&x);
    b[0][..n].fill(0);
}

/// Reads `x`: what it writes there is not kept.
static COPY: KernelDef = KernelDef {
    name: "copy_f32",
    cpu: Some(copy),
    ..OVERRUN
};

/// A CPU implementation's writes reach the bindings it declares written,
/// and only those: what it does to a read binding's copy is dropped.
/// Mutation: the write-back test inverted (`==` → `!=`) → red.
#[test]
fn only_written_bindings_keep_what_the_kernel_wrote() {
    let dev = device();
    dev.register_kernel(&COPY).unwrap();
    let x = dev.buffer_from(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let y = dev.buffer_from(&[0.0f32; 4]).unwrap();
    dev.launch(&ops::user(
        &COPY,
        &[x.id().into(), y.id().into()],
        Params::dims(4, 0, 0),
    ))
    .unwrap();
    assert_eq!(y.read().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        x.read().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0],
        "a read binding is not written"
    );
}
