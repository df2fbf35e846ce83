//! The cross-device matrix: rows are cases (`case[::mode]`), columns are
//! devices (device id + machine + driver), cells are verdicts; plus, per
//! row, whether the devices' output digests agree (see [`crate::merge`] for
//! when digests are compared at all). Rendered as Markdown and as one
//! self-contained HTML page (inline CSS, no scripts, no external assets).
//!
//! Built by [`crate::merge::merge`] from one report (the binary's
//! `--markdown`) or from many (`cargo xtask report merge`).

use crate::junit::escape;
use crate::report::Verdict;
use std::fmt::Write;

/// One device of one report.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// `cuda:0`
    pub device: String,
    pub backend: String,
    /// The device's own name (`NVIDIA H200`).
    pub name: String,
    /// Driver / runtime version as the backend reported it.
    pub driver: String,
    /// [`crate::report::Machine::display_name`] of the report's machine.
    pub machine: String,
    pub capture: String,
    /// How the device updates a captured graph (C13), `—` where the report
    /// predates it.
    pub update: String,
    /// How the device times the launches inside a replay (C10), `—`
    /// where the report predates it.
    pub node_timing: String,
    /// How the device runs conditional bodies (C14), `—` where the report
    /// predates it.
    pub conditional: String,
    /// Index into [`Matrix::sources`].
    pub source: usize,
}

impl Column {
    /// `cuda:0 @ h200-box`: unique within a matrix.
    pub fn key(&self) -> String {
        format!("{} @ {}", self.device, self.machine)
    }
}

/// One trial's result in the matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub verdict: Verdict,
    pub digest: Option<String>,
    pub duration_ms: f64,
}

/// Whether a row's output digests agree across devices.
#[derive(Clone, Debug, PartialEq)]
pub enum Digests {
    /// No device recorded a digest for this case.
    None,
    /// A bit-exact case: every device that passed recorded the same digest.
    Agree { devices: usize },
    /// A bit-exact case whose devices produced different bytes: flagged.
    /// Each group is a digest and the columns that produced it.
    Disagree { groups: Vec<(String, Vec<usize>)> },
    /// Not comparable by digest (see [`crate::merge::comparison`]): `why`
    /// says which bound applies; `distinct` is how many different digests
    /// were seen (more than one is expected and not an alarm), over how many
    /// devices.
    NotCompared {
        distinct: usize,
        devices: usize,
        why: String,
    },
}

impl Digests {
    /// The short text of the matrix's "outputs" column.
    pub fn text(&self, columns: &[Column]) -> String {
        match self {
            Digests::None => "—".into(),
            Digests::Agree { devices: 1 } | Digests::NotCompared { devices: 1, .. } => {
                "1 device (nothing to compare)".into()
            }
            Digests::Agree { devices } => format!("agree ({devices} devices)"),
            Digests::Disagree { groups } => {
                let parts: Vec<String> = groups
                    .iter()
                    .enumerate()
                    .map(|(i, (d, cols))| {
                        let who: Vec<String> = cols.iter().map(|&c| columns[c].key()).collect();
                        format!("{} = {d} on {}", group_letter(i), who.join(", "))
                    })
                    .collect();
                format!("DIGESTS DISAGREE: {}", parts.join("; "))
            }
            Digests::NotCompared { distinct, why, .. } if *distinct > 1 => {
                format!("digest differs ({why}; not compared)")
            }
            Digests::NotCompared { why, .. } => format!("digests identical ({why}; not compared)"),
        }
    }

    /// The digest group a column belongs to in a disagreeing row.
    pub fn group_of(&self, column: usize) -> Option<char> {
        match self {
            Digests::Disagree { groups } => groups
                .iter()
                .position(|(_, cols)| cols.contains(&column))
                .map(group_letter),
            _ => None,
        }
    }
}

fn group_letter(i: usize) -> char {
    (b'A' + (i % 26) as u8) as char
}

/// One case (in one mode) across every column.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `case` or `case::mode`.
    pub label: String,
    pub rule: String,
    /// One per [`Matrix::columns`]; `None` where that device has no such trial.
    pub cells: Vec<Option<Cell>>,
    pub digests: Digests,
}

