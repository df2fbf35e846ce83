//! What a backend says about itself, once: how to find and open its devices,
//! what it declares (capture support, device timing, capabilities), and how
//! it differs from the contract (cases it cannot run, cases expected to
//! fail), each with a reason. IREE's HAL CTS works the same way: every
//! driver registers a factory plus its unsupported and expected-failure
//! lists.
//!
//! Every backend crate exports one `pub const REGISTRATION: Registration`.
//! `seam-backends` collects the compiled-in ones; the conformance runner,
//! its reports and `seam_conformance::harness` (for backends outside this
//! repository) read nothing else.

use crate::backend::{Backend, CaptureSupport};
use crate::error::ErrorKind;

/// One backend's description of itself.
///
/// ```
/// use seam::{Backend, CaptureKind, DeclaredTiming, ErrorKind, Expectation, Registration};
///
/// fn open(_index: usize) -> Result<Box<dyn Backend>, ErrorKind> {
///     Ok(Box::new(seam::testing::NullBackend::new(seam::CaptureSupport::Emulated)))
/// }
/// /// Exported by the backend's crate; `seam_conformance::harness::certify`
/// /// takes it.
/// pub const REGISTRATION: Registration =
///     Registration::new("mine", None, || Ok(1), open)
///         .with_capture(&[CaptureKind::Emulated])
///         .with_timing(DeclaredTiming::Untimed("the device has no timer"))
///         .with_unsupported(&[Expectation {
///             case: "c7_prepared_gemm_captures_and_replays",
///             reason: "no GEMM on this device",
///         }]);
/// assert_eq!(REGISTRATION.name, "mine");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    /// Backend kind, as in `DeviceInfo::backend`: `cuda`, `vulkan`, ...
    pub name: &'static str,
    /// The `seam-backends` cargo feature that compiles it in; `None` when
    /// it is always compiled in (the CPU reference) or lives outside seam.
    pub feature: Option<&'static str>,
    /// How many devices there are; `Err` says what is missing and what to
    /// install (the runner turns it into ignored trials with that reason).
    pub device_count: fn() -> Result<usize, String>,
    /// Open device `index` (`0..device_count()`), fresh.
    pub open: fn(usize) -> Result<Box<dyn Backend>, ErrorKind>,
    /// The capture support its devices may report (C9): a device that
    /// reports anything else fails `c9_report_matches_behaviour`, so a
    /// silent regression to `Unsupported` is a failure, not ignored trials.
    pub capture: &'static [CaptureKind],
    /// Whether its devices time work on the device (C10): a device that
    /// declares timing must return device spans for traced work.
    pub device_timing: DeclaredTiming,
    /// How its devices time the launches inside a replay (C10): a device
    /// that reports anything else fails `c10_node_spans_inside_replays`.
    pub node_timing: DeclaredNodeTiming,
    /// How its devices time the launches of a graph that holds conditional
    /// bodies (C14), where that differs from [`Registration::node_timing`]
    /// (CUDA: a body's launches run as often as the device decides and a
    /// node-timed graph keeps one stamp per launch, so such a graph is
    /// captured untimed); a device that returns node
    /// spans it declares unavailable, or none where it declares them,
    /// fails `c14_node_spans_follow_iterations`.
    pub body_node_timing: DeclaredNodeTiming,
    /// What its devices can do, for cases that need it (`Tag`s).
    pub capabilities: &'static [Capability],
    /// Cases it can never run: their trials are ignored with the reason.
    pub unsupported: &'static [Expectation],
    /// Cases known to fail for now: their trials must fail, and one that
    /// passes fails the run ("unexpected pass"), so stale entries go.
    pub expected_failures: &'static [Expectation],
}

/// The kind of a [`CaptureSupport`], without its reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureKind {
    /// [`CaptureSupport::Native`].
    Native,
    /// [`CaptureSupport::Emulated`].
    Emulated,
    /// [`CaptureSupport::Unsupported`].
    Unsupported,
}

impl CaptureKind {
    /// The kind of `support`.
    pub fn of(support: &CaptureSupport) -> CaptureKind {
        match support {
            CaptureSupport::Native => CaptureKind::Native,
            CaptureSupport::Emulated => CaptureKind::Emulated,
            CaptureSupport::Unsupported(_) => CaptureKind::Unsupported,
        }
    }

    /// Its name (`native`, `emulated`, `unsupported`).
    pub fn name(self) -> &'static str {
        match self {
            CaptureKind::Native => "native",
            CaptureKind::Emulated => "emulated",
            CaptureKind::Unsupported => "unsupported",
        }
    }
}

/// Device timing, as declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclaredTiming {
    /// Every device times traced replays and launches on the device.
    Timed,
    /// No device does, and why.
    Untimed(&'static str),
}

