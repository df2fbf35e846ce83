//! One update that changes a launch's parameters and rebinds a buffer at
//! once (C13), on the CPU reference: the rebind reaches the changed launch
//! after its change and every other launch that uses the old buffer, and
//! no launch that does not.

use seam::{ops, Change, Device, EventKind, Params};

/// Mutations in `Device::update`'s mixed path (the rebind skipped when
/// there are other changes, the changed launch's filter inverted or its
/// `==` → `!=`, the old-buffer test's `&&` → `||` or `==` → `!=`) → red:
/// an output read through the old buffer, or a launch that does not use it
/// counted as changed.
#[test]
fn a_rebind_with_a_parameter_change_reaches_every_user_of_the_old_buffer() {
    let d = Device::new(Box::new(seam_cpu::CpuBackend::new(0)));
    let a = d.buffer_from(&[1.0f32; 4]).unwrap();
    let a2 = d.buffer_from(&[10.0f32; 4]).unwrap();
    let b = d.buffer_from(&[2.0f32; 4]).unwrap();
    let o1 = d.buffer_from(&[0.0f32; 4]).unwrap();
    let o2 = d.buffer_from(&[0.0f32; 4]).unwrap();
    let o3 = d.buffer_from(&[0.0f32; 4]).unwrap();
    let s = d.capture().unwrap();
    d.launch(&ops::add(a.id(), b.id(), o1.id(), 4)).unwrap();
    d.launch(&ops::copy(a.id(), o2.id(), 4)).unwrap();
    d.launch(&ops::scale_add(a.id(), o2.id(), 4, 2.0, 0.0))
        .unwrap();
    d.launch(&ops::copy(b.id(), o3.id(), 4)).unwrap();
    let g = s.end_graph().unwrap();
    d.set_tracing(true);
    d.update(
        &g,
        &[
            Change::Params {
                index: 2,
                params: Params::dims(4, 0, 0).with_scalars(3.0, 0.0),
            },
            Change::Rebind {
                old: a.id(),
                new: a2.id(),
            },
        ],
    )
    .unwrap();
    g.replay().unwrap();
    assert_eq!(
        o1.read().unwrap(),
        [12.0; 4],
        "an unchanged user of the old buffer"
    );
    assert_eq!(o2.read().unwrap(), [30.0; 4], "the changed launch, rebound");
    assert_eq!(
        o3.read().unwrap(),
        [2.0; 4],
        "a launch that does not use it"
    );
    let log = d.take_trace_log("t").unwrap();
    let changed: Vec<usize> = log
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Update { launches, .. } => Some(launches),
            _ => None,
        })
        .collect();
    assert_eq!(
        changed,
        [3],
        "launches 0, 1 and 2 change; launch 3 does not"
    );
}
