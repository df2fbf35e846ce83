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
