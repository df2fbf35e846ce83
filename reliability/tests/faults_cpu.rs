//! Fault injection over the CPU backend: every k of every workload.

use seam::{ops, Backend, DType, Device, ErrorKind};
use seam_cpu::CpuBackend;
use seam_reliability::faults::{is_known_gap, sweep_all};
use seam_reliability::{FaultPlan, FaultyBackend};

fn cpu() -> Result<Box<dyn Backend>, ErrorKind> {
    Ok(Box::new(CpuBackend::new(0)))
}

#[test]
fn injected_fault_hits_exactly_call_k_and_names_it() {
    let plan = FaultPlan::new();
    let dev = Device::new(Box::new(FaultyBackend::new(cpu().unwrap(), plan.clone())));
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
    let mut unknown = Vec::new();
    let mut known = Vec::new();
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
            if is_known_gap(f) {
                known.push(f.clone());
            } else {
                unknown.push(f.clone());
            }
        }
    }
    assert!(reports.len() >= 5, "every workload ran on the CPU backend");
    assert!(
        unknown.is_empty(),
        "unexpected fault-injection failures: {unknown:#?}"
    );
    // The known core gap (docs/reliability.md) must still reproduce; once core
    // stops the backend's recording after a failed end/abort, drop it from
    // `is_known_gap` and this list.
    for call in ["end_capture", "end_capture_graph", "abort_capture"] {
        assert!(
            known.iter().any(|f| f.call == call),
            "known gap for {call} no longer reproduces: core fixed it? update faults::is_known_gap"
        );
    }
}

/// The minimal reproduction of the known gap: what core should guarantee.
/// Ignored until core tells the backend to stop recording after a failed end.
#[test]
#[ignore = "known core gap (docs/reliability.md): a failed end_capture leaves the backend recording"]
fn failed_end_capture_leaves_device_usable() {
    let plan = FaultPlan::new();
    let dev = Device::new(Box::new(FaultyBackend::new(cpu().unwrap(), plan.clone())));
    let a = dev.buffer_from(&[1u32]).unwrap();
    let b = dev.buffer_from(&[0u32]).unwrap();
    dev.begin_capture().unwrap();
    plan.arm(Some(0)); // the next backend call: end_capture
    let e = dev.end_capture().unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::Injected {
            call: "end_capture"
        }
    );
    assert!(!dev.capturing());
    dev.launch(&ops::add(a.id(), a.id(), b.id(), 1)).unwrap();
    assert_eq!(
        b.read().unwrap(),
        [2],
        "the launch after a failed end_capture must run"
    );
}
