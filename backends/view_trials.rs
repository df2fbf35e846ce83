// Shared by the WGSL backends' own device tests (`#[path]`-included, as
// `device_trials.rs` is): buffer views at odd element offsets and user
// kernels, on a `seam::Device` of the backend under test, with
// the CPU backend as the oracle. The conformance suite owns the contract;
// these check what a WGSL backend gets wrong first: the offset words
// (`p.o<k>`), 16-bit halves shared with a neighbour outside the view, and
// user-kernel compilation and its errors.

use seam::kernel::{Field, KernelDef};
use seam::ops::{self, Access, Binding, Role};
use seam::testing::Rng;
use seam::{DType, Device, ErrorKind, OpCall, OpKind, Params, Tolerance};

/// Elements past the view on each side that must keep their bytes.
const MARGIN: usize = 3;

/// One catalogue launch over views: op, dtype, dims, each binding's offset.
struct Case {
    op: OpKind,
    dtype: DType,
    dims: (u32, u32, u32),
    offsets: &'static [usize],
}

fn lens(op: OpKind, (a, b, c): (u32, u32, u32)) -> Vec<usize> {
    let v = match op {
        OpKind::RmsNorm => vec![a * b, b, a * b],
        OpKind::Softmax => vec![a * b; 2],
        OpKind::Gemm => vec![a * c, c * b, a * b],
        _ => vec![a; op.signature().len()],
    };
    v.into_iter().map(|n| n as usize).collect()
}

fn dtype_of(b: &Binding, dtype: DType) -> DType {
    match b.role {
        Role::Fixed(d) => d,
        Role::Input => dtype,
    }
}

fn call(c: &Case, views: &[seam::View]) -> OpCall {
    let (a, b, k) = c.dims;
    let v = views;
    match c.op {
        OpKind::Fill => ops::fill(
            v[0],
            a,
            if c.dtype.size() == 2 {
                0xBEEF
            } else {
                0xDEAD_BEEF
            },
        ),
        OpKind::Copy => ops::copy(v[0], v[1], a),
        OpKind::ScaleAdd => ops::scale_add(v[0], v[1], a, 1.75, -0.3),
        OpKind::Add => ops::add(v[0], v[1], v[2], a),
        OpKind::Mul => ops::mul(v[0], v[1], v[2], a),
        OpKind::Silu => ops::silu(v[0], v[1], a),
        OpKind::RmsNorm => ops::rms_norm(v[0], v[1], v[2], a, b, 1e-5),
        OpKind::Softmax => ops::softmax(v[0], v[1], a, b),
        OpKind::Gemm => ops::gemm(v[0], v[1], v[2], a, b, k),
        OpKind::User(_) => unreachable!("catalogue cases only"),
    }
}

/// Run `c` on `dev` over views at its offsets inside buffers with
/// [`MARGIN`] elements either side; every buffer's bytes afterwards, and
/// the bytes it started with.
fn run_case(dev: &Device, c: &Case, captured: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let sig = c.op.signature();
    let mut rng = Rng::new(c.offsets.iter().sum::<usize>() as u64 + 1);
    let mut ids = Vec::new();
    let mut views = Vec::new();
    let mut before = Vec::new();
    for ((b, &len), &off) in sig.iter().zip(&lens(c.op, c.dims)).zip(c.offsets) {
        let d = dtype_of(b, c.dtype);
        let total = off + len + MARGIN;
        let id = dev.alloc(d, total).unwrap();
        let data: Vec<u8> = rng.bytes(d, total, 2.0);
        dev.write_bytes(id, 0, &data).unwrap();
        views.push(id.view(off, len));
        ids.push(id);
        before.push(data);
    }
    let launch = call(c, &views);
    if captured {
        let cap = dev.capture().unwrap();
        dev.launch(&launch).unwrap();
        cap.end_graph().unwrap().replay().unwrap();
    } else {
        dev.launch(&launch).unwrap();
    }
    let after: Vec<Vec<u8>> = ids.iter().map(|&id| dev.read_bytes(id).unwrap()).collect();
    for id in ids {
        dev.free(id).unwrap();
    }
    after.into_iter().zip(before).collect()
}

