//! libtest's filters for test binaries with a harness of their own
//! (libtest-mimic, `harness = false`): `cargo test -- a b` hands every test
//! binary both filters, and libtest runs a test that matches any of them,
//! while libtest-mimic's parser takes at most one and refuses the run
//! otherwise. These split the filters off the command line and apply them.

/// libtest's command line split into its options and its filters. The
/// first argument (the program) stays with the options; an option that
/// takes a value keeps it (libtest-mimic 0.8's: `-Z`, `--test-threads`,
/// `--logfile`, `--skip`, `--color`, `--format`).
pub fn split_filters(args: impl IntoIterator<Item = String>) -> (Vec<String>, Vec<String>) {
    const WITH_VALUE: &[&str] = &[
        "-Z",
        "--test-threads",
        "--logfile",
        "--skip",
        "--color",
        "--format",
    ];
    let mut it = args.into_iter();
    let mut rest: Vec<String> = it.next().into_iter().collect();
    let mut filters = Vec::new();
    while let Some(a) = it.next() {
        if WITH_VALUE.contains(&a.as_str()) {
            rest.push(a);
            rest.extend(it.next());
        } else if a.starts_with('-') {
            rest.push(a);
        } else {
            filters.push(a);
        }
    }
    (rest, filters)
}

/// Whether the test `name` runs under `filters` as libtest decides: every
/// test when there is none, else one whose name contains any of them (is
/// one of them, with `--exact`).
pub fn filtered_in(name: &str, filters: &[String], exact: bool) -> bool {
    filters.is_empty()
        || filters.iter().any(|f| {
            if exact {
                name == f
            } else {
                name.contains(f.as_str())
            }
        })
}

/// Apply `filters` to `tests` for a harness that takes at most one filter
/// itself (libtest-mimic): with none or one, every test is kept and the one
/// filter is returned for the harness to apply (so it counts the tests it
/// filtered out); with more, the tests no filter matches are left out here
/// and none is returned.
pub fn apply_filters<T>(
    filters: &[String],
    exact: bool,
    tests: Vec<T>,
    name: impl Fn(&T) -> &str,
) -> (Option<String>, Vec<T>) {
    match filters {
        [] => (None, tests),
        [one] => (Some(one.clone()), tests),
        many => (
            None,
            tests
                .into_iter()
                .filter(|t| filtered_in(name(t), many, exact))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    /// Filters come out of the command line; options, and their values,
    /// stay.
    #[test]
    fn filters_are_split_from_options_and_their_values() {
        let (rest, filters) = split_filters(strings(&[
            "prog",
            "vulkan:0::",
            "--skip",
            "c8",
            "--exact",
            "tests::",
            "--test-threads",
            "2",
            "--format=terse",
        ]));
        assert_eq!(
            rest,
            strings(&[
                "prog",
                "--skip",
                "c8",
                "--exact",
                "--test-threads",
                "2",
                "--format=terse"
            ])
        );
        assert_eq!(filters, strings(&["vulkan:0::", "tests::"]));
        let (rest, filters) = split_filters(strings(&["prog"]));
        assert_eq!((rest, filters), (strings(&["prog"]), vec![]));
    }

    /// Any filter lets a test in; none lets every test in; `--exact` wants
    /// the whole name.
    #[test]
    fn a_test_runs_when_any_filter_matches() {
        let f = strings(&["vulkan:0::", "tests::"]);
        assert!(filtered_in("vulkan:0::c1_a", &f, false));
        assert!(filtered_in("x::tests::unit", &f, false));
        assert!(!filtered_in("cpu:0::c1_a", &f, false));
        assert!(filtered_in("anything", &[], false));
        assert!(!filtered_in("vulkan:0::c1_a", &f, true));
        assert!(filtered_in("tests::", &f, true));
    }

    /// One filter is the harness's to apply; several are applied here.
    #[test]
    fn one_filter_is_handed_on_and_several_are_applied() {
        let tests = || strings(&["vulkan:0::a", "cpu:0::a", "x::tests::b"]);
        let id = String::as_str;
        assert_eq!(apply_filters(&[], false, tests(), id), (None, tests()));
        let one = strings(&["cpu:0::"]);
        assert_eq!(
            apply_filters(&one, false, tests(), id),
            (Some("cpu:0::".to_string()), tests())
        );
        let two = strings(&["vulkan:0::", "tests::"]);
        assert_eq!(
            apply_filters(&two, false, tests(), id),
            (None, strings(&["vulkan:0::a", "x::tests::b"]))
        );
    }
}
