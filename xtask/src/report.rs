//! `cargo xtask report merge <reports…> [--out DIR]`: one cross-device matrix
//! (Markdown and a self-contained HTML page) from conformance reports of
//! many machines. The merge itself lives in `seam_conformance::merge`.

use clap::Subcommand;
use seam_conformance::{matrix, merge};
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum ReportCmd {
    /// Merge JSON reports (files, or folders searched for *.json) into
    /// DIR/matrix.md and DIR/matrix.html. Fails when bit-exact outputs
    /// disagree across devices, or when the reports' seam versions differ.
    Merge {
        /// Report files, or folders holding them (searched recursively).
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Where to write matrix.md and matrix.html.
        #[arg(long, default_value = "target/conformance/merged")]
        out: PathBuf,
    },
}

pub fn run(cmd: ReportCmd) -> Result<(), String> {
    match cmd {
        ReportCmd::Merge { reports, out } => merge_reports(&reports, &out),
    }
}

/// Files named directly, plus every `*.json` under folders, in a stable order.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            collect_json(p, &mut found)?;
            if found.is_empty() {
                return Err(format!("{} holds no *.json report", p.display()));
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

fn collect_json(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            collect_json(&path, out)?;
        } else if path.extension().is_some_and(|x| x == "json") {
            out.push(path);
        }
    }
    Ok(())
}

fn merge_reports(paths: &[PathBuf], out: &Path) -> Result<(), String> {
    let files = expand(paths)?;
    let reports = files
        .iter()
        .map(|f| merge::load(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let m = merge::merge(&reports).map_err(|e| e.to_string())?;
    let out = if out.is_absolute() {
        out.to_path_buf()
    } else {
        crate::root().join(out)
    };
    std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    for (name, text) in [
        ("matrix.md", matrix::markdown(&m)),
        ("matrix.html", matrix::html(&m)),
    ] {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    println!(
        "merged {} reports: {} devices × {} cases (seam {})",
        m.sources.len(),
        m.columns.len(),
        m.rows.len(),
        m.seam_version
    );
    let failures = m.failures();
    if !failures.is_empty() {
        println!("{} failing trials (see the matrix)", failures.len());
    }
    let disagree = m.disagreements();
    if disagree.is_empty() {
        Ok(())
    } else {
        for r in &disagree {
            eprintln!("{}: {}", r.label, r.digests.text(&m.columns));
        }
        Err(format!(
            "bit-exact outputs disagree across devices in {} cases",
            disagree.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = crate::root()
            .join("target/xtask-tests")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn committed(name: &str) -> String {
        std::fs::read_to_string(crate::root().join("docs/results").join(name)).unwrap()
    }

    /// Reports in nested folders are found (and nothing else), merged into
    /// both pages, every device a column; a folder with no report, and a
    /// report whose bit-exact output disagrees with another device's, fail.
    #[test]
    fn merge_finds_reports_in_folders_writes_both_pages_and_fails_on_disagreement() {
        let dir = scratch("merge");
        let nested = dir.join("in/deeper");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(dir.join("in/cpu.json"), committed("cpu-ci.json")).unwrap();
        std::fs::write(
            nested.join("vulkan.json"),
            committed("vulkan-lavapipe.json"),
        )
        .unwrap();
        std::fs::write(nested.join("notes.txt"), "not a report").unwrap();
        let found = expand(&[dir.join("in")]).unwrap();
        assert_eq!(found, [dir.join("in/cpu.json"), nested.join("vulkan.json")]);
        let named = dir.join("in/deeper/notes.txt");
        assert_eq!(expand(std::slice::from_ref(&named)).unwrap(), [named]);
        let out = dir.join("out");
        merge_reports(&[dir.join("in")], &out).unwrap();
        let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
        let html = std::fs::read_to_string(out.join("matrix.html")).unwrap();
        for device in ["cpu:0", "vulkan:0"] {
            assert!(md.contains(device), "{device} in matrix.md");
            assert!(html.contains(device), "{device} in matrix.html");
        }
        assert!(md.contains("c1_replay_reexecutes"));

        std::fs::create_dir_all(dir.join("empty")).unwrap();
        let e = merge_reports(&[dir.join("empty")], &out).unwrap_err();
        assert!(e.contains("holds no *.json report"), "{e}");

        // vulkan:0's digest of a bit-exact case changed: it disagrees with cpu:0.
        let mut v: serde_json::Value =
            serde_json::from_str(&committed("vulkan-lavapipe.json")).unwrap();
        let trial = v["trials"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|t| t["case"] == "c1_replay_reexecutes" && t["digest"].is_string())
            .unwrap();
        trial["digest"] = "0000000000000000".into();
        std::fs::write(nested.join("vulkan.json"), v.to_string()).unwrap();
        let e = run(ReportCmd::Merge {
            reports: vec![dir.join("in")],
            out: out.clone(),
        })
        .unwrap_err();
        assert!(
            e.contains("bit-exact outputs disagree across devices in 1 cases"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
