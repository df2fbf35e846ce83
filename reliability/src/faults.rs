//! The fault-injection sweep: for a workload that makes N backend calls, run
//! it N+1 times on fresh devices, failing call k = 0..N-1 (and none at k = N).
//! After each run the same device must still work: no capture open, a plain
//! launch + read gives the right answer, nothing leaks once every handle is
//! dropped, and the error the workload saw names the failed call.

use crate::faulty::{FaultPlan, Faults, FaultyBackend};
use crate::Opener;
use seam::{ops, Change, DType, Device, GraphRef, OpKind, ResourceCounts};
use std::sync::Arc;

/// Why a workload stopped.
#[derive(Debug)]
pub enum WorkloadError {
    /// A seam call failed (expected when a fault was injected).
    Seam(seam::Error),
    /// The workload finished with a wrong answer: silent corruption.
    Wrong(String),
}

impl From<seam::Error> for WorkloadError {
    fn from(e: seam::Error) -> Self {
        WorkloadError::Seam(e)
    }
}

type W = Result<(), WorkloadError>;

fn expect<T: PartialEq + std::fmt::Debug>(got: T, want: T, what: &str) -> W {
    if got == want {
        Ok(())
    } else {
        Err(WorkloadError::Wrong(format!(
            "{what}: got {got:?}, want {want:?}"
        )))
    }
}

/// A representative workload: straight-line seam calls, `?` on every one.
pub struct Workload {
    pub name: &'static str,
    pub needs_capture: bool,
    pub run: fn(&Device) -> W,
}

/// C1: dst += a captured once; 17, 34, then 35 after a host write of a = 1.
/// An aborted capture first, so abort_capture is on the path too.
fn c1(d: &Device, current: bool) -> W {
    let a = d.buffer_from(&[17.0f32])?;
    let dst = d.buffer_from(&[0.0f32])?;
    d.low_level().begin_capture()?;
    if let Err(e) = d.launch(&ops::add(a.id(), a.id(), a.id(), 1)) {
        // A raw capture has no scope to abort it: the caller must.
        let _ = d.low_level().abort_capture();
        return Err(e.into());
    }
    d.low_level().abort_capture()?;
    let scope = d.capture()?;
    d.launch(&ops::add(a.id(), dst.id(), dst.id(), 1))?;
    let (target, _graph) = if current {
        scope.end_into_current()?;
        (GraphRef::Current, None)
    } else {
        let g = scope.end_graph()?;
        (GraphRef::Handle(g.id()), Some(g))
    };
    d.replay(target)?;
    expect(dst.read()?, vec![17.0], "after the first replay")?;
    d.replay(target)?;
    expect(dst.read()?, vec![34.0], "after the second replay")?;
    a.write(&[1.0])?;
    d.replay(target)?;
    expect(dst.read()?, vec![35.0], "after a = 1 and a third replay")?;
    expect(d.replay_count(target)?, 3, "replay count")
}

/// Eager work only: alloc, write, launch, read, fill, copy, free, synchronize.
fn eager(d: &Device) -> W {
    let n = 64u32;
    let a = d.buffer_from(&(0..n).collect::<Vec<u32>>())?;
    let b = d.buffer_from(&vec![2u32; n as usize])?;
    // Owned, so an early return frees it; freed explicitly below to put free on the path.
    let out_buf = d.buffer::<u32>(n as usize)?;
    let out = out_buf.id();
    d.launch(&ops::add(a.id(), b.id(), out, n))?;
    expect(
        d.read::<u32>(out)?,
        (0..n).map(|i| i + 2).collect(),
        "add output",
    )?;
    d.launch(&ops::fill(out, n, 7))?;
    d.launch(&ops::copy(out, a.id(), n))?;
    d.synchronize()?;
    expect(a.read()?, vec![7u32; n as usize], "copy of a fill")?;
    d.free(out)?;
    Ok(())
}

/// C7: prepare a GEMM, capture it, replay, change an input, replay again.
fn prepared_gemm(d: &Device) -> W {
    d.prepare(&[(OpKind::Gemm, DType::F32)])?;
    // a is 2x3, b is 3x2, c = a·b is 2x2.
    let a = d.buffer_from(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    let b = d.buffer_from(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0])?;
    let c = d.buffer_from(&[0.0f32; 4])?;
    let scope = d.capture()?;
    d.launch(&ops::gemm(a.id(), b.id(), c.id(), 2, 2, 3))?;
    let g = scope.end_graph()?;
    g.replay()?;
    expect(
        c.read()?,
        vec![4.0, 5.0, 10.0, 11.0],
        "gemm after one replay",
    )?;
    a.write(&[0.0, 0.0, 1.0, 1.0, 0.0, 0.0])?;
    g.replay()?;
    expect(c.read()?, vec![1.0, 1.0, 1.0, 0.0], "gemm after a new a")
}