/// Catalogue ops over views at odd offsets (and 16-bit views of both
/// parities), eager and captured: every byte outside each view keeps its
/// value, inputs are not changed at all, and the view agrees with the CPU
/// backend within the op's tolerance. Mutations: a kernel ignoring `p.o<k>`,
/// fill_16/copy_16 writing a whole edge word → red.
pub fn catalogue_ops_on_odd_views_keep_neighbours(dev: &Device) {
    let cpu = Device::new(Box::new(seam_cpu::CpuBackend::new(0)));
    let cases = [
        Case {
            op: OpKind::Add,
            dtype: DType::F32,
            dims: (37, 0, 0),
            offsets: &[1, 3, 5],
        },
        Case {
            op: OpKind::Add,
            dtype: DType::U32,
            dims: (70, 0, 0),
            offsets: &[0, 7, 1],
        },
        Case {
            op: OpKind::Mul,
            dtype: DType::I32,
            dims: (5, 0, 0),
            offsets: &[2, 1, 9],
        },
        Case {
            op: OpKind::ScaleAdd,
            dtype: DType::F32,
            dims: (65, 0, 0),
            offsets: &[3, 1],
        },
        Case {
            op: OpKind::Silu,
            dtype: DType::F32,
            dims: (9, 0, 0),
            offsets: &[1, 4],
        },
        Case {
            op: OpKind::Fill,
            dtype: DType::F32,
            dims: (11, 0, 0),
            offsets: &[3],
        },
        Case {
            op: OpKind::Fill,
            dtype: DType::F16,
            dims: (1, 0, 0),
            offsets: &[1],
        },
        Case {
            op: OpKind::Fill,
            dtype: DType::F16,
            dims: (10, 0, 0),
            offsets: &[1],
        },
        Case {
            op: OpKind::Fill,
            dtype: DType::Bf16,
            dims: (129, 0, 0),
            offsets: &[2],
        },
        Case {
            op: OpKind::Copy,
            dtype: DType::F16,
            dims: (1, 0, 0),
            offsets: &[0, 1],
        },
        Case {
            op: OpKind::Copy,
            dtype: DType::F16,
            dims: (37, 0, 0),
            offsets: &[1, 3],
        },
        Case {
            op: OpKind::Copy,
            dtype: DType::F16,
            dims: (36, 0, 0),
            offsets: &[2, 5],
        },
        Case {
            op: OpKind::Copy,
            dtype: DType::Bf16,
            dims: (130, 0, 0),
            offsets: &[3, 0],
        },
        Case {
            op: OpKind::Copy,
            dtype: DType::U32,
            dims: (17, 0, 0),
            offsets: &[5, 3],
        },
        Case {
            op: OpKind::RmsNorm,
            dtype: DType::F16,
            dims: (3, 7, 0),
            offsets: &[1, 3, 5],
        },
        Case {
            op: OpKind::RmsNorm,
            dtype: DType::F32,
            dims: (2, 300, 0),
            offsets: &[7, 1, 3],
        },
        Case {
            op: OpKind::Softmax,
            dtype: DType::F32,
            dims: (3, 5, 0),
            offsets: &[1, 2],
        },
        Case {
            op: OpKind::Gemm,
            dtype: DType::F16,
            dims: (3, 5, 7),
            offsets: &[1, 3, 5],
        },
        Case {
            op: OpKind::Gemm,
            dtype: DType::Bf16,
            dims: (17, 18, 3),
            offsets: &[0, 1, 2],
        },
        Case {
            op: OpKind::Gemm,
            dtype: DType::F32,
            dims: (4, 4, 4),
            offsets: &[3, 1, 2],
        },
        // gemm's GEMV mapping (m <= 8) past its unrolled loop (k >= 64) with
        // a partial last strip of 16 columns, and the tile mapping just
        // above it (m = 9); rms_norm and softmax rows past their unrolled
        // loops (cols >= 1024).
        Case {
            op: OpKind::Gemm,
            dtype: DType::F32,
            dims: (1, 70, 200),
            offsets: &[1, 3, 5],
        },
        Case {
            op: OpKind::Gemm,
            dtype: DType::F16,
            dims: (2, 33, 131),
            offsets: &[1, 2, 3],
        },
        Case {
            op: OpKind::Gemm,
            dtype: DType::Bf16,
            dims: (8, 40, 77),
            offsets: &[3, 1, 0],
        },
        Case {
            op: OpKind::Gemm,
            dtype: DType::F32,
            dims: (9, 20, 70),
            offsets: &[0, 0, 1],
        },
        Case {
            op: OpKind::RmsNorm,
            dtype: DType::F32,
            dims: (1, 2500, 0),
            offsets: &[1, 3, 5],
        },
        Case {
            op: OpKind::RmsNorm,
            dtype: DType::F16,
            dims: (2, 1100, 0),
            offsets: &[1, 2, 3],
        },
        Case {
            op: OpKind::Softmax,
            dtype: DType::F32,
            dims: (2, 1500, 0),
            offsets: &[1, 2],
        },
    ];
    let mut failures = Vec::new();
    for c in &cases {
        let want = run_case(&cpu, c, false);
        for captured in [false, true] {
            let got = run_case(dev, c, captured);
            let at = format!(
                "{}/{} {:?} offsets {:?} captured={captured}",
                c.op, c.dtype, c.dims, c.offsets
            );
            for (k, (b, ((after, before), (cpu_after, _)))) in
                c.op.signature()
                    .iter()
                    .zip(got.iter().zip(&want))
                    .enumerate()
            {
                let d = dtype_of(b, c.dtype);
                let (lo, hi) = (
                    c.offsets[k] * d.size(),
                    (c.offsets[k] + lens(c.op, c.dims)[k]) * d.size(),
                );
                let kept = if b.access == Access::Read {
                    after == before
                } else {
                    after[..lo] == before[..lo] && after[hi..] == before[hi..]
                };
                if !kept {
                    let i = after
                        .iter()
                        .zip(before)
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    failures.push(format!(
                        "{at}: binding {k}: byte {i} changed outside the written view"
                    ));
                    continue;
                }
                if b.access == Access::Read {
                    continue;
                }
                let (g, w) = (&after[lo..hi], &cpu_after[lo..hi]);
                if let Err(e) = seam::testing::compare(d, c.op.tolerance(c.dtype), g, w) {
                    failures.push(format!("{at}: binding {k}, against the CPU: {e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn twice_extents(p: &Params, out: &mut [u64]) {
    out[0] = p.d0 as u64;
    out[1] = 2 * p.d0 as u64;
}

fn twice_grid(p: &Params) -> [u32; 3] {
    [p.d0.div_ceil(64).max(1), 1, 2]
}

/// `y[z * n + i] = x[i] * (z + 1) + s0` over a 3-D grid (z = 0, 1): a user
/// kernel reading a scalar, both view offsets and `workgroup_id.z`.
pub static TWICE: KernelDef = KernelDef {
    name: "seam_test_twice",
    bindings: &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("y", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::S0],
    extents: twice_extents,
    workgroup_size: [64, 1, 1],
    grid: twice_grid,
    check: None,
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: Some(
        "@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn seam_test_twice(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x;
    if (i < p.d0) {
        y[p.o1 + g.z * p.d0 + i] = x[p.o0 + i] * f32(g.z + 1u) + p.s0;
    }
}
",
    ),
    cuda: None,
    cpu: None,
    samples: &[],
};

/// A user kernel registers (compiled by the backend), runs eager and
/// captured over views at odd offsets, and leaves the bytes around its
/// output view alone; registering it again is a no-op.
pub fn user_kernel_runs_over_views(dev: &Device) {
    dev.register_kernel(&TWICE).unwrap();
    dev.register_kernel(&TWICE).unwrap();
    let n = 100usize;
    let x: Vec<f32> = (0..n + 4).map(|i| i as f32 * 0.5 - 7.0).collect();
    let xs = dev.alloc(DType::F32, n + 4).unwrap();
    dev.write(xs, 0, &x).unwrap();
    for captured in [false, true] {
        let ys = dev.alloc(DType::F32, 2 * n + 5).unwrap();
        let fill = vec![-1.0f32; 2 * n + 5];
        dev.write(ys, 0, &fill).unwrap();
        let p = Params::dims(n as u32, 0, 0).with_scalars(0.25, 0.0);
        let launch = OpCall::new(
            OpKind::User((&TWICE).into()),
            &[xs.view(3, n), ys.view(1, 2 * n)],
            p,
        );
        if captured {
            let cap = dev.capture().unwrap();
            dev.launch(&launch).unwrap();
            cap.end_graph().unwrap().replay().unwrap();
        } else {
            dev.launch(&launch).unwrap();
        }
        let y: Vec<f32> = dev.read(ys).unwrap();
        assert_eq!(y[0], -1.0, "captured={captured}: element before the view");
        for z in 0..2 {
            for i in 0..n {
                let want = x[3 + i] * (z + 1) as f32 + 0.25;
                assert_eq!(y[1 + z * n + i], want, "captured={captured}: z={z} i={i}");
            }
        }
        assert!(
            y[1 + 2 * n..].iter().all(|&v| v == -1.0),
            "captured={captured}: after the view"
        );
        dev.free(ys).unwrap();
    }
    dev.free(xs).unwrap();
}

pub fn one_extents(_: &Params, out: &mut [u64]) {
    out.fill(1);
}

pub fn one_grid(_: &Params) -> [u32; 3] {
    [1, 1, 1]
}

/// Line 4 of its source lacks an operand.
pub static BROKEN: KernelDef = KernelDef {
    name: "seam_test_broken",
    bindings: &[Binding::fixed("y", Access::Write, DType::U32)],
    reads: &[],
    extents: one_extents,
    workgroup_size: [1, 1, 1],
    grid: one_grid,
    check: None,
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: Some(
        "@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1)
fn seam_test_broken() {
    y[p.o0] = 1u +;
}
",
    ),
    cuda: None,
    cpu: None,
    samples: &[],
};

/// CUDA C only: nothing a WGSL backend can compile.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static SOURCELESS: KernelDef = KernelDef {
    name: "seam_test_sourceless",
    wgsl: None,
    // SAFETY: writes element 0 of `y`, within any extent of at least one.
    cuda: Some(unsafe {
        seam::kernel::CudaSource::trusted(
            "extern \"C\" __global__ void seam_test_sourceless(unsigned* y, Params p) { y[0] = 1u; }\n",
        )
    }),
    ..BROKEN
};

/// A WGSL syntax error is `KernelCompile` naming the kernel, with a log
/// that names the line of the kernel's own source and quotes it; a kernel
/// without WGSL is `KernelSourceMissing`. Neither is registered.
pub fn kernel_errors_name_the_kernel_and_line(dev: &Device) {
    let e = dev.register_kernel(&BROKEN).unwrap_err();
    match &e.kind {
        ErrorKind::KernelCompile { kernel, log, .. } => {
            assert_eq!(*kernel, "seam_test_broken");
            assert!(log.contains("seam_test_broken.wgsl:4:"), "{log}");
            assert!(log.contains("y[p.o0] = 1u +;"), "{log}");
        }
        other => panic!("{e}: {other:?}"),
    }
    let e = dev.register_kernel(&SOURCELESS).unwrap_err();
    assert!(
        matches!(
            e.kind,
            ErrorKind::KernelSourceMissing {
                kernel: "seam_test_sourceless",
                ..
            }
        ),
        "{e}"
    );
    // Not registered: a launch is refused by core.
    let y = dev.alloc(DType::U32, 1).unwrap();
    let launch = OpCall::new(OpKind::User((&BROKEN).into()), &[y.into()], Params::ZERO);
    assert!(dev.launch(&launch).is_err());
    dev.free(y).unwrap();
}
