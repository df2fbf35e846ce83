//! A user kernel that writes outside the extents it declares (the mistake
//! of a kernel whose `extents` are too small) is named by checked mode
//! (`Device::set_checked`, on in every user-kernel trial), and the buffers
//! it wrote are put back.

use crate::{check, check_eq, Case, Failure, Rule, ONCE};
use seam::kernel::{Field, KernelDef};
use seam::ops::{Access, Binding};
use seam::{ops, DType, ErrorKind, Params, Tolerance};

fn extents(p: &Params, out: &mut [u64]) {
    out.fill(p.d0 as u64);
}
/// One invocation more than the extents cover.
fn grid(p: &Params) -> [u32; 3] {
    [(p.d0 + 1).div_ceil(64), 1, 1]
}
/// `y[i] = x[i] + 1` for `i <= n`: one element past its declared `n`.
fn overrun_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let n = p.d0 as usize + 1;
    let x: Vec<f32> = b[0][..n * 4]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) + 1.0)
        .collect();
    for (c, v) in b[1][..n * 4].chunks_exact_mut(4).zip(x) {
        c.copy_from_slice(&v.to_le_bytes());
    }
}

/// Declares `n` elements of `y` written and writes `n + 1`.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
static OVERRUN: KernelDef = KernelDef {
    name: "seam_overrun",
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
        "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn seam_overrun(@builtin(global_invocation_id) g: vec3<u32>) {\n\
             if (g.x <= p.d0) { y[p.o1 + g.x] = x[p.o0 + g.x] + 1.0; }\n\
         }\n",
    ),
    // SAFETY: NOT what `trusted` asks: the kernel writes one element past
    // its declared extent, on purpose. The case binds `y` to a view with
    // room after it (a neighbour in its buffer, or checked mode's guard),
    // so the stray write stays inside the allocation, where it is found.
    cuda: Some(unsafe {
        seam::kernel::CudaSource::trusted(
            "extern \"C\" __global__ void seam_overrun(const float* x, float* y, Params p) {\n\
                 unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                 if (i <= p.d0) y[i] = x[i] + 1.0f;\n\
             }\n",
        )
    }),
    cpu: Some(overrun_cpu),
    samples: &[],
};

/// A kernel writing one element past its declared extent, eager, with
/// checked mode on: into the next element of its own buffer, and past the
/// end of a buffer exactly as long as its view (into the guard checked
/// mode allocates). Each launch fails naming the kernel, the binding `y`
/// and the element (`WroteOutsideExtents`); on a device whose kernels
/// cannot reach memory outside their views (the CPU reference runs the
/// kernel's Rust over copies of its views), the overrun is the kernel's own
/// panic, reported as the launch's error naming it. Either way every
/// element of `y` is as it was, and the device runs the next launch.
///
/// Mutations: on cpu:0, the queue thread running an eager launch without
/// catching a panic (`run_caught` → `run`) → red ("the queue thread has
/// exited"); on lavapipe's vulkan:0 and wgpu:0 (tried), skip the
/// comparison in `State::check_writes` → red ("the next element of its
/// buffer: accepted"), and allocate no guard (`GUARD` → 0) → red ("past
/// the end of its buffer: accepted").
pub const C12_WRITES_OUTSIDE_EXTENTS_NAMED: Case = Case {
    name: "c12_writes_outside_declared_extents_named",
    rule: Rule::C12,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        d.set_checked(true);
        d.register_kernel(&OVERRUN)?;
        const N: usize = 37;
        let x = d.buffer_from(&[1.5f32; N + 1])?;
        let inside = d.buffer_from(&[7.0f32; N + 4])?;
        let exact = d.buffer_from(&[9.0f32; N])?;
        let p = Params::dims(N as u32, 0, 0);
        for (y, what, element) in [
            (&inside, "the next element of its buffer", N as u64),
            (&exact, "past the end of its buffer", N as u64),
        ] {
            let before = y.read()?;
            let call = ops::user(&OVERRUN, &[x.id().into(), y.id().view(0, N)], p);
            let e = match d.launch(&call).and_then(|()| d.synchronize()) {
                Ok(()) => return Err(Failure(format!("{what}: accepted"))),
                Err(e) => e,
            };
            match &e.kind {
                ErrorKind::WroteOutsideExtents {
                    kernel,
                    binding,
                    element: at,
                    ..
                } => {
                    check!(
                        *kernel == OVERRUN.name && *binding == "y" && *at == element,
                        "{what}: names the wrong kernel, binding or element: {e}"
                    );
                }
                _ => check!(
                    e.to_string().contains(OVERRUN.name) && e.to_string().contains("panicked"),
                    "{what}: neither WroteOutsideExtents nor the kernel's panic: {e}"
                ),
            }
            check_eq!(y.read()?, before, "{what}: the buffer changed");
        }
        d.launch(&ops::fill(inside.id(), N as u32, 0))?;
        check_eq!(
            inside.read()?[..N].to_vec(),
            vec![0.0f32; N],
            "the device runs the next launch"
        );
        Ok(())
    },
};
