//! The cases over two small kernels of their own on the CPU reference
//! (seam's own user kernels run in the suite itself).
use super::*;
use crate::report::Verdict;
use crate::runner::{self, Filter, Trial};
use seam::ops::Binding;

fn extents_n(p: &Params, out: &mut [u64]) {
    out.fill(p.d0 as u64);
}
fn grid_n(p: &Params) -> [u32; 3] {
    [p.d0.div_ceil(64), 1, 1]
}
fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
fn put(b: &mut [u8], v: &[f32]) {
    for (c, x) in b.chunks_exact_mut(4).zip(v) {
        c.copy_from_slice(&x.to_le_bytes());
    }
}
/// `y = s0 * x`, in place allowed.
fn scale_cpu(p: &Params, b: &mut [Vec<u8>]) {
    let y: Vec<f32> = f32s(&b[0]).iter().map(|x| p.s0 * x).collect();
    put(&mut b[1], &y);
}
/// `r += x; out = 2 r` (r read and written).
fn accumulate_cpu(_: &Params, b: &mut [Vec<u8>]) {
    let x = f32s(&b[0]);
    let r: Vec<f32> = f32s(&b[1]).iter().zip(&x).map(|(r, x)| r + x).collect();
    let out: Vec<f32> = r.iter().map(|v| 2.0 * v).collect();
    put(&mut b[1], &r);
    put(&mut b[2], &out);
}
static SCALE: KernelDef = KernelDef {
    name: "test_scale",
    bindings: &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("y", Access::Write, DType::F32),
    ],
    reads: &[Field::D0, Field::S0],
    extents: extents_n,
    workgroup_size: [64, 1, 1],
    grid: grid_n,
    check: None,
    allows_aliasing: true,
    tolerance: Tolerance::BitExact,
    wgsl: None,
    cuda: None,
    cpu: Some(scale_cpu),
    samples: &[Params::dims(37, 0, 0).with_scalars(1.5, 0.0)],
};
static ACCUMULATE: KernelDef = KernelDef {
    name: "test_accumulate",
    bindings: &[
        Binding::fixed("x", Access::Read, DType::F32),
        Binding::fixed("r", Access::Write, DType::F32),
        Binding::fixed("out", Access::Write, DType::F32),
    ],
    reads: &[Field::D0],
    extents: extents_n,
    workgroup_size: [64, 1, 1],
    grid: grid_n,
    check: None,
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: None,
    cuda: None,
    cpu: Some(accumulate_cpu),
    samples: &[Params::dims(5, 0, 0), Params::dims(130, 0, 0)],
};

/// `y = 2 x`; the workspace is left as it came.
fn tidy_cpu(_: &Params, b: &mut [Vec<u8>]) {
    let y: Vec<f32> = f32s(&b[0]).iter().map(|x| 2.0 * x).collect();
    put(&mut b[1], &y);
}
/// `y = 2 x`, and a mark left in the workspace.
fn messy_cpu(p: &Params, b: &mut [Vec<u8>]) {
    tidy_cpu(p, b);
    put(&mut b[2], &[1.0]);
}
const WORKSPACE: &[Binding] = &[
    Binding::fixed("x", Access::Read, DType::F32),
    Binding::fixed("y", Access::Write, DType::F32),
    Binding::workspace("ws", DType::F32),
];
/// A kernel with a workspace it keeps zero.
static TIDY: KernelDef = KernelDef {
    name: "test_tidy",
    bindings: WORKSPACE,
    cpu: Some(tidy_cpu),
    allows_aliasing: false,
    ..SCALE
};
/// One that leaves its workspace dirty, its own CPU implementation too.
static MESSY: KernelDef = KernelDef {
    name: "test_messy",
    bindings: WORKSPACE,
    cpu: Some(messy_cpu),
    allows_aliasing: false,
    ..SCALE
};

/// Every per-kernel case over `def` on cpu:0: the trials that did not pass.
fn not_passed(def: &'static KernelDef) -> Vec<String> {
    let plan = runner::plan(&Filter {
        backends: vec!["cpu".into()],
        cases: vec!["c1_replay_reexecutes".into()],
        ..Default::default()
    });
    let base = plan.trials.first().expect("a cpu trial").clone();
    let mut failed = Vec::new();
    for case in crate::cases::KERNEL_CASES {
        for &mode in case.modes {
            let t = Trial {
                name: format!("cpu:0::{}::{}::{mode}", case.name, def.name),
                case,
                mode,
                kernel: Some(def),
                ..base.clone()
            };
            let v = runner::run(&t).verdict;
            if !matches!(v, Verdict::Passed) {
                failed.push(format!("{}: {v:?}", t.name));
            }
        }
    }
    failed
}

/// Every per-kernel case passes over both kernels on cpu:0, and over one
/// with a workspace it keeps zero (which only holds if the cases hand it
/// zeros: it never writes them).
#[test]
fn kernel_cases_pass_on_the_cpu_reference() {
    let failed: Vec<String> = [&SCALE, &ACCUMULATE, &TIDY]
        .into_iter()
        .flat_map(not_passed)
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A workspace left dirty is red in both C11 cases (one launch, and the
/// chain's first link), eager and captured, though the kernel's own CPU
/// implementation leaves it dirty the same way.
#[test]
fn a_workspace_left_dirty_is_red() {
    let failed = not_passed(&MESSY);
    let c11: Vec<&String> = failed.iter().filter(|f| f.contains("c11_")).collect();
    assert_eq!(c11.len(), 4, "{failed:#?}");
    assert!(
        c11.iter()
            .all(|f| f.contains("workspace `ws` is not zero after the launch")),
        "{c11:#?}"
    );
}
