//! Runs the conformance suite on every device found, prints a device × case
//! matrix and the summary line, writes the JSON report, and exits non-zero on
//! any failure.

use clap::Parser;
use seam_conformance::report::{Report, Verdict};
use seam_conformance::runner::{self, Filter};
use seam_conformance::{isolate, junit, matrix, merge};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "seam-conformance",
    about = "Run the seam conformance suite on every device found"
)]
struct Args {
    /// Only these backends (cpu, cuda, hip, vulkan, metal, wgpu); repeatable or comma-separated.
    #[arg(long, value_delimiter = ',')]
    backend: Vec<String>,
    /// Only cases whose name contains this; repeatable or comma-separated.
    #[arg(long, value_delimiter = ',')]
    case: Vec<String>,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a JUnit XML report here (one testsuite per device).
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write the device × case matrix as Markdown here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write a Chrome trace-event JSON of every trial here (opens in ui.perfetto.dev).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// List the planned trials and exit.
    #[arg(long)]
    list: bool,
    /// Print every trial's verdict as it finishes.
    #[arg(long, short)]
    verbose: bool,
    /// Only these device ids (e.g. cuda:1); comma-separated.
    #[arg(long, value_delimiter = ',')]
    device: Vec<String>,
    /// Run every trial in this process (default: each device in its own
    /// child process with a deadline, so crashes and teardown hangs are verdicts).
    #[arg(long)]
    in_process: bool,
    /// Internal: this process is a device child of an isolated run.
    #[arg(long, hide = true)]
    child: bool,
    /// Internal: trace every trial and send its trace logs to the parent
    /// with its verdict (a device child of a traced isolated run).
    #[arg(long, hide = true)]
    trace_stream: bool,
}