/// What one merged report said about its run.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    /// Where the report came from (a path, or "this run").
    pub label: String,
    pub machine: String,
    pub os: String,
    pub cpu: String,
    pub git_commit: String,
    pub started_at: String,
    pub format_version: u32,
    pub summary: String,
    /// Devices whose trials fall short of the report's own plan
    /// ([`crate::report::Report::uncovered`]); shown with the summary.
    pub uncovered: Vec<String>,
}

impl Source {
    /// The summary as the matrix shows it: with any device whose trials
    /// fall short of its plan flagged after it.
    pub fn summary_line(&self) -> String {
        let s = self.summary.trim_start_matches("conformance: ").to_string();
        if self.uncovered.is_empty() {
            s
        } else {
            format!("{s} — INCOMPLETE: {}", self.uncovered.join("; "))
        }
    }
}

/// A backend a machine has no device for.
#[derive(Clone, Debug, PartialEq)]
pub struct Missing {
    pub machine: String,
    pub backend: String,
    pub reason: String,
}

/// The merged matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub seam_version: String,
    pub sources: Vec<Source>,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    pub missing: Vec<Missing>,
}

impl Matrix {
    pub fn row(&self, label: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.label == label)
    }

    pub fn column(&self, key: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.key() == key)
    }

    /// The cell of `row` (label) in `column` (key).
    pub fn cell(&self, row: &str, column: &str) -> Option<&Cell> {
        let c = self.column(column)?;
        self.row(row)?.cells[c].as_ref()
    }

    /// Rows whose bit-exact outputs differ across devices.
    pub fn disagreements(&self) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| matches!(r.digests, Digests::Disagree { .. }))
            .collect()
    }

    /// Trials that fail a run, as (column key, row label, first line of detail).
    pub fn failures(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for r in &self.rows {
            for (c, cell) in r.cells.iter().enumerate() {
                if let Some(cell) = cell {
                    if fails(&cell.verdict) {
                        out.push((
                            self.columns[c].key(),
                            r.label.clone(),
                            detail(&cell.verdict).lines().next().unwrap_or("").into(),
                        ));
                    }
                }
            }
        }
        out
    }
}

/// Verdicts that make a run fail (as `Summary::ok` counts them).
fn fails(v: &Verdict) -> bool {
    v.fails_run()
}

/// A verdict's message, empty for a pass.
pub fn detail(v: &Verdict) -> &str {
    v.detail()
}

/// Text of a cell: the verdict's short code, and the digest group in a
/// disagreeing row.
fn cell_text(row: &Row, c: usize) -> String {
    match &row.cells[c] {
        None => "—".into(),
        Some(cell) => match row.digests.group_of(c) {
            Some(g) => format!("{} ({g})", cell.verdict.short()),
            None => cell.verdict.short().into(),
        },
    }
}

