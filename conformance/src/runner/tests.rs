//! The runner's own tests: planning, verdicts, deadlines.

use super::*;

/// The reference check runs the whole suite on cpu:0, and only there.
#[test]
fn the_reference_suite_is_every_case_on_cpu_0() {
    let cpu = plan(&Filter {
        backends: vec!["cpu".into()],
        ..Default::default()
    });
    assert!(cpu.trials.len() >= 78, "{}", cpu.trials.len());
    assert!(cpu.trials.iter().all(|t| t.device == "cpu:0"));
    assert_eq!(assert_reference_suite_passes(), cpu.trials.len());
}

/// A record's duration is the outcome's, in milliseconds.
#[test]
fn a_record_keeps_the_duration_in_milliseconds() {
    let p = plan(&Filter {
        backends: vec!["cpu".into()],
        cases: vec!["c6_nested_begin_refused".into()],
        devices: vec![],
    });
    let out = Outcome {
        verdict: Verdict::Passed,
        duration: Duration::from_millis(1500),
        digest: Some(0xab),
        trace: None,
    };
    let r = record(&p.trials[0], out);
    assert_eq!(r.duration_ms, 1500.0);
    assert_eq!(r.digest.as_deref(), Some("00000000000000ab"));
    assert_eq!(r.name, "cpu:0::c6_nested_begin_refused");
}

fn open_uncapturing(_: usize) -> Result<Box<dyn seam::Backend>, seam::ErrorKind> {
    Ok(Box::new(seam::testing::NullBackend::new(
        seam::CaptureSupport::Unsupported("this test device records nothing".into()),
    )))
}
static UNCAPTURING: seam::Registration =
    seam::Registration::new("nocap", None, || Ok(1), open_uncapturing);

/// On a device that cannot capture, a case's captured trial is ignored
/// with the device's reason and its eager trial runs (here on a backend
/// that computes nothing, so it fails: what matters is that it ran).
/// Mutation: `mode == Mode::Captured` → `!=` → red.
#[test]
fn only_captured_trials_need_capture() {
    let found = seam_backends::Discovery {
        devices: vec![seam_backends::DeviceSlot::new(&UNCAPTURING, 0)],
        missing: vec![],
    };
    let p = plan_in(
        &Filter {
            cases: vec!["c11_known_values".into()],
            ..Default::default()
        },
        found,
    );
    let by_mode = |m: Mode| {
        let t = p.trials.iter().find(|t| t.mode == m).expect("a trial");
        run(t).verdict
    };
    match by_mode(Mode::Captured) {
        Verdict::Ignored(why) => assert!(why.contains("records nothing"), "{why}"),
        v => panic!("captured: {v:?}"),
    }
    let eager = by_mode(Mode::Eager);
    assert!(!matches!(eager, Verdict::Ignored(_)), "eager: {eager:?}");
}

/// A kernel trial on a device without the kernel's source is ignored,
/// naming it; a kernel whose source does not compile fails. The CPU
/// runs a kernel's Rust: the first has none (only WGSL), the second
/// has Rust and broken WGSL (checked on every device). Mutations: the
/// `KernelSourceMissing` guard in `run_with` → `true` / `false` → red.
#[test]
fn a_missing_kernel_source_ignores_and_a_broken_one_fails() {
    use seam::kernel::{Field, KernelDef};
    use seam::ops::{Access, Binding};
    use seam::{DType, Params, Tolerance};
    fn extents(p: &Params, out: &mut [u64]) {
        out.fill(p.d0 as u64);
    }
    fn grid(p: &Params) -> [u32; 3] {
        [p.d0.div_ceil(64).max(1), 1, 1]
    }
    static NO_CPU: KernelDef = KernelDef {
        name: "seam_no_cpu",
        bindings: &[Binding::fixed("y", Access::Write, DType::F32)],
        reads: &[Field::D0],
        extents,
        workgroup_size: [64, 1, 1],
        grid,
        check: None,
        allows_aliasing: false,
        tolerance: Tolerance::BitExact,
        wgsl: Some(
            "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n\
             @compute @workgroup_size(64)\n\
             fn seam_no_cpu(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                 if (g.x < p.d0) { y[p.o0 + g.x] = 1.0; }\n\
             }\n",
        ),
        cuda: None,
        cpu: None,
        samples: &[Params::dims(4, 0, 0)],
    };
    fn noop(_: &Params, _: &mut [Vec<u8>]) {}
    static BROKEN_WGSL: KernelDef = KernelDef {
        name: "seam_broken_wgsl",
        wgsl: Some("this is not WGSL"),
        cpu: Some(noop),
        ..NO_CPU
    };
    let p = plan(&Filter {
        backends: vec!["cpu".into()],
        cases: vec!["c1_replay_reexecutes".into()],
        ..Default::default()
    });
    let base = p.trials.first().expect("a cpu trial").clone();
    let case = crate::cases::KERNEL_CASES.first().expect("a kernel case");
    let with = |def: &'static KernelDef| Trial {
        name: format!("cpu:0::{}::{}", case.name, def.name),
        case,
        kernel: Some(def),
        ..base.clone()
    };
    match run(&with(&NO_CPU)).verdict {
        Verdict::Ignored(why) => assert!(why.contains("seam_no_cpu"), "{why}"),
        v => panic!("no source: {v:?}"),
    }
    match run(&with(&BROKEN_WGSL)).verdict {
        Verdict::Failed(why) => assert!(why.contains("seam_broken_wgsl"), "{why}"),
        v => panic!("broken source: {v:?}"),
    }
}

