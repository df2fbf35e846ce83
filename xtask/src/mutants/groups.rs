//! What cargo-mutants mutates and what each mutant answers to: one group
//! per crate with logic (or part of one), each with the tests that judge it.
//! Files left out of every group are listed in `.cargo/mutants.toml`, each
//! with its reason.

/// One campaign group: the files of one package it mutates, and the test
/// command every mutant of them must turn red.
pub struct Group {
    /// The name on the command line (`--group`) and in the record.
    pub name: &'static str,
    /// The package mutated.
    pub package: &'static str,
    /// Files whose every mutant is tested (globs; empty: every file of the
    /// package that `.cargo/mutants.toml` does not exclude).
    pub files: &'static [&'static str],
    /// Files sampled instead: a uniform random sample of this many of their
    /// mutants, seeded ([`SEED`]) so a run is reproducible.
    pub sampled: Option<(&'static [&'static str], usize)>,
    /// Files of `files` left out of this group (another group takes them).
    pub exclude: &'static [&'static str],
    /// The packages whose tests run (`cargo test -p …`).
    pub test_packages: &'static [&'static str],
    /// Arguments after `cargo test -p …` (test targets, `--` and filters).
    pub test_args: &'static [&'static str],
    /// Environment of the test run (validation layers, the staging path).
    pub env: &'static [(&'static str, &'static str)],
    /// What judges the group, for the record.
    pub judged_by: &'static str,
    /// Seconds one mutant's tests may take before it counts as timed out
    /// (a mutant that hangs a wait costs this much: the lavapipe groups'
    /// tests take under 60 s here, so 300).
    pub timeout_s: u32,
}

/// The seed of every sampled group's sample.
pub const SEED: u64 = 0x5EA4_2026;

/// The suite on one lavapipe device, as CI runs it, with the backend's own
/// tests: its unit tests (`--lib`: the barrier audit's, the waits', the
/// staging memory's; their names hold `tests::`, no trial's does) and its
/// device tests on that device (`--test lavapipe`: named `vulkan:0::…` as
/// the suite's trials are).
const LAVAPIPE_SUITE_VULKAN: &[&str] = &[
    "--lib",
    "--test",
    "conformance",
    "--test",
    "lavapipe",
    "--",
    "vulkan:0::",
    "tests::",
];
/// The suite on lavapipe's wgpu device and the wgpu backend's own tests
/// (its library's test harness: host checks and device trials, all named
/// `wgpu:0::…`).
const LAVAPIPE_SUITE_WGPU: &[&str] = &["--lib", "--test", "conformance", "--", "wgpu:0::"];
/// lavapipe's Vulkan device required (`SEAM_REQUIRE_DEVICES`): a mutant
/// that hides it from discovery fails the trials instead of leaving them
/// ignored, which would pass.
const VALIDATED: &[(&str, &str)] = &[
    ("SEAM_VULKAN_VALIDATION", "sync"),
    ("SEAM_REQUIRE_DEVICES", "vulkan:0"),
];

