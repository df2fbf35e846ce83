//! C14's refusals: misuse of conditional bodies is a named error that
//! leaves the capture usable, and what a device reports of its bodies is
//! what it does.

use super::conditional::{host_loop, Bufs, Node, COND, COUNTER};
use crate::{check, check_eq, expect_err, Case, Rule, Tag, ONCE};
use seam::{ops, ConditionalSupport, ErrorKind};

const CAP: &[Tag] = &[Tag::NeedsCapture];

/// Misuse is a named error that leaves the capture usable: a WHILE of 0
/// iterations, a condition in an f32 buffer, past its buffer's end, or of
/// another device; host calls inside a body; closing a body none opened;
/// ending the capture with a body open (refused, the capture still open:
/// the body is closed and the capture ended after it). The graph made
/// after all of it still runs as the host loop.
///
/// Mutation: core accepts a WHILE of 0 iterations (the `ZeroIterations`
/// check in core/src/device/conditional.rs removed) → red on cpu:0 at
/// "expected ErrorKind::ZeroIterations".
pub const C14_MISUSE_REFUSED_CAPTURE_USABLE: Case = Case {
    name: "c14_misuse_refused_capture_usable",
    rule: Rule::C14,
    tags: COND,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let b = Bufs::new(d)?;
        let floats = d.buffer_from(&[1.0f32])?;
        let other = (cx.reference)();
        let foreign = other.buffer_from(&[1u32])?;
        let low = d.low_level();
        low.begin_capture()?;
        let e = expect_err!(
            low.begin_while(b.ctl.id().view(COUNTER, 1), 0),
            ErrorKind::ZeroIterations
        );
        check!(
            e.call == "begin_conditional",
            "the error names the call: {e}"
        );
        expect_err!(low.begin_if(floats.id()), ErrorKind::ConditionDType { .. });
        expect_err!(
            low.begin_if(b.ctl.id().view(4, 1)),
            ErrorKind::ConditionOutOfRange { .. }
        );
        expect_err!(low.begin_if(foreign.id()), ErrorKind::ForeignBuffer { .. });
        expect_err!(low.end_body(), ErrorKind::NoOpenConditional);
        low.begin_while(b.ctl.id().view(COUNTER, 1), 5)?;
        expect_err!(
            b.ctl.write(&[0, 0, 0, 0]),
            ErrorKind::HostAccessInCapture { .. }
        );
        expect_err!(d.alloc(seam::DType::F32, 4), ErrorKind::AllocInCapture);
        for node in [b.double(2.0), b.count(), b.decrement()] {
            if let Node::Launch(c) = node {
                d.launch(&c)?;
            }
        }
        expect_err!(
            low.end_capture_graph(),
            ErrorKind::UnclosedConditional { open: 1 }
        );
        check!(
            d.capturing(),
            "the capture is still open after the refused end"
        );
        low.end_body()?;
        let id = low.end_capture_graph()?;
        let r = (cx.reference)();
        let theirs = Bufs::new(&r)?;
        for k in [2, 5] {
            b.reset(k)?;
            theirs.reset(k)?;
            d.replay(seam::GraphRef::Handle(id))?;
            host_loop(&r, &theirs.counted_loop(5, 2.0))?;
            check_eq!(
                b.contents(d)?,
                theirs.contents(&r)?,
                "counter {k}: the graph made after the refusals (left) against the host loop"
            );
        }
        d.destroy_graph(id)?;
        Ok(())
    },
};

/// What a device reports of its conditional bodies is what happens: where
/// it reports them unsupported, opening one is refused by that name (the
/// capture stays usable and its graph replays); where it reports them, an
/// IF runs exactly when its condition holds.
///
/// Mutation: core refuses conditional bodies where the device reports
/// them Native (the `Unsupported` test in core/src/device/conditional.rs
/// turned into `== ConditionalSupport::Native`) → red on cpu:0 at
/// "begin_conditional: conditional bodies are not supported here".
pub const C14_REPORT_MATCHES_BEHAVIOUR: Case = Case {
    name: "c14_report_matches_behaviour",
    rule: Rule::C14,
    tags: CAP,
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let x = d.buffer_from(&[1.0f32; 4])?;
        let flag = d.buffer_from(&[0u32])?;
        let scope = d.capture()?;
        let support = d.conditional_support();
        let body = || d.launch(&ops::scale_add(x.id(), x.id(), 4, 2.0, 0.0));
        match &support {
            ConditionalSupport::Unsupported(_) => {
                let e = expect_err!(
                    scope.run_if(flag.id(), body),
                    ErrorKind::ConditionalUnsupported { .. }
                );
                check!(
                    e.call == "begin_conditional",
                    "the error names the call: {e}"
                );
                d.launch(&ops::scale_add(x.id(), x.id(), 4, 1.0, 1.0))?;
                let g = scope.end_graph()?;
                g.replay()?;
                check_eq!(x.read()?, vec![2.0f32; 4], "the capture after the refusal");
            }
            _ => {
                scope.run_if(flag.id(), body)?;
                let g = scope.end_graph()?;
                g.replay()?;
                check!(
                    x.read()? == vec![1.0f32; 4],
                    "an IF whose condition is 0 ran its body"
                );
                flag.write(&[1])?;
                g.replay()?;
                check_eq!(
                    x.read()?,
                    vec![2.0f32; 4],
                    "an IF whose condition is 1 ({support:?})"
                );
            }
        }
        Ok(())
    },
};
