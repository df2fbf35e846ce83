//! The example's check: a device's captured-and-updated decode steps
//! against the same steps run eagerly on the CPU reference device.

use crate::step::{input, kv_initial, randoms, Config, DecodeStep, Weights};
use seam::kernel::KernelDef;
use seam::ops::Access;
use seam::testing::Rng;
use seam::{ops, DType, Device, ErrorKind, Params, Tolerance, View};
use seam_kernels::user::{ADD_RMS_NORM, ROPE};

/// How closely a step's output and the KV cache must agree with the CPU
/// reference. Each slot of the cache is `rope(hn · wk)` (a 300-term f32
/// GEMM, allowed 1e-4, after the fused norm); the output chains two more
/// GEMMs, a softmax and silu on top. The bound is the GEMM's, ten times:
/// loose enough for any order of summation, tight enough that a wrong slot,
/// position or stale launch (differences of order 1e-1) fails.
pub const STEP_TOLERANCE: Tolerance = Tolerance::Relative {
    rel: 1e-3,
    abs: 1e-3,
};

/// The weights' seed.
pub const SEED: u64 = 0x5EA4;

/// What one device did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every step's output and the whole KV cache agreed.
    Agreed {
        steps: u32,
        /// Largest `|device - reference|` over every output and the cache.
        max_diff: f32,
        /// Launches changed in the graph by updates.
        updates: usize,
        /// Largest difference of the kernels' own samples ([`check_kernels`]).
        kernel_diff: f32,
    },
    /// The device cannot run the example (no kernel source, a kernel that
    /// does not compile there, an op or capture it lacks): why.
    Skipped(String),
    /// It ran and disagreed, or failed: what and where.
    Failed(String),
}

impl Outcome {
    /// One line, e.g. `8 steps, max |diff| 3.0e-7, 49 launches updated,
    /// kernel samples max |diff| 0.0e0, ok`.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Agreed {
                steps,
                max_diff,
                updates,
                kernel_diff,
            } => format!(
                "{steps} steps, max |diff| {max_diff:.1e}, {updates} launches updated, \
                 kernel samples max |diff| {kernel_diff:.1e}, ok"
            ),
            Outcome::Skipped(why) => format!("skipped: {}", first_line(why)),
            Outcome::Failed(why) => format!("FAILED: {}", first_line(why)),
        }
    }
}

/// The first line of a message (a compiler log follows some), marked when
/// more was cut.
fn first_line(s: &str) -> String {
    match s.trim_end().split_once('\n') {
        Some((first, _)) => format!("{first} […]"),
        None => s.trim_end().to_string(),
    }
}

/// Whether an error means the device cannot run the example rather than
/// that it ran it wrong.
fn cannot_run(kind: &ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::KernelSourceMissing { .. }
            | ErrorKind::KernelCompile { .. }
            | ErrorKind::OpUnsupported { .. }
            | ErrorKind::CaptureUnsupported { .. }
            | ErrorKind::UpdateUnsupported
            | ErrorKind::Unavailable { .. }
    )
}

fn classify(e: seam::Error) -> Outcome {
    // Registration is where a backend says it has no way to run a kernel
    // (no source, or one that does not compile there; not every backend
    // reports the latter as `KernelCompile` yet).
    if e.call == "register_kernel" || cannot_run(&e.kind) {
        Outcome::Skipped(e.to_string())
    } else {
        Outcome::Failed(e.to_string())
    }
}

/// `got` within `tol` of `want`, element by element: the largest
/// difference, or the first element outside the bound.
pub fn compare(got: &[f32], want: &[f32], tol: Tolerance, what: &str) -> Result<f32, String> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} elements, the reference has {}",
            got.len(),
            want.len()
        ));
    }
    let bytes = |v: &[f32]| bytemuck::cast_slice::<f32, u8>(v).to_vec();
    seam::testing::compare(DType::F32, tol, &bytes(got), &bytes(want))
        .map_err(|e| format!("{what}: {e}"))?;
    Ok(got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f32::max))
}

/// The KV cache after `steps` steps agrees with the reference's in the
/// written slots (within [`STEP_TOLERANCE`]) and holds [`kv_initial`] bit
/// for bit everywhere else.
pub fn check_kv(cfg: &Config, steps: u32, got: &[f32], want: &[f32]) -> Result<f32, String> {
    let written = (steps * cfg.dim()) as usize;
    let initial = kv_initial(cfg);
    if got.len() != initial.len() || want.len() != initial.len() {
        return Err(format!(
            "KV cache: {} elements (reference {}), expected {}",
            got.len(),
            want.len(),
            initial.len()
        ));
    }
    compare(
        &want[written..],
        &initial[written..],
        Tolerance::BitExact,
        "reference KV cache past the written slots",
    )?;
    compare(
        &got[written..],
        &initial[written..],
        Tolerance::BitExact,
        "KV cache past the written slots",
    )?;
    compare(
        &got[..written],
        &want[..written],
        STEP_TOLERANCE,
        "KV cache",
    )
}

/// Elements either side of each view in [`check_kernels`] (odd, so views
/// start off every alignment).
const GUARD: usize = 3;