pub const GROUPS: &[Group] = &[
    Group {
        name: "core",
        package: "seam",
        files: &[],
        sampled: None,
        exclude: &[],
        test_packages: &["seam"],
        test_args: &["--tests"],
        env: &[],
        judged_by: "core's unit tests and tests/reference_suite.rs: the whole suite, the fault sweep and 300 model sequences on cpu:0",
        timeout_s: 300,
    },
    Group {
        name: "cpu",
        package: "seam-cpu",
        files: &[],
        sampled: None,
        exclude: &[],
        test_packages: &["seam-cpu"],
        test_args: &["--tests"],
        env: &[],
        judged_by: "the CPU backend's tests/reference_suite.rs (as core's)",
        timeout_s: 300,
    },
    Group {
        name: "backends",
        package: "seam-backends",
        files: &[],
        sampled: None,
        exclude: &[],
        test_packages: &["seam-backends", "seam-conformance"],
        test_args: &[
            "--lib",
            "--test",
            "readme_using_it",
            "--test",
            "conformance",
        ],
        env: &[],
        judged_by: "discovery's unit tests, the README's code block, and the suite in one process on every device discovery finds",
        timeout_s: 600,
    },
    Group {
        name: "streamgraph",
        package: "seam-streamgraph",
        files: &[],
        sampled: None,
        exclude: &[],
        test_packages: &["seam-streamgraph"],
        test_args: &["--tests"],
        env: &[],
        judged_by: "the stream backend's tests against the recording fake driver (the CUDA and HIP backends' logic)",
        timeout_s: 300,
    },
    Group {
        name: "harness",
        package: "seam-conformance",
        files: &[
            "conformance/src/isolate/**",
            "conformance/src/report/**",
            "conformance/src/merge.rs",
            "conformance/src/matrix.rs",
            "conformance/src/junit.rs",
            "conformance/src/runner/mod.rs",
            "conformance/src/harness.rs",
            "conformance/src/bin/**",
        ],
        sampled: None,
        exclude: &[],
        test_packages: &["seam-conformance"],
        test_args: &[
            "--lib",
            "--test",
            "isolate_children",
            "--test",
            "hostile_reports",
            "--test",
            "merge_results",
            "--test",
            "trace_file",
            "--test",
            "binary_output",
            "--test",
            "git_commit",
            "--bin",
            "seam-conformance",
        ],
        env: &[],
        judged_by: "the harness's unit tests and the command line's, the fake-child isolation tests, hostile and committed reports, the trace file, the report's commit",
        timeout_s: 300,
    },
    Group {
        name: "xtask",
        package: "xtask",
        files: &[
            "xtask/src/mutants/**",
            "xtask/src/mutations/mod.rs",
            "xtask/src/report.rs",
        ],
        sampled: None,
        exclude: &[],
        test_packages: &["xtask"],
        test_args: &["--bins"],
        env: &[],
        judged_by: "xtask's unit tests (the judging parts: the mutants verdict, the named-mutation record, report merge)",
        timeout_s: 300,
    },
    Group {
        name: "vulkan",
        package: "seam-vulkan",
        files: &[
            "backends/vulkan/src/sys/command/update.rs",
            "backends/vulkan/src/backend/update.rs",
            "backends/vulkan/src/sys/audit.rs",
            "backends/vulkan/src/sys/command/held.rs",
            "backends/vulkan/src/sys/command/sets.rs",
            "backends/vulkan/src/user.rs",
            "backends/vulkan/src/dispatch.rs",
            "backends/vulkan/src/backend/bodies.rs",
            "backends/vulkan/src/sys/command/indirect.rs",
        ],
        sampled: Some((&["backends/vulkan/src/**"], 150)),
        exclude: &["backends/vulkan/src/backend/staging.rs"],
        test_packages: &["seam-conformance", "seam-vulkan"],
        test_args: LAVAPIPE_SUITE_VULKAN,
        env: VALIDATED,
        judged_by: "the suite on lavapipe's vulkan:0 under Khronos + synchronization validation and the barrier audit, and the Vulkan backend's unit and device tests",
        timeout_s: 300,
    },
    Group {
        name: "vulkan-staging",
        package: "seam-vulkan",
        files: &["backends/vulkan/src/backend/staging.rs"],
        sampled: None,
        exclude: &[],
        test_packages: &["seam-conformance", "seam-vulkan"],
        test_args: LAVAPIPE_SUITE_VULKAN,
        env: &[
            ("SEAM_VULKAN_VALIDATION", "sync"),
            ("SEAM_VULKAN_STAGING", "1"),
            ("SEAM_REQUIRE_DEVICES", "vulkan:0"),
        ],
        judged_by: "the suite on lavapipe's vulkan:0 on the staging path, validated, and the Vulkan backend's unit and device tests",
        timeout_s: 300,
    },
    Group {
        name: "wgpu",
        package: "seam-wgpu",
        files: &[
            "backends/wgpu/src/dispatch.rs",
            "backends/wgpu/src/kernels.rs",
            "backends/wgpu/src/replay.rs",
            "backends/wgpu/src/backend/bodies.rs",
        ],
        sampled: Some((&["backends/wgpu/src/**"], 150)),
        exclude: &[],
        test_packages: &["seam-conformance", "seam-wgpu"],
        test_args: LAVAPIPE_SUITE_WGPU,
        env: &[
            ("SEAM_WGPU_VALIDATION", "1"),
            ("WGPU_VALIDATION", "1"),
            ("SEAM_REQUIRE_DEVICES", "wgpu:0"),
        ],
        judged_by: "the suite on lavapipe's wgpu:0 under validation, and the wgpu backend's own tests",
        timeout_s: 300,
    },
    Group {
        name: "kernels",
        package: "seam-kernels",
        files: &["kernels/src/geometry.rs", "kernels/src/conditional.rs"],
        sampled: Some((&["kernels/src/**"], 150)),
        exclude: &[],
        test_packages: &["seam-conformance", "seam-kernels"],
        // `tests::` lets the crate's own unit tests through the suite's
        // filters (`tests::…`, `geometry::tests::…`).
        test_args: &["--tests", "--", "vulkan:0::", "kernels", "tests::"],
        env: VALIDATED,
        judged_by: "the suite on lavapipe's vulkan:0, validated, and the kernels crate's own tests",
        timeout_s: 300,
    },
    Group {
        name: "llama",
        package: "seam-example-llama",
        // Every file `.cargo/mutants.toml` leaves in: the loaders and their
        // refusals, the references, the check's verdict, the decode step,
        // attention and the on-device loop.
        files: &[],
        sampled: None,
        exclude: &[],
        test_packages: &["seam-example-llama"],
        // Every test of the crate on cpu:0; its lavapipe trials (a minute a
        // mutant here) are left to the suite's groups and CI's test command.
        test_args: &["--tests", "--", "--skip", "vulkan:0::", "--skip", "wgpu:0::"],
        env: &[],
        judged_by: "the model crate's own tests on cpu:0: the loaders' round trips and refusals, eager = captured, K tokens per replay, the attention kernel against f64, and stories260K against llama2.c's logits where SEAM_STORIES260K names it",
        timeout_s: 300,
    },
];

