//! Tests that need no AMD GPU: the build-option truth table, the profiling
//! switch table, and (with `rocm`) the runtime probe and hipRTC compiles.

use crate::options::{build_options, effective_level, is_opt_level, split_options, DEFAULT_LEVEL};
use crate::profile::{
    self, decode_runtime_version, parse_release, switches_for, to_set, Switch, Version,
    CLASSIC_PATH, PACKET_CAPTURE, SEGMENT_SCHEDULING,
};

/// (user options, level the device code is built at, why).
const OPTION_ROWS: &[(&str, &str, &str)] = &[
    ("", DEFAULT_LEVEL, "nothing set: never -O0 (seed 003)"),
    ("-O0", "-O0", "an explicit -O0 is the user's choice, kept"),
    ("-O1", "-O1", "explicit level kept"),
    ("-O3", "-O3", "explicit level kept"),
    ("-Ofast", "-Ofast", "explicit -Ofast kept"),
    ("-Os", "-Os", "size levels are levels"),
    ("-O", "-O", "bare -O is a level"),
    (
        "--rocm-path=/opt/rocm",
        DEFAULT_LEVEL,
        "a path option is not a level",
    ),
    ("-DOPT=1", DEFAULT_LEVEL, "a macro named OPT is not a level"),
    ("-DO3", DEFAULT_LEVEL, "a macro named O3 is not a level"),
    ("-Ofoo", DEFAULT_LEVEL, "not a clang level"),
    (
        "-I/opt/O2",
        DEFAULT_LEVEL,
        "an include path containing O2 is not a level",
    ),
    ("-O2 -g", "-O2", "a level among other options"),
    (
        "--rocm-path=/opt/rocm -O0",
        "-O0",
        "a level after a path option",
    ),
    ("-O1 -O2", "-O2", "the last level wins (clang's rule)"),
];

/// What the options declare for f32 subnormals (C11). Mutation: make
/// `options::subnormals` ignore the options → red at `-ffast-math`.
#[test]
fn subnormal_declaration_follows_arch_and_options() {
    use crate::options::subnormals;
    use seam::Subnormals::{MayFlush, Preserved};
    for arch in ["gfx90a", "gfx906", "gfx1030", "gfx1100"] {
        assert_eq!(
            subnormals(arch, &build_options(arch, &[])),
            Preserved,
            "{arch}"
        );
    }
    assert!(matches!(
        subnormals("gfx803", &build_options("gfx803", &[])),
        MayFlush(_)
    ));
    for user in [
        "-ffast-math",
        "-fgpu-flush-denormals-to-zero",
        "-Ofast",
        "-fdenormal-fp-math-f32=preserve-sign",
    ] {
        let opts = build_options("gfx90a", &split_options(user));
        assert!(
            matches!(subnormals("gfx90a", &opts), MayFlush(r) if r.contains(user)),
            "{user}"
        );
    }
}

#[test]
fn opt_level_truth_table() {
    for &(user, level, why) in OPTION_ROWS {
        let opts = build_options("gfx90a", &split_options(user));
        assert_eq!(effective_level(&opts), Some(level), "{user:?}: {why}");
        assert_eq!(opts[0], "--gpu-architecture=gfx90a");
        assert!(opts.contains(&"-ffp-contract=off".to_string()));
        // The user's options are all there, in order, after ours.
        let tail = &opts[opts.len() - split_options(user).len()..];
        assert_eq!(tail, split_options(user).as_slice(), "{user:?}");
        // Ours add a level only when the user gave none.
        let added = opts.iter().filter(|o| *o == DEFAULT_LEVEL).count()
            - split_options(user)
                .iter()
                .filter(|o| *o == DEFAULT_LEVEL)
                .count();
        let user_level = split_options(user).iter().any(|o| is_opt_level(o));
        assert_eq!(added, usize::from(!user_level), "{user:?}: {why}");
    }
}

#[test]
fn default_level_is_never_o0() {
    assert!(is_opt_level(DEFAULT_LEVEL));
    assert_ne!(DEFAULT_LEVEL, "-O0");
    assert_ne!(DEFAULT_LEVEL, "-O");
}

