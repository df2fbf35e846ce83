//! What every stream backend's own tests check where its device is missing
//! (CI has neither an NVIDIA nor an AMD GPU), written once.

use seam::{Backend, ErrorKind};

/// Without a device, `device_count` says why (`expected` recognises the
/// reason: what is missing, what to install) and `open(0)` is an error with
/// that same reason, never a panic or a device. With a device, nothing to check.
pub fn check_missing_device(
    device_count: impl Fn() -> Result<usize, String>,
    open: impl Fn(usize) -> Result<Box<dyn Backend>, ErrorKind>,
    expected: impl Fn(&str) -> bool,
) {
    let Err(reason) = device_count() else {
        return;
    };
    assert!(expected(&reason), "unhelpful reason: {reason}");
    let opened = open(0).map(|b| b.info().id());
    let e = opened.expect_err("opened a device that device_count says is missing");
    assert!(
        e.to_string().contains(&reason),
        "open(0) says {e}; device_count says {reason}"
    );
}
