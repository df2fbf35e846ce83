//! What `seam-conformance` prints while it runs, as a person reads it: one
//! `[k/n] <trial> … <verdict>` line per trial with `--verbose`, nothing
//! but failures without it when stderr is not a terminal (no `\r`
//! progress, no blank line), and one `[device k/n]` line per device child
//! in the isolated mode.

use std::process::Command;

fn run(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_seam-conformance"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// The lines of ours (the backends' drivers may print their own warnings).
fn ours(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with('[') || l.trim().is_empty() || l.contains('\r'))
        .collect()
}

const CASES: &str = "c1_replay_reexecutes,c1_current_exec_reexecutes,c6_nested_begin_refused";

#[test]
fn verbose_in_process_prints_one_numbered_line_per_trial() {
    let (_, stderr) = run(&[
        "--in-process",
        "--backend",
        "cpu",
        "--case",
        CASES,
        "--verbose",
    ]);
    assert_eq!(
        ours(&stderr),
        [
            "[1/3] cpu:0::c1_replay_reexecutes … ok",
            "[2/3] cpu:0::c1_current_exec_reexecutes … ok",
            "[3/3] cpu:0::c6_nested_begin_refused … ok",
        ],
        "{stderr}"
    );
}

#[test]
fn quiet_in_process_off_a_terminal_prints_no_progress() {
    let (stdout, stderr) = run(&["--in-process", "--backend", "cpu", "--case", CASES]);
    assert!(ours(&stderr).is_empty(), "{stderr:?}");
    assert!(
        stdout.contains("conformance: 3 passed, 0 failed"),
        "{stdout}"
    );
}

#[test]
fn the_isolated_mode_prints_one_line_per_device_child() {
    let (_, stderr) = run(&["--backend", "cpu", "--case", CASES]);
    let lines = ours(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("[device 1/1] cpu:0: exited 0 in "),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with("conformance: 3 passed, 0 failed, 0 ignored, 0 expected failures, 0 unexpected passes, 0 timed out, 0 crashed, 0 teardown hangs"), "{}", lines[0]);
}

/// The matrix on stdout: a column per device (a missing backend's too),
/// a row per case and mode in plan order, labels padded to the longest.
#[test]
fn the_matrix_has_a_column_per_device_and_a_row_per_case_and_mode() {
    let (stdout, _) = run(&[
        "--in-process",
        "--backend",
        "cpu,metal",
        "--case",
        "c1_replay_reexecutes,c11_views_at_odd",
    ]);
    let start = stdout.find("case ").expect("a matrix header");
    let matrix: Vec<&str> = stdout[start..].lines().take(4).collect();
    assert_eq!(
        matrix,
        [
            "case                                                      cpu:0   metal:none",
            "c1_replay_reexecutes                                         ok          ign",
            "c11_views_at_odd_offsets_agree_with_cpu [eager]              ok          ign",
            "c11_views_at_odd_offsets_agree_with_cpu [captured]           ok          ign",
        ],
        "{stdout}"
    );
}

