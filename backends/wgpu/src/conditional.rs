//! Conditional bodies (C14), emulated: WebGPU has no conditional or loop
//! primitive, only indirect dispatches, whose workgroup counts the device
//! reads from a buffer when it reaches them. So a captured body is
//! unrolled (an IF once, a WHILE `max_iterations` times) and every
//! dispatch inside it becomes an indirect one; before each copy of a body
//! a one-invocation *gate* decides on the device whether the copy runs and
//! writes its dispatches' workgroup counts: the recorded counts if it
//! runs, zeros (a dispatch of no workgroups does nothing) if not.
//!
//! Each graph with bodies has a control buffer of `u32` words: one latch
//! per body (1 while its current copy runs), then per dispatch inside a
//! body six words, its recorded counts and the counts its next dispatch
//! uses. A body's gate sets its latch from the condition, the enclosing
//! body's latch (first copy) or its own latch (later copies of a WHILE,
//! so a loop that stopped stays stopped), and writes the counts of the
//! body's own dispatches; bodies nested in it have gates of their own in
//! each copy. wgpu orders a dispatch after the one before that wrote what
//! it uses (the gate's control buffer, read as indirect arguments).

use seam::{ConditionalKind, ErrorKind};

/// The gate (one invocation): `g.cond_word` of `cond` decides, with the
/// enclosing latch (`g.parent`, none: `NONE`) or the body's own
/// (`g.again`); the latch `g.latch` is set and the `g.count` dispatches'
/// counts from slot `g.first` written. Slot `s` holds its recorded counts
/// at word `g.base + 6 s`, the counts to use at `g.base + 6 s + 3`.
pub(crate) const GATE_WGSL: &str = r#"
struct Gate {
    cond_word: u32,
    parent: u32,
    latch: u32,
    again: u32,
    first: u32,
    count: u32,
    base: u32,
    pad0: u32,
    pad1: vec4<u32>,
    pad2: vec4<u32>,
}

var<immediate> g: Gate;

@group(0) @binding(0) var<storage, read> cond: array<u32>;
@group(0) @binding(1) var<storage, read_write> ctl: array<u32>;

const NONE: u32 = 0xffffffffu;

@compute @workgroup_size(1)
fn gate() {
    var on = cond[g.cond_word] != 0u;
    if (g.parent != NONE) {
        on = on && ctl[g.parent] != 0u;
    }
    if (g.again != 0u) {
        on = on && ctl[g.latch] != 0u;
    }
    ctl[g.latch] = select(0u, 1u, on);
    for (var j = 0u; j < g.count; j = j + 1u) {
        let at = g.base + 6u * (g.first + j);
        for (var k = 0u; k < 3u; k = k + 1u) {
            ctl[at + 3u + k] = select(0u, ctl[at + k], on);
        }
    }
}
"#;

/// The words of a gate's immediate block ([`GATE_WGSL`]'s `Gate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GateParams {
    pub(crate) cond_word: u32,
    pub(crate) parent: u32,
    pub(crate) latch: u32,
    pub(crate) again: bool,
    pub(crate) first: u32,
    pub(crate) count: u32,
    pub(crate) base: u32,
}

/// `parent` of a body at the top of the graph.
pub(crate) const NONE: u32 = u32::MAX;

impl GateParams {
    pub(crate) fn immediates(&self) -> crate::replay::Immediates {
        let words = [
            self.cond_word,
            self.parent,
            self.latch,
            self.again as u32,
            self.first,
            self.count,
            self.base,
        ];
        let mut out = [0u8; seam::ops::IMMEDIATE_BYTES];
        for (k, w) in words.iter().enumerate() {
            out[4 * k..4 * k + 4].copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}

/// One step of an unrolled graph, before its objects are made: a recorded
/// dispatch (launch `index`; `slot`: its counts' slot where it is inside a
/// body), or a gate over `cond`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unrolled<C> {
    Dispatch { index: u32, slot: Option<u32> },
    Gate { cond: C, params: GateParams },
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
pub(crate) type Unrolling<C> = (Vec<Unrolled<C>>, u32, Vec<u32>);

/// Unroll a capture's structure ([`Unrolling`]).
pub(crate) fn unroll<C: Clone>(
    items: impl IntoIterator<Item = Structure<C>>,
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
    emit(&top, NONE, base, &mut steps);
    Ok((steps, latches, slots))
}

/// What [`unroll`] reads: a capture's calls, in order.
pub(crate) enum Structure<C> {
    Dispatch(u32),
    Begin(ConditionalKind, C, u32),
    End,
}

fn emit<C: Clone>(nodes: &[Node<C>], parent: u32, base: u32, out: &mut Vec<Unrolled<C>>) {
    for n in nodes {
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
                        params: GateParams {
                            cond_word: b.word,
                            parent: if copy == 0 { parent } else { NONE },
                            latch: b.latch,
                            again: copy > 0,
                            first: b.first,
                            count: b.count,
                            base,
                        },
                    });
                    emit(&b.nodes, b.latch, base, out);
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
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
                Unrolled::Gate { cond, params: p } => format!(
                    "g{cond}{}{}p{}[{}+{}]",
                    p.latch,
                    if p.again { "'" } else { "" },
                    if p.parent == NONE {
                        "-".into()
                    } else {
                        p.parent.to_string()
                    },
                    p.first,
                    p.count
                ),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A WHILE of 2 holding an IF: the WHILE's gate before each copy (the
    /// second continuing its own latch), the IF's gate inside each copy
    /// under the WHILE's latch, slots per body in closing order (the IF's
    /// dispatch first), dispatches outside bodies direct. Mutations: a
    /// later copy reading the enclosing latch instead of its own, slots of
    /// nested dispatches counted in the outer body, the copies of a WHILE
    /// not repeated → red.
    pub fn bodies_unroll_into_gated_copies() {
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
        let (steps, latches, slots) = unroll(items).unwrap();
        assert_eq!(latches, 2);
        assert_eq!(slots, vec![2, 1, 3]);
        assert_eq!(
            shape(&steps),
            "0 gw0p-[1+2] 1@1 gi1p0[0+1] 2@0 3@2 gw0'p-[1+2] 1@1 gi1p0[0+1] 2@0 3@2 4"
        );
        assert!(steps.iter().all(|s| match s {
            Unrolled::Gate { params, .. } => params.base == 2,
            _ => true,
        }));
        assert!(matches!(
            unroll::<char>(vec![End]),
            Err(ErrorKind::NoOpenConditional)
        ));
        assert!(matches!(
            unroll(vec![Begin(ConditionalKind::If, 'i', 0)]),
            Err(ErrorKind::UnclosedConditional { open: 1 })
        ));
    }
}