/// Node timing, as declared (the kinds of [`crate::NodeTiming`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclaredNodeTiming {
    /// One device span per launch of every traced replay of a node-timed
    /// graph.
    Native,
    /// One span per piece of consecutive launches; what a piece is.
    Coarse(&'static str),
    /// No node spans, and why.
    Unavailable(&'static str),
}

impl DeclaredNodeTiming {
    /// Whether a device reporting `reported` keeps this declaration (the
    /// kind; the reasons are the device's own words).
    pub fn matches(self, reported: &crate::NodeTiming) -> bool {
        use crate::NodeTiming as N;
        matches!(
            (self, reported),
            (DeclaredNodeTiming::Native, N::Native)
                | (DeclaredNodeTiming::Coarse(_), N::Coarse(_))
                | (DeclaredNodeTiming::Unavailable(_), N::Unavailable(_))
        )
    }

    /// Its kind in a word: `native`, `coarse`, `unavailable`.
    pub fn name(self) -> &'static str {
        match self {
            DeclaredNodeTiming::Native => "native",
            DeclaredNodeTiming::Coarse(_) => "coarse",
            DeclaredNodeTiming::Unavailable(_) => "unavailable",
        }
    }
}

/// What a case may need from a device beyond the contract's core. A case
/// that needs one a backend does not declare is ignored there, with the
/// reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// f16 and bf16 buffers and ops.
    Half,
    /// Calls from several host threads on one device.
    Threads,
}

/// A case a backend differs on, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// The exact case name (`c8_destroy_while_replay_in_flight`).
    pub case: &'static str,
    /// Why, as a reader of the report should read it.
    pub reason: &'static str,
}

impl Registration {
    /// What a backend that runs the whole contract declares: Native capture,
    /// device timing, native node timing, every capability, no unsupported
    /// cases and no expected failures. The `with_*` methods say where it
    /// differs.
    pub const fn new(
        name: &'static str,
        feature: Option<&'static str>,
        device_count: fn() -> Result<usize, String>,
        open: fn(usize) -> Result<Box<dyn Backend>, ErrorKind>,
    ) -> Registration {
        Registration {
            name,
            feature,
            device_count,
            open,
            capture: &[CaptureKind::Native],
            device_timing: DeclaredTiming::Timed,
            node_timing: DeclaredNodeTiming::Native,
            body_node_timing: DeclaredNodeTiming::Native,
            capabilities: ALL_CAPABILITIES,
            unsupported: &[],
            expected_failures: &[],
        }
    }

    /// Declare the capture kinds a device of the backend may report.
    pub const fn with_capture(self, capture: &'static [CaptureKind]) -> Registration {
        Registration { capture, ..self }
    }

    /// Declare what the backend says about timing the device.
    pub const fn with_timing(self, device_timing: DeclaredTiming) -> Registration {
        Registration {
            device_timing,
            ..self
        }
    }

    /// Declare how the backend times the nodes inside a replay (of graphs
    /// with conditional bodies too, unless
    /// [`Registration::with_body_node_timing`] says otherwise after it).
    pub const fn with_node_timing(self, node_timing: DeclaredNodeTiming) -> Registration {
        Registration {
            node_timing,
            body_node_timing: node_timing,
            ..self
        }
    }

    /// Declare how the backend times the nodes of a graph holding
    /// conditional bodies, where that differs from its other graphs.
    pub const fn with_body_node_timing(self, body_node_timing: DeclaredNodeTiming) -> Registration {
        Registration {
            body_node_timing,
            ..self
        }
    }

    /// Declare the capabilities (cases tagged with others are ignored, with
    /// the reason).
    pub const fn with_capabilities(self, capabilities: &'static [Capability]) -> Registration {
        Registration {
            capabilities,
            ..self
        }
    }

    /// Cases the backend cannot run, each with the reason (ignored trials).
    pub const fn with_unsupported(self, unsupported: &'static [Expectation]) -> Registration {
        Registration {
            unsupported,
            ..self
        }
    }

    /// Cases expected to fail for now, each with the reason; one that passes
    /// fails the run.
    pub const fn with_expected_failures(
        self,
        expected_failures: &'static [Expectation],
    ) -> Registration {
        Registration {
            expected_failures,
            ..self
        }
    }

    /// Whether a device reporting `support` keeps this declaration.
    pub fn declares_capture(&self, support: &CaptureSupport) -> bool {
        self.capture.contains(&CaptureKind::of(support))
    }

    /// The declared capture support in words: `native`, `native or emulated`.
    pub fn declared_capture(&self) -> String {
        let names: Vec<&str> = self.capture.iter().map(|k| k.name()).collect();
        names.join(" or ")
    }

    /// Whether the backend declares `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    /// The declaration that case `case` cannot run here, if any.
    pub fn unsupported_case(&self, case: &str) -> Option<&'static Expectation> {
        self.unsupported.iter().find(|e| e.case == case)
    }

    /// The declaration that case `case` is expected to fail here, if any.
    pub fn expected_failure(&self, case: &str) -> Option<&'static Expectation> {
        self.expected_failures.iter().find(|e| e.case == case)
    }
}

