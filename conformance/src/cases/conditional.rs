//! C14 conditional bodies: an IF or a WHILE captured into a graph decides
//! on the device, at each replay, exactly as the same program run as a
//! host loop (eager launches, the condition read by the host before each
//! body) decides on the CPU reference. Each case builds one program
//! ([`Node`]s over a set of buffers), captures it on the device under
//! test, runs it as a host loop on a fresh CPU reference device with the
//! same inputs, and compares every buffer bit for bit.

use crate::{check, check_eq, Case, CaseResult, Rule, Tag, ONCE};
use seam::{ops, BufferId, CaptureScope, Change, Device, ErrorKind, OpCall};

pub(super) const COND: &[Tag] = &[Tag::NeedsConditional];

/// A program: launches and conditional bodies over a device's buffers
/// (a few dozen nodes a case: the launch kept inline).
#[allow(clippy::large_enum_variant)]
pub(super) enum Node {
    Launch(OpCall),
    /// WHILE the `u32` at (buffer, element) is non-zero, at most this many times.
    While(BufferId, usize, u32, Vec<Node>),
    /// IF the `u32` at (buffer, element) is non-zero.
    If(BufferId, usize, Vec<Node>),
}

/// Record `nodes` into the open capture `scope` of `d`.
pub(super) fn record(scope: &CaptureScope<'_>, d: &Device, nodes: &[Node]) -> seam::Result<()> {
    for n in nodes {
        match n {
            Node::Launch(c) => d.launch(c)?,
            Node::While(b, at, max, body) => {
                scope.run_while(b.view(*at, 1), *max, || record(scope, d, body))?
            }
            Node::If(b, at, body) => scope.run_if(b.view(*at, 1), || record(scope, d, body))?,
        }
    }
    Ok(())
}

/// Run `nodes` on `d` as a host loop: launches eagerly, each condition read
/// by the host when the program reaches it.
pub(super) fn host_loop(d: &Device, nodes: &[Node]) -> seam::Result<()> {
    let holds = |b: &BufferId, at: &usize| -> seam::Result<bool> {
        Ok(d.read_range::<u32>(*b, *at, 1)?[0] != 0)
    };
    for n in nodes {
        match n {
            Node::Launch(c) => d.launch(c)?,
            Node::While(b, at, max, body) => {
                for _ in 0..*max {
                    if !holds(b, at)? {
                        break;
                    }
                    host_loop(d, body)?;
                }
            }
            Node::If(b, at, body) => {
                if holds(b, at)? {
                    host_loop(d, body)?;
                }
            }
        }
    }
    Ok(())
}

/// The buffers every C14 program works on, made alike on each device:
/// `acc` and `acc2` (f32), `ctl` (u32: 0 control words 0..4, the
/// counter at element 2), `gate` (u32), and the constants `minus` (u32:
/// u32::MAX, u32::MAX - 1: adding them subtracts 1 or 2).
pub(super) struct Bufs {
    pub(super) acc: seam::Buffer<f32>,
    acc2: seam::Buffer<f32>,
    pub(super) ctl: seam::Buffer<u32>,
    gate: seam::Buffer<u32>,
    minus: seam::Buffer<u32>,
}

pub(super) const N: usize = 16;
/// Where the WHILE counter lives in `ctl`: not at element 0, so a backend
/// that reads the condition from the buffer's start is seen.
pub(super) const COUNTER: usize = 2;

impl Bufs {
    pub(super) fn new(d: &Device) -> seam::Result<Bufs> {
        Ok(Bufs {
            acc: d.buffer_from(&start(N, 0.5))?,
            acc2: d.buffer_from(&start(N, -1.0))?,
            ctl: d.buffer_from(&[7u32, 9, 0, 11])?,
            gate: d.buffer_from(&[0u32])?,
            minus: d.buffer_from(&[u32::MAX, u32::MAX - 1])?,
        })
    }

    /// Put the inputs back (accumulators at their start, counter `k`).
    pub(super) fn reset(&self, k: u32) -> seam::Result<()> {
        self.acc.write(&start(N, 0.5))?;
        self.acc2.write(&start(N, -1.0))?;
        self.ctl.write(&[7, 9, k, 11])
    }

    /// Every buffer, for comparison.
    pub(super) fn contents(&self, d: &Device) -> seam::Result<Snapshot> {
        Ok(Snapshot {
            acc: d.read(self.acc.id())?,
            acc2: d.read(self.acc2.id())?,
            ctl: d.read(self.ctl.id())?,
            gate: d.read(self.gate.id())?,
        })
    }