/// Bytes of one launch's bindings: values in [-2, 2) seeded by `seed`,
/// [`GUARD`] elements either side of each view.
fn sample_inputs(def: &KernelDef, p: &Params, seed: u64) -> Vec<Vec<f32>> {
    let mut need = vec![0u64; def.bindings.len()];
    (def.extents)(p, &mut need);
    let mut rng = Rng::new(seed);
    need.iter()
        .map(|&n| randoms(&mut rng, n as usize + 2 * GUARD, 2.0))
        .collect()
}

/// One launch of `def` with `p` on `dev` over views at offset [`GUARD`]:
/// every buffer afterwards.
fn run_sample(
    dev: &Device,
    def: &'static KernelDef,
    p: Params,
    inputs: &[Vec<f32>],
) -> seam::Result<Vec<Vec<f32>>> {
    dev.register_kernel(def)?;
    let mut bufs = Vec::new();
    for data in inputs {
        bufs.push(dev.buffer_from(data)?);
    }
    let views: Vec<View> = bufs
        .iter()
        .map(|b| b.id().view(GUARD, b.len() - 2 * GUARD))
        .collect();
    dev.launch(&ops::user(def, &views, p))?;
    bufs.iter().map(|b| b.read()).collect()
}

/// Every sample of both kernels, on `dev` and on the CPU reference, over
/// views at an odd offset: written views within the kernel's tolerance,
/// read views and everything outside the views bit for bit. The largest
/// difference, or what disagreed.
pub fn check_kernels(dev: &Device) -> Result<f32, Outcome> {
    let reference = Device::new(Box::new(seam_backends::CpuBackend::new(0)));
    let mut max = 0f32;
    for def in [&ROPE, &ADD_RMS_NORM] {
        for (i, p) in def.samples.iter().enumerate() {
            let inputs = sample_inputs(def, p, 17 + i as u64);
            let want = run_sample(&reference, def, *p, &inputs)
                .map_err(|e| Outcome::Failed(format!("CPU reference: {e}")))?;
            let got = run_sample(dev, def, *p, &inputs).map_err(classify)?;
            for (k, b) in def.bindings.iter().enumerate() {
                let (g, w) = (&got[k], &want[k]);
                let what = format!("{} sample {i} `{}`", def.name, b.name);
                let inner = GUARD..w.len() - GUARD;
                let tol = match b.access {
                    Access::Write => def.tolerance,
                    Access::Read => Tolerance::BitExact,
                };
                let d = compare(&g[inner.clone()], &w[inner.clone()], tol, &what)
                    .map_err(Outcome::Failed)?;
                let outside = |v: &[f32]| [v[..GUARD].to_vec(), v[inner.end..].to_vec()].concat();
                compare(
                    &outside(g),
                    &outside(w),
                    Tolerance::BitExact,
                    &format!("{what} outside its view"),
                )
                .map_err(Outcome::Failed)?;
                max = max.max(d);
            }
        }
    }
    Ok(max)
}

/// Check both kernels' samples on `dev` ([`check_kernels`]), then run
/// `steps` decode steps on `dev` (captured once, then updated and
/// replayed each step) and the same steps eagerly on a fresh CPU reference
/// device, and compare every step's output, the residual and the whole KV
/// cache.
pub fn check_device(dev: &Device, cfg: Config, steps: u32) -> Outcome {
    let kernel_diff = match check_kernels(dev) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let weights = Weights::new(&cfg, SEED);
    let reference = Device::new(Box::new(seam_backends::CpuBackend::new(0)));
    let mut want = match DecodeStep::new(&reference, cfg, &weights) {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(format!("CPU reference: {e}")),
    };
    let mut got = match DecodeStep::new(dev, cfg, &weights) {
        Ok(s) => s,
        Err(e) => return classify(e),
    };
    let mut max_diff = 0f32;
    for step in 0..steps {
        let x = input(&cfg, step);
        let w = match want.eager(&x) {
            Ok(w) => w,
            Err(e) => return Outcome::Failed(format!("CPU reference, step {step}: {e}")),
        };
        let g = match got.replay(&x) {
            Ok(g) => g,
            Err(e) => return classify(e),
        };
        match compare(&g, &w, STEP_TOLERANCE, &format!("step {step} output")) {
            Ok(d) => max_diff = max_diff.max(d),
            Err(e) => return Outcome::Failed(e),
        }
    }
    let tails = (|| -> seam::Result<_> {
        Ok((
            got.kv_cache()?,
            want.kv_cache()?,
            got.residual()?,
            want.residual()?,
        ))
    })();
    let (kv_got, kv_want, r_got, r_want) = match tails {
        Ok(t) => t,
        Err(e) => return classify(e),
    };
    let kv = check_kv(&cfg, steps, &kv_got, &kv_want);
    // The residual is one add per element per step: exact everywhere.
    let resid = compare(&r_got, &r_want, Tolerance::BitExact, "residual");
    match (kv, resid) {
        (Ok(d), Ok(_)) => Outcome::Agreed {
            steps,
            max_diff: max_diff.max(d),
            updates: got.updates(),
            kernel_diff,
        },
        (Err(e), _) | (_, Err(e)) => Outcome::Failed(e),
    }
}