/// The groups a run names, or every group.
pub fn select(names: &[String]) -> Result<Vec<&'static Group>, String> {
    if names.is_empty() {
        return Ok(GROUPS.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            GROUPS.iter().find(|g| g.name == n).ok_or_else(|| {
                let known: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
                format!("no mutants group `{n}` (groups: {})", known.join(", "))
            })
        })
        .collect()
}

/// Whether `path` matches `glob` as cargo-mutants matches `--file` globs
/// that contain a slash: the whole path, `*` within a component, `**` any
/// number of components.
pub fn glob_match(glob: &str, path: &str) -> bool {
    fn parts(s: &str) -> Vec<&str> {
        s.split('/').filter(|p| !p.is_empty()).collect()
    }
    fn component(g: &str, p: &str) -> bool {
        match g.split_once('*') {
            None => g == p,
            Some((head, tail)) => {
                p.starts_with(head)
                    && (0..=p.len() - head.len()).any(|i| component(tail, &p[head.len() + i..]))
            }
        }
    }
    fn walk(g: &[&str], p: &[&str]) -> bool {
        match g.split_first() {
            None => p.is_empty(),
            Some((&"**", rest)) => (0..=p.len()).any(|i| walk(rest, &p[i..])),
            Some((first, rest)) => !p.is_empty() && component(first, p[0]) && walk(rest, &p[1..]),
        }
    }
    walk(&parts(glob), &parts(path))
}

