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
mod tests;