/// The binary under a pseudo-terminal (`script`, from util-linux): all it
/// printed, stdout and stderr together, as the terminal got it.
fn on_a_terminal(args: &str) -> String {
    let exe = env!("CARGO_BIN_EXE_seam-conformance");
    let out = Command::new("script")
        .args(["-qec", &format!("{exe} {args}"), "/dev/null"])
        .output()
        .expect("`script` (util-linux) runs the binary under a pseudo-terminal");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// At a terminal, a quiet in-process run rewrites one progress line per
/// trial and ends it before the matrix; `--verbose` and a device child
/// print no such line.
#[test]
fn at_a_terminal_progress_is_one_rewritten_line() {
    let cases = "--backend cpu --case c1_replay_reexecutes,c6_nested_begin_refused";
    let quiet = on_a_terminal(&format!("--in-process {cases}"));
    let first = quiet
        .find("\r[1/2] cpu:0::c1_replay_reexecutes ")
        .expect(&quiet);
    let second = quiet
        .find("\r[2/2] cpu:0::c6_nested_begin_refused ")
        .expect(&quiet);
    let matrix = quiet.find("case ").expect(&quiet);
    assert!(first < second && second < matrix, "{quiet:?}");
    assert!(
        quiet[second..matrix].contains('\n'),
        "the progress line is ended before the matrix: {quiet:?}"
    );
    let verbose = on_a_terminal(&format!("--in-process {cases} --verbose"));
    assert!(!verbose.contains("\r[1/2]"), "{verbose:?}");
    assert!(
        verbose.contains("[1/2] cpu:0::c1_replay_reexecutes … ok"),
        "{verbose:?}"
    );
    let child = on_a_terminal(&format!("--in-process --child --device cpu:0 {cases}"));
    assert!(!child.contains("\r["), "{child:?}");
    assert!(
        child.contains("> start cpu:0::c1_replay_reexecutes"),
        "{child:?}"
    );
}

/// A verdict with a reason prints it after the verdict: an ignored trial
/// says why.
#[test]
fn a_verdict_line_carries_its_reason() {
    let (_, stderr) = run(&[
        "--in-process",
        "--backend",
        "metal",
        "--case",
        "c1_replay_reexecutes",
        "--verbose",
    ]);
    let line = ours(&stderr).join("\n");
    assert!(
        line.starts_with("[1/1] metal:none::c1_replay_reexecutes … ign: no metal device: "),
        "{stderr}"
    );
}

/// The report says where and from what it ran: the machine as this
/// process sees it, its name and commit from `SEAM_MACHINE_NAME` and
/// `SEAM_GIT_COMMIT` when set, else the hostname and `git rev-parse HEAD`.
#[test]
fn the_report_names_the_machine_and_the_commit() {
    let dir = std::env::temp_dir().join(format!("seam-machine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let report = |env: &[(&str, &str)]| -> serde_json::Value {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_seam-conformance"));
        cmd.args([
            "--in-process",
            "--backend",
            "cpu",
            "--case",
            "c6_nested_begin_refused",
        ])
        .arg("--json")
        .arg(&json)
        .env_remove("SEAM_MACHINE_NAME")
        .env_remove("SEAM_GIT_COMMIT")
        .envs(env.iter().copied())
        .current_dir(root);
        assert!(cmd.output().unwrap().status.success());
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let given = report(&[
        ("SEAM_MACHINE_NAME", "bench-box"),
        (
            "SEAM_GIT_COMMIT",
            "0123456789abcdef0123456789abcdef01234567",
        ),
    ]);
    assert_eq!(given["machine"]["label"], "bench-box");
    assert_eq!(
        given["git_commit"],
        "0123456789abcdef0123456789abcdef01234567"
    );
    let m = &given["machine"];
    assert_eq!(m["os"], std::env::consts::OS);
    assert_eq!(m["arch"], std::env::consts::ARCH);
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    assert_eq!(m["hostname"], read("/etc/hostname").trim());
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    assert_eq!(m["cpu"], cpu.as_str());

    let plain = report(&[]);
    assert_eq!(plain["machine"]["label"], read("/etc/hostname").trim());
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root)
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    if !head.is_empty() {
        assert_eq!(plain["git_commit"], head.as_str());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--trace` says what it wrote; with node timing on (`SEAM_NODE_TIMING=1`)
/// it counts the node spans and prints the nodes that took the most device
/// time, per graph; without, no such table. Mutation: the table's
/// `!table.is_empty()` inverted → red.
#[test]
fn a_trace_with_node_timing_prints_the_nodes_that_took_the_most_time() {
    let path = std::env::temp_dir().join(format!("seam-nodes-{}.json", std::process::id()));
    let trace = path.to_str().unwrap();
    let args = [
        "--backend",
        "cpu",
        "--case",
        "c1_dependent",
        "--trace",
        trace,
    ];
    let run_with = |nodes: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_seam-conformance"));
        cmd.args(args).env_remove("SEAM_NODE_TIMING");
        if nodes {
            cmd.env("SEAM_NODE_TIMING", "1");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    const TABLE: &str = "the nodes that took the most device time";
    let off = run_with(false);
    assert!(off.contains(", 0 node spans)"), "{off}");
    assert!(!off.contains(TABLE), "{off}");
    let on = run_with(true);
    std::fs::remove_file(&path).ok();
    assert!(!on.contains(", 0 node spans)"), "{on}");
    let table = &on[on.find(TABLE).expect(&on)..];
    // The case's graph (scale_add, mul, copy): a line for it, then one
    // per launch, each named by its op.
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[1].starts_with("cpu:0 cpu:0::c1_dependent_chain_replays_in_order "),
        "{table}"
    );
    for op in ["scale_add", "mul", "copy"] {
        let named = lines[2..5].iter().any(|l| l.contains(&format!(" {op} ")));
        assert!(named, "{op}: {table}");
    }
}
