//! Conditional bodies (C14) through the stream backend, against the
//! recording fake: what the backend asks of a driver with conditional
//! nodes, in order.

use crate::fake::{backend, Call};
use seam::{ops, ConditionalSupport, Device};

/// The launches of the capture, by entry point, with the body calls.
fn shape(log: &[Call]) -> Vec<String> {
    log.iter()
        .filter_map(|c| match c {
            Call::LaunchKernel { name, .. } => Some(name.clone()),
            Call::ConditionalHandle(_) => Some("handle".into()),
            Call::BeginBody { while_, .. } => Some(if *while_ { "while{" } else { "if{" }.into()),
            Call::EndBody => Some("}".into()),
            Call::RecordInCapture(_) => Some("event".into()),
            _ => None,
        })
        .collect()
}

/// A WHILE holding an IF, between two launches: per body a handle, the
/// setter before the node, the node, the body's launches in it, and for
/// the WHILE the setter again at the end of its body (the node reads the
/// condition after each iteration); the setter reads the condition's own
/// buffer and carries the handle. Node timing on: no event recorded into
/// a body or after one opened. Mutations: the WHILE's closing setter
/// left out, the setter's handle halves swapped, its bound or iteration
/// flag dropped, a body's counter at another depth, the capture left
/// timed → red.
#[test]
fn bodies_become_conditional_nodes_with_their_setters() {
    let (b, d) = backend(false);
    d.set_conditional_available(true);
    let dev = Device::new(Box::new(b));
    assert_eq!(dev.conditional_support(), ConditionalSupport::Native);
    let x = dev.buffer_from(&[1.0f32; 4]).unwrap();
    let cond = dev.buffer_from(&[0u32, 3, 1]).unwrap();
    dev.set_node_timing(true).unwrap();
    d.clear_log();
    let scope = dev.capture().unwrap();
    dev.launch(&ops::scale_add(x.id(), x.id(), 4, 2.0, 0.0))
        .unwrap();
    scope
        .run_while(cond.id().view(1, 1), 8, || {
            dev.launch(&ops::silu(x.id(), x.id(), 4))?;
            scope.run_if(cond.id().view(2, 1), || {
                dev.launch(&ops::scale_add(x.id(), x.id(), 4, 1.0, 1.0))
            })
        })
        .unwrap();
    dev.launch(&ops::silu(x.id(), x.id(), 4)).unwrap();
    let _graph = scope.end_graph().unwrap();
    let log = d.log();
    assert!(d.violations().is_empty(), "{:?}", d.violations());
    assert_eq!(
        shape(&log),
        [
            "event",
            "scale_add_f32",
            "event",
            "handle",
            "seam_set_condition",
            "while{",
            "silu_f32",
            "handle",
            "seam_set_condition",
            "if{",
            "scale_add_f32",
            "}",
            "seam_set_condition",
            "}",
            "silu_f32",
        ]
    );
    // Each body's node is over the handle made for it, and each setter
    // carries that handle (d0 low, d1 high) and reads the condition.
    let handles: Vec<u64> = log
        .iter()
        .filter_map(|c| match c {
            Call::ConditionalHandle(h) => Some(*h),
            _ => None,
        })
        .collect();
    let nodes: Vec<u64> = log
        .iter()
        .filter_map(|c| match c {
            Call::BeginBody { handle, .. } => Some(*handle),
            _ => None,
        })
        .collect();
    assert_eq!(handles, nodes);
    assert_ne!(handles[0], handles[1]);
    let exec = d.last_exec();
    let setters: Vec<_> = d
        .nodes_of(exec)
        .into_iter()
        .filter(|k| k.name == "seam_set_condition")
        .collect();
    assert_eq!(setters.len(), 3);
    // Each carries its body's bound (the WHILE's 8, the IF's 1) and
    // whether an iteration just ran (only the WHILE's closing setter).
    let wants = [(handles[0], 8, 0), (handles[1], 1, 0), (handles[0], 8, 1)];
    for (k, (handle, bound, after)) in setters.iter().zip(wants) {
        let p = k.params.expect("the setter's params");
        assert_eq!(u64::from(p.d0) | u64::from(p.d1) << 32, handle);
        assert_eq!((p.d2, p.bits), (bound, after));
        assert_eq!(k.buffers.len(), 2);
    }
    // The counters are one allocation of the backend's, neither buffer of
    // the capture, kept across setters.
    assert!(setters
        .iter()
        .all(|k| k.buffers[1] == setters[0].buffers[1]));
    assert_ne!(setters[0].buffers[1], setters[0].buffers[0]);
    // The WHILE's condition is element 1 of `cond`, the IF's element 2,
    // each setter's argument pointing at its own word; the WHILE counts in
    // word 0 (depth 0), the IF in word 1.
    let offsets: Vec<_> = setters.iter().map(|k| k.offsets.clone()).collect();
    assert_eq!(offsets, [vec![4, 0], vec![8, 4], vec![4, 0]]);
}

