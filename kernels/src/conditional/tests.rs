//! Tests of the emulation: unrolling and its step bound, nesting, the recorder, the gate's launch and its WGSL.

use super::*;

fn shape(steps: &[Unrolled<char>]) -> String {
    steps
        .iter()
        .map(|s| match s {
            Unrolled::Dispatch { index, slot: None } => format!("{index}"),
            Unrolled::Dispatch {
                index,
                slot: Some(s),
            } => format!("{index}@{s}"),
            Unrolled::Gate { cond, gate: g } => format!(
                "g{cond}{}f{}[{}+{}]",
                g.latch,
                if g.follows == NONE {
                    "-".into()
                } else {
                    g.follows.to_string()
                },
                g.first_word,
                g.count
            ),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A WHILE of 2 holding an IF: the WHILE's gate before each copy (the
/// first following no latch, the second its own), the IF's gate inside
/// each copy following the WHILE's latch, slots per body in closing
/// order (the IF's dispatch first) after the two latches, dispatches
/// outside bodies direct. Mutations: a later copy following the
/// enclosing latch instead of its own, slots of nested dispatches
/// counted in the outer body, the copies of a WHILE not repeated → red.
#[test]
fn bodies_unroll_into_gated_copies() {
    use Structure::*;
    let items = vec![
        Dispatch(0),
        Begin(ConditionalKind::While { max_iterations: 2 }, 'w', 2),
        Dispatch(1),
        Begin(ConditionalKind::If, 'i', 0),
        Dispatch(2),
        End,
        Dispatch(3),
        End,
        Dispatch(4),
    ];
    let (steps, latches, slots) = unroll(items, MAX_STEPS).unwrap();
    assert_eq!(latches, 2);
    assert_eq!(slots, vec![2, 1, 3]);
    assert_eq!(
        shape(&steps),
        "0 gw0f-[8+2] 1@1 gi1f0[2+1] 2@0 3@2 gw0f0[8+2] 1@1 gi1f0[2+1] 2@0 3@2 4"
    );
    assert!(steps.iter().all(|s| match s {
        Unrolled::Gate { cond, gate } => (*cond == 'w') == (gate.cond_word == 2),
        _ => true,
    }));
    assert_eq!(counts_word(2, 1), 11);
    assert_eq!(
        control_words(2, &slots, |l| [l, 10 + l, 20 + l]),
        vec![0, 0, 2, 12, 22, 0, 0, 0, 1, 11, 21, 0, 0, 0, 3, 13, 23, 0, 0, 0]
    );
    assert!(matches!(
        unroll::<char>(vec![End], MAX_STEPS),
        Err(ErrorKind::NoOpenConditional)
    ));
    assert!(matches!(
        unroll(vec![Begin(ConditionalKind::If, 'i', 0)], MAX_STEPS),
        Err(ErrorKind::UnclosedConditional { open: 1 })
    ));
}

/// The gate's block: its params, then the condition's word as binding
/// 0's offset and binding 1 from its start.
#[test]
fn the_gate_block_is_its_launch() {
    let g = Gate {
        cond_word: 5,
        follows: NONE,
        latch: 1,
        first_word: 8,
        count: 2,
    };
    let b = g.block();
    let word = |k: usize| u32::from_ne_bytes(b[4 * k..4 * k + 4].try_into().unwrap());
    assert_eq!([word(0), word(1), word(2), word(3)], [8, 2, 1, NONE]);
    assert_eq!([word(8), word(9)], [5, 0]);
    let mut ext = [0u64; 2];
    (GATE.extents)(&g.params(), &mut ext);
    assert_eq!(ext, [1, 20]);
    // A gate of a body with no dispatch of its own (only nested
    // bodies) touches latches past its count words: the control
    // buffer's extent reaches the higher of its latch and the one it
    // follows. Mutation: the latch's `+ 1` → `- 1` or `* 1` → red.
    for (follows, latch, want) in [(NONE, 5, 6), (7, 2, 8), (3, 9, 10)] {
        let g = Gate {
            cond_word: 0,
            follows,
            latch,
            first_word: 2,
            count: 0,
        };
        (GATE.extents)(&g.params(), &mut ext);
        assert_eq!(ext, [1, want], "follows {follows}, latch {latch}");
    }
    // The setter of a CUDA conditional node reads one word, counts in
    // another, and carries its handle's two halves, its bound and
    // whether an iteration ran.
    let handle = 0x0123_4567_89ab_cdef_u64;
    let p = set_condition_params(handle, 7, true);
    assert_eq!((p.d0, p.d1, p.d2, p.bits), (0x89ab_cdef, 0x0123_4567, 7, 1));
    assert_eq!(set_condition_params(handle, 1, false).bits, 0);
    let mut ext = [0u64; 2];
    (SET_CONDITION.extents)(&p, &mut ext);
    assert_eq!(ext, [1, 1]);
}

/// A body's copies are its bound times those of the bodies around it:
/// refused past `MAX_COPIES` (nothing opened), accepted up to it.
/// Mutation: the enclosing copies left out → red (the nested WHILE of
/// 4 in one of `MAX_COPIES / 2` is accepted).
#[test]
fn nested_bodies_multiply_their_copies() {
    let w = |max_iterations| ConditionalKind::While { max_iterations };
    let mut n = Nesting::default();
    assert!(matches!(
        n.open(w(u32::MAX)),
        Err(ErrorKind::TooLarge { .. })
    ));
    assert_eq!(n.depth(), 0);
    n.open(w((MAX_COPIES / 2) as u32)).unwrap();
    assert!(matches!(n.open(w(4)), Err(ErrorKind::TooLarge { .. })));
    n.open(w(2)).unwrap();
    n.open(ConditionalKind::If).unwrap();
    assert!(matches!(n.open(w(2)), Err(ErrorKind::TooLarge { .. })));
    assert_eq!(n.depth(), 3);
    for _ in 0..3 {
        n.close().unwrap();
    }
    assert!(matches!(n.close(), Err(ErrorKind::NoOpenConditional)));
}

/// A WHILE of 3 over one dispatch, between two: 8 steps (a gate and a
/// dispatch a copy), taken under a bound of 8 and refused under 7; a
/// `u32::MAX` WHILE refused without being built.
#[test]
fn the_step_bound_is_inclusive() {
    use Structure::*;
    let w = |max_iterations| {
        vec![
            Dispatch(0),
            Begin(ConditionalKind::While { max_iterations }, 'w', 0),
            Dispatch(1),
            End,
            Dispatch(2),
        ]
    };
    assert_eq!(unroll(w(3), 8).unwrap().0.len(), 8);
    assert!(matches!(unroll(w(3), 7), Err(ErrorKind::TooLarge { .. })));
    assert!(matches!(
        unroll(w(u32::MAX), MAX_STEPS),
        Err(ErrorKind::TooLarge { .. })
    ));
}

/// The recorder numbers launches from its last take, records a body
/// only once its bound is accepted, and remembers that one opened.
/// Mutations: a refused body recorded, or `take` keeping the count →
/// red.
#[test]
fn the_recorder_keeps_what_unroll_reads() {
    use Structure::*;
    let shape = |s: Vec<Structure<char>>| -> Vec<String> {
        s.into_iter()
            .map(|i| match i {
                Dispatch(n) => format!("d{n}"),
                Begin(_, c, w) => format!("{c}{w}"),
                End => "end".into(),
            })
            .collect()
    };
    let mut r = Recorder::default();
    assert_eq!(r.launch(), 0);
    assert!(!r.has_bodies() && !r.is_open());
    assert!(matches!(r.close(), Err(ErrorKind::NoOpenConditional)));
    let huge = ConditionalKind::While {
        max_iterations: u32::MAX,
    };
    assert!(matches!(
        r.open(huge, 'x', 0),
        Err(ErrorKind::TooLarge { .. })
    ));
    assert!(!r.has_bodies() && !r.is_open());
    r.open(ConditionalKind::If, 'c', 3).unwrap();
    assert!(r.is_open());
    assert_eq!(r.launch(), 1);
    r.close().unwrap();
    assert!(!r.is_open() && r.has_bodies());
    assert_eq!(shape(r.take()), ["d0", "c3", "d1", "end"]);
    assert_eq!(r.launch(), 0);
    assert_eq!(shape(r.take()), ["d0"]);
    assert!(r.has_bodies());
}

/// The gate's WGSL passes core's checks of a user kernel (naga's
/// validation, bindings and fields against its definition).
#[test]
fn the_gate_compiles_as_a_user_kernel() {
    seam::wgsl::compile(seam::Kernel::new(&GATE)).unwrap();
}
