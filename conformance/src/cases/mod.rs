//! Every case, written once. Each case's doc comment names the mutation of the
//! implementation that turns it red (tried in a scratch copy; see
//! docs/contract.md for the list and the red trial each gave).

use crate::Case;

mod bad_input;
mod bounds;
mod conditional;
mod conditional_misuse;
mod conditional_spans;
mod extents;
mod gemm_shapes;
mod kernel_chain;
mod kernel_sources;
mod kernels;
mod lifetimes;
mod node_spans;
mod order;
mod peers;
mod prewarm;
mod reexecution;
mod reporting;
mod results;
mod stream_order;
mod transfers;
mod update;
mod update_checks;
mod views;

/// The whole suite, in contract order.
pub static ALL: &[Case] = &[
    reexecution::C1_REPLAY_REEXECUTES,
    reexecution::C1_CURRENT_EXEC_REEXECUTES,
    reexecution::C1_CAPTURE_DOES_NOT_EXECUTE,
    reexecution::C1_DEPENDENT_CHAIN_REPLAYS_IN_ORDER,
    peers::C1_TEN_THOUSAND_LAUNCHES_IN_ONE_CAPTURE,
    reexecution::C2_HOST_WRITE_SEEN_BY_NEXT_REPLAY,
    reexecution::C2_PARTIAL_WRITE_SEEN_BY_NEXT_REPLAY,
    stream_order::C2_EAGER_WORK_AND_REPLAYS_KEEP_STREAM_ORDER,
    peers::C2_HALF_HOST_ACCESS_AT_ODD_OFFSETS,
    transfers::C2_LARGE_TRANSFERS_ARRIVE_WHOLE,
    reexecution::C3_HANDLES_DO_NOT_ALIAS,
    reexecution::C3_CURRENT_EXEC_AND_HANDLE_DISTINCT,
    reexecution::C3_NEW_CURRENT_EXEC_REPLACES_OLD,
    lifetimes::C3_HANDLE_KEEPS_ITS_WORK_ACROSS_LATER_ENDS,
    results::C4_EAGER_AND_CAPTURED_IDENTICAL,
    results::C4_DECODE_STACK_EAGER_AND_CAPTURED_IDENTICAL,
    peers::C4_TRACING_DOES_NOT_CHANGE_OUTPUTS,
    order::C5_ALLOC_INSIDE_CAPTURE_REFUSED,
    order::C5_FREE_INSIDE_CAPTURE_REFUSED,
    order::C5_DROPPED_BUFFER_DEFERRED_UNTIL_SAFE,
    lifetimes::C5_UNUSED_DROPS_IN_CAPTURE_WAIT_FOR_ITS_END,
    order::C6_NESTED_BEGIN_REFUSED,
    order::C6_END_WITHOUT_BEGIN_REFUSED,
    order::C6_UNKNOWN_OR_DESTROYED_HANDLE_REFUSED,
    order::C6_HOST_CALLS_INSIDE_CAPTURE_REFUSED,
    order::C6_LAUNCH_FROM_OTHER_THREAD_REFUSED,
    order::C6_CAPTURE_SCOPE_ABORTS_ON_EARLY_RETURN,
    order::C6_NOTHING_LEAKS_AFTER_ERRORS,
    peers::C6_EMPTY_CAPTURE_IS_A_REPLAYABLE_NO_OP,
    peers::C6_CAPTURE_CYCLES_KEEP_RESOURCES_FLAT,
    peers::C6_TWO_DEVICES_CAPTURE_CONCURRENTLY,
    prewarm::C7_PREPARED_GEMM_CAPTURES_AND_REPLAYS,
    prewarm::C7_COLD_VENDOR_OP_FAILS_LOUDLY_OR_SUCCEEDS,
    peers::C7_EAGER_GEMM_BETWEEN_REPLAYS,
    prewarm::C8_DESTROY_WHILE_REPLAY_IN_FLIGHT,
    prewarm::C8_REPLACE_CURRENT_EXEC_WHILE_IN_FLIGHT,
    lifetimes::C8_FREE_WHILE_QUEUED_WORK_READS,
    reporting::C9_REPORT_MATCHES_BEHAVIOUR,
    reporting::C10_EVERY_REPLAY_COUNTED,
    reporting::C10_COUNTS_ARE_PER_HANDLE,
    reporting::C10_DEVICE_SPANS_MATCH_REPLAYS,
    node_spans::C10_NODE_SPANS_INSIDE_REPLAYS,
    peers::C10_REPLAY_EVENTS_NAME_THEIR_GRAPH,
    results::C11_EVERY_OP_AGREES_WITH_CPU,
    results::C11_KNOWN_VALUES,
    results::C11_SUBNORMALS_AS_DECLARED,
    views::C11_VIEWS_AT_ODD_OFFSETS_AGREE_WITH_CPU,
    gemm_shapes::C11_GEMM_SHAPES_AGREE_WITH_CPU,
    bad_input::C12_BAD_LAUNCHES_REFUSED_BEFORE_WORK,
    bad_input::C12_BAD_HOST_ACCESS_REFUSED,
    bad_input::C12_BAD_MEMORY_CALLS_REFUSED,
    bad_input::C12_FOREIGN_IDS_REFUSED,
    bounds::C12_BOUNDS_FROM_THE_RULES,
    extents::C12_WRITES_OUTSIDE_EXTENTS_NAMED,
    kernel_sources::C12_BAD_KERNEL_SOURCES_REFUSED,
    views::C12_VIEW_RULES_FROM_THE_SIGNATURES,
    update::C13_REBIND_EQUALS_FRESH_CAPTURE,
    update::C13_UPDATES_BACK_AND_FORTH,
    update::C13_QUEUED_REPLAYS_KEEP_OLD_BINDINGS,
    update::C13_QUEUED_REPLAYS_KEEP_OLD_PARAMS,
    update::C13_UPDATE_PARAMS_EQUALS_FRESH_CAPTURE,
    update::C13_UPDATE_LAUNCH_MOVES_A_VIEW,
    update::C13_REBIND_MAKES_LAUNCHES_DEPENDENT,
    update_checks::C13_BAD_UPDATES_REFUSED,
    update_checks::C13_REBINDS_LEAVE_RESOURCES_FLAT,
    update_checks::C13_UPDATE_REPORT_MATCHES_BEHAVIOUR,
    conditional::C14_IF_FOLLOWS_ITS_CONDITION,
    conditional::C14_WHILE_RUNS_AS_THE_HOST_LOOP,
    conditional::C14_IF_NESTED_IN_WHILE,
    conditional::C14_UPDATES_REACH_INSIDE_BODIES,
    conditional_misuse::C14_MISUSE_REFUSED_CAPTURE_USABLE,
    conditional_misuse::C14_REPORT_MATCHES_BEHAVIOUR,
    conditional_spans::C14_NODE_SPANS_FOLLOW_ITERATIONS,
];

