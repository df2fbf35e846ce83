//! Conditional bodies (C14), emulated where the device has indirect
//! dispatches but no conditional or loop primitive (wgpu, Vulkan, Metal): a
//! captured body is unrolled (an IF once, a WHILE `max_iterations` times)
//! and every dispatch inside it becomes an indirect one, whose workgroup
//! counts the device reads from a buffer when it reaches it; before each
//! copy of a body a one-invocation *gate* ([`GATE`]) decides on the device
//! whether the copy runs and writes its dispatches' workgroup counts: the
//! recorded counts if it runs, zeros (a dispatch of no workgroups does
//! nothing) if not.
//!
//! Each graph with bodies has a control buffer of `u32` words: one latch
//! per body (1 while its current copy runs), then per dispatch inside a
//! body six words, its recorded counts and the counts its indirect
//! dispatch uses. A body's gate sets its latch from the condition and the
//! latch it follows: the enclosing body's (its first copy), or its own
//! (later copies of a WHILE, so a loop that stopped stays stopped); then
//! it writes the counts of the body's own dispatches. Bodies nested in it
//! have gates of their own in each copy. The backend orders every gate
//! and indirect dispatch after the commands before it that wrote what it
//! reads (the condition, the control buffer read as indirect arguments).
//!
//! The gate is a seam kernel ([`GATE`], WGSL with the shared prelude), made
//! by each backend's user-kernel path; its launch's immediate block is
//! [`Gate::block`]. The module also holds the kernel that sets a CUDA
//! conditional node's handle from the condition ([`SET_CONDITION`]), for
//! the stream backend's native bodies.

use seam::kernel::{Field, KernelDef};
use seam::ops::{Access, Binding, IMMEDIATE_BYTES};
use seam::{ConditionalKind, DType, ErrorKind, Params, Tolerance};

/// `Gate::follows` of a body at the top of the graph: no latch.
pub const NONE: u32 = u32::MAX;

/// What `conditional_support` reports where bodies are emulated so.
pub const HOW: &str = "each body unrolled (an IF once, a WHILE max_iterations times); \
     a one-invocation gate before each copy writes the workgroup counts of its indirect \
     dispatches on the device: the recorded counts while the condition holds, zeros after";

/// The most copies one body is unrolled into (its WHILE's bound times
/// those of the bodies around it).
pub const MAX_COPIES: u64 = 1 << 16;
/// The most steps (dispatches and gates) an unrolled graph holds
/// ([`unroll`]'s bound in every backend).
pub const MAX_STEPS: usize = 1 << 22;

/// The bodies open in a capture, innermost last, each with the copies it
/// is unrolled into (its bound times those of the bodies around it).
#[derive(Debug, Default)]
pub struct Nesting(Vec<u64>);

impl Nesting {
    /// Open a body of `kind`: `TooLarge` where it would unroll into more
    /// than [`MAX_COPIES`] copies (a `u32::MAX` WHILE would otherwise
    /// unroll without end), for the backend to refuse when the body opens,
    /// the capture still usable (nothing is opened).
    pub fn open(&mut self, kind: ConditionalKind) -> Result<(), ErrorKind> {
        let iterations = match kind {
            ConditionalKind::If => 1,
            ConditionalKind::While { max_iterations } => u64::from(max_iterations),
        };
        let copies = self.0.last().copied().unwrap_or(1) * iterations;
        if copies > MAX_COPIES {
            return Err(ErrorKind::TooLarge {
                what: "conditional body",
                detail: format!(
                    "unrolled into {copies} copies (its bound times those around it); \
                     bodies are emulated by unrolling them, at most {MAX_COPIES} copies"
                ),
            });
        }
        self.0.push(copies);
        Ok(())
    }

    /// Close the innermost body.
    pub fn close(&mut self) -> Result<(), ErrorKind> {
        self.0.pop().map(drop).ok_or(ErrorKind::NoOpenConditional)
    }

    /// Bodies open.
    pub fn depth(&self) -> usize {
        self.0.len()
    }
}

/// What a backend records of a capture for [`unroll`]: its launches
/// (counted from the last [`Recorder::take`]) and the bodies around them,
/// each body checked against the unroll bound when it opens ([`Nesting`]).
pub struct Recorder<C> {
    open: Nesting,
    structure: Vec<Structure<C>>,
    launches: u32,
    bodies: bool,
}

