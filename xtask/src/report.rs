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