    /// `acc = 2·acc + 1`.
    pub(super) fn double(&self, x: f32) -> Node {
        Node::Launch(ops::scale_add(
            self.acc.id(),
            self.acc.id(),
            N as u32,
            x,
            1.0,
        ))
    }

    /// `acc2 = acc2 + 1`.
    pub(super) fn count(&self) -> Node {
        Node::Launch(ops::scale_add(
            self.acc2.id(),
            self.acc2.id(),
            N as u32,
            1.0,
            1.0,
        ))
    }

    /// `ctl[COUNTER] -= 1`.
    pub(super) fn decrement(&self) -> Node {
        let c = self.ctl.id().view(COUNTER, 1);
        Node::Launch(ops::add(c, self.minus.id().view(0, 1), c, 1))
    }

    /// WHILE counter (at most `max`): double, count, decrement.
    pub(super) fn counted_loop(&self, max: u32, x: f32) -> Vec<Node> {
        vec![Node::While(
            self.ctl.id(),
            COUNTER,
            max,
            vec![self.double(x), self.count(), self.decrement()],
        )]
    }
}

/// What a program left in its buffers; equal when every bit is.
#[derive(Debug)]
pub(super) struct Snapshot {
    acc: Vec<f32>,
    acc2: Vec<f32>,
    ctl: Vec<u32>,
    gate: Vec<u32>,
}

impl PartialEq for Snapshot {
    fn eq(&self, o: &Snapshot) -> bool {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        bits(&self.acc) == bits(&o.acc)
            && bits(&self.acc2) == bits(&o.acc2)
            && self.ctl == o.ctl
            && self.gate == o.gate
    }
}

fn start(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| k + i as f32 * 0.125).collect()
}

/// Capture `program(bufs)` on the case's device, then for each counter
/// value in `ks`: reset both sides, replay on the device, run the program
/// as a host loop on the reference, and compare every buffer.
fn against_host_loop(
    d: &Device,
    reference: fn() -> Device,
    ks: &[u32],
    program: impl Fn(&Bufs) -> Vec<Node>,
) -> CaseResult {
    let mine = Bufs::new(d)?;
    let scope = d.capture()?;
    record(&scope, d, &program(&mine))?;
    let g = scope.end_graph()?;
    let r = reference();
    let theirs = Bufs::new(&r)?;
    for &k in ks {
        mine.reset(k)?;
        theirs.reset(k)?;
        g.replay()?;
        host_loop(&r, &program(&theirs))?;
        check_eq!(
            mine.contents(d)?,
            theirs.contents(&r)?,
            "counter {k}: the replay (left) against the host loop on the CPU reference (right)"
        );
    }
    Ok(())
}

/// A WHILE runs as the host loop for 0, 1, k and `max_iterations`
/// iterations and stops at `max_iterations` when the condition still
/// holds; its body writes the condition (a counter at element 2 of its
/// buffer); each count is a host write between replays of one graph (C1,
/// C2 inside the body).
///
/// A WHILE bounded by `u32::MAX` (an engine's "no bound") runs as the
/// host loop where the device accepts it; a device that cannot run it (an
/// emulation that unrolls its bound) refuses it with `TooLarge` when the
/// body opens, and the capture goes on.
///
/// Mutations: the CPU backend reads a WHILE's condition once, before the
/// first iteration (`if !r.holds() { break; }` moved out of the loop in
/// backends/cpu/src/program.rs) → red on cpu:0 at "counter 1: the replay
/// (left) against the host loop on the CPU reference (right)"; the
/// emulation's bound on copies removed (`Nesting::open` in
/// seam_kernels::conditional never refuses) → red on lavapipe's vulkan:0
/// and wgpu:0 at "end_capture_graph: graph with conditional bodies is too
/// large: more than 4194304 dispatches and gates unrolled" (the bound on
/// steps stops the unrolling, so the mutant fails fast, not by timeout).
pub const C14_WHILE_RUNS_AS_THE_HOST_LOOP: Case = Case {
    name: "c14_while_runs_as_the_host_loop",
    rule: Rule::C14,
    tags: COND,
    modes: ONCE,
    body: |cx| {
        against_host_loop(&cx.dev, cx.reference, &[0, 1, 3, 5, 8], |b| {
            b.counted_loop(5, 2.0)
        })?;
        unbounded(cx)
    },
};

