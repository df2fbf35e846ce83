use super::*;
use crate::backend::CaptureSupport;
use crate::testing::NullBackend;
use crate::{ops, DType};

/// A rebind's shortcut lowers exactly what lowering each swapped call
/// in full gives (`lower_changes`, what rebind ran before): the same
/// launches, or the same first error, for every pair and two-pair
/// rebind over a graph with views at offsets and open-ended ones, an
/// in-place launch, an op that may not alias, a buffer released while
/// the graph holds it, and new buffers shorter, equal and longer.
/// Mutations: the shortcut not checking lengths, liveness or which
/// bindings share a buffer, or keeping an open-ended view's old length
/// → red.
#[test]
fn a_rebinds_shortcut_lowers_what_lowering_gives() {
    let dev = Device::new(Box::new(NullBackend::new(CaptureSupport::Native)));
    let lens = [64, 64, 32, 128, 60, 64, 16];
    let b: Vec<BufferId> = lens
        .iter()
        .map(|&n| dev.alloc(DType::F32, n).unwrap())
        .collect();
    let h = dev.alloc(DType::F16, 64).unwrap();
    dev.begin_capture().unwrap();
    for call in [
        ops::scale_add(b[0], b[1], 60, 2.0, 1.0),
        ops::add(b[0].view(8, 16), b[1], b[2], 16),
        ops::copy(b[0].from_offset(4), b[3], 56),
        ops::scale_add(b[2], b[2], 32, 1.0, 0.0),
        ops::rms_norm(b[1], b[6], b[3], 4, 16, 1e-5),
        ops::add(b[5].view(0, 30), b[4], b[5].from_offset(32), 30),
    ] {
        dev.launch(&call).unwrap();
    }
    let g = dev.end_capture_graph().unwrap();
    dev.low_level().release_buffer(b[5]);
    let target = GraphRef::Handle(g);
    let mut ids = b.clone();
    ids.push(h);
    let mut pairs: Vec<Vec<(BufferId, BufferId)>> = Vec::new();
    for &old in &ids {
        for &new in &ids {
            pairs.push(vec![(old, new)]);
            for &(o2, n2) in &[(b[1], b[2]), (b[2], b[0]), (b[3], b[1])] {
                pairs.push(vec![(old, new), (o2, n2)]);
            }
        }
    }
    let (mut agreed, mut vouched) = (0, 0);
    for pairs in &pairs {
        let st = dev.state();
        let entry = st.entry(target).unwrap();
        let fast = rebound_launches(&st, entry, pairs);
        let changes: Vec<(usize, OpCall)> = entry
            .record
            .calls
            .iter()
            .enumerate()
            .filter(|(_, r)| r.buffers.iter().any(|v| swap(pairs, v.buffer) != v.buffer))
            .map(|(i, r)| {
                let mut call = r.clone();
                call.buffers
                    .iter_mut()
                    .for_each(|v| v.buffer = swap(pairs, v.buffer));
                (i, call)
            })
            .collect();
        let full = lower_changes(&st, target, changes).map(|(lowered, _)| lowered);
        // What rebind refuses before lowering anything.
        let refused = pairs.iter().any(|&(o, n)| {
            !entry.uses.contains(&o)
                || st.live_meta(n).is_err()
                || st.meta(o).map(|m| m.dtype) != st.live_meta(n).map(|m| m.dtype)
        });
        if !refused {
            assert_eq!(fast, full, "{pairs:?}");
            agreed += 1;
            vouched += usize::from(fast.is_ok());
        }
    }
    assert!(
        agreed > 150 && vouched > 20,
        "{agreed} compared, {vouched} ok"
    );
}