/// Markdown table cells cannot hold `|` or line breaks.
fn md(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

const LEGEND: &str = "ok = passed · FAIL = failed · ign = ignored (unsupported or not run; reason in the report) · xfail = expected failure · XPASS = expected failure that passed · TIMEOUT / CRASH / HANG = the trial or its process did not finish · — = no such trial on that device";

/// The digest-comparison rule, in one paragraph (docs/reports.md has the long form).
pub const DIGEST_RULE: &str = "Output digests (FNV-1a of a case's output bytes) are compared across devices only for cases whose every digested output comes from a bit-exact op (`OpKind::tolerance` = BitExact: fill, copy, add, mul, scale_add). Cases that digest tolerance-bounded outputs (silu, rms_norm, softmax, gemm, half types) are checked against the CPU reference within their bound by the case itself; their digests may legitimately differ and are shown, not compared.";

/// The matrix as Markdown.
pub fn markdown(m: &Matrix) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# seam conformance matrix (seam {})\n", m.seam_version);
    s.push_str(
        "| report | machine | OS | commit | started | summary |\n|---|---|---|---|---|---|\n",
    );
    for src in &m.sources {
        let _ = writeln!(
            s,
            "| {} | {} | {} | `{}` | {} | {} |",
            md(&src.label),
            md(&src.machine),
            md(&src.os),
            md(short_commit(&src.git_commit)),
            md(&src.started_at),
            md(&src.summary_line())
        );
    }
    s.push_str("\n## Devices\n\n| column | device | backend | driver / runtime | capture | graph update | node timing | conditional bodies |\n|---|---|---|---|---|---|---|---|\n");
    for c in &m.columns {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            md(&c.key()),
            md(&c.name),
            md(&c.backend),
            md(&c.driver),
            md(&c.capture),
            md(&c.update),
            md(&c.node_timing),
            md(&c.conditional)
        );
    }
    s.push_str("\n## Matrix\n\n| case | rule |");
    for c in &m.columns {
        let _ = write!(s, " {}<br>{} |", md(&c.device), md(&c.machine));
    }
    s.push_str(" outputs |\n|---|---|");
    for _ in &m.columns {
        s.push_str("---|");
    }
    s.push_str("---|\n");
    for r in &m.rows {
        let _ = write!(s, "| `{}` | {} |", md(&r.label), md(&r.rule));
        for c in 0..m.columns.len() {
            let _ = write!(s, " {} |", cell_text(r, c));
        }
        let flag = if matches!(r.digests, Digests::Disagree { .. }) {
            "⚠ "
        } else {
            ""
        };
        let _ = writeln!(s, " {flag}{} |", md(&r.digests.text(&m.columns)));
    }
    let _ = writeln!(s, "\n{LEGEND}\n\n{DIGEST_RULE}");
    let disagree = m.disagreements();
    if !disagree.is_empty() {
        let _ = writeln!(s, "\n## ⚠ Outputs disagree ({} cases)\n", disagree.len());
        for r in disagree {
            let _ = writeln!(s, "- `{}`: {}", r.label, md(&r.digests.text(&m.columns)));
        }
    }
    let failures = m.failures();
    if !failures.is_empty() {
        let _ = writeln!(s, "\n## Failures ({})\n", failures.len());
        for (col, row, msg) in failures {
            let _ = writeln!(s, "- `{row}` on {}: {}", md(&col), md(&msg));
        }
    }
    if !m.missing.is_empty() {
        s.push_str(
            "\n## Backends without a device\n\n| machine | backend | reason |\n|---|---|---|\n",
        );
        for x in &m.missing {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                md(&x.machine),
                md(&x.backend),
                md(&x.reason)
            );
        }
    }
    s
}

fn short_commit(c: &str) -> &str {
    if c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()) {
        &c[..12]
    } else {
        c
    }
}

/// CSS class of a verdict's cell.
fn class(v: &Verdict) -> &'static str {
    match v {
        Verdict::Passed => "ok",
        Verdict::Ignored(_) => "ign",
        Verdict::ExpectedFailure(_) => "xfail",
        Verdict::Failed(_) | Verdict::UnexpectedPass(_) => "fail",
        Verdict::TimedOut(_) | Verdict::Crashed(_) | Verdict::TeardownHang(_) => "err",
    }
}