/// C8: queue replays of a graph doing real work, destroy it before they finish.
fn destroy_while_queued(d: &Device) -> W {
    // Big enough that replays are still queued at destroy; small under Miri.
    let n = if cfg!(miri) { 1u32 << 8 } else { 1u32 << 16 };
    let x = d.buffer_from(&vec![1.0f32; n as usize])?;
    let y = d.buffer_from(&vec![0.0f32; n as usize])?;
    let scope = d.capture()?;
    for _ in 0..3 {
        d.launch(&ops::add(y.id(), x.id(), y.id(), n))?;
    }
    let g = scope.end_graph()?;
    for _ in 0..4 {
        g.replay()?;
    }
    d.destroy_graph(g.id())?;
    expect(y.read()?[n as usize - 1], 12.0, "after 4 replays of 3 adds")?;
    drop(g);
    Ok(())
}

/// C13: rebind a captured graph to another buffer, then change one
/// launch's parameters, replaying after each. A native backend whose
/// in-place update fails must fall back (core re-records), and every
/// answer must still be right.
fn update(d: &Device) -> W {
    let one = d.buffer_from(&[1.0f32; 8])?;
    let x = d.buffer_from(&[0.0f32; 8])?;
    let y = d.buffer_from(&[10.0f32; 8])?;
    let scope = d.capture()?;
    d.launch(&ops::add(x.id(), one.id(), x.id(), 8))?;
    let g = scope.end_graph()?;
    g.replay()?;
    g.device()
        .update(&g, &Change::rebinds(&[(x.id(), y.id())]))?;
    g.replay()?;
    expect(y.read()?, vec![11.0; 8], "y after the rebind and a replay")?;
    g.device().update(
        &g,
        &[Change::Params {
            index: 0,
            params: ops::add(y.id(), one.id(), y.id(), 4).params,
        }],
    )?;
    g.replay()?;
    let want = [12.0, 12.0, 12.0, 12.0, 11.0, 11.0, 11.0, 11.0];
    expect(y.read()?, want.to_vec(), "y after n = 4 and a replay")?;
    expect(
        x.read()?,
        vec![1.0; 8],
        "x keeps the replay before the rebind",
    )
}

/// The workloads every sweep runs.
pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "c13_rebind_and_update_params",
        needs_capture: true,
        run: update,
    },
    Workload {
        name: "c1_graph_17_34_35",
        needs_capture: true,
        run: |d| c1(d, false),
    },
    Workload {
        name: "c1_current_17_34_35",
        needs_capture: true,
        run: |d| c1(d, true),
    },
    Workload {
        name: "eager_alloc_write_launch_read",
        needs_capture: false,
        run: eager,
    },
    Workload {
        name: "capture_prepared_gemm",
        needs_capture: true,
        run: prepared_gemm,
    },
    Workload {
        name: "destroy_while_replays_queued",
        needs_capture: true,
        run: destroy_while_queued,
    },
];

/// Calls whose failure core can absorb without telling the caller: deferred
/// frees and destroys are retried by the next sweep, and a capture scope's
/// drop has nowhere to report a failed abort.
/// `update_launches` too: a failed in-place update falls back to core's
/// re-record, which the workload's answers then check.
const MAY_BE_ABSORBED: &[&str] = &["free", "destroy_graph", "abort_capture", "update_launches"];

/// One k that went wrong.
#[derive(Clone, Debug)]
pub struct FaultFailure {
    pub workload: &'static str,
    pub k: u64,
    /// The backend call that was failed.
    pub call: &'static str,
    pub problem: String,
}

/// What a sweep over one workload found.
#[derive(Clone, Debug)]
pub struct SweepReport {
    pub workload: &'static str,
    /// Backend calls the workload makes with no fault (k ran over 0..=calls).
    pub calls: u64,
    /// Faults the workload saw as an error naming the call.
    pub surfaced: u64,
    /// Faults core absorbed (the workload still finished correctly).
    pub absorbed: u64,
    pub failures: Vec<FaultFailure>,
}

fn open_faulty(open: &Opener, plan: &Arc<FaultPlan>) -> Result<Device, String> {
    let inner = open().map_err(|e| format!("opening the device: {e}"))?;
    Ok(Device::new(Box::new(FaultyBackend::new(
        inner,
        Faults(plan.clone()),
    ))))
}

