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
    // kernel of the run (seam's six).
    let kernels = seam_conformance::kernels().len();
    assert_eq!(kernels, 6, "seam's user kernels");
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

/// `--trace` in the default mode: each device's trials run in a child
/// process (the real binary), whose trace logs come back to the parent.
/// User kernels' launches are in them, so the logs must read back with
/// launches of ops no catalogue knows.
#[test]
fn an_isolated_run_brings_every_childs_trace_back() {
    use seam_conformance::isolate::{self, Limits};
    let p = plan(&Filter {
        backends: vec!["cpu".into()],
        cases: vec!["c1_".into()],
        devices: vec![],
    });
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_seam-conformance"));
    let cases = vec!["c1_".to_string()];
    let limits = Limits {
        device: std::time::Duration::from_secs(300),
        trial: std::time::Duration::from_secs(300),
        teardown: std::time::Duration::from_secs(60),
    };
    let (report, traces) = isolate::run_isolated_with(
        &p,
        &limits,
        |device, only, files| {
            isolate::child_command(&exe, device, only.unwrap_or(&cases), true, files)
        },
        |_, _| {},
    );
    assert!(report.summary.ok(), "{:#?}", report.failed_lines());
    let kernels = seam_conformance::kernels().len();
    assert_eq!(traces.len(), 5 + kernels, "one trace log per C1 trial");
    let user_launches = traces
        .iter()
        .flat_map(|t| &t.events)
        .filter(|e| {
            matches!(&e.kind, seam::EventKind::Launch { op, .. }
                if seam_conformance::kernels().iter().any(|k| k.name == op.as_ref()))
        })
        .count();
    assert!(user_launches > 0, "the user kernels' launches are traced");
    let trace = seam::chrome_trace(&traces);
    let replays = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"].as_str().unwrap().starts_with("replay"))
        .count();
    assert_eq!(replays, 3 + 3 + 1 + 2 + 2 + 3 * kernels);
}