/// A driver without conditional nodes: the backend reports them
/// Unsupported with the driver's reason, and a body is refused by name
/// with the capture still usable.
#[test]
fn a_driver_without_conditional_nodes_refuses_a_body() {
    let (b, _d) = backend(false);
    let dev = Device::new(Box::new(b));
    let why = match dev.conditional_support() {
        ConditionalSupport::Unsupported(why) => why,
        other => panic!("{other:?}"),
    };
    assert!(why.contains("conditional"), "{why}");
    let x = dev.buffer_from(&[1.0f32; 4]).unwrap();
    let cond = dev.buffer_from(&[1u32]).unwrap();
    let scope = dev.capture().unwrap();
    let e = scope
        .run_if(cond.id(), || dev.launch(&ops::silu(x.id(), x.id(), 4)))
        .unwrap_err();
    assert!(
        matches!(e.kind, seam::ErrorKind::ConditionalUnsupported { .. }),
        "{e}"
    );
    dev.launch(&ops::silu(x.id(), x.id(), 4)).unwrap();
    scope.end_graph().unwrap();
}

/// Bodies nest as deep as the counters have words: `MAX_DEPTH` nested
/// IFs capture (the innermost setter's counter is the last word of the
/// counters' allocation, in range), one more is refused by name when it
/// opens, with the capture still usable. Mutations: the counters
/// allocated smaller (`4 * MAX_DEPTH` → `4 + MAX_DEPTH`), the depth check
/// off by one → red.
#[test]
fn bodies_nest_as_deep_as_the_counters_reach() {
    use crate::backend::MAX_DEPTH;
    fn nest(
        scope: &seam::CaptureScope<'_>,
        dev: &Device,
        cond: seam::BufferId,
        x: seam::BufferId,
        depth: usize,
    ) -> seam::Result<()> {
        if depth == 0 {
            return dev.launch(&ops::silu(x, x, 4));
        }
        scope.run_if(cond, || nest(scope, dev, cond, x, depth - 1))
    }
    let (b, d) = backend(false);
    d.set_conditional_available(true);
    let dev = Device::new(Box::new(b));
    let x = dev.buffer_from(&[1.0f32; 4]).unwrap();
    let cond = dev.buffer_from(&[1u32]).unwrap();
    let scope = dev.capture().unwrap();
    nest(&scope, &dev, cond.id(), x.id(), MAX_DEPTH).unwrap();
    let e = nest(&scope, &dev, cond.id(), x.id(), MAX_DEPTH + 1).unwrap_err();
    assert!(
        matches!(e.kind, seam::ErrorKind::TooLarge { .. }) && e.to_string().contains("deep"),
        "{e}"
    );
    dev.launch(&ops::silu(x.id(), x.id(), 4)).unwrap();
    scope.end_graph().unwrap();
    assert!(d.violations().is_empty(), "{:?}", d.violations());
}
