//! The seam conformance suite.
//!
//! Every case is written once (`cases/`), as data ([`Case`]: name, contract
//! rule, tags, modes) plus a body over the seam. The harness expands cases ×
//! discovered devices × modes into trials named `<device>::<case>` (or
//! `<device>::<case>::<mode>` for cases run both eagerly and captured).
//! Backend differences are data in each backend's [`seam::Registration`]
//! (declared capture and timing, capabilities, unsupported cases and
//! expected failures, each with a reason), never a forked case.

pub mod cases;
pub mod harness;
pub mod isolate;
pub mod junit;
pub mod matrix;
pub mod merge;
pub mod report;
pub mod runner;
pub mod workloads;

use std::sync::OnceLock;

static KERNELS: OnceLock<&'static [&'static seam::KernelDef]> = OnceLock::new();

/// The user kernels this run certifies: every case of
/// [`cases::KERNEL_CASES`] runs once per kernel, as trials named
/// `<device>::<case>::<kernel>`. Set once, before planning, by whoever
/// owns `main` ([`harness::certify_with`], the `seam-conformance`
/// binary); its child processes set the same list, being the same
/// program. The first call wins; later ones are ignored.
pub fn set_kernels(kernels: &'static [&'static seam::KernelDef]) {
    let _ = KERNELS.set(kernels);
}

/// The user kernels of this run ([`set_kernels`]); by default seam's own
/// ([`seam_kernels::user::ALL`]: RoPE, a fused residual-add-rms_norm, a
/// fused decode layer, the same layer in two launches, and a launch that
/// finishes one layer and sums the next one's rows).
pub fn kernels() -> &'static [&'static seam::KernelDef] {
    KERNELS.get_or_init(|| seam_kernels::user::ALL)
}

use seam::{Device, ErrorKind};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The contract rule a case pins (docs/contract.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Rule {
    C1,
    C2,
    C3,
    C4,
    C5,
    C6,
    C7,
    C8,
    C9,
    C10,
    C11,
    C12,
    C13,
    C14,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// What a case needs from a device. The runner reads each one: a trial
/// whose device lacks it is ignored with the reason, never run to a
/// failure nor counted as a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tag {
    /// Needs `capture_support()` to be Native or Emulated.
    NeedsCapture,
    /// Needs f16/bf16 buffers ([`seam::Capability::Half`]).
    NeedsHalf,
    /// Uses more than one host thread ([`seam::Capability::Threads`]).
    Threads,
    /// Needs `conditional_support()` to be Native or Emulated (C14).
    NeedsConditional,
}

impl Tag {
    /// Why `dev`, of `registration`, cannot run a case with this tag, if
    /// it cannot (what the device reports of itself, or what its
    /// registration declares).
    pub fn unmet(self, registration: &seam::Registration, dev: &seam::Device) -> Option<String> {
        let lacks = |c: seam::Capability| {
            (!registration.has(c))
                .then(|| format!("{} does not declare {c:?} support", registration.name))
        };
        match self {
            Tag::NeedsCapture => match dev.capture_support() {
                seam::CaptureSupport::Unsupported(reason) => {
                    Some(format!("capture unsupported: {reason}"))
                }
                _ => None,
            },
            Tag::NeedsConditional => match dev.conditional_support() {
                seam::ConditionalSupport::Unsupported(reason) => {
                    Some(format!("conditional bodies unsupported: {reason}"))
                }
                _ => Tag::NeedsCapture.unmet(registration, dev),
            },
            Tag::NeedsHalf => lacks(seam::Capability::Half),
            Tag::Threads => lacks(seam::Capability::Threads),
        }
    }
}

/// How a trial runs a case's workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Ops run as they are launched.
    Eager,
    /// Ops are captured into a graph, then the graph is replayed once.
    Captured,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Eager => "eager",
            Mode::Captured => "captured",
        })
    }
}