/// The `u32::MAX` WHILE of [`C14_WHILE_RUNS_AS_THE_HOST_LOOP`].
fn unbounded(cx: &crate::Ctx) -> CaseResult {
    let d = &cx.dev;
    let probe = Bufs::new(d)?;
    let scope = d.capture()?;
    let opened = record(&scope, d, &probe.counted_loop(u32::MAX, 2.0));
    drop(scope);
    match opened {
        Ok(()) => against_host_loop(d, cx.reference, &[0, 1, 4], |b| {
            b.counted_loop(u32::MAX, 2.0)
        }),
        Err(e) => {
            check!(
                matches!(e.kind, ErrorKind::TooLarge { .. }),
                "a WHILE bounded by u32::MAX refused with {e}, not TooLarge"
            );
            // The capture that refused it goes on.
            let scope = d.capture()?;
            check!(
                record(&scope, d, &probe.counted_loop(u32::MAX, 2.0)).is_err(),
                "the same WHILE accepted in a second capture"
            );
            record(&scope, d, &[probe.double(2.0)])?;
            let g = scope.end_graph()?;
            probe.reset(0)?;
            g.replay()?;
            check_eq!(
                d.read::<f32>(probe.acc.id())?[0],
                2.0,
                "a launch recorded after the refused body: acc[0] = 2 · 0.5 + 1"
            );
            Ok(())
        }
    }
}

/// An IF runs its body when its condition is non-zero and skips it when
/// it is zero, the condition written inside the graph before the body (a
/// copy from `ctl[0]`, which the host sets between replays) or by a fill
/// that makes it zero; a WHILE inside a skipped IF runs no iteration
/// though its own condition holds; launches after a body run either way.
///
/// Mutation: the CPU backend runs an IF's body whatever its condition
/// (`if r.holds()` → `if true` in backends/cpu/src/program.rs) → red on
/// cpu:0 at "counter 1: the replay (left) against the host loop" (the
/// body after the fill ran).
pub const C14_IF_FOLLOWS_ITS_CONDITION: Case = Case {
    name: "c14_if_follows_its_condition",
    rule: Rule::C14,
    tags: COND,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        // ctl[0] ← ctl[COUNTER] (the host's k); IF ctl[0]: double; count;
        // gate ← 0; IF gate: double, then WHILE counter (3): double.
        against_host_loop(d, cx.reference, &[1, 0, 7, 0], |b| {
            let (ctl, gate) = (b.ctl.id(), b.gate.id());
            vec![
                Node::Launch(ops::copy(ctl.view(COUNTER, 1), ctl.view(0, 1), 1)),
                Node::If(ctl, 0, vec![b.double(2.0)]),
                b.count(),
                Node::Launch(ops::fill(gate, 1, 0)),
                Node::If(
                    gate,
                    0,
                    vec![
                        b.double(3.0),
                        Node::While(ctl, COUNTER, 3, vec![b.double(3.0)]),
                    ],
                ),
            ]
        })
    },
};

/// An IF nested in a WHILE decides afresh in each iteration: the body sets
/// `gate = counter - 2`, runs `double` only when the gate is non-zero
/// (every iteration but the one where the counter is 2), counts and
/// decrements; an empty IF at the end of the body is allowed.
///
/// Mutation: the CPU backend runs a body's nested bodies unconditionally
/// (`execute(r.first, r.end, inner, run)` → `execute(r.first, r.end, &[],
/// run)`) → red on cpu:0 at "counter 4: the replay (left) against the host
/// loop".
pub const C14_IF_NESTED_IN_WHILE: Case = Case {
    name: "c14_if_nested_in_while",
    rule: Rule::C14,
    tags: COND,
    modes: ONCE,
    body: |cx| {
        against_host_loop(&cx.dev, cx.reference, &[4, 2, 0], |b| {
            let c = b.ctl.id().view(COUNTER, 1);
            let gate = b.gate.id();
            vec![Node::While(
                b.ctl.id(),
                COUNTER,
                6,
                vec![
                    Node::Launch(ops::add(c, b.minus.id().view(1, 1), gate, 1)),
                    Node::If(gate, 0, vec![b.double(2.0)]),
                    b.count(),
                    b.decrement(),
                    Node::If(gate, 0, vec![]),
                ],
            )]
        })
    },
};

/// The program C13 updates: WHILE counter (at most 4) { double with `x`;
/// IF ctl[3]: count; decrement }, then IF ctl[0]: count. Three bodies,
/// one nested, all conditioned on `ctl`, so a rebind of `ctl` moves them
/// all and the graph is recorded anew with its whole structure.
fn updated_loop(b: &Bufs, x: f32) -> Vec<Node> {
    let ctl = b.ctl.id();
    vec![
        Node::While(
            ctl,
            COUNTER,
            4,
            vec![
                b.double(x),
                Node::If(ctl, 3, vec![b.count()]),
                b.decrement(),
            ],
        ),
        Node::If(ctl, 0, vec![b.count()]),
    ]
}

