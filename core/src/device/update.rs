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
use crate::ops::{Launch, OpCall, Params};
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
                .filter(|(_, r)| r.call.buffers.iter().any(|v| swap(v.buffer) != v.buffer))
                .map(|(i, r)| {
                    let mut call = r.call.clone();
                    // A view keeps its offset and length over the new buffer
                    // (checked against it again by `apply`).
                    call.buffers
                        .iter_mut()
                        .for_each(|v| v.buffer = swap(v.buffer));
                    (i, call)
                })
                .collect();
            // Every use of each old buffer moves to its new one.
            let uses = entry
                .uses
                .iter()
                .map(|b| swap(*b))
                .collect::<BTreeSet<BufferId>>();
            apply(st, target, changes, Some(uses))
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
            apply(st, target, vec![(index, call)], None)
        })
    }
}

impl Device {
    /// Replace the launch at `index` (capture order) of a captured graph
    /// with `call`: the same op over any views of this device's live
    /// buffers, with any parameters, validated as a launch would be (C12).
    /// This is how a decode step moves its KV-cache write to the next slot
    /// without a new capture: the view's offset changes, nothing else.
    /// Replays queued before the call run the old launch; the graph holds
    /// the buffers its launches use afterwards (one no launch uses any more
    /// may be freed). On any error nothing changes.
    pub fn update_launch(&self, target: GraphRef, index: usize, call: &OpCall) -> Result<()> {
        self.replace_launches("update_launch", target, &[(index, call.clone())])
    }

    /// [`Device::update_launch`] for several launches at once, as one
    /// update: validated together (any error changes nothing), patched
    /// together, and on a backend that re-records (`Emulated`) recorded
    /// once, not once per launch. Each index at most once.
    pub fn update_launches(&self, target: GraphRef, changes: &[(usize, OpCall)]) -> Result<()> {
        self.replace_launches("update_launches", target, changes)
    }

    fn replace_launches(
        &self,
        call: &'static str,
        target: GraphRef,
        changes: &[(usize, OpCall)],
    ) -> Result<()> {
        self.with(call, |st| {
            let entry = check_updatable(st, target)?;
            let launches = entry.recorded.len();
            let mut sorted: Vec<(usize, OpCall)> = changes.to_vec();
            sorted.sort_by_key(|(i, _)| *i);
            for pair in sorted.windows(2) {
                if pair[0].0 == pair[1].0 {
                    return Err(ErrorKind::InvalidUpdate {
                        reason: format!("launch {} is updated twice in one call", pair[0].0),
                    });
                }
            }
            if let Some(&(index, _)) = sorted.iter().find(|(i, _)| *i >= launches) {
                return Err(ErrorKind::NoSuchLaunch { index, launches });
            }
            let mut next = sorted.iter().peekable();
            let uses = entry
                .recorded
                .iter()
                .enumerate()
                .flat_map(|(i, r)| {
                    let views = match next.next_if(|(at, _)| *at == i) {
                        Some((_, call)) => &call.buffers,
                        None => &r.call.buffers,
                    };
                    views.iter().map(|v| v.buffer)
                })
                .collect::<BTreeSet<BufferId>>();
            apply(st, target, sorted, Some(uses))
        })
    }
}

fn check_updatable(st: &State, target: GraphRef) -> std::result::Result<&ExecEntry, ErrorKind> {
    if st.capture.is_some() {
        return Err(ErrorKind::UpdateInCapture);
    }
    st.entry(target)
}

/// Validate `changes` (launch index, new call; ascending indices), then
/// patch or re-record. `uses`: the graph's buffer set afterwards, when the
/// change alters it (a rebind). Only the changed launches are copied: the
/// whole list is rebuilt only for a re-record.
fn apply(
    st: &mut State,
    target: GraphRef,
    changes: Vec<(usize, OpCall)>,
    uses: Option<BTreeSet<BufferId>>,
) -> std::result::Result<(), ErrorKind> {
    let mut lowered = Vec::with_capacity(changes.len());
    let mut calls = Vec::with_capacity(changes.len());
    {
        let recorded = &st.entry(target)?.recorded;
        for (index, call) in changes {
            let was = &recorded[index];
            if call.op != was.call.op {
                return Err(ErrorKind::UpdateChangesOp {
                    index,
                    recorded: was.call.op,
                    requested: call.op,
                });
            }
            lowered.push((index, validate::lower(&call, |id| st.live_meta(id))?));
            calls.push(call);
        }
    }
    if lowered.is_empty() {
        return Ok(());
    }
    let raw_target = st.replay_target(target)?;
    let mut native = false;
    let mut patched_partly = false;
    if st.backend.update_support() == UpdateSupport::Native {
        match st.backend.update_launches(raw_target, &lowered) {
            Ok(()) => native = true,
            Err(_) => patched_partly = true,
        }
    }
    if !native {
        let mut changed = lowered.iter().peekable();
        let launches: Vec<Launch> = st
            .entry(target)?
            .recorded
            .iter()
            .enumerate()
            .map(|(i, r)| match changed.next_if(|(at, _)| *at == i) {
                Some((_, l)) => l.clone(),
                None => r.launch.clone(),
            })
            .collect();
        if let Err(e) = rerecord(st, target, &launches) {
            if patched_partly {
                let reason = format!("a failed in-place update could not be redone ({e})");
                st.entry_mut(target)?.broken = Some(reason);
            }
            return Err(e);
        }
    }
    let count = lowered.len();
    let entry = st.entry_mut(target)?;
    for ((index, launch), call) in lowered.into_iter().zip(calls) {
        entry.recorded[index] = Recorded { call, launch };
    }
    if let Some(uses) = uses {
        entry.uses = uses;
    }
    entry.broken = None;
    let graph = match target {
        GraphRef::Current => None,
        GraphRef::Handle(id) => Some(id.0),
    };
    st.trace.record(|| EventKind::Update {
        graph,
        launches: count,
        native,
    });
    st.sweep();
    Ok(())
}

/// Record the graph again from `launches` through the backend's capture
/// calls and put the result in place of the old one (whose in-flight
/// replays complete: C8). On an error the old graph is left as it was.
fn rerecord(
    st: &mut State,
    target: GraphRef,
    launches: &[Launch],
) -> std::result::Result<(), ErrorKind> {
    st.backend.begin_capture()?;
    for launch in launches {
        if let Err(e) = st.backend.launch(launch) {
            let _ = st.backend.abort_capture();
            return Err(e);
        }
    }
    match target {
        GraphRef::Current => {
            if let Err(e) = st.backend.end_capture_into_current() {
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
