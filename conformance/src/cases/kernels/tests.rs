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

/// Every per-kernel case passes over both kernels on cpu:0.
#[test]
fn kernel_cases_pass_on_the_cpu_reference() {
    let plan = runner::plan(&Filter {
        backends: vec!["cpu".into()],
        cases: vec!["c1_replay_reexecutes".into()],
        ..Default::default()
    });
    let base = plan.trials.first().expect("a cpu trial").clone();
    let mut failed = Vec::new();
    for def in [&SCALE, &ACCUMULATE] {
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
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