impl<C> Default for Recorder<C> {
    fn default() -> Self {
        Recorder {
            open: Nesting::default(),
            structure: Vec::new(),
            launches: 0,
            bodies: false,
        }
    }
}

impl<C> Recorder<C> {
    /// A launch: its index among those recorded since the last take.
    pub fn launch(&mut self) -> u32 {
        let index = self.launches;
        self.structure.push(Structure::Dispatch(index));
        self.launches += 1;
        index
    }

    /// Open a body of `kind` over the condition at `word` of `cond`;
    /// refused as [`Nesting::open`] refuses it, nothing recorded.
    pub fn open(&mut self, kind: ConditionalKind, cond: C, word: u32) -> Result<(), ErrorKind> {
        self.open.open(kind)?;
        self.structure.push(Structure::Begin(kind, cond, word));
        self.bodies = true;
        Ok(())
    }

    /// Close the innermost body ([`ErrorKind::NoOpenConditional`] where
    /// none is open).
    pub fn close(&mut self) -> Result<(), ErrorKind> {
        self.open.close()?;
        self.structure.push(Structure::End);
        Ok(())
    }

    /// Whether a launch now goes into a body.
    pub fn is_open(&self) -> bool {
        self.open.depth() > 0
    }

    /// Whether a body was ever opened (then the graph is unrolled).
    pub fn has_bodies(&self) -> bool {
        self.bodies
    }

    /// What was recorded since the last take, for [`unroll`]; launches are
    /// counted from 0 again.
    pub fn take(&mut self) -> Vec<Structure<C>> {
        self.launches = 0;
        std::mem::take(&mut self.structure)
    }
}

/// The workgroups a gate's launch dispatches ([`GATE`]'s grid: one).
pub fn gate_groups(gate: &Gate) -> (u32, u32, u32) {
    let [x, y, z] = (GATE.grid)(&gate.params());
    (x, y, z)
}

fn gate_extents(p: &Params, out: &mut [u64]) {
    let counts = u64::from(p.d0) + 6 * u64::from(p.d1);
    let latches = u64::from(p.d2.max(if p.bits == NONE { 0 } else { p.bits })) + 1;
    out[0] = 1;
    out[1] = counts.max(latches);
}

fn gate_grid(_: &Params) -> [u32; 3] {
    [1, 1, 1]
}

/// The gate: one invocation. `cond` is a view of the condition's word;
/// `ctl` the graph's control buffer. `p.bits`: the latch this copy follows
/// ([`NONE`]: none), `p.d2`: the body's own latch, `p.d0`: the control
/// word of the first of the body's `p.d1` dispatches (six words each: the
/// recorded counts, then the counts to use).
pub static GATE: KernelDef = KernelDef {
    name: "seam_gate",
    bindings: &[
        Binding::fixed("cond", Access::Read, DType::U32),
        Binding::fixed("ctl", Access::Write, DType::U32),
    ],
    reads: &[Field::D0, Field::D1, Field::D2, Field::Bits],
    extents: gate_extents,
    workgroup_size: [1, 1, 1],
    grid: gate_grid,
    check: None,
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: Some(
        r#"@group(0) @binding(0) var<storage, read> cond: array<u32>;
@group(0) @binding(1) var<storage, read_write> ctl: array<u32>;

@compute @workgroup_size(1)
fn seam_gate() {
    var on = cond[p.o0] != 0u;
    if (p.bits != 0xffffffffu) {
        on = on && ctl[p.o1 + p.bits] != 0u;
    }
    ctl[p.o1 + p.d2] = select(0u, 1u, on);
    for (var j = 0u; j < p.d1; j = j + 1u) {
        let at = p.o1 + p.d0 + 6u * j;
        for (var k = 0u; k < 3u; k = k + 1u) {
            ctl[at + 3u + k] = select(0u, ctl[at + k], on);
        }
    }
}
"#,
    ),
    cuda: None,
    cpu: None,
    samples: &[],
};

fn set_extents(_: &Params, out: &mut [u64]) {
    out[0] = 1;
    out[1] = 1;
}