/// After a workload (faulted or not): the device works and holds nothing.
/// Consumes the device and checks the backend after the drop too.
fn post_check(dev: Device, plan: &FaultPlan) -> Result<(), String> {
    if dev.capturing() {
        return Err("a capture is still open in core".into());
    }
    // A backend left recording would record this launch instead of running it.
    let x = dev
        .buffer_from(&[5u32; 4])
        .map_err(|e| format!("plain alloc+write: {e}"))?;
    let y = dev
        .buffer_from(&[0u32; 4])
        .map_err(|e| format!("plain alloc+write: {e}"))?;
    dev.launch(&ops::add(x.id(), x.id(), y.id(), 4))
        .map_err(|e| format!("plain launch: {e}"))?;
    let got = y.read().map_err(|e| format!("plain read: {e}"))?;
    if got != [10u32; 4] {
        return Err(format!(
            "a plain launch no longer runs: read {got:?}, want [10; 4] (backend still recording?)"
        ));
    }
    drop((x, y));
    if dev.capture_support().is_supported() {
        // Replace the current exec with an empty one: what it read can be freed.
        dev.low_level()
            .begin_capture()
            .and_then(|()| dev.low_level().end_capture_into_current())
            .map_err(|e| format!("empty capture: {e}"))?;
    }
    let live = dev.live();
    let current = usize::from(live.current_graph);
    let want = ResourceCounts {
        buffers: 0,
        graphs: current,
        bytes: 0,
    };
    if live.buffers != 0 || live.graphs != 0 || live.capturing || live.backend != want {
        return Err(format!(
            "leak after dropping every handle: {live:?} (backend should hold {want:?})"
        ));
    }
    drop(dev);
    match plan.live_at_drop() {
        Some(got) if got == want => Ok(()),
        got => Err(format!(
            "after dropping the device the backend holds {got:?}, want {want:?}"
        )),
    }
}

/// Run `w` once per k in 0..=N on fresh devices from `open`.
pub fn sweep(open: &Opener, w: &Workload) -> Result<SweepReport, String> {
    let plan = FaultPlan::new();
    let dev = open_faulty(open, &plan)?;
    plan.arm(None);
    let base = (w.run)(&dev);
    plan.disarm();
    let calls = plan.calls();
    let log = plan.log();
    if let Err(e) = base {
        return Err(format!("{}: fails with no fault injected: {e:?}", w.name));
    }
    post_check(dev, &plan).map_err(|e| format!("{}: with no fault: {e}", w.name))?;

    let mut report = SweepReport {
        workload: w.name,
        calls,
        surfaced: 0,
        absorbed: 0,
        failures: Vec::new(),
    };
    for k in 0..calls {
        let plan = FaultPlan::new();
        let dev = open_faulty(open, &plan)?;
        plan.arm(Some(k));
        let r = (w.run)(&dev);
        plan.disarm();
        let call = log[k as usize];
        let mut fail = |problem: String| {
            report.failures.push(FaultFailure {
                workload: w.name,
                k,
                call,
                problem,
            })
        };
        match plan.fired() {
            Some((at, name)) if at == k && name == call => {}
            other => fail(format!(
                "fault {other:?} fired, expected call {k} ({call}): the workload is not deterministic"
            )),
        }
        let needle = format!("injected fault in {call}");
        match r {
            Err(WorkloadError::Seam(e)) if e.to_string().contains(&needle) => report.surfaced += 1,
            Err(WorkloadError::Seam(e)) => {
                fail(format!("the error does not name the failed call: {e}"))
            }
            Err(WorkloadError::Wrong(m)) => fail(format!("silent corruption: {m}")),
            Ok(()) if MAY_BE_ABSORBED.contains(&call) => report.absorbed += 1,
            Ok(()) => fail("the fault vanished: the workload saw no error".into()),
        }
        if let Err(p) = post_check(dev, &plan) {
            fail(format!("afterwards: {p}"));
        }
    }
    Ok(report)
}

/// Sweep every workload the device can run.
pub fn sweep_all(open: &Opener) -> Result<Vec<SweepReport>, String> {
    let probe = open().map_err(|e| format!("opening the device: {e}"))?;
    let capture = probe.capture_support().is_supported();
    drop(probe);
    WORKLOADS
        .iter()
        .filter(|w| capture || !w.needs_capture)
        .map(|w| sweep(open, w))
        .collect()
}