/// A required device (`SEAM_REQUIRE_DEVICES`) that discovery did not find
/// fails each of its trials, named as its own would be, with the reason;
/// one that was found, or that the filter leaves out, adds nothing; an id
/// of a backend discovery does not know still gets its trials. Mutations:
/// `absent` → `()`, the found check dropped, `required: true` → `false`,
/// the filter ignored → red.
#[test]
fn a_required_device_that_is_missing_fails_its_trials() {
    let filter = Filter {
        cases: vec!["c11_known_values".into()],
        ..Default::default()
    };
    let required: Vec<String> = ["wgpu:0", "nocap:0", "metal:3"].map(String::from).into();
    let plan = |filter: &Filter| {
        let found = seam_backends::Discovery {
            devices: vec![seam_backends::DeviceSlot::new(&UNCAPTURING, 0)],
            missing: vec![seam_backends::Missing {
                backend: "wgpu",
                reason: "no adapter".into(),
            }],
        };
        let mut p = plan_in(filter, found);
        // What this process's own SEAM_REQUIRE_DEVICES added.
        p.trials
            .retain(|t| !matches!(t.target, Target::Missing { required: true, .. }));
        let before: Vec<String> = p.trials.iter().map(|t| t.name.clone()).collect();
        absent(
            &mut p,
            filter,
            &planned_cases(filter),
            &["nocap", "wgpu"],
            &required,
        );
        let added: Vec<Trial> = p.trials.into_iter().skip(before.len()).collect();
        added
    };
    let added = plan(&filter);
    let modes = crate::cases::ALL
        .iter()
        .find(|c| c.name == "c11_known_values")
        .expect("the case")
        .modes
        .len();
    let on = |id: &str| added.iter().filter(|t| t.device == id).count();
    assert_eq!(
        (on("wgpu:0"), on("nocap:0"), on("metal:3")),
        (modes, 0, modes)
    );
    assert_eq!(added.len(), 2 * modes);
    for t in &added {
        assert!(
            t.name
                .starts_with(&format!("{}::c11_known_values", t.device)),
            "{}",
            t.name
        );
        assert_eq!(t.backend, t.device.split(':').next().expect("a backend"));
        match run(t).verdict {
            Verdict::Failed(why) => {
                assert!(
                    why.contains(&format!("SEAM_REQUIRE_DEVICES requires {}", t.device)),
                    "{why}"
                );
                assert!(
                    why.contains(&format!("discovery found no device {}", t.device)),
                    "{why}"
                );
            }
            v => panic!("{}: {v:?}", t.name),
        }
    }
    let only_wgpu = plan(&Filter {
        backends: vec!["wgpu".into()],
        ..filter.clone()
    });
    assert_eq!(only_wgpu.len(), modes);
    let only_device = plan(&Filter {
        devices: vec!["metal:3".into()],
        ..filter
    });
    assert!(
        only_device.iter().all(|t| t.device == "metal:3"),
        "filtered by device"
    );
}

