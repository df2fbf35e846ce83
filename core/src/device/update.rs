//! C13: update a captured graph without a new capture by the user.
//!
//! Core owns it like the rest of the state machine: it keeps every captured
//! launch as the user stated it and as it lowered it, re-validates an
//! update against the live buffers (C12's rules), and then either lets the
//! backend patch the instantiated graph in place (`UpdateSupport::Native`)
//! or re-records the graph itself through the backend's capture calls
//! (`Emulated`). A native patch that fails falls back to the re-record; a
//! re-record that fails after a partial patch leaves the graph refused
//! (`GraphBroken`), never silently half-updated.

use super::handles::{BufferId, GraphRef};
use super::state::{ExecEntry, Recorded, State};
use super::Device;
use crate::backend::{CaptureSupport, UpdateSupport};
use crate::error::{ErrorKind, Result};
use crate::ops::{OpCall, Params};
use crate::trace::EventKind;
use crate::validate;
use std::collections::BTreeSet;

impl Device {
    /// How this device updates captured graphs (C13), as its backend reports.
    pub fn update_support(&self) -> UpdateSupport {
        match &self.inner.support {
            CaptureSupport::Unsupported(reason) => {
                UpdateSupport::Unsupported(format!("capture is unsupported: {reason}"))
            }
            _ => self.state().backend.update_support(),
        }
    }

    /// Substitute buffers in a captured graph: every launch that reads or
    /// writes `old` uses `new` from the next replay on, as if it had been
    /// captured over `new`. Replays queued before the call run with the old
    /// buffers. `new` must be a live buffer of this device with `old`'s
    /// element type and at least the length each launch needs; the graph
    /// stops holding `old` (it may be freed once nothing else uses it). On
    /// any error nothing changes.
    pub fn rebind(&self, target: GraphRef, pairs: &[(BufferId, BufferId)]) -> Result<()> {
        self.with("rebind", |st| {
            let entry = check_updatable(st, target)?;
            for &(old, new) in pairs {
                if !entry.uses.contains(&old) {
                    return Err(ErrorKind::NotUsedByGraph { id: old.0 });
                }
                let (o, n) = (st.meta(old)?, st.live_meta(new)?);
                if o.dtype != n.dtype {
                    return Err(ErrorKind::RebindMismatch {
                        old: old.0,
                        new: new.0,
                        reason: format!("it holds {}, the graph's buffer {}", n.dtype, o.dtype),
                    });
                }
            }
            let swap = |id: BufferId| {
                pairs
                    .iter()
                    .find(|(old, _)| *old == id)
                    .map_or(id, |(_, new)| *new)
            };
            let changes: Vec<(usize, OpCall)> = entry
                .recorded
                .iter()
                .enumerate()
                .filter(|(_, r)| r.call.buffers.iter().any(|b| swap(*b) != *b))
                .map(|(i, r)| {
                    let mut call = r.call.clone();
                    call.buffers.iter_mut().for_each(|b| *b = swap(*b));
                    (i, call)
                })
                .collect();
            apply(st, target, changes)
        })
    }

    /// Replace the scalar parameters (`Params`: dims and scalars) of the
    /// launch at `index` (capture order) of a captured graph, validated as
    /// a launch of the same op over the same buffers would be. Replays
    /// queued before the call run with the old parameters. On any error
    /// nothing changes.
    pub fn update_params(&self, target: GraphRef, index: usize, params: Params) -> Result<()> {
        self.with("update_params", |st| {
            let entry = check_updatable(st, target)?;
            let launches = entry.recorded.len();
            let recorded = entry
                .recorded
                .get(index)
                .ok_or(ErrorKind::NoSuchLaunch { index, launches })?;
            let call = OpCall {
                params,
                ..recorded.call.clone()
            };
            apply(st, target, vec![(index, call)])
        })
    }
}

fn check_updatable(st: &State, target: GraphRef) -> std::result::Result<&ExecEntry, ErrorKind> {
    if st.capture.is_some() {
        return Err(ErrorKind::UpdateInCapture);
    }
    st.entry(target)
}

/// Validate `changes` (launch index, new call), then patch or re-record.
fn apply(
    st: &mut State,
    target: GraphRef,
    changes: Vec<(usize, OpCall)>,
) -> std::result::Result<(), ErrorKind> {
    let mut recorded = st.entry(target)?.recorded.clone();
    let mut lowered = Vec::with_capacity(changes.len());
    for (index, call) in changes {
        let was = &recorded[index];
        if call.op != was.call.op {
            return Err(ErrorKind::UpdateChangesOp {
                index,
                recorded: was.call.op,
                requested: call.op,
            });
        }
        let launch = validate::lower(&call, |id| st.live_meta(id))?;
        lowered.push((index, launch.clone()));
        recorded[index] = Recorded { call, launch };
    }
    let raw_target = st.replay_target(target)?;
    let mut native = false;
    let mut patched_partly = false;
    if !lowered.is_empty() && st.backend.update_support() == UpdateSupport::Native {
        match st.backend.update_launches(raw_target, &lowered) {
            Ok(()) => native = true,
            Err(_) => patched_partly = true,
        }
    }
    if !native && !lowered.is_empty() {
        if let Err(e) = rerecord(st, target, &recorded) {
            if patched_partly {
                let reason = format!("a failed in-place update could not be redone ({e})");
                st.entry_mut(target)?.broken = Some(reason);
            }
            return Err(e);
        }
    }
    let uses: BTreeSet<BufferId> = recorded
        .iter()
        .flat_map(|r| r.call.buffers.iter().copied())
        .collect();
    let launches = lowered.len();
    let entry = st.entry_mut(target)?;
    entry.recorded = recorded;
    entry.uses = uses;
    entry.broken = None;
    let graph = match target {
        GraphRef::Current => None,
        GraphRef::Handle(id) => Some(id.0),
    };
    st.trace.record(|| EventKind::Update {
        graph,
        launches,
        native,
    });
    st.sweep();
    Ok(())
}

/// Record the graph again from `recorded` through the backend's capture
/// calls and put the result in place of the old one (whose in-flight
/// replays complete: C8). On an error the old graph is left as it was.
fn rerecord(
    st: &mut State,
    target: GraphRef,
    recorded: &[Recorded],
) -> std::result::Result<(), ErrorKind> {
    st.backend.begin_capture()?;
    for r in recorded {
        if let Err(e) = st.backend.launch(&r.launch) {
            let _ = st.backend.abort_capture();
            return Err(e);
        }
    }
    match target {
        GraphRef::Current => {
            if let Err(e) = st.backend.end_capture() {
                let _ = st.backend.abort_capture();
                return Err(e);
            }
        }
        GraphRef::Handle(id) => {
            let fresh = match st.backend.end_capture_graph() {
                Ok(raw) => raw,
                Err(e) => {
                    let _ = st.backend.abort_capture();
                    return Err(e);
                }
            };
            let old = st.raw_graph(id)?;
            st.entry_mut(target)?.raw = Some(fresh);
            // The new graph is in place; an old one the backend refuses to
            // destroy now is retried by the sweep (and at teardown).
            if st.backend.destroy_graph(old).is_err() {
                st.orphans.push(old);
            }
        }
    }
    Ok(())
}
