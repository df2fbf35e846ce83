//! xtask finds the checkout at run time: the binary built in one checkout,
//! started in another (as a target dir shared by two worktrees makes cargo
//! do), works on the second one.

use std::path::Path;
use std::process::Command;

fn skeleton(dir: &Path) {
    std::fs::create_dir_all(dir.join("xtask")).unwrap();
    std::fs::create_dir_all(dir.join("core/src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[workspace]\nmembers = [\"xtask\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("xtask/Cargo.toml"),
        "[package]\nname = \"xtask\"\n",
    )
    .unwrap();
}

/// Mutation: `root()` back to `env!("CARGO_MANIFEST_DIR")`'s parent → red
/// (it prints this checkout instead of the second one).
#[test]
fn the_built_binary_works_on_the_checkout_it_is_started_in() {
    let second = std::env::temp_dir().join(format!("seam-second-checkout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&second);
    skeleton(&second);
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("root")
        .current_dir(second.join("core/src"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        Path::new(printed.trim()).canonicalize().unwrap(),
        second.canonicalize().unwrap()
    );
    std::fs::remove_dir_all(&second).unwrap();
}

/// Outside any checkout it says so instead of working on another one.
#[test]
fn outside_a_checkout_it_refuses() {
    let nowhere = std::env::temp_dir().join(format!("seam-no-checkout-{}", std::process::id()));
    std::fs::create_dir_all(&nowhere).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("root")
        .current_dir(&nowhere)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not inside a seam checkout"), "{err}");
    std::fs::remove_dir_all(&nowhere).unwrap();
}
