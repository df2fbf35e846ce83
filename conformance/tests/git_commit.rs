//! Which commit a report names (`report::git_commit`): `SEAM_GIT_COMMIT`
//! when set and not blank, else `git rev-parse HEAD` of the checkout the
//! run is in, else "unknown". One test in its own binary: it sets the
//! environment and the working directory, which the process shares.

use seam_conformance::report::git_commit;
use std::process::Command;

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=seam", "-c", "user.email=seam@localhost"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_report_names_the_given_commit_else_the_checkouts_else_unknown() {
    let dir = std::env::temp_dir().join(format!("seam-git-commit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let repo = dir.join("repo");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "one"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    assert_eq!(head.len(), 40, "{head}");

    std::env::set_current_dir(&repo).unwrap();
    std::env::remove_var("SEAM_GIT_COMMIT");
    assert_eq!(git_commit(), head, "the checkout's HEAD");
    std::env::set_var("SEAM_GIT_COMMIT", "  ");
    assert_eq!(
        git_commit(),
        head,
        "a blank SEAM_GIT_COMMIT is not a commit"
    );
    std::env::set_var("SEAM_GIT_COMMIT", " c0ffee ");
    assert_eq!(git_commit(), "c0ffee", "the given commit, trimmed");

    // Outside any checkout (GIT_CEILING_DIRECTORIES stops git's search at
    // the temporary directory): unknown.
    std::env::remove_var("SEAM_GIT_COMMIT");
    std::env::set_var("GIT_CEILING_DIRECTORIES", &dir);
    std::env::set_current_dir(&outside).unwrap();
    assert_eq!(git_commit(), "unknown");
    std::env::remove_var("GIT_CEILING_DIRECTORIES");
    let _ = std::fs::remove_dir_all(&dir);
}