/// (release, switches that release's runtime reads).
const SWITCH_ROWS: &[(Version, &[Switch])] = &[
    (Version::new(5, 2, Some(3)), &[]),
    (Version::new(6, 4, Some(1)), &[]),
    (Version::new(7, 0, Some(2)), &[]),
    (Version::new(7, 1, Some(0)), &[PACKET_CAPTURE]),
    (Version::new(7, 2, Some(0)), &[PACKET_CAPTURE]),
    (Version::new(7, 2, Some(3)), &[PACKET_CAPTURE]),
    (Version::new(7, 2, Some(4)), &[SEGMENT_SCHEDULING]),
    (
        Version::new(7, 2, None),
        &[PACKET_CAPTURE, SEGMENT_SCHEDULING],
    ),
    (Version::new(7, 9, None), &[PACKET_CAPTURE]),
    (Version::new(7, 10, None), &[PACKET_CAPTURE]),
    (Version::new(7, 11, None), &[SEGMENT_SCHEDULING]),
    (Version::new(7, 14, None), &[SEGMENT_SCHEDULING]),
    (Version::new(10, 0, None), &[CLASSIC_PATH]),
    (Version::new(10, 2, None), &[CLASSIC_PATH]),
    (Version::new(11, 0, None), &[CLASSIC_PATH]),
    (
        Version::new(8, 0, None),
        &[PACKET_CAPTURE, SEGMENT_SCHEDULING, CLASSIC_PATH],
    ),
];

#[test]
fn profile_switch_table() {
    for (version, want) in SWITCH_ROWS {
        assert_eq!(switches_for(*version), *want, "ROCm {version}");
    }
}

#[test]
fn profile_switch_values_are_the_documented_ones() {
    let pairs: Vec<(&str, &str)> = profile::ALL.iter().map(|s| (s.var, s.value)).collect();
    assert_eq!(
        pairs,
        [
            ("DEBUG_CLR_GRAPH_PACKET_CAPTURE", "0"),
            ("DEBUG_HIP_GRAPH_SEGMENT_SCHEDULING", "0"),
            ("DEBUG_HIP_GRAPH_CLASSIC_PATH", "1"),
        ]
    );
}

#[test]
fn profile_mode_sets_every_switch_the_user_has_not() {
    assert!(!profile::requested_by(None), "off by default");
    assert!(!profile::requested_by(Some("0")));
    assert!(profile::requested_by(Some("1")));
    assert_eq!(to_set(|_| false), profile::ALL.to_vec());
    let kept = to_set(|v| v == "DEBUG_HIP_GRAPH_CLASSIC_PATH");
    assert_eq!(kept, vec![PACKET_CAPTURE, SEGMENT_SCHEDULING]);
}

#[test]
fn versions_decode() {
    // Debian's libamdhip64 5.2.3 reports 50221153.
    assert_eq!(
        decode_runtime_version(50221153),
        (Version::new(5, 2, None), 21153)
    );
    assert_eq!(
        parse_release("7.2.4-123\n"),
        Some(Version::new(7, 2, Some(4)))
    );
    assert_eq!(parse_release("10.0"), Some(Version::new(10, 0, None)));
    assert_eq!(parse_release("garbage"), None);
    assert!(profile::describe(Version::new(5, 2, None)).contains("node by node already"));
    assert!(profile::describe(Version::new(7, 2, Some(4)))
        .contains("DEBUG_HIP_GRAPH_SEGMENT_SCHEDULING=0"));
}

#[cfg(feature = "rocm")]
mod rocm {
    use seam::OpKind;

    /// The runtime's own answer, and `open` refusing with it.
    #[test]
    fn without_a_device_the_probe_and_open_give_the_runtimes_answer() {
        seam_streamgraph::testing::check_missing_device(crate::device_count, crate::open, |why| {
            why.starts_with("ROCm runtime ")
                && why.contains(" found, no HIP device (hipGetDeviceCount: ")
        });
    }

    #[test]
    fn every_kernel_compiles_for_gfx90a_without_a_gpu() {
        // gfx90a and gfx1030 compile with ROCm 5.2's hipRTC here; the guard also
        // checks gfx1030, each arch in its own process.
        for op in OpKind::ALL {
            let bytes = crate::compile_kernel("gfx90a", op)
                .unwrap_or_else(|e| panic!("{op} for gfx90a: {e}"));
            assert!(bytes > 0, "{op}: empty code object");
        }
    }

    #[test]
    fn a_bad_kernel_option_is_a_named_error_with_the_log() {
        let err = crate::sys::hiprtc_compile(
            "extern \"C\" __global__ void k(float* x) { x[0] = undefined_name; }",
            "bad.cu",
            &["--gpu-architecture=gfx90a".to_string()],
        )
        .expect_err("must not compile");
        let text = err.to_string();
        assert!(
            text.contains("hiprtcCompileProgram") && text.contains("undefined_name"),
            "{text}"
        );
    }
}