/// A case failed: what was expected and what happened.
#[derive(Debug)]
pub struct Failure(pub String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<seam::Error> for Failure {
    fn from(e: seam::Error) -> Self {
        Failure(format!("unexpected error: {e}"))
    }
}

pub type CaseResult = Result<(), Failure>;

/// Everything a case body gets.
pub struct Ctx {
    /// A freshly opened device.
    pub dev: Device,
    /// What the device's backend declares about itself.
    pub registration: &'static seam::Registration,
    pub mode: Mode,
    /// Opens a fresh CPU reference device (the C11 oracle).
    pub reference: fn() -> Device,
    /// The user kernel a per-kernel case runs over (`cases::KERNEL_CASES`).
    pub kernel: Option<&'static seam::KernelDef>,
    digest: std::cell::RefCell<Option<u64>>,
}

impl Ctx {
    pub fn new(dev: Device, registration: &'static seam::Registration, mode: Mode) -> Self {
        Ctx {
            dev,
            registration,
            mode,
            reference: || Device::new(Box::new(seam_backends::CpuBackend::new(0))),
            kernel: None,
            digest: Default::default(),
        }
    }

    /// The user kernel of a per-kernel case.
    pub fn kernel(&self) -> Result<&'static seam::KernelDef, Failure> {
        self.kernel
            .ok_or_else(|| Failure("a per-kernel case ran without a kernel".into()))
    }

    /// Record the output the case produced, for cross-device comparison in reports.
    pub fn digest_bytes(&self, bytes: &[u8]) {
        let mut d = self.digest.borrow_mut();
        *d = Some(fnv1a(d.unwrap_or(FNV_OFFSET), bytes));
    }

    pub fn digest(&self) -> Option<u64> {
        *self.digest.borrow()
    }

    /// Run `body` in this trial's mode: eagerly, or captured into a graph
    /// that is then replayed once. Either way, returns after the work finished.
    pub fn run(&self, body: impl FnOnce(&Device) -> seam::Result<()>) -> CaseResult {
        run_in_mode(&self.dev, self.mode, body)
    }
}

/// Run `body` eagerly, or captured and replayed once, then synchronize.
pub fn run_in_mode(
    dev: &Device,
    mode: Mode,
    body: impl FnOnce(&Device) -> seam::Result<()>,
) -> CaseResult {
    match mode {
        Mode::Eager => body(dev)?,
        Mode::Captured => {
            let scope = dev.capture()?;
            body(dev)?;
            let graph = scope.end_graph()?;
            graph.replay()?;
            dev.synchronize()?;
            drop(graph);
        }
    }
    dev.synchronize()?;
    Ok(())
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a: a stable digest of output bytes for reports (not security).
pub fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One conformance case, written once for every backend.
pub struct Case {
    /// Snake-case, prefixed by its rule: `c1_replay_reexecutes`.
    pub name: &'static str,
    pub rule: Rule,
    pub tags: &'static [Tag],
    /// Modes the case runs in; one trial per mode.
    pub modes: &'static [Mode],
    pub body: fn(&Ctx) -> CaseResult,
}

/// Only eager (the case drives capture itself, or needs none).
pub const ONCE: &[Mode] = &[Mode::Eager];
/// Both eager and captured (C4: the same body must give the same result).
pub const BOTH: &[Mode] = &[Mode::Eager, Mode::Captured];

/// Fail the case unless `cond`.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::Failure(format!($($fmt)+)));
        }
    };
}

/// Fail unless `result` is an error whose kind matches `pattern`.
#[macro_export]
macro_rules! expect_err {
    ($result:expr, $pattern:pat) => {
        match $result {
            Err(e) if matches!(e.kind, $pattern) => e,
            Err(e) => {
                return Err($crate::Failure(format!(
                    "{}: expected {}, got error: {e}",
                    stringify!($result),
                    stringify!($pattern)
                )))
            }
            Ok(_) => {
                return Err($crate::Failure(format!(
                    "{}: expected {}, but it succeeded",
                    stringify!($result),
                    stringify!($pattern)
                )))
            }
        }
    };
}

/// Fail unless two values are equal.
#[macro_export]
macro_rules! check_eq {
    ($left:expr, $right:expr, $($fmt:tt)+) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err($crate::Failure(format!(
                "{}: {:?} != {:?}",
                format!($($fmt)+),
                l,
                r
            )));
        }
    }};
}

/// Map a backend error kind to a short name, for reports.
pub fn kind_name(k: &ErrorKind) -> String {
    let s = format!("{k:?}");
    s.split([' ', '{', '(']).next().unwrap_or("").to_string()
}
