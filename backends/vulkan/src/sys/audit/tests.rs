//! The audit's rules, command by command: what it accepts and what it refuses.

use super::*;
use vk::AccessFlags as A;
use vk::PipelineStageFlags as S;
use Command::{Copy, Dispatch};

const A_: u64 = 0xa;
const B: u64 = 0xb;
const OUT: u64 = 0xc;

/// Orders every compute or transfer access after every other.
fn full() -> Scope {
    Scope {
        src_stages: S::COMPUTE_SHADER | S::TRANSFER,
        dst_stages: S::COMPUTE_SHADER | S::TRANSFER,
        src_access: A::SHADER_WRITE | A::TRANSFER_WRITE,
        dst_access: A::SHADER_READ | A::SHADER_WRITE | A::TRANSFER_READ | A::TRANSFER_WRITE,
    }
}

fn after_barrier() -> Audit {
    let mut a = Audit::default();
    a.barrier(&full());
    a
}

#[test]
fn a_barrier_before_every_dependent_dispatch_passes() {
    let mut a = after_barrier();
    for _ in 0..3 {
        a.command(Dispatch, &[(A_, false), (OUT, true)]).unwrap();
        a.barrier(&full());
        a.command(Dispatch, &[(OUT, false), (B, true)]).unwrap();
        a.barrier(&full());
    }
}

#[test]
fn read_after_write_without_a_barrier_is_a_hazard() {
    let mut a = after_barrier();
    a.command(Dispatch, &[(A_, false), (OUT, true)]).unwrap();
    let h = a.command(Dispatch, &[(OUT, false), (B, true)]).unwrap_err();
    assert_eq!(h.earlier, Some((1, true)));
    assert_eq!((h.number, h.writes, h.buffer), (2, false, OUT));
    let text = h.to_string();
    assert!(
        text.contains("read after write") && text.contains("#1"),
        "{text}"
    );
}

#[test]
fn write_after_read_and_write_after_write_are_hazards() {
    let mut a = after_barrier();
    a.command(Dispatch, &[(A_, false), (OUT, true)]).unwrap();
    let war = a.command(Copy, &[(B, false), (A_, true)]).unwrap_err();
    assert!(war.to_string().contains("write after read"), "{war}");
    assert_eq!(war.command, "copy");
    let waw = a.command(Dispatch, &[(OUT, true)]).unwrap_err();
    assert!(waw.to_string().contains("write after write"), "{waw}");
}

/// `full()` with indirect-argument reads in both scopes
/// (`record::global_indirect`).
fn with_indirect() -> Scope {
    let f = full();
    Scope {
        src_stages: f.src_stages | S::DRAW_INDIRECT,
        dst_stages: f.dst_stages | S::DRAW_INDIRECT,
        dst_access: f.dst_access | A::INDIRECT_COMMAND_READ,
        ..f
    }
}

/// A write to a buffer that may hold indirect arguments, then an
/// indirect dispatch reading it: a barrier without indirect reads in
/// its second scope orders every other later access but not that one
/// (the write stays pending past it); one with them does. A later write
/// after the indirect read needs DRAW_INDIRECT in the first scope.
/// Mutations: the write dropped from the pending list once the four
/// direct kinds are ordered, `Indirect`'s stage taken as the compute
/// shader's → red.
#[test]
fn indirect_arguments_need_a_barrier_that_holds_their_reads() {
    use Command::Indirect;
    const CTL: u64 = 0xd;
    let mut a = Audit::default();
    a.barrier(&with_indirect());
    a.indirect_args(CTL);
    a.command(Dispatch, &[(A_, false), (CTL, true)]).unwrap();
    a.barrier(&full());
    a.command(Dispatch, &[(CTL, false), (B, true)]).unwrap();
    let h = a.command(Indirect, &[(CTL, false)]).unwrap_err();
    assert_eq!(h.earlier, Some((1, true)));
    assert!(h.to_string().contains("indirect arguments"), "{h}");
    a.barrier(&with_indirect());
    a.command(Indirect, &[(CTL, false)]).unwrap();
    a.barrier(&full());
    let war = a.command(Dispatch, &[(CTL, true)]).unwrap_err();
    assert!(war.to_string().contains("write after read"), "{war}");
    a.barrier(&with_indirect());
    a.command(Dispatch, &[(CTL, true)]).unwrap();
    // The first indirect read of a command buffer must follow a
    // barrier that orders it after earlier submissions' writes.
    let mut fresh = after_barrier();
    assert_eq!(
        fresh
            .command(Indirect, &[(CTL, false)])
            .unwrap_err()
            .earlier,
        None
    );
    fresh.barrier(&with_indirect());
    fresh.command(Indirect, &[(CTL, false)]).unwrap();
}

