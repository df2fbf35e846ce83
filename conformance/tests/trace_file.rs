//! `--trace` end to end: the suite's trials on the CPU device are traced,
//! written as a Chrome trace-event file, and parsed back.

use seam_conformance::runner::{plan, run_all, Filter, RunOptions};

#[test]
fn a_traced_run_writes_a_trace_that_parses_back_with_every_replay() {
    let p = plan(&Filter {
        backends: vec!["cpu".into()],
        cases: vec!["c1_".into()],
        devices: vec![],
    });
    let (report, traces) = run_all(&p, RunOptions { trace: true }, |_, _| {});
    assert!(report.summary.ok(), "{}", report.summary.line());
    // Five C1 cases, and c1_user_kernel_replay_reexecutes once per user
    // kernel of the run (the example's two).
    let kernels = seam_conformance::kernels().len();
    assert_eq!(kernels, 2, "the example's kernels");
    assert_eq!(traces.len(), 5 + kernels, "one trace log per C1 trial");

    let path = std::env::temp_dir().join(format!("seam-trace-{}.json", std::process::id()));
    std::fs::write(&path, seam::chrome_trace(&traces).to_string()).unwrap();
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).ok();

    let events = parsed["traceEvents"].as_array().expect("traceEvents");
    let replay_slices: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"].as_str().unwrap().starts_with("replay"))
        .collect();
    // C1's cases replay 3 + 3 + 1 + 2 + 2 times (the last: ten thousand
    // launches in one capture, replayed twice; cases that take their own
    // trace, like C10's, empty the harness's trace for their part), and
    // the user-kernel case 3 times per kernel.
    assert_eq!(replay_slices.len(), 3 + 3 + 1 + 2 + 2 + 3 * kernels);
    assert!(replay_slices
        .iter()
        .all(|e| e["dur"].as_f64().unwrap() >= 0.0));
    let named = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .any(|e| e["args"]["name"].as_str().unwrap().starts_with("cpu:0"));
    assert!(named, "the device has a named track");
}