/// A filter that selects nothing is a problem the binary refuses, named
/// with what is known; a `--device` that discovery did not find gets
/// ignored trials with the reason. Mutations: `problems` → `vec![]`, a
/// check's condition inverted, the empty-plan check dropped, `absent`
/// skipping the filter's ids → red.
#[test]
fn a_filter_that_selects_nothing_is_a_problem() {
    let found = || seam_backends::Discovery {
        devices: vec![seam_backends::DeviceSlot::new(&UNCAPTURING, 0)],
        missing: vec![seam_backends::Missing {
            backend: "wgpu",
            reason: "no adapter".into(),
        }],
    };
    let one = |f: Filter| {
        let p = plan_in(&f, found());
        assert_eq!(p.problems.len(), 1, "{:?}", p.problems);
        p.problems[0].clone()
    };
    let bad = one(Filter {
        backends: vec!["wgpuu".into()],
        ..Default::default()
    });
    assert!(
        bad.contains("--backend wgpuu") && bad.contains("known: nocap, wgpu"),
        "{bad}"
    );
    let bad = one(Filter {
        cases: vec!["c1_replay".into(), "zz_no_case".into()],
        ..Default::default()
    });
    assert!(bad.contains("--case zz_no_case"), "{bad}");
    let bad = one(Filter {
        devices: vec!["cuad:0".into()],
        ..Default::default()
    });
    assert!(
        bad.contains("--device cuad:0") && bad.contains("\"cuad\""),
        "{bad}"
    );
    let bad = one(Filter {
        backends: vec!["nocap".into()],
        devices: vec!["wgpu:0".into()],
        ..Default::default()
    });
    assert!(
        bad.contains("--device wgpu:0") && bad.contains("--backend nocap"),
        "{bad}"
    );
    let empty = |required: &[String]| {
        plan_requiring(
            &Filter::default(),
            seam_backends::Discovery::default(),
            required,
        )
        .problems
    };
    assert_eq!(empty(&[]), ["the selection plans no trial"]);
    let refused = plan_requiring(&Filter::default(), seam_backends::Discovery::default(), &[]);
    assert_eq!(
        refused.refusal().as_deref(),
        Some("seam-conformance: the selection plans no trial")
    );
    // A required device the filter selects is planned (failing): a plan.
    assert_eq!(empty(&["cuda:0".into()]), Vec::<String>::new());
    // Known, selected and found: no problem.
    let fine = plan_in(
        &Filter {
            backends: vec!["nocap".into(), "wgpu".into()],
            cases: vec!["c1_replay".into()],
            devices: vec!["nocap:0".into()],
        },
        found(),
    );
    assert!(fine.problems.is_empty(), "{:?}", fine.problems);
    assert_eq!(fine.refusal(), None);
    // An id the filter and SEAM_REQUIRE_DEVICES both name is planned once.
    let twice = plan_requiring(
        &Filter {
            cases: vec!["c11_known_values".into()],
            devices: vec!["nocap:5".into(), "nocap:6".into()],
            ..Default::default()
        },
        found(),
        &["nocap:5".into()],
    );
    let on = |id: &str| twice.trials.iter().filter(|t| t.device == id).count();
    assert!(on("nocap:5") > 0);
    assert_eq!(on("nocap:5"), on("nocap:6"));
    // A device of a known backend that discovery did not find: its trials
    // are ignored, with the reason.
    let p = plan_in(
        &Filter {
            cases: vec!["c11_known_values".into()],
            devices: vec!["nocap:5".into()],
            ..Default::default()
        },
        found(),
    );
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    let on5: Vec<&Trial> = p.trials.iter().filter(|t| t.device == "nocap:5").collect();
    assert!(!on5.is_empty());
    for t in on5 {
        let required = seam::testing::required_devices().contains(&t.device);
        match run(t).verdict {
            Verdict::Ignored(why) if !required => {
                // What discovery found, though `--device` selected none of it.
                assert!(
                    why.contains("discovery found no device nocap:5 (devices: [nocap:0]; missing backends: [wgpu: no adapter])"),
                    "{why}"
                )
            }
            v => panic!("{}: {v:?}", t.name),
        }
    }
}
