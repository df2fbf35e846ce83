//! Profiling replay mode (seed 004): make the HIP runtime replay a graph
//! node by node, so a profiler records the kernels of every replay instead of
//! only the one a host sync follows.
//!
//! Each ROCm line has its own switch, read from the environment when the
//! runtime initialises. The runtime version is not known before that, so
//! with `SEAM_HIP_PROFILE_REPLAY=1` every switch is set (a runtime ignores
//! the ones it does not define; one the user already set is left alone);
//! [`switches_for`] then says which one the loaded runtime reads.
//!
//! Measured on hardware: only ROCm 7.2.0's `DEBUG_CLR_GRAPH_PACKET_CAPTURE=0`,
//! by the seed's author; none by this project. The classic path on therock
//! 10.x refuses multi-device graphs (ours are single-device, one stream).

/// Turns the mode on when set to `1`.
pub const PROFILE_ENV: &str = "SEAM_HIP_PROFILE_REPLAY";

/// One runtime switch to the per-node (non-captured) replay path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    pub var: &'static str,
    pub value: &'static str,
    /// The ROCm lines that read it.
    pub lines: &'static str,
}

pub const PACKET_CAPTURE: Switch = Switch {
    var: "DEBUG_CLR_GRAPH_PACKET_CAPTURE",
    value: "0",
    lines: "ROCm 7.1.0-7.2.3, therock 7.9-7.10",
};
pub const SEGMENT_SCHEDULING: Switch = Switch {
    var: "DEBUG_HIP_GRAPH_SEGMENT_SCHEDULING",
    value: "0",
    lines: "ROCm 7.2.4, therock 7.11-7.14",
};
pub const CLASSIC_PATH: Switch = Switch {
    var: "DEBUG_HIP_GRAPH_CLASSIC_PATH",
    value: "1",
    lines: "therock 10.x and later",
};

/// Every switch, in the order the lines appeared.
pub const ALL: [Switch; 3] = [PACKET_CAPTURE, SEGMENT_SCHEDULING, CLASSIC_PATH];

/// A ROCm / therock release. `patch` is `None` when only the HIP runtime's
/// number is known: its third field is a build number, not the ROCm patch
/// release, so it cannot tell 7.2.3 from 7.2.4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: Option<u32>,
}

impl Version {
    pub const fn new(major: u32, minor: u32, patch: Option<u32>) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.patch {
            Some(p) => write!(f, "{}.{}.{p}", self.major, self.minor),
            None => write!(f, "{}.{}", self.major, self.minor),
        }
    }
}

/// The switch(es) a runtime of `version` reads; none before 7.1, whose
/// graphs were not packet-captured (replays already run node by node).
/// Where the version does not decide (7.2 without its patch release, lines
/// the seed does not document) every candidate is returned.
pub fn switches_for(v: Version) -> Vec<Switch> {
    match (v.major, v.minor, v.patch) {
        (0..=6, _, _) | (7, 0, _) => vec![],
        (7, 1, _) | (7, 2, Some(0..=3)) | (7, 9 | 10, _) => vec![PACKET_CAPTURE],
        (7, 2, None) => vec![PACKET_CAPTURE, SEGMENT_SCHEDULING],
        (7, 2, Some(_)) | (7, 11..=14, _) => vec![SEGMENT_SCHEDULING],
        (10.., _, _) => vec![CLASSIC_PATH],
        _ => ALL.to_vec(),
    }
}

/// `hipRuntimeGetVersion`'s number (major·10⁷ + minor·10⁵ + build) as a
/// version without a patch release, and the build number.
pub fn decode_runtime_version(v: i32) -> (Version, u32) {
    let v = v.max(0) as u32;
    (
        Version::new(v / 10_000_000, (v / 100_000) % 100, None),
        v % 100_000,
    )
}

/// A ROCm install's release from its `.info/version` text (`7.2.4-123`).
pub fn parse_release(text: &str) -> Option<Version> {
    let core = text.trim().split(['-', '+', ' ']).next()?;
    let mut it = core.split('.').map(|p| p.parse::<u32>().ok());
    Some(Version::new(it.next()??, it.next()??, it.next().flatten()))
}

/// Whether `SEAM_HIP_PROFILE_REPLAY` asks for the mode.
pub fn requested() -> bool {
    requested_by(std::env::var(PROFILE_ENV).ok().as_deref())
}

pub fn requested_by(value: Option<&str>) -> bool {
    matches!(value.map(str::trim), Some("1" | "true" | "on" | "yes"))
}

/// The variables to set before the runtime initialises: every switch whose
/// variable `is_set` does not already report (the user's value wins).
pub fn to_set(is_set: impl Fn(&str) -> bool) -> Vec<Switch> {
    ALL.into_iter().filter(|s| !is_set(s.var)).collect()
}

/// Set them, if the mode is requested. Must run before the first HIP call
/// of the process (the backend calls it before probing the runtime, once).
pub fn apply_before_runtime_init() -> Vec<Switch> {
    if !requested() {
        return Vec::new();
    }
    let set = to_set(|var| std::env::var_os(var).is_some());
    for s in &set {
        // Runs once, before the HIP runtime (and any thread of ours that
        // reads the environment) starts.
        std::env::set_var(s.var, s.value);
    }
    set
}

/// What the driver string says about the mode for the loaded runtime.
pub fn describe(version: Version) -> String {
    let names = |s: &[Switch]| {
        s.iter()
            .map(|s| format!("{}={}", s.var, s.value))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    match switches_for(version).as_slice() {
        [] => format!("profile replay: ROCm {version} replays graphs node by node already"),
        s => format!(
            "profile replay: {} read by ROCm {version} (all set; not measured by seam)",
            names(s)
        ),
    }
}