#[test]
fn reads_of_one_buffer_need_no_barrier() {
    let mut a = after_barrier();
    a.command(Dispatch, &[(A_, false), (OUT, true)]).unwrap();
    a.command(Dispatch, &[(A_, false), (B, true)]).unwrap();
}

#[test]
fn one_command_may_read_and_write_one_buffer() {
    // `add(a, dst, dst)`: each invocation reads, then writes, its element.
    let mut a = after_barrier();
    a.command(Dispatch, &[(A_, false), (OUT, false), (OUT, true)])
        .unwrap();
}

#[test]
fn the_first_access_must_follow_a_barrier() {
    let mut a = Audit::default();
    let h = a.command(Dispatch, &[(A_, false)]).unwrap_err();
    assert_eq!(h.earlier, None);
    assert!(h.to_string().contains("before any barrier"), "{h}");
}

#[test]
fn a_refused_command_is_not_recorded() {
    let mut a = after_barrier();
    a.command(Dispatch, &[(OUT, true)]).unwrap();
    a.command(Dispatch, &[(OUT, false)]).unwrap_err();
    a.barrier(&full());
    // Numbering continues from the last recorded command.
    let h = {
        a.command(Dispatch, &[(OUT, true)]).unwrap();
        a.command(Dispatch, &[(OUT, true)]).unwrap_err()
    };
    assert_eq!((h.number, h.earlier), (3, Some((2, true))));
}

/// Each bit of `full()` dropped in turn: the write it leaves unordered
/// (or, for a destination bit, the later access it leaves out) is a
/// hazard, and every other pair stays ordered.
#[test]
fn a_barrier_orders_only_what_its_masks_hold() {
    // (earlier command, later command, later writes) of a dependent pair
    // through one buffer: the earlier always writes.
    let pairs = [
        (Dispatch, Dispatch, false),
        (Dispatch, Dispatch, true),
        (Dispatch, Copy, false),
        (Copy, Dispatch, false),
        (Copy, Copy, true),
    ];
    let ordered = |scope: &Scope, (e, l, w): (Command, Command, bool)| {
        let mut a = after_barrier();
        a.command(e, &[(OUT, true)]).unwrap();
        a.barrier(scope);
        a.command(l, &[(OUT, w)]).is_ok()
    };
    let f = full();
    for pair in pairs {
        assert!(ordered(&f, pair), "{pair:?}");
    }
    let (e, l, w) = (Dispatch, Dispatch, false);
    let without = |s: Scope| ordered(&s, (e, l, w));
    assert!(!without(Scope {
        src_stages: S::TRANSFER,
        ..f
    }));
    assert!(!without(Scope {
        dst_stages: S::TRANSFER,
        ..f
    }));
    assert!(!without(Scope {
        src_access: A::TRANSFER_WRITE,
        ..f
    }));
    let no_read = A::SHADER_WRITE | A::TRANSFER_READ | A::TRANSFER_WRITE;
    assert!(!without(Scope {
        dst_access: no_read,
        ..f
    }));
    // The shader's read is made visible, the copy's is not.
    let s = Scope {
        dst_access: A::SHADER_READ | A::SHADER_WRITE,
        ..f
    };
    assert!(ordered(&s, (Dispatch, Dispatch, false)));
    assert!(!ordered(&s, (Dispatch, Copy, false)));
    assert!(!ordered(&s, (Copy, Copy, true)));
    let h = {
        let mut a = after_barrier();
        a.command(Dispatch, &[(OUT, true)]).unwrap();
        a.barrier(&Scope {
            dst_access: no_read,
            ..f
        });
        a.command(Dispatch, &[(OUT, false)]).unwrap_err()
    };
    assert!(h.to_string().contains("read after write"), "{h}");
}

#[test]
fn write_after_read_needs_only_the_execution_dependency() {
    let exec_only = Scope {
        src_access: A::empty(),
        dst_access: A::empty(),
        ..full()
    };
    let mut a = after_barrier();
    a.command(Dispatch, &[(A_, false), (OUT, true)]).unwrap();
    a.barrier(&exec_only);
    // The read of A is ordered before the copy's write.
    a.command(Copy, &[(B, false), (A_, true)]).unwrap();
    // The write of OUT is not made visible to a later read.
    let h = a.command(Dispatch, &[(OUT, false)]).unwrap_err();
    assert_eq!(h.earlier, Some((1, true)));
}