const CSS: &str = "
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:24px 0 8px}
table{border-collapse:collapse;margin:8px 0}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
table.matrix th.dev{text-align:center;font-size:12px;min-width:110px}
table.matrix td.v{text-align:center;font-weight:600;font-family:ui-monospace,Menlo,Consolas,monospace}
td.case{font-family:ui-monospace,Menlo,Consolas,monospace;white-space:nowrap}
td.ok{background:#dafbe1;color:#116329}td.fail{background:#ffebe9;color:#a40e26}
td.err{background:#f5e0ff;color:#6e2a96}td.ign{background:#f6f8fa;color:#6e7781}
td.xfail{background:#fff8c5;color:#7d4e00}td.none{color:#8c959f;text-align:center}
tr.disagree td.outputs{background:#ffebe9;color:#a40e26;font-weight:700}
tr.disagree td.case{border-left:4px solid #cf222e}
td.outputs{font-size:12px;color:#57606a;max-width:380px}
.small{font-size:12px;color:#57606a}code{font-family:ui-monospace,Menlo,Consolas,monospace}
";

/// The matrix as one self-contained HTML page.
pub fn html(m: &Matrix) -> String {
    let mut s = String::new();
    let title = format!("seam conformance matrix (seam {})", m.seam_version);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    s.push_str("<table class=\"sources\"><tr><th>report</th><th>machine</th><th>OS</th><th>CPU</th><th>commit</th><th>started</th><th>summary</th></tr>\n");
    for src in &m.sources {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(&src.label),
            escape(&src.machine),
            escape(&src.os),
            escape(&src.cpu),
            escape(short_commit(&src.git_commit)),
            escape(&src.started_at),
            escape(&src.summary_line())
        );
    }
    s.push_str(
        "</table>\n<h2>Matrix</h2>\n<table class=\"matrix\">\n<tr><th>case</th><th>rule</th>",
    );
    for c in &m.columns {
        let _ = write!(
            s,
            "<th class=\"dev\" title=\"{}\">{}<br><span class=\"small\">{}</span><br><span class=\"small\">{}</span><br><span class=\"small\">{}</span></th>",
            escape(&format!(
                "{} — capture {}, graph update {}, node timing {}, conditional bodies {}",
                c.name, c.capture, c.update, c.node_timing, c.conditional
            )),
            escape(&c.device),
            escape(&c.machine),
            escape(&c.name),
            escape(&c.driver)
        );
    }
    s.push_str("<th>outputs</th></tr>\n");
    for r in &m.rows {
        let disagree = matches!(r.digests, Digests::Disagree { .. });
        let _ = write!(
            s,
            "<tr{}><td class=\"case\">{}</td><td>{}</td>",
            if disagree { " class=\"disagree\"" } else { "" },
            escape(&r.label),
            escape(&r.rule)
        );
        for (c, cell) in r.cells.iter().enumerate() {
            match cell {
                None => s.push_str("<td class=\"none\">—</td>"),
                Some(cell) => {
                    let mut tip = detail(&cell.verdict).to_string();
                    if let Some(d) = &cell.digest {
                        tip = format!("{tip}{}digest {d}", if tip.is_empty() { "" } else { "\n" });
                    }
                    let _ = write!(
                        s,
                        "<td class=\"v {}\" title=\"{}\">{}</td>",
                        class(&cell.verdict),
                        escape(&format!("{:.1} ms\n{tip}", cell.duration_ms)),
                        escape(&cell_text(r, c))
                    );
                }
            }
        }
        let _ = writeln!(
            s,
            "<td class=\"outputs\">{}</td></tr>",
            escape(&r.digests.text(&m.columns))
        );
    }
    let _ = writeln!(
        s,
        "</table>\n<p class=\"small\">{}</p>\n<p class=\"small\">{}</p>",
        escape(LEGEND),
        escape(DIGEST_RULE)
    );
    let failures = m.failures();
    if !failures.is_empty() {
        let _ = writeln!(s, "<h2>Failures ({})</h2>\n<ul>", failures.len());
        for (col, row, msg) in failures {
            let _ = writeln!(
                s,
                "<li><code>{}</code> on {}: {}</li>",
                escape(&row),
                escape(&col),
                escape(&msg)
            );
        }
        s.push_str("</ul>\n");
    }
    if !m.missing.is_empty() {
        s.push_str("<h2>Backends without a device</h2>\n<table><tr><th>machine</th><th>backend</th><th>reason</th></tr>\n");
        for x in &m.missing {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&x.machine),
                escape(&x.backend),
                escape(&x.reason)
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str("</body>\n</html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Digests that are not compared still say whether they differ: one
    /// digest over two devices is "identical", two are "differs".
    #[test]
    fn not_compared_digests_say_whether_they_differ() {
        let not_compared = |distinct| Digests::NotCompared {
            distinct,
            devices: 2,
            why: "silu/f32 is bounded".into(),
        };
        assert_eq!(
            not_compared(1).text(&[]),
            "digests identical (silu/f32 is bounded; not compared)"
        );
        assert_eq!(
            not_compared(2).text(&[]),
            "digest differs (silu/f32 is bounded; not compared)"
        );
        assert_eq!(
            Digests::NotCompared {
                distinct: 1,
                devices: 1,
                why: String::new()
            }
            .text(&[]),
            "1 device (nothing to compare)"
        );
    }
}