fn main() -> ExitCode {
    seam_conformance::report::mark_started();
    let args = Args::parse();
    let filter = Filter {
        backends: args.backend.clone(),
        cases: args.case.clone(),
        devices: args.device.clone(),
    };
    let plan = runner::plan(&filter);
    // A filter that selects nothing, or a report that could not be
    // written, is refused before any trial runs.
    let unwritable = [&args.json, &args.junit, &args.markdown, &args.trace]
        .into_iter()
        .flatten()
        .filter_map(|p| unwritable(p));
    let outputs = [
        ("--json", &args.json),
        ("--junit", &args.junit),
        ("--markdown", &args.markdown),
        ("--trace", &args.trace),
    ];
    let problems: Vec<String> = plan
        .problems
        .iter()
        .cloned()
        .chain(unwritable)
        .chain(shared_outputs(&outputs))
        .collect();
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("seam-conformance: {p}");
        }
        return ExitCode::from(2);
    }
    if args.list {
        for t in &plan.trials {
            println!("{}", t.name);
        }
        return ExitCode::SUCCESS;
    }
    // A device child runs the device it was started for, or says why not
    // and exits 2: an empty report would make its planned trials vanish.
    if args.child {
        for id in &args.device {
            if let Some(why) = plan.unavailable(id) {
                eprintln!("seam-conformance: {why}");
                return ExitCode::from(2);
            }
        }
    }
    for d in &plan.devices {
        println!(
            "device {}: {} — driver {} — capture {:?} — subnormals {:?}",
            d.id, d.name, d.driver, d.capture_support, d.subnormals
        );
    }
    for m in &plan.missing {
        println!("missing {}: {}", m.backend, m.reason);
    }
    // A `\r` progress line only for a person at a terminal: never in a
    // device child (its stderr is a log) or with every trial printed.
    let progress_line = if args.child || args.verbose {
        false
    } else {
        std::io::stderr().is_terminal()
    };
    let trace = args.trace.is_some() || args.trace_stream;
    let (report, traces) = if args.in_process {
        let total = plan.trials.len();
        let mut done = 0;
        let opts = runner::RunOptions { trace };
        let child = args.child;
        runner::run_all_observed(
            &plan,
            opts,
            |t| {
                if child {
                    eprintln!("{}{}", isolate::START_PREFIX, t.name);
                }
            },
            |t, out| {
                done += 1;
                if args.verbose || out.verdict.fails_run() {
                    eprintln!(
                        "[{done}/{total}] {} … {}{}",
                        t.name,
                        out.verdict.short(),
                        detail(&out.verdict)
                    );
                } else if progress_line {
                    eprint!("\r[{done}/{total}] {:<70}", t.name);
                    let _ = std::io::stderr().flush();
                }
            },
        )
    } else {
        let n = plan.devices.len();
        let mut k = 0;
        let mut last = String::new();
        isolate::run_isolated(&plan, &args.case, trace, |device, run| {
            // A device whose child crashed gets a second child (resumed): same k.
            if last != device {
                k += 1;
                last = device.to_string();
            }
            let how = match &run.end {
                isolate::ChildEnd::Exited(code) => format!("exited {code}"),
                isolate::ChildEnd::Signaled(why) => why.clone(),
                isolate::ChildEnd::TeardownHang => "TEARDOWN HANG".into(),
                isolate::ChildEnd::TimedOut => "TIMED OUT".into(),
            };
            let summary = run
                .log
                .lines()
                .find(|l| seam_conformance::report::Summary::is_line(l))
                .unwrap_or("no summary");
            eprintln!(
                "[device {k}/{n}] {device}: {how} in {:.1} s — {summary}",
                run.elapsed.as_secs_f64()
            );
            if args.verbose {
                eprintln!("{}", run.log);
            }
        })
    };
    if progress_line && args.in_process {
        eprintln!();
    }
    print_matrix(&report);
    for line in report.failed_lines() {
        println!("{line}");
    }
    println!("{}", report.summary.line());
    if let Some(path) = &args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => {
                if let Err(e) = std::fs::write(path, s) {
                    eprintln!("error: writing {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
                println!("report written to {}", path.display());
            }
            Err(e) => {
                eprintln!("error: serialising the report: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(path) = &args.junit {
        if let Err(e) = std::fs::write(path, junit::junit(&report)) {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("JUnit XML written to {}", path.display());
    }
    if let Some(path) = &args.markdown {
        let text = merge::merge(&[("this run".into(), report.clone())])
            .map(|m| matrix::markdown(&m))
            .map_err(|e| e.to_string())
            .and_then(|md| std::fs::write(path, md).map_err(|e| e.to_string()));
        if let Err(e) = text {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("Markdown matrix written to {}", path.display());
    }
    if let Some(path) = &args.trace {
        let trace = seam::chrome_trace(&traces).to_string();
        if let Err(e) = std::fs::write(path, trace) {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        let spans: usize = traces.iter().map(|t| t.device_spans.len()).sum();
        let events: usize = traces.iter().map(|t| t.events.len()).sum();
        let nodes: usize = traces.iter().map(|t| t.node_spans.len()).sum();
        println!(
            "trace written to {} ({events} host events, {spans} device spans, {nodes} node spans)",
            path.display()
        );
        let table = seam::trace::node_table(&traces, 5, 5);
        if !table.is_empty() {
            println!("the nodes that took the most device time (5 graphs, 5 nodes each):\n{table}");
        }
    }
    if report.summary.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Why a report cannot be written at `path`, checked before the run: its
/// folder does not exist, or the path is a folder.
fn unwritable(path: &std::path::Path) -> Option<String> {
    if path.is_dir() {
        return Some(format!("{}: is a folder, not a file", path.display()));
    }
    let folder = match path.parent() {
        Some(f) if !f.as_os_str().is_empty() => f,
        _ => std::path::Path::new("."),
    };
    if folder.is_dir() {
        None
    } else {
        Some(format!(
            "{}: no folder {} to write it in",
            path.display(),
            folder.display()
        ))
    }
}

/// Outputs given the same file: each would overwrite the one before.
fn shared_outputs(outputs: &[(&str, &Option<PathBuf>)]) -> Vec<String> {
    let path = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
    let given: Vec<(&str, PathBuf)> = outputs
        .iter()
        .filter_map(|(flag, p)| p.as_ref().map(|p| (*flag, path(p))))
        .collect();
    let mut out = Vec::new();
    for (i, (a, pa)) in given.iter().enumerate() {
        if let Some((b, _)) = given[..i].iter().find(|(_, pb)| pb == pa) {
            out.push(format!(
                "{b} and {a} both name {}: each output needs a file of its own",
                pa.display()
            ));
        }
    }
    out
}

fn detail(v: &Verdict) -> String {
    match v {
        Verdict::Passed => String::new(),
        Verdict::Failed(m)
        | Verdict::Crashed(m)
        | Verdict::TeardownHang(m)
        | Verdict::Ignored(m)
        | Verdict::ExpectedFailure(m)
        | Verdict::UnexpectedPass(m)
        | Verdict::TimedOut(m) => format!(": {m}"),
    }
}

/// Rows are cases (with mode), columns are devices.
fn print_matrix(report: &Report) {
    let mut devices: Vec<&str> = Vec::new();
    // Rows in contract order (the order trials were planned in).
    let mut order: Vec<(String, String)> = Vec::new();
    let mut rows: BTreeMap<(String, String), BTreeMap<&str, &'static str>> = BTreeMap::new();
    for t in &report.trials {
        if !devices.contains(&t.device.as_str()) {
            devices.push(&t.device);
        }
        let mode = if t.name.ends_with("::eager") || t.name.ends_with("::captured") {
            t.mode.clone()
        } else {
            String::new()
        };
        let key = (t.case.clone(), mode);
        if !order.contains(&key) {
            order.push(key.clone());
        }
        rows.entry(key)
            .or_default()
            .insert(&t.device, t.verdict.short());
    }
    let width = rows
        .keys()
        .map(|(c, m)| c.len() + m.len() + 3)
        .max()
        .unwrap_or(10);
    print!("{:width$}", "case");
    for d in &devices {
        print!(" {:>12}", d);
    }
    println!();
    for key in &order {
        let ((case, mode), cells) = (key, &rows[key]);
        let label = if mode.is_empty() {
            case.clone()
        } else {
            format!("{case} [{mode}]")
        };
        print!("{label:width$}");
        for d in &devices {
            print!(" {:>12}", cells.get(d).copied().unwrap_or("-"));
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::{shared_outputs, unwritable};
    use std::path::{Path, PathBuf};

    /// Two outputs naming one file (also by another spelling of it) are
    /// refused, naming both flags; distinct files and absent outputs pass.
    #[test]
    fn outputs_need_files_of_their_own() {
        let (a, b) = (Some(PathBuf::from("r.json")), Some(PathBuf::from("r.md")));
        let none = None;
        assert!(
            shared_outputs(&[("--json", &a), ("--markdown", &b), ("--trace", &none)]).is_empty()
        );
        let same = Some(PathBuf::from("./r.json"));
        let why = shared_outputs(&[("--json", &a), ("--markdown", &b), ("--junit", &same)]);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].starts_with("--json and --junit both name"),
            "{why:?}"
        );
    }

    /// A report path whose folder does not exist, or that is a folder, is
    /// refused; a file in an existing folder (or the current one) is not.
    #[test]
    fn a_report_needs_an_existing_folder() {
        let tmp = std::env::temp_dir();
        assert_eq!(unwritable(&tmp.join("seam-report.json")), None);
        assert_eq!(unwritable(Path::new("report.json")), None);
        let why = unwritable(&tmp.join("no-such-seam-folder/r.json")).expect("refused");
        assert!(
            why.contains("no folder") && why.contains("no-such-seam-folder"),
            "{why}"
        );
        let why = unwritable(&tmp).expect("refused");
        assert!(why.contains("is a folder"), "{why}");
    }
}