/// The condition of a CUDA conditional node (C14, native): one thread
/// sets the node's handle (the 64 bits of `d0` | `d1` << 32) from the `u32`
/// `cond` view, before the node (IF, WHILE; `bits` 0) and at the end of
/// each iteration of a WHILE's body (`bits` 1), counting the iterations in
/// `iter` (one word: 0 before the node, one more after each iteration), so
/// the node runs its body while the condition is non-zero and fewer than
/// `d2` (`max_iterations`; an IF 1) iterations ran: the driver's WHILE
/// node has no bound of its own. CUDA C only: the device-side
/// `cudaGraphSetConditional` (CUDA 12.4), declared here, not included.
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static SET_CONDITION: KernelDef = KernelDef {
    name: "seam_set_condition",
    bindings: &[
        Binding::fixed("cond", Access::Read, DType::U32),
        Binding::fixed("iter", Access::Write, DType::U32),
    ],
    reads: &[Field::D0, Field::D1, Field::D2, Field::Bits],
    extents: set_extents,
    workgroup_size: [1, 1, 1],
    grid: gate_grid,
    check: None,
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: None,
    // SAFETY: reads cond[0], reads and writes iter[0] (each view holds one
    // element: `set_extents`), one thread; the handle is the graph's own
    // (the backend passes the one it created for the node).
    cuda: Some(unsafe {
        seam::kernel::CudaSource::trusted(
            r#"extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);

extern "C" __global__ void seam_set_condition(const unsigned int* cond, unsigned int* iter, Params p) {
    unsigned long long handle = ((unsigned long long)p.d1 << 32) | p.d0;
    unsigned int n = p.bits == 0u ? 0u : iter[0] + 1u;
    iter[0] = n;
    cudaGraphSetConditional(handle, (cond[0] != 0u && n < p.d2) ? 1u : 0u);
}
"#,
        )
    }),
    cpu: None,
    samples: &[],
};

/// [`SET_CONDITION`]'s params: the node's `handle`, its bound (an IF's 1,
/// a WHILE's `max_iterations`), and whether an iteration just ran (the
/// setter at the end of a WHILE's body) or none yet (before the node).
pub fn set_condition_params(handle: u64, bound: u32, after_iteration: bool) -> Params {
    Params {
        d0: handle as u32,
        d1: (handle >> 32) as u32,
        d2: bound,
        bits: u32::from(after_iteration),
        ..Params::ZERO
    }
}

/// One gate's launch: what [`GATE`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The condition's word in its buffer.
    pub cond_word: u32,
    /// The latch this copy follows ([`NONE`]: none).
    pub follows: u32,
    /// The body's own latch.
    pub latch: u32,
    /// The control word of the first of the body's dispatches.
    pub first_word: u32,
    /// The body's own dispatches.
    pub count: u32,
}

impl Gate {
    /// The launch's params.
    pub fn params(&self) -> Params {
        Params {
            d0: self.first_word,
            d1: self.count,
            d2: self.latch,
            bits: self.follows,
            ..Params::ZERO
        }
    }

    /// The launch's immediate block (`seam::Launch::immediates`): its
    /// params, the condition's word as binding 0's view offset, the
    /// control buffer bound from its start.
    pub fn block(&self) -> [u8; IMMEDIATE_BYTES] {
        let mut out = [0u8; IMMEDIATE_BYTES];
        out[..Params::BYTES].copy_from_slice(&self.params().to_bytes());
        out[Params::BYTES..Params::BYTES + 4].copy_from_slice(&self.cond_word.to_ne_bytes());
        out
    }
}

/// The control word holding the counts dispatch slot `slot` uses (three
/// `u32`s, an indirect dispatch's arguments), in a graph of `latches`
/// bodies.
pub fn counts_word(latches: u32, slot: u32) -> u64 {
    u64::from(latches) + 6 * u64::from(slot) + 3
}

/// A graph's control buffer as it starts: latches zero, then per slot the
/// recorded counts of its launch (`groups[launch]`) and zeros.
pub fn control_words(latches: u32, slots: &[u32], groups: impl Fn(u32) -> [u32; 3]) -> Vec<u32> {
    let mut words = vec![0u32; latches as usize + 6 * slots.len()];
    for (s, &launch) in slots.iter().enumerate() {
        let at = latches as usize + 6 * s;
        words[at..at + 3].copy_from_slice(&groups(launch));
    }
    words
}

