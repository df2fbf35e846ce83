//! Fault injection over the CPU backend: every k of every workload.

use seam::{ops, Backend, DType, Device, ErrorKind};
use seam_cpu::CpuBackend;
use seam_reliability::faults::sweep_all;
use seam_reliability::{FaultPlan, Faults, FaultyBackend};

fn cpu() -> Result<Box<dyn Backend>, ErrorKind> {
    Ok(Box::new(CpuBackend::new(0)))
}

#[test]
fn injected_fault_hits_exactly_call_k_and_names_it() {
    let plan = FaultPlan::new();
    let dev = Device::new(Box::new(FaultyBackend::new(
        cpu().unwrap(),
        Faults(plan.clone()),
    )));
    // Calls: alloc (0), write (1), alloc (2) → fail the second alloc.
    plan.arm(Some(2));
    let a = dev.buffer_from(&[1u32, 2]).unwrap();
    let e = dev.alloc(DType::U32, 2).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Injected { call: "alloc" });
    assert!(
        e.to_string().contains("alloc: injected fault in alloc"),
        "{e}"
    );
    assert_eq!(plan.fired(), Some((2, "alloc")));
    assert_eq!(plan.log(), ["alloc", "write", "alloc"]);
    // Fires once: the next call goes through, and the failed alloc left nothing behind.
    let b = dev.alloc(DType::U32, 2).unwrap();
    dev.launch(&ops::add(a.id(), a.id(), b, 2)).unwrap();
    assert_eq!(dev.read::<u32>(b).unwrap(), [2, 4]);
    let live = dev.live();
    assert_eq!((live.buffers, live.backend.buffers), (2, 2));
    // Pure queries are not counted.
    let before = plan.calls();
    let _ = (dev.live(), dev.capture_support());
    assert_eq!(plan.calls(), before);
}

#[test]
fn fault_sweep_cpu() {
    let reports = sweep_all(&cpu).expect("sweep ran");
    let mut failures = Vec::new();
    for r in &reports {
        eprintln!(
            "{:32} k = 0..={:3}: {} surfaced, {} absorbed, {} failed",
            r.workload,
            r.calls,
            r.surfaced,
            r.absorbed,
            r.failures.len()
        );
        assert!(r.calls >= 10, "{} makes {} calls", r.workload, r.calls);
        for f in &r.failures {
            eprintln!("  k={} {}: {}", f.k, f.call, f.problem);
            failures.push(f.clone());
        }
    }
    assert!(reports.len() >= 5, "every workload ran on the CPU backend");
    assert!(
        failures.is_empty(),
        "fault-injection failures: {failures:#?}"
    );
}

/// The minimal reproduction of the gap fault injection found, fixed in core:
/// after a failed end, core tells the backend to stop recording.
#[test]
fn failed_end_capture_leaves_device_usable() {
    let plan = FaultPlan::new();
    let dev = Device::new(Box::new(FaultyBackend::new(
        cpu().unwrap(),
        Faults(plan.clone()),
    )));
    let a = dev.buffer_from(&[1u32]).unwrap();
    let b = dev.buffer_from(&[0u32]).unwrap();
    dev.low_level().begin_capture().unwrap();
    plan.arm(Some(0)); // the next backend call: end_capture_into_current
    let e = dev.low_level().end_capture_into_current().unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::Injected {
            call: "end_capture_into_current"
        }
    );
    assert!(!dev.capturing());
    dev.launch(&ops::add(a.id(), a.id(), b.id(), 1)).unwrap();
    assert_eq!(
        b.read().unwrap(),
        [2],
        "the launch after a failed end_capture_into_current must run"
    );
}

/// Fails each named call once, the first time it comes, and logs every call.
struct FailOnce {
    fail: std::sync::Arc<std::sync::Mutex<Vec<&'static str>>>,
    log: std::sync::Arc<std::sync::Mutex<Vec<&'static str>>>,
}

impl seam::testing::Hooks for FailOnce {
    fn before(&mut self, call: &'static str) -> Result<(), ErrorKind> {
        self.log.lock().unwrap().push(call);
        let mut fail = self.fail.lock().unwrap();
        match fail.iter().position(|c| *c == call) {
            Some(i) => {
                fail.remove(i);
                Err(ErrorKind::Injected { call })
            }
            None => Ok(()),
        }
    }
}

/// A graph whose in-place update failed (a stream backend may have patched
/// some of its nodes before the failure) and whose re-record failed too is
/// refused; the next update must record it again whole, never patch it in
/// place: a patch of its own changes alone would leave the nodes the failed
/// update reached running launches core no longer records. Mutation: the
/// next update taking the native path (`apply` ignoring `broken`) → red at
/// "patched in place".
#[test]
fn an_update_of_a_broken_graph_records_it_again() {
    use std::sync::{Arc, Mutex};
    let (fail, log) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let hooks = FailOnce {
        fail: fail.clone(),
        log: log.clone(),
    };
    let dev = Device::new(Box::new(seam::testing::Forward::new(cpu().unwrap(), hooks)));
    let a = dev.buffer_from(&[1.0f32, 2.0]).unwrap();
    let b = dev.buffer_from(&[10.0f32, 20.0]).unwrap();
    let out = dev.buffer_from(&[0.0f32, 0.0]).unwrap();
    let scope = dev.capture().unwrap();
    dev.launch(&ops::copy(a.id(), out.id(), 2)).unwrap();
    dev.launch(&ops::scale_add(out.id(), out.id(), 2, 2.0, 1.0))
        .unwrap();
    let g = scope.end_graph().unwrap();
    g.replay().unwrap();
    assert_eq!(out.read().unwrap(), [3.0, 5.0]);
    // The patch fails, then the re-record's capture: the graph is broken.
    *fail.lock().unwrap() = vec!["update_launches", "begin_capture"];
    let e = dev
        .update(&g, &seam::Change::rebinds(&[(a.id(), b.id())]))
        .unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::Injected {
            call: "begin_capture"
        },
        "{e}"
    );
    assert!(matches!(
        g.replay().unwrap_err().kind,
        ErrorKind::GraphBroken { .. }
    ));
    // The next update: recorded again, whole.
    log.lock().unwrap().clear();
    let params = ops::scale_add(out.id(), out.id(), 2, 3.0, 1.0).params;
    dev.update(&g, &[seam::Change::Params { index: 1, params }])
        .unwrap();
    let calls = log.lock().unwrap().clone();
    assert!(
        !calls.contains(&"update_launches"),
        "patched in place: {calls:?}"
    );
    assert!(calls.contains(&"begin_capture"), "{calls:?}");
    g.replay().unwrap();
    assert_eq!(out.read().unwrap(), [4.0, 7.0]);
}
