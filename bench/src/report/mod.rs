//! CSV rows of every arm → a Markdown report (ratios to the raw-driver arm,
//! the targets' verdicts, break-even replay counts) and SVG plots.
//!
//! - [`parse`]: the CSV text → [`Input`] and the queries over it;
//! - [`targets`]: the targets as a data table, and their verdicts;
//! - [`markdown`](mod@markdown): the report's tables;
//! - [`svg`]: the plots.

mod decode_targets;
mod markdown;
mod parse;
mod svg;
mod targets;
#[cfg(test)]
mod tests;

pub use markdown::{break_even, markdown};
pub use parse::Input;
pub use svg::{chain_svg, decode_floor_svg, decode_svg};
pub use targets::{verdicts, Verdict};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A time in µs, to a precision that suits its size.
pub fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Write `results.md` and every plot into `dir`; returns the files written.
pub fn write_all(input: &Input, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = vec![(dir.join("results.md"), markdown(input))];
    for e in input.chain_elems() {
        files.push((
            dir.join(format!("chain_per_node_{e}.svg")),
            chain_svg(input, e)?,
        ));
    }
    let layers: BTreeSet<u64> = input
        .rows
        .iter()
        .filter(|r| r.workload == "decode")
        .map(|r| r.layers)
        .collect();
    for l in layers {
        files.push((
            dir.join(format!("decode_speedup_L{l}.svg")),
            decode_svg(input, l)?,
        ));
        if input.rows.iter().any(|r| r.mode == "copy") {
            files.push((
                dir.join(format!("decode_floor_L{l}.svg")),
                decode_floor_svg(input, l)?,
            ));
        }
    }
    let mut written = Vec::new();
    for (path, text) in files {
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