#[test]
fn two_partial_barriers_together_order_what_each_orders() {
    let reads = Scope {
        dst_access: A::SHADER_READ | A::TRANSFER_READ,
        ..full()
    };
    let writes = Scope {
        dst_access: A::SHADER_WRITE | A::TRANSFER_WRITE,
        ..full()
    };
    let mut a = after_barrier();
    a.command(Dispatch, &[(OUT, true)]).unwrap();
    a.barrier(&reads);
    assert_eq!(a.pending.len(), 1, "a write is still pending for writers");
    a.barrier(&writes);
    assert!(a.pending.is_empty());
    a.command(Copy, &[(OUT, true)]).unwrap();
}

#[test]
fn the_first_access_of_a_kind_needs_a_barrier_ordering_that_kind() {
    let mut a = Audit::default();
    a.barrier(&Scope {
        dst_stages: S::COMPUTE_SHADER,
        ..full()
    });
    a.command(Dispatch, &[(A_, false), (OUT, true)]).unwrap();
    let h = a.command(Copy, &[(B, false)]).unwrap_err();
    assert_eq!((h.command, h.earlier), ("copy", None));
    // After a barrier missing a write's source access, nothing is
    // ordered after earlier submissions.
    let mut a = Audit::default();
    a.barrier(&Scope {
        src_access: A::SHADER_WRITE,
        ..full()
    });
    assert_eq!(
        a.command(Dispatch, &[(A_, false)]).unwrap_err().earlier,
        None
    );
    let fresh = Audit::after_barrier(4, &full());
    assert_eq!((fresh.ordered, fresh.commands), (ALL_KINDS, 4));
}

#[test]
fn every_write_must_be_visible_to_the_host_at_the_end() {
    let host = Scope {
        src_stages: S::COMPUTE_SHADER | S::TRANSFER,
        dst_stages: S::HOST,
        src_access: A::SHADER_WRITE | A::TRANSFER_WRITE,
        dst_access: A::HOST_READ,
    };
    let program = || {
        let mut a = after_barrier();
        a.command(Dispatch, &[(A_, false)]).unwrap();
        // Reads alone: nothing to make visible.
        a.end().unwrap();
        a.command(Dispatch, &[(OUT, true)]).unwrap();
        a.barrier(&full());
        a.command(Copy, &[(OUT, false), (B, true)]).unwrap();
        a
    };
    let mut a = program();
    a.barrier(&host);
    a.end().unwrap();
    // A write after the host barrier is not shown by it.
    a.command(Dispatch, &[(A_, true)]).unwrap();
    let h = a.end().unwrap_err();
    assert_eq!((h.command, h.number, h.buffer), ("host", 4, A_));
    assert!(h.to_string().contains("visible to the host"), "{h}");
    for (broken, number) in [
        (
            Scope {
                src_stages: S::TRANSFER,
                ..host
            },
            2,
        ),
        (
            Scope {
                src_stages: S::COMPUTE_SHADER,
                ..host
            },
            3,
        ),
        (
            Scope {
                src_access: A::TRANSFER_WRITE,
                ..host
            },
            2,
        ),
        (
            Scope {
                src_access: A::SHADER_WRITE,
                ..host
            },
            3,
        ),
        (
            Scope {
                dst_stages: S::COMPUTE_SHADER,
                ..host
            },
            2,
        ),
        (
            Scope {
                dst_access: A::SHADER_READ,
                ..host
            },
            2,
        ),
    ] {
        let mut a = program();
        a.barrier(&broken);
        let h = a.end().unwrap_err();
        assert_eq!((h.command, h.number), ("host", number), "{broken:?}");
    }
    let mut a = program();
    a.reset();
    a.end().unwrap();
}

/// Each later access has a bit of its own: dispatch and copy, reading and
/// writing, in `ALL_KINDS`; the indirect read is `INDIRECT_KIND`.
#[test]
fn each_later_access_has_its_own_kind() {
    let kinds: Vec<u8> = Command::LATER.iter().map(|&(c, w)| c.kind(w)).collect();
    assert_eq!(kinds, [0b1, 0b10, 0b100, 0b1000, INDIRECT_KIND]);
    assert_eq!(kinds.iter().fold(0, |a, k| a | k), EVERY_KIND);
    assert_eq!(kinds[..4].iter().fold(0, |a, k| a | k), ALL_KINDS);
    assert_eq!(Command::WRITERS.map(|c| c.kind(true)), [0b10, 0b1000]);
    assert_eq!(WRITE_KINDS, 0b1010);
}
