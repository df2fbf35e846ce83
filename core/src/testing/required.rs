//! Devices a run requires: `SEAM_REQUIRE_DEVICES=vulkan:0,wgpu:0`. A
//! required device that is missing, or fails to open, fails its trials
//! instead of leaving them ignored. For a machine known to have the device
//! (CI with lavapipe, a GPU runner) a lost device is then a red run, not a
//! quiet one; mutation testing needs it too, since a mutant that hides the
//! device from discovery would otherwise pass as "no device here".

/// The variable naming the required devices, comma-separated.
pub const REQUIRE_ENV: &str = "SEAM_REQUIRE_DEVICES";

/// The device ids `list` names (comma-separated, spaces around an id
/// ignored, empty entries skipped).
pub fn parse_required(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// The devices [`REQUIRE_ENV`] names in this process's environment.
pub fn required_devices() -> Vec<String> {
    parse_required(&std::env::var(REQUIRE_ENV).unwrap_or_default())
}

/// Whether [`REQUIRE_ENV`] names `device` (`backend:index`).
pub fn is_required(device: &str) -> bool {
    required_devices().iter().any(|d| d == device)
}

#[cfg(test)]
mod tests {
    use super::{is_required, parse_required, required_devices, REQUIRE_ENV};

    /// The devices required are what the environment names, each one
    /// required and nothing else (CI names cpu:0 and lavapipe's devices;
    /// where it names none, none is required). Mutations:
    /// `required_devices` → `vec![]` / another list, `is_required` →
    /// `true` / `false` → red where the variable names a device.
    #[test]
    fn required_devices_are_the_environments() {
        let named = parse_required(&std::env::var(REQUIRE_ENV).unwrap_or_default());
        assert_eq!(required_devices(), named);
        for d in &named {
            assert!(is_required(d), "{d}");
        }
        assert!(!is_required("seam-no-such-backend:99"));
        assert!(!is_required(""));
    }

    /// The same, whatever this process's environment: the test binary runs
    /// [`required_devices_are_the_environments`] again in a child process
    /// whose environment names two devices, so a run without the variable
    /// (a developer's, a mutation campaign's) still sees `required_devices`
    /// → `vec![]` and `is_required` → `false` red. (Such a run left the
    /// first mutant alive: cargo-mutants over core, 2026-12-06.)
    #[test]
    fn required_devices_are_read_from_a_named_environment() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env(REQUIRE_ENV, " cpu:0 , vulkan:0")
            .args([
                "--exact",
                "testing::required::tests::required_devices_are_the_environments",
                "--test-threads",
                "1",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "the child run: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn required_list_is_split_on_commas_and_trimmed() {
        assert_eq!(
            parse_required(" vulkan:0, wgpu:0,,cpu:0 "),
            ["vulkan:0", "wgpu:0", "cpu:0"]
        );
        assert!(parse_required("").is_empty());
        assert!(parse_required(" , ").is_empty());
    }
}