/// Every capability: what a backend that runs all of the contract declares.
pub const ALL_CAPABILITIES: &[Capability] = &[Capability::Half, Capability::Threads];

#[cfg(test)]
mod tests {
    use super::*;

    const REG: Registration = Registration {
        name: "null",
        feature: None,
        device_count: || Ok(0),
        open: |_| {
            Err(ErrorKind::Unavailable {
                reason: "no".into(),
            })
        },
        capture: &[CaptureKind::Native, CaptureKind::Emulated],
        device_timing: DeclaredTiming::Untimed("no clock"),
        node_timing: DeclaredNodeTiming::Unavailable("no clock"),
        body_node_timing: DeclaredNodeTiming::Unavailable("no clock"),
        capabilities: &[Capability::Half],
        unsupported: &[Expectation {
            case: "c8_x",
            reason: "because",
        }],
        expected_failures: &[],
    };

    /// Mutations: `declares_capture` → `true`, `has` → `true`,
    /// `unsupported_case` → `None` → red.
    #[test]
    fn declarations_are_read_as_written() {
        assert!(REG.declares_capture(&CaptureSupport::Emulated));
        assert!(!REG.declares_capture(&CaptureSupport::Unsupported("x".into())));
        assert_eq!(REG.declared_capture(), "native or emulated");
        assert!(REG.has(Capability::Half) && !REG.has(Capability::Threads));
        assert_eq!(REG.unsupported_case("c8_x").unwrap().reason, "because");
        assert!(REG.unsupported_case("c8_y").is_none());
        assert!(REG.expected_failure("c8_x").is_none());
    }

    /// Each `with_*` declares what it names and keeps the rest of `new`'s
    /// defaults (a builder that dropped or swapped a field would pass the
    /// struct-literal test above).
    #[test]
    fn each_builder_sets_its_declaration_and_keeps_the_rest() {
        const X: &[Expectation] = &[Expectation {
            case: "c1_x",
            reason: "why",
        }];
        let base = Registration::new("null", None, REG.device_count, REG.open);
        assert!(base.has(Capability::Half) && base.has(Capability::Threads));
        assert!(base.declares_capture(&CaptureSupport::Native));
        assert!(!base.declares_capture(&CaptureSupport::Emulated));
        assert_eq!(base.device_timing, DeclaredTiming::Timed);
        assert_eq!(base.node_timing, DeclaredNodeTiming::Native);
        let r = base
            .with_capabilities(&[Capability::Threads])
            .with_expected_failures(X)
            .with_capture(&[CaptureKind::Emulated])
            .with_timing(DeclaredTiming::Untimed("none"))
            .with_node_timing(DeclaredNodeTiming::Coarse("per piece"));
        assert_eq!(r.body_node_timing, DeclaredNodeTiming::Coarse("per piece"));
        let b = r.with_body_node_timing(DeclaredNodeTiming::Unavailable("bodies"));
        assert_eq!(
            (b.node_timing, b.body_node_timing),
            (
                DeclaredNodeTiming::Coarse("per piece"),
                DeclaredNodeTiming::Unavailable("bodies")
            )
        );
        assert_eq!(r.node_timing, DeclaredNodeTiming::Coarse("per piece"));
        assert!(!r.has(Capability::Half) && r.has(Capability::Threads));
        assert_eq!(r.expected_failure("c1_x").unwrap().reason, "why");
        assert!(r.unsupported_case("c1_x").is_none());
        assert!(r.declares_capture(&CaptureSupport::Emulated));
        assert_eq!(r.device_timing, DeclaredTiming::Untimed("none"));
        let u = base.with_unsupported(X);
        assert_eq!(u.unsupported_case("c1_x").unwrap().reason, "why");
        assert!(u.expected_failure("c1_x").is_none());
        assert!(u.has(Capability::Half));
        assert_eq!(u.node_timing, DeclaredNodeTiming::Native);
    }

    /// A declaration matches the reported kind only, and names it.
    /// Mutations: `matches` → `true` / `false`, a `name` arm swapped → red.
    #[test]
    fn node_timing_declarations_match_their_kind() {
        use crate::NodeTiming as N;
        let reported = [N::Native, N::Coarse("a".into()), N::Unavailable("b".into())];
        let declared = [
            DeclaredNodeTiming::Native,
            DeclaredNodeTiming::Coarse("x"),
            DeclaredNodeTiming::Unavailable("y"),
        ];
        for (i, d) in declared.iter().enumerate() {
            for (j, r) in reported.iter().enumerate() {
                assert_eq!(d.matches(r), i == j, "{d:?} vs {r:?}");
            }
        }
        let names: Vec<_> = declared.iter().map(|d| d.name()).collect();
        assert_eq!(names, ["native", "coarse", "unavailable"]);
    }
}