/// Cases over user kernels, each run once per kernel of the run
/// (`crate::kernels()`), as trials `<device>::<case>::<kernel>`.
pub static KERNEL_CASES: &[Case] = &[
    kernels::C1_USER_KERNEL_REPLAY_REEXECUTES,
    kernels::C2_USER_KERNEL_KEEPS_STREAM_ORDER,
    kernels::C4_USER_KERNEL_EAGER_AND_CAPTURED_IDENTICAL,
    kernels::C11_USER_KERNEL_AGREES_WITH_CPU,
    kernel_chain::C11_USER_KERNEL_CHAIN_AGREES_WITH_CPU,
    kernels::C12_USER_KERNEL_BAD_LAUNCHES_REFUSED,
];

/// The guard elements kept on each side of a view by the view cases.
pub use kernels::GUARD;

#[cfg(test)]
mod tests {
    use super::ALL;
    use std::collections::HashSet;

    #[test]
    fn case_names_are_unique_and_prefixed_by_rule() {
        let mut seen = HashSet::new();
        for c in ALL.iter().chain(super::KERNEL_CASES) {
            assert!(seen.insert(c.name), "duplicate case {}", c.name);
            let prefix = format!("{}_", c.rule).to_lowercase();
            assert!(
                c.name.starts_with(&prefix),
                "{} does not start with {prefix}",
                c.name
            );
        }
    }

    #[test]
    fn every_rule_has_a_case() {
        use crate::Rule::*;
        for r in [C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13, C14] {
            assert!(ALL.iter().any(|c| c.rule == r), "no case for {r}");
        }
    }
}

#[cfg(test)]
mod docs {
    /// docs/contract.md must list every case, so the documented contract matches the suite.
    #[test]
    fn contract_doc_lists_every_case() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/contract.md"))
                .expect("docs/contract.md");
        for c in super::ALL.iter().chain(super::KERNEL_CASES) {
            assert!(
                doc.contains(&format!("`{}`", c.name)),
                "docs/contract.md does not list {}",
                c.name
            );
        }
    }
}