/// A uniform sample of `k` of `items`, the same for the same seed
/// (a seeded partial Fisher–Yates shuffle), in the items' own order.
pub fn sample<T: Clone>(items: &[T], k: usize, seed: u64) -> Vec<T> {
    let mut idx: Vec<usize> = (0..items.len()).collect();
    let mut state = (seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9) | 1;
    let mut next = || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let k = k.min(items.len());
    for i in 0..k {
        let j = i + (next() % (items.len() - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut chosen = idx[..k].to_vec();
    chosen.sort_unstable();
    chosen.into_iter().map(|i| items[i].clone()).collect()
}

/// How many of a budget of `max` mutants each group tests, given how many
/// it has (`counts`): shared evenly among the groups that have any, a
/// group with fewer than its share taking all of its own and leaving the
/// rest to the others, until the budget or the mutants run out. So an
/// in-diff run over every group looks at each group that changed, not only
/// the first ones in order (which a budget spent group by group did: a
/// large change to the first group took it all).
pub fn share(counts: &[usize], max: usize) -> Vec<usize> {
    let mut got = vec![0; counts.len()];
    let mut left = max;
    loop {
        let open: Vec<usize> = (0..counts.len()).filter(|&i| got[i] < counts[i]).collect();
        if open.is_empty() || left == 0 {
            return got;
        }
        // At least one each while the budget lasts, first groups first.
        let each = (left / open.len()).max(1);
        for i in open {
            let add = each.min(counts[i] - got[i]).min(left);
            got[i] += add;
            left -= add;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget reaches every group with mutants, evenly, a small group
    /// giving what it does not need to the others; never more than a group
    /// has or than the budget. Mutations: a budget spent in order (the old
    /// way), a share ignoring a group's count, the leftover not handed on
    /// → red.
    #[test]
    fn a_budget_is_shared_among_every_group_that_changed() {
        assert_eq!(share(&[323, 0, 40, 5, 12], 30), [9, 0, 8, 5, 8]);
        assert_eq!(share(&[323, 40], 30), [15, 15]);
        assert_eq!(
            share(&[2, 3, 1], 30),
            [2, 3, 1],
            "fewer than the budget: all"
        );
        assert_eq!(
            share(&[10, 10, 10, 10], 2),
            [1, 1, 0, 0],
            "first groups first"
        );
        assert_eq!(share(&[], 30), Vec::<usize>::new());
        assert_eq!(share(&[5, 5], 0), [0, 0]);
        // A group left with fewer than a later round's share takes only
        // what it has.
        assert_eq!(share(&[10, 11, 1], 30), [10, 11, 1]);
        for (counts, max) in [(vec![7, 100, 3, 0, 50], 31), (vec![1, 1, 1], 2)] {
            let got = share(&counts, max);
            let total: usize = counts.iter().sum();
            assert_eq!(got.iter().sum::<usize>(), max.min(total), "{counts:?}");
            assert!(got.iter().zip(&counts).all(|(g, c)| g <= c), "{got:?}");
        }
    }

    #[test]
    fn globs_match_whole_paths_by_component() {
        assert!(glob_match(
            "conformance/src/isolate/**",
            "conformance/src/isolate/mod.rs"
        ));
        assert!(glob_match("a/**/c.rs", "a/c.rs"));
        assert!(glob_match("a/**/c.rs", "a/b/x/c.rs"));
        assert!(glob_match("a/*.rs", "a/b.rs"));
        assert!(!glob_match("a/*.rs", "a/b/c.rs"));
        assert!(!glob_match("a/b.rs", "a/bb.rs"));
        assert!(!glob_match(
            "conformance/src/isolate/**",
            "conformance/src/runner.rs"
        ));
        assert!(glob_match("x/*_tests.rs", "x/update_tests.rs"));
        assert!(!glob_match("x/*_tests.rs", "x/update.rs"));
        assert!(!glob_match("x*.rs", "xa"));
    }

    /// The sample a seed picks is fixed: the record names a seed, and the
    /// same seed must pick the same mutants on every later run (a changed
    /// generator would make the recorded seed mean another sample).
    #[test]
    fn a_seed_picks_the_same_sample_as_when_it_was_recorded() {
        let items: Vec<u32> = (0..1000).collect();
        let a = sample(&items, 8, SEED);
        // Worked out independently of this code (the same xorshift64* in
        // Python): the generator, not only its shape, is what is pinned.
        assert_eq!(a, [82, 182, 226, 228, 369, 445, 607, 743]);
    }

    #[test]
    fn a_sample_is_uniform_reproducible_and_within_bounds() {
        let items: Vec<u32> = (0..1000).collect();
        let a = sample(&items, 150, SEED);
        assert_eq!(a.len(), 150);
        assert_eq!(a, sample(&items, 150, SEED), "same seed, same sample");
        assert_ne!(a, sample(&items, 150, SEED + 1));
        assert!(a.windows(2).all(|w| w[0] < w[1]), "distinct, in order");
        assert_eq!(sample(&items[..10], 150, SEED).len(), 10);
        // Uniform enough: each tenth of the items gets 15 ± 10 of 150.
        for d in 0..10 {
            let n = a.iter().filter(|&&x| x / 100 == d).count();
            assert!((5..=25).contains(&n), "decile {d}: {n}");
        }
    }

    /// A group's file that names nothing (a file moved or renamed) would
    /// quietly shrink the campaign: every glob a group names matches a
    /// file the repository holds.
    #[test]
    fn every_file_a_group_names_exists() {
        let out = std::process::Command::new("git")
            .args(["ls-files"])
            .current_dir(crate::root())
            .output()
            .unwrap();
        let tracked: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        assert!(tracked.len() > 100, "git ls-files: {} files", tracked.len());
        for g in GROUPS {
            let sampled = g.sampled.map(|(globs, _)| globs).unwrap_or(&[]);
            for glob in g.files.iter().chain(sampled).chain(g.exclude) {
                assert!(
                    tracked.iter().any(|f| glob_match(glob, f)),
                    "group {}: `{glob}` matches no file",
                    g.name
                );
            }
        }
    }

    #[test]
    fn every_group_is_selectable_and_unknown_names_are_refused() {
        assert_eq!(select(&[]).unwrap().len(), GROUPS.len());
        assert_eq!(select(&["core".into()]).unwrap()[0].package, "seam");
        let e = select(&["nope".into()]).err().unwrap();
        assert!(
            e.contains("no mutants group `nope`") && e.contains("harness"),
            "{e}"
        );
    }
}
