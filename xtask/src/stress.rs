//! `cargo xtask stress-teardown`: saturated teardown stress.
//!
//! Each round starts P concurrent conformance processes while W worker
//! threads churn CPU and syscalls, and waits for every one with a deadline. A
//! process that printed its summary line ("conformance: ...") but did not
//! exit within the teardown grace is a **teardown hang**; one killed by a
//! signal is a **crash**. Every wait is bounded and every leftover is killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What `stress-teardown` was asked to do.
pub struct Options {
    pub processes: usize,
    pub rounds: usize,
    pub churn: usize,
    pub backend: String,
    /// Longest a process may run in all.
    pub deadline: Duration,
    /// Longest a process may take to exit after printing its summary.
    pub teardown: Duration,
    /// Use the binary already built.
    pub no_build: bool,
    /// Run this program instead of the conformance binary (to test the harness).
    pub bin: Option<PathBuf>,
}

/// How one process ended.
#[derive(Clone, Debug, PartialEq)]
enum Verdict {
    /// Exit 0 after printing its summary.
    Clean,
    /// Printed its summary, then did not exit within the teardown grace.
    TeardownHang,
    /// Killed by a signal.
    Crash(i32),
    /// Did not print a summary within the deadline.
    TimedOut,
    /// Exited non-zero (the suite failed) or exited without a summary.
    Failed(String),
}

struct Outcome {
    round: usize,
    index: usize,
    verdict: Verdict,
    elapsed: Duration,
    summary: Option<String>,
    stderr_tail: Vec<String>,
}

/// A running child and the threads draining its pipes.
struct Proc {
    index: usize,
    child: Child,
    started: Instant,
    /// When the summary line was seen, and the line.
    summary: Arc<Mutex<Option<(Instant, String)>>>,
    stderr_tail: Arc<Mutex<Vec<String>>>,
    /// One message per pipe reader at EOF.
    readers_done: mpsc::Receiver<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        crate::root().join(target)
    };
    target.join("release").join("seam-conformance")
}

/// W threads: spin, tiny file writes and reads, cheap syscalls, yields.
fn start_churn(
    workers: usize,
    stop: &Arc<AtomicBool>,
    ops: &Arc<AtomicU64>,
) -> Vec<JoinHandle<()>> {
    (0..workers)
        .map(|i| {
            let (stop, ops) = (stop.clone(), ops.clone());
            std::thread::spawn(move || {
                let path =
                    std::env::temp_dir().join(format!("seam-stress-{}-{i}", std::process::id()));
                let mut x = i as u64 | 1;
                let mut buf = Vec::with_capacity(64);
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..20_000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                    }
                    if let Ok(mut f) = std::fs::File::create(&path) {
                        let _ = f.write_all(&x.to_le_bytes());
                    }
                    if let Ok(mut f) = std::fs::File::open(&path) {
                        buf.clear();
                        let _ = f.read_to_end(&mut buf);
                    }
                    let _ = std::process::id();
                    let _ = std::env::current_dir();
                    std::thread::yield_now();
                    ops.fetch_add(1, Ordering::Relaxed);
                }
                let _ = std::fs::remove_file(&path);
            })
        })
        .collect()
}

fn spawn(bin: &PathBuf, backend: &str, index: usize) -> Result<Proc, String> {
    let mut cmd = Command::new(bin);
    cmd.args(["--backend", backend])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so a kill reaches the suite's own child processes.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting {}: {e}", bin.display()))?;
    let summary: Arc<Mutex<Option<(Instant, String)>>> = Arc::default();
    let stderr_tail: Arc<Mutex<Vec<String>>> = Arc::default();
    let (done_tx, readers_done) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        let (summary, done) = (summary.clone(), done_tx.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.starts_with("conformance:") {
                    *lock(&summary) = Some((Instant::now(), line));
                }
            }
            let _ = done.send(());
        });
    }
    if let Some(err) = child.stderr.take() {
        let (tail, done) = (stderr_tail.clone(), done_tx);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut t = lock(&tail);
                if t.len() == 8 {
                    t.remove(0);
                }
                t.push(line);
            }
            let _ = done.send(());
        });
    }
    Ok(Proc {
        index,
        child,
        started: Instant::now(),
        summary,
        stderr_tail,
        readers_done,
    })
}

/// SIGKILL the child's whole process group (the suite and its own children).
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
}

fn classify(status: ExitStatus, summary: bool) -> Verdict {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return Verdict::Crash(sig);
        }
    }
    match (status.success(), summary) {
        (true, true) => Verdict::Clean,
        (true, false) => Verdict::Failed("exited 0 without a summary line".into()),
        (false, _) => Verdict::Failed(format!("{status}")),
    }
}