/// One step of an unrolled graph, before its objects are made: a recorded
/// dispatch (launch `index`; `slot`: its counts' slot where it is inside a
/// body), or a gate over `cond`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unrolled<C> {
    Dispatch { index: u32, slot: Option<u32> },
    Gate { cond: C, gate: Gate },
}

/// A body: its kind, condition, latch, the slots of its own dispatches,
/// and what it holds.
struct Body<C> {
    kind: ConditionalKind,
    cond: C,
    word: u32,
    latch: u32,
    first: u32,
    count: u32,
    nodes: Vec<Node<C>>,
}

enum Node<C> {
    Dispatch { index: u32, slot: Option<u32> },
    Body(Body<C>),
}

/// A capture unrolled: the steps in order, the number of latches (one per
/// body), and for each slot the launch whose counts it holds.
pub type Unrolling<C> = (Vec<Unrolled<C>>, u32, Vec<u32>);

/// Unroll a capture's structure ([`Unrolling`]) into at most `max_steps`
/// steps (backends: [`MAX_STEPS`]); more is `TooLarge`, found as the
/// steps are made (a bound of `u32::MAX` copies is refused, not built).
pub fn unroll<C: Clone>(
    items: impl IntoIterator<Item = Structure<C>>,
    max_steps: usize,
) -> Result<Unrolling<C>, ErrorKind> {
    let mut latches = 0u32;
    let mut slots: Vec<u32> = Vec::new();
    // The bodies open, innermost last, each with its nodes so far.
    let mut open: Vec<Body<C>> = Vec::new();
    let mut top: Vec<Node<C>> = Vec::new();
    for item in items {
        match item {
            Structure::Dispatch(index) => {
                let node = Node::Dispatch { index, slot: None };
                match open.last_mut() {
                    // A body's own dispatches take consecutive slots when
                    // it closes (nested bodies took theirs before).
                    Some(b) => {
                        b.count += 1;
                        b.nodes.push(node);
                    }
                    None => top.push(node),
                }
            }
            Structure::Begin(kind, cond, word) => {
                open.push(Body {
                    kind,
                    cond,
                    word,
                    latch: latches,
                    first: 0,
                    count: 0,
                    nodes: Vec::new(),
                });
                latches += 1;
            }
            Structure::End => {
                let mut body = open.pop().ok_or(ErrorKind::NoOpenConditional)?;
                body.first = slots.len() as u32;
                for n in body.nodes.iter_mut() {
                    if let Node::Dispatch { index, slot } = n {
                        *slot = Some(slots.len() as u32);
                        slots.push(*index);
                    }
                }
                match open.last_mut() {
                    Some(b) => b.nodes.push(Node::Body(body)),
                    None => top.push(Node::Body(body)),
                }
            }
        }
    }
    if !open.is_empty() {
        return Err(ErrorKind::UnclosedConditional { open: open.len() });
    }
    let base = latches;
    let mut steps = Vec::new();
    emit(&top, NONE, base, &mut steps, max_steps)?;
    Ok((steps, latches, slots))
}

/// What [`unroll`] reads: a capture's calls, in order.
pub enum Structure<C> {
    Dispatch(u32),
    Begin(ConditionalKind, C, u32),
    End,
}

fn emit<C: Clone>(
    nodes: &[Node<C>],
    parent: u32,
    base: u32,
    out: &mut Vec<Unrolled<C>>,
    max_steps: usize,
) -> Result<(), ErrorKind> {
    for n in nodes {
        if out.len() >= max_steps {
            return Err(ErrorKind::TooLarge {
                what: "graph with conditional bodies",
                detail: format!("more than {max_steps} dispatches and gates unrolled"),
            });
        }
        match n {
            Node::Dispatch { index, slot } => out.push(Unrolled::Dispatch {
                index: *index,
                slot: *slot,
            }),
            Node::Body(b) => {
                let copies = match b.kind {
                    ConditionalKind::If => 1,
                    ConditionalKind::While { max_iterations } => max_iterations,
                };
                for copy in 0..copies {
                    out.push(Unrolled::Gate {
                        cond: b.cond.clone(),
                        gate: Gate {
                            cond_word: b.word,
                            follows: if copy == 0 { parent } else { b.latch },
                            latch: b.latch,
                            first_word: base + 6 * b.first,
                            count: b.count,
                        },
                    });
                    emit(&b.nodes, b.latch, base, out, max_steps)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
}
