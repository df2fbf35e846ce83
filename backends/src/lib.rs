//! Every seam backend, one cargo feature each, and device discovery.
//!
//! A backend is one crate `seam-<name>` exporting one
//! `pub const REGISTRATION: seam::Registration`, and one feature line in this
//! crate's Cargo.toml (`<feature> = ["dep:seam-<name>"]`); `build.rs` turns
//! the feature lines into [`KNOWN`] and [`registrations`].
//!
//! `discover()` lists every device of every compiled-in backend, and for a
//! backend whose driver or hardware is missing, why: the conformance harness
//! turns that into ignored trials that say what to install.

use seam::{Backend, Device, ErrorKind, Registration};
use std::sync::Arc;

pub use seam_cpu::CpuBackend;

include!(concat!(env!("OUT_DIR"), "/known.rs"));

/// Opens a fresh backend for one device.
pub type Opener = Box<dyn Fn() -> Result<Box<dyn Backend>, ErrorKind> + Send + Sync>;

/// A device that was found: its id, its backend's registration and a way to open it.
pub struct DeviceSlot {
    /// `<backend>:<index>`.
    pub id: String,
    pub backend: &'static str,
    pub registration: &'static Registration,
    pub open: Opener,
}

impl DeviceSlot {
    /// Device `index` of a registered backend.
    pub fn new(registration: &'static Registration, index: usize) -> DeviceSlot {
        let open = registration.open;
        DeviceSlot {
            id: format!("{}:{index}", registration.name),
            backend: registration.name,
            registration,
            open: Box::new(move || open(index)),
        }
    }

    /// Open the device behind the shared semantics. An error names the
    /// backend, the device and the call (`open`), like every other seam error.
    pub fn device(&self) -> seam::Result<Device> {
        (self.open)().map(Device::new).map_err(|kind| seam::Error {
            site: Arc::new(seam::Site {
                backend: self.backend.to_string(),
                device: self.id.clone(),
                device_name: "not opened".into(),
            }),
            call: "open",
            kind,
        })
    }
}

/// A known backend that has no usable device here, and why.
#[derive(Clone, Debug)]
pub struct Missing {
    pub backend: &'static str,
    /// What was found and what to install, e.g. "no Vulkan loader: install mesa-vulkan-drivers".
    pub reason: String,
}

/// What discovery found.
#[derive(Default)]
pub struct Discovery {
    pub devices: Vec<DeviceSlot>,
    pub missing: Vec<Missing>,
}

/// Find every device of every compiled-in backend. Never panics: a backend
/// whose driver is missing is reported in `missing`, and so is every known
/// backend this build left out (with the feature that compiles it in).
pub fn discover() -> Discovery {
    let mut d = discover_in(&registrations());
    for &(backend, feature) in KNOWN {
        if !compiled_in(backend) {
            d.missing.push(Missing {
                backend,
                reason: format!("not compiled in: build with `--features seam-backends/{feature}`"),
            });
        }
    }
    d
}

/// Find every device of these backends (the in-tree ones, or any other
/// crate's registration: `seam_conformance::harness` certifies backends
/// that live outside seam this way).
pub fn discover_in(registrations: &[&'static Registration]) -> Discovery {
    let mut d = Discovery::default();
    for &reg in registrations {
        match (reg.device_count)() {
            Ok(0) => d.missing.push(Missing {
                backend: reg.name,
                reason: "driver found, no device".into(),
            }),
            Ok(n) => d.devices.extend((0..n).map(|i| DeviceSlot::new(reg, i))),
            Err(reason) => d.missing.push(Missing {
                backend: reg.name,
                reason,
            }),
        }
    }
    d
}

/// The registration of a compiled-in backend.
pub fn registration(backend: &str) -> Option<&'static Registration> {
    registrations().into_iter().find(|r| r.name == backend)
}

/// Whether this build includes the backend.
pub fn compiled_in(backend: &str) -> bool {
    registration(backend).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every backend is in the `portable` set the other crates turn on,
    /// except HIP, which links libamdhip64 at build time (docs/decisions.md
    /// D9); the set names only known backends. A backend added without its
    /// name in `portable` → red.
    #[test]
    fn every_backend_but_hip_is_portable() {
        let left_out: Vec<&str> = KNOWN[1..]
            .iter()
            .filter(|(_, f)| !PORTABLE.contains(f))
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(left_out, ["hip"], "backends outside `portable`");
        for f in PORTABLE {
            assert!(
                KNOWN.iter().any(|(_, k)| k == f),
                "`portable` names {f}, which is no backend's feature"
            );
        }
    }

    /// Each compiled-in registration is the one its feature line names, and
    /// says so: name = crate suffix, feature = the feature. Mutation: a
    /// backend's REGISTRATION with another name or feature → red.
    #[test]
    fn registrations_match_their_feature_lines() {
        let regs = registrations();
        assert_eq!(regs[0].name, "cpu");
        assert_eq!(regs[0].feature, None);
        for reg in &regs[1..] {
            let known = KNOWN.iter().find(|(n, _)| *n == reg.name);
            assert_eq!(
                known.map(|(_, f)| *f),
                reg.feature,
                "{}: its registration and its feature line disagree",
                reg.name
            );
        }
        let names: std::collections::BTreeSet<_> = regs.iter().map(|r| r.name).collect();
        assert_eq!(names.len(), regs.len(), "two registrations share a name");
    }

    /// A backend is compiled in exactly when its registration is there, and
    /// the registration found by name carries that name. Mutations:
    /// `compiled_in` always true or false, `registration` never found or
    /// found by another name → red.
    #[test]
    fn a_backend_is_compiled_in_when_registered() {
        assert!(compiled_in("cpu"));
        assert_eq!(registration("cpu").map(|r| r.name), Some("cpu"));
        for reg in registrations() {
            assert_eq!(registration(reg.name).map(|r| r.name), Some(reg.name));
        }
        assert!(!compiled_in("no such backend"));
        assert!(registration("no such backend").is_none());
    }

    /// A backend left out of the build is missing with the feature to add;
    /// one compiled in is never said to be left out. Mutation: drop the
    /// not-compiled-in loop in `discover` → red (in a build without every
    /// feature, as `cargo test -p seam-backends` is); report every backend
    /// as left out → red.
    #[test]
    fn left_out_backends_say_which_feature_adds_them() {
        let d = discover();
        for &(backend, feature) in &KNOWN[1..] {
            if !compiled_in(backend) {
                let m = d.missing.iter().find(|m| m.backend == backend);
                let reason = m.map(|m| m.reason.as_str()).unwrap_or("");
                assert!(
                    reason.contains(&format!("--features seam-backends/{feature}")),
                    "{backend}: {reason}"
                );
            }
        }
        for m in &d.missing {
            assert!(
                !(compiled_in(m.backend) && m.reason.contains("not compiled in")),
                "{}: compiled in, said to be left out",
                m.backend
            );
        }
        assert!(d.devices.iter().any(|s| s.id == "cpu:0"));
    }
}