/// Poll every process until it exits or runs out of time; kill what is left.
fn wait_all(procs: Vec<Proc>, round: usize, opts: &Options) -> Vec<Outcome> {
    let mut pending: Vec<Proc> = procs;
    let mut done = Vec::new();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for mut p in pending {
            let now = Instant::now();
            let seen = lock(&p.summary).clone();
            let verdict = match p.child.try_wait() {
                Ok(Some(status)) => Some(classify(status, seen.is_some())),
                Ok(None) => match &seen {
                    Some((at, _)) if now.duration_since(*at) > opts.teardown => {
                        Some(Verdict::TeardownHang)
                    }
                    None if now.duration_since(p.started) > opts.deadline => {
                        Some(Verdict::TimedOut)
                    }
                    _ => None,
                },
                Err(e) => Some(Verdict::Failed(format!("waiting: {e}"))),
            };
            match verdict {
                None => still.push(p),
                Some(verdict) => {
                    // Also reaps anything the suite left behind in its group.
                    kill_group(&mut p.child);
                    // Bounded: the child has exited or was just killed.
                    let _ = p.child.wait();
                    // Pipes close once the group is gone; never wait long for them.
                    let grace = Instant::now() + Duration::from_secs(5);
                    for _ in 0..2 {
                        let left = grace.saturating_duration_since(Instant::now());
                        let _ = p.readers_done.recv_timeout(left);
                    }
                    // The summary may have arrived while the child was exiting.
                    let summary = lock(&p.summary).clone().map(|(_, l)| l);
                    let verdict = match verdict {
                        Verdict::Failed(m)
                            if summary.is_some() && m.contains("without a summary") =>
                        {
                            Verdict::Clean
                        }
                        v => v,
                    };
                    done.push(Outcome {
                        round,
                        index: p.index,
                        verdict,
                        elapsed: p.started.elapsed(),
                        summary,
                        stderr_tail: lock(&p.stderr_tail).clone(),
                    });
                }
            }
        }
        pending = still;
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    done
}

pub fn run(opts: &Options) -> Result<(), String> {
    if opts.processes == 0 || opts.rounds == 0 {
        return Err("--processes and --rounds must be at least 1".into());
    }
    if !opts.no_build && opts.bin.is_none() {
        crate::run(
            &crate::cargo(),
            &["build", "--release", "-p", "seam-conformance"],
            &[],
        )?;
    }
    let bin = opts.bin.clone().unwrap_or_else(binary);
    if !bin.exists() {
        return Err(format!("{} does not exist: build it first", bin.display()));
    }
    eprintln!(
        "stress-teardown: {} processes x {} rounds, {} churn workers, backend {}, deadline {} s, teardown grace {} s",
        opts.processes,
        opts.rounds,
        opts.churn,
        opts.backend,
        opts.deadline.as_secs(),
        opts.teardown.as_secs()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let churn_ops = Arc::new(AtomicU64::new(0));
    let workers = start_churn(opts.churn, &stop, &churn_ops);
    let start = Instant::now();
    let mut outcomes = Vec::new();
    let mut spawn_error = None;
    for round in 0..opts.rounds {
        let mut procs = Vec::new();
        for index in 0..opts.processes {
            match spawn(&bin, &opts.backend, index) {
                Ok(p) => procs.push(p),
                Err(e) => {
                    spawn_error = Some(e);
                    break;
                }
            }
        }
        let results = wait_all(procs, round, opts);
        let bad = results
            .iter()
            .filter(|o| o.verdict != Verdict::Clean)
            .count();
        eprintln!(
            "round {round}: {}/{} clean ({:.1} s)",
            results.len() - bad,
            results.len(),
            results
                .iter()
                .map(|o| o.elapsed.as_secs_f64())
                .fold(0.0, f64::max)
        );
        outcomes.extend(results);
        if spawn_error.is_some() {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    report(
        opts,
        &outcomes,
        start.elapsed(),
        churn_ops.load(Ordering::Relaxed),
    );
    if let Some(e) = spawn_error {
        return Err(e);
    }
    let hangs = outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::TeardownHang | Verdict::Crash(_)))
        .count();
    let other = outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::TimedOut | Verdict::Failed(_)))
        .count();
    match (hangs, other) {
        (0, 0) => Ok(()),
        _ => Err(format!(
            "{hangs} teardown hang(s)/crash(es), {other} timed out or failed"
        )),
    }
}

fn report(opts: &Options, outcomes: &[Outcome], wall: Duration, churn_ops: u64) {
    let clean = outcomes
        .iter()
        .filter(|o| o.verdict == Verdict::Clean)
        .count();
    let count = |f: fn(&Verdict) -> bool| outcomes.iter().filter(|o| f(&o.verdict)).count();
    let mut times: Vec<f64> = outcomes.iter().map(|o| o.elapsed.as_secs_f64()).collect();
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(0.0);
    let max = times.last().copied().unwrap_or(0.0);
    println!(
        "stress-teardown backend {}: {clean}/{} clean exits; {} teardown hangs, {} crashes, {} timed out, {} failed; {} processes x {} rounds under {} churn workers ({churn_ops} churn iterations); process time median {median:.2} s, max {max:.2} s; wall {:.1} s",
        opts.backend,
        outcomes.len(),
        count(|v| *v == Verdict::TeardownHang),
        count(|v| matches!(v, Verdict::Crash(_))),
        count(|v| *v == Verdict::TimedOut),
        count(|v| matches!(v, Verdict::Failed(_))),
        opts.processes,
        opts.rounds,
        opts.churn,
        wall.as_secs_f64()
    );
    for o in outcomes.iter().filter(|o| o.verdict != Verdict::Clean) {
        println!(
            "  {:?}: backend {} round {} process {} after {:.1} s; summary: {}",
            o.verdict,
            opts.backend,
            o.round,
            o.index,
            o.elapsed.as_secs_f64(),
            o.summary.as_deref().unwrap_or("(none)")
        );
        for l in &o.stderr_tail {
            println!("    stderr: {l}");
        }
    }
}