/// The snapshot of a graph that works on `acc` and `ctl` of `on` and the
/// rest of `rest`.
fn moved_contents(d: &Device, on: &Bufs, rest: &Bufs) -> seam::Result<Snapshot> {
    Ok(Snapshot {
        acc: d.read(on.acc.id())?,
        acc2: d.read(rest.acc2.id())?,
        ctl: d.read(on.ctl.id())?,
        gate: d.read(rest.gate.id())?,
    })
}

/// C13 reaches inside bodies: new parameters for a launch inside a WHILE,
/// then a rebind of the accumulator and of the conditions' buffer, then a
/// rebind back given in one call with a parameter change, each replayed
/// against the host loop of the changed program; the buffers rebound away
/// from keep what they held.
///
/// Mutation: a rebind leaves conditions where they were (`moved = true`
/// dropped in core/src/device/update.rs, so the graph keeps reading the old
/// counter) → red on cpu:0 at "after rebinding acc and ctl, counter 3: the
/// replay (left) against the host loop" (no iteration ran). Also red:
/// core's record of a moved condition keeping its old buffer (`cond`
/// dropped from the moved `Region`: the rebind back then moves nothing),
/// and a body's count of nested bodies wrong when it is not the capture's
/// first (`len - at - 1` → `len + at - 1` in `end_body`: the re-record
/// walks past the structure); and rebinds given beside other changes
/// leaving conditions where they were (the rebind back with its parameter
/// change then leaves the loop on the moved counter).
pub const C14_UPDATES_REACH_INSIDE_BODIES: Case = Case {
    name: "c14_updates_reach_inside_bodies",
    rule: Rule::C14,
    tags: COND,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let mine = Bufs::new(d)?;
        let scope = d.capture()?;
        record(&scope, d, &updated_loop(&mine, 2.0))?;
        let g = scope.end_graph()?;
        let r = (cx.reference)();
        let theirs = Bufs::new(&r)?;
        // Launch 0, inside the body: double with 3 instead of 2.
        let p = ops::scale_add(mine.acc.id(), mine.acc.id(), N as u32, 3.0, 1.0).params;
        d.update(
            &g,
            &[Change::Params {
                index: 0,
                params: p,
            }],
        )?;
        // One round: the device's inputs put back (counter k), a replay,
        // and the host loop of the updated program on the reference.
        let round = |k: u32,
                     reset: &dyn Fn() -> seam::Result<()>,
                     got: &dyn Fn() -> seam::Result<Snapshot>,
                     when: &str|
         -> CaseResult {
            reset()?;
            theirs.reset(k)?;
            g.replay()?;
            host_loop(&r, &updated_loop(&theirs, 3.0))?;
            check_eq!(
                got()?,
                theirs.contents(&r)?,
                "{when}, counter {k}: the replay (left) against the host loop"
            );
            Ok(())
        };
        for k in [3, 0] {
            round(
                k,
                &|| mine.reset(k),
                &|| mine.contents(d),
                "after new parameters inside the body",
            )?;
        }
        let moved = Bufs::new(d)?;
        let old = mine.contents(d)?;
        let pairs = [
            (mine.acc.id(), moved.acc.id()),
            (mine.ctl.id(), moved.ctl.id()),
        ];
        d.update(&g, &Change::rebinds(&pairs))?;
        for k in [3, 5] {
            // The graph now works on moved.acc, moved.ctl and the rest of mine.
            let reset = || {
                moved.reset(k)?;
                mine.acc2.write(&start(N, -1.0))
            };
            round(
                k,
                &reset,
                &|| moved_contents(d, &moved, &mine),
                "after rebinding acc and ctl",
            )?;
        }
        check_eq!(
            (d.read::<f32>(mine.acc.id())?, d.read::<u32>(mine.ctl.id())?),
            (old.acc, old.ctl),
            "the buffers rebound away from keep what they held"
        );
        // Back in one call with a parameter change (the same parameters):
        // rebinds beside other changes move the conditions as well.
        let mut back = Change::rebinds(&pairs.map(|(a, b)| (b, a)));
        back.push(Change::Params {
            index: 0,
            params: p,
        });
        d.update(&g, &back)?;
        moved.reset(0)?;
        for k in [2, 4] {
            round(
                k,
                &|| mine.reset(k),
                &|| mine.contents(d),
                "after rebinding back",
            )?;
        }
        check_eq!(
            d.read::<u32>(moved.ctl.id())?,
            vec![7, 9, 0, 11],
            "the conditions' buffer rebound away from is left alone"
        );
        Ok(())
    },
};
