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

use super::conditional::{lower_condition, walk, Region, Step};
use super::handles::{BufferId, GraphRef};
use super::state::{ExecEntry, State};
use super::Device;
use crate::backend::{CaptureSupport, UpdateSupport};
use crate::error::{ErrorKind, Result};
use crate::ops::{Launch, OpCall, Params};
use crate::trace::EventKind;
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

    /// Apply `changes` to a captured graph as one update (C13): the graph
    /// then runs as a fresh capture over the changed launches would, from
    /// the next replay on. Replays queued before the call run as before.
    /// Changes are validated together as launches are (C12), and on any
    /// error nothing changes. Where the backend patches graphs in place
    /// ([`UpdateSupport::Native`]) nothing is re-captured; elsewhere core
    /// records the graph again from the launches it validated.
    ///
    /// - [`Change::Rebind`]: every launch that uses `old` uses `new`, a live
    ///   buffer of this device with `old`'s element type and at least the
    ///   length each launch needs; the graph stops holding `old`.
    /// - [`Change::Params`]: launch `index`'s parameters, over the same
    ///   views.
    /// - [`Change::Launch`]: launch `index` (capture order) replaced by a
    ///   call of the same op over any views (how a decode step moves its
    ///   KV-cache write to the next slot). The graph holds the buffers its
    ///   launches use afterwards.
    ///
    /// Each index is changed at most once per update, and each `old` buffer
    /// rebound at most once; rebinds apply to every launch after its own
    /// change, and to the conditions of conditional bodies (C14). A launch
    /// may keep binding a buffer its owner dropped (the graph holds it);
    /// no change may bind one anew.
    ///
    /// ```
    /// # fn main() -> seam::Result<()> {
    /// use seam::{ops, Change, Device, GraphRef, Params};
    /// let dev = Device::new(Box::new(seam::testing::NullBackend::new(
    ///     seam::CaptureSupport::Native,
    /// )));
    /// let (a, b) = (dev.buffer::<f32>(4)?, dev.buffer::<f32>(4)?);
    /// let scope = dev.capture()?;
    /// dev.launch(&ops::fill(a.id(), 4, 0))?;
    /// let graph = scope.end_graph()?;
    /// dev.update(&graph, &[Change::Rebind { old: a.id(), new: b.id() }])?;
    /// dev.update(&graph, &[Change::Params { index: 0, params: Params::dims(2, 0, 0) }])?;
    /// # let _ = GraphRef::Current;
    /// # Ok(())
    /// # }
    /// ```
    pub fn update(&self, target: impl Into<GraphRef>, changes: &[Change]) -> Result<()> {
        let target = target.into();
        self.with("update", |st| {
            let pairs: Vec<(BufferId, BufferId)> = changes
                .iter()
                .filter_map(|c| match c {
                    Change::Rebind { old, new } => Some((*old, *new)),
                    _ => None,
                })
                .collect();
            if pairs.len() == changes.len() {
                return rebind(st, target, &pairs);
            }
            let entry = check_updatable(st, target)?;
            check_rebinds(st, entry, &pairs)?;
            let launches = entry.record.len();
            let mut calls: Vec<(usize, OpCall)> = Vec::new();
            for c in changes {
                let (index, call) = match c {
                    Change::Rebind { .. } => continue,
                    Change::Params { index, params } => {
                        let recorded =
                            entry
                                .record
                                .calls
                                .get(*index)
                                .ok_or(ErrorKind::NoSuchLaunch {
                                    index: *index,
                                    launches,
                                })?;
                        let call = OpCall {
                            params: *params,
                            ..recorded.clone()
                        };
                        (*index, call)
                    }
                    Change::Launch { index, call } => (*index, call.clone()),
                };
                calls.push((index, call));
            }
            if !pairs.is_empty() {
                // Rebinds reach every launch that uses an old buffer: the
                // changed ones (after their change) and the rest.
                for (i, r) in entry.record.calls.iter().enumerate() {
                    if !calls.iter().any(|(at, _)| *at == i)
                        && r.buffers
                            .iter()
                            .any(|v| pairs.iter().any(|p| p.0 == v.buffer))
                    {
                        calls.push((i, r.clone()));
                    }
                }
                for (_, call) in &mut calls {
                    for v in call.buffers.iter_mut() {
                        v.buffer = swap(&pairs, v.buffer);
                    }
                }
            }
            replace_launches(st, target, &calls, &pairs)
        })
    }
}

/// One change to a captured graph, applied by [`Device::update`] (C13).
// A `Launch` carries its call inline: changes live in short slices, and a
// box would only cost an allocation per change.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Every launch that reads or writes `old` uses `new`.
    Rebind {
        /// The buffer the graph uses now.
        old: BufferId,
        /// The buffer it uses from the next replay on.
        new: BufferId,
    },
    /// The scalar parameters of the launch at `index` (capture order).
    Params {
        /// The launch, in capture order.
        index: usize,
        /// Its new parameters.
        params: Params,
    },
    /// The launch at `index` (capture order) replaced by `call`: the same
    /// op, over any views, with any parameters.
    Launch {
        /// The launch, in capture order.
        index: usize,
        /// The call that replaces it.
        call: OpCall,
    },
}

impl Change {
    /// A [`Change::Launch`] for each `(index, call)`.
    pub fn launches(calls: &[(usize, OpCall)]) -> Vec<Change> {
        calls
            .iter()
            .map(|(index, call)| Change::Launch {
                index: *index,
                call: call.clone(),
            })
            .collect()
    }

    /// A [`Change::Rebind`] for each `(old, new)` pair.
    pub fn rebinds(pairs: &[(BufferId, BufferId)]) -> Vec<Change> {
        pairs
            .iter()
            .map(|&(old, new)| Change::Rebind { old, new })
            .collect()
    }
}

/// The rebind rules: each old buffer is one the graph uses, named once,
/// each new one live with its element type.
fn check_rebinds(
    st: &State,
    entry: &ExecEntry,
    pairs: &[(BufferId, BufferId)],
) -> std::result::Result<(), ErrorKind> {
    for (i, &(old, new)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(earlier, _)| *earlier == old) {
            return Err(ErrorKind::InvalidUpdate {
                reason: format!("buffer {} is rebound twice in one call", old.n),
            });
        }
        if !entry.uses.contains(&old) {
            return Err(ErrorKind::NotUsedByGraph { id: old.n });
        }
        let (o, n) = (st.meta(old)?, st.live_meta(new)?);
        if o.dtype != n.dtype {
            return Err(ErrorKind::RebindMismatch {
                old: old.n,
                new: new.n,
                reason: format!("it holds {}, the graph's buffer {}", n.dtype, o.dtype),
            });
        }
    }
    Ok(())
}

/// An update of rebinds only: each launch that uses an old buffer lowered
/// again over the new one (or patched by the backend as it is).
fn rebind(
    st: &mut State,
    target: GraphRef,
    pairs: &[(BufferId, BufferId)],
) -> std::result::Result<(), ErrorKind> {
    let entry = check_updatable(st, target)?;
    check_rebinds(st, entry, pairs)?;
    // The conditions first, then the launches, as an update of launches
    // and rebinds together checks them.
    let regions = moved_regions(st, entry, pairs)?;
    let lowered = rebound_launches(st, entry, pairs)?;
    // Every use of each old buffer moves to its new one.
    let uses = entry
        .uses
        .iter()
        .map(|b| swap(pairs, *b))
        .collect::<BTreeSet<BufferId>>();
    apply(
        st,
        target,
        lowered,
        NewCalls::Rebound(pairs),
        Some(uses),
        regions,
    )
}

/// The graph's conditional bodies after `pairs` moved their conditions
/// (C14), each moved one checked as at capture; `None` when none moved. A
/// moved condition has the graph recorded anew.
fn moved_regions(
    st: &State,
    entry: &ExecEntry,
    pairs: &[(BufferId, BufferId)],
) -> std::result::Result<Option<Vec<Region>>, ErrorKind> {
    let mut regions = entry.regions.clone();
    let mut moved = false;
    for r in regions.iter_mut() {
        let cond = swap(pairs, r.cond);
        if cond != r.cond {
            let view = cond.view(r.offset, 1);
            *r = Region {
                cond,
                raw: lower_condition(st, r.kind, view)?,
                ..r.clone()
            };
            moved = true;
        }
    }
    Ok(moved.then_some(regions))
}

/// An update of whole launches (index, new call), with `pairs` the
/// rebinds given beside them (already applied to the calls) for the
/// conditions they move.
fn replace_launches(
    st: &mut State,
    target: GraphRef,
    changes: &[(usize, OpCall)],
    pairs: &[(BufferId, BufferId)],
) -> std::result::Result<(), ErrorKind> {
    let entry = check_updatable(st, target)?;
    let launches = entry.record.len();
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
    let regions = moved_regions(st, entry, pairs)?;
    let conditions = regions.as_ref().unwrap_or(&entry.regions);
    // The graph's buffers change only where a changed launch binds
    // buffers its recorded call did not (a new parameter, or a view moved
    // within its buffer, binds the same ones): then they are gathered
    // from every launch again, else the update costs nothing per launch
    // it leaves alone.
    let same_buffers = regions.is_none()
        && sorted.iter().all(|(i, call)| {
            let was = entry.record.calls[*i].buffers.iter().map(|v| v.buffer);
            call.buffers.iter().map(|v| v.buffer).eq(was)
        });
    let uses = (!same_buffers).then(|| {
        let mut next = sorted.iter().peekable();
        entry
            .record
            .calls
            .iter()
            .enumerate()
            .flat_map(|(i, r)| {
                let views = match next.next_if(|(at, _)| *at == i) {
                    Some((_, call)) => &call.buffers,
                    None => &r.buffers,
                };
                views.iter().map(|v| v.buffer)
            })
            .chain(conditions.iter().map(|r| r.cond))
            .collect::<BTreeSet<BufferId>>()
    });
    let (lowered, calls) = lower_changes(st, target, sorted)?;
    apply(st, target, lowered, NewCalls::Given(calls), uses, regions)
}

fn check_updatable(st: &State, target: GraphRef) -> std::result::Result<&ExecEntry, ErrorKind> {
    if st.capture.is_some() {
        return Err(ErrorKind::UpdateInCapture);
    }
    st.entry(target)
}

/// Where a rebind's `pairs` move buffer `id` (itself if none names it).
fn swap(pairs: &[(BufferId, BufferId)], id: BufferId) -> BufferId {
    pairs
        .iter()
        .find(|(old, _)| *old == id)
        .map_or(id, |(_, new)| *new)
}

/// Changed launches, lowered: (launch index, launch), ascending indices.
type Lowered = Vec<(usize, Launch)>;

/// Validate `changes` (launch index, new call; ascending indices) as
/// launches (C12): each lowered, and the calls, in the same order.
fn lower_changes(
    st: &State,
    target: GraphRef,
    changes: Vec<(usize, OpCall)>,
) -> std::result::Result<(Lowered, Vec<OpCall>), ErrorKind> {
    let record = &st.entry(target)?.record;
    let mut lowered = Vec::with_capacity(changes.len());
    let mut calls = Vec::with_capacity(changes.len());
    for (index, call) in changes {
        let (was_call, was_launch) = (&record.calls[index], &record.launches[index]);
        if call.op != was_call.op {
            return Err(ErrorKind::UpdateChangesOp {
                index,
                recorded: was_call.op,
                requested: call.op,
            });
        }
        let launch = st.lower_keeping(&call, &was_call.buffers)?;
        if launch.dtype != was_launch.dtype {
            return Err(ErrorKind::UpdateChangesDtype {
                index,
                recorded: was_launch.dtype,
                requested: launch.dtype,
            });
        }
        lowered.push((index, launch));
        calls.push(call);
    }
    Ok((lowered, calls))
}

/// Every launch of `entry` that binds one of the `pairs`' old buffers,
/// lowered over the new ones: what `validate::lower` gives for the launch's
/// call with its buffers swapped, which is what each launch gets that a
/// shortcut cannot vouch for. The shortcut: a recorded launch is its call
/// lowered over buffers whose metadata never changes, so where each new
/// buffer has its old one's type (checked by `rebind`) and at least its
/// length (every other buffer of the launch is held by the graph, even
/// one its owner released, so its metadata is as it was), and the swap
/// makes no two of its bindings the same buffer that were not before (nor
/// the reverse), every check `lower` makes passes as it did (view ranges
/// and needs only grow more room; aliasing depends on which bindings share
/// a buffer; the rest on the op and params alone), and the lowered launch
/// is the recorded one over the new raw buffers, an open-ended view's
/// length taken from the new buffer.
fn rebound_launches(
    st: &State,
    entry: &ExecEntry,
    pairs: &[(BufferId, BufferId)],
) -> std::result::Result<Lowered, ErrorKind> {
    // Per pair (first one for an old buffer, as `swap` picks): the new
    // buffer's metadata, and whether it holds at least what the old did.
    let mut new = Vec::with_capacity(pairs.len());
    for &(old, to) in pairs {
        let (o, n) = (st.meta(old)?, st.live_meta(to)?);
        new.push((n, n.len >= o.len));
    }
    // The pair that moves `id` (as `swap` finds it), if it moves.
    let pair_of = |id: BufferId| {
        pairs
            .iter()
            .position(|(old, _)| *old == id)
            .filter(|&p| pairs[p].1 != id)
    };
    let mut lowered = Vec::with_capacity(entry.record.len());
    let record = &entry.record;
    for (index, (r_call, r_launch)) in record.calls.iter().zip(&record.launches).enumerate() {
        let views = r_call.buffers.as_slice();
        let mut moved = [None; crate::kernel::MAX_BINDINGS];
        let mut any = false;
        for (m, v) in moved.iter_mut().zip(views.iter()) {
            *m = pair_of(v.buffer);
            any |= m.is_some();
        }
        if !any {
            continue;
        }
        let moved = &moved[..views.len().min(moved.len())];
        let to = |k: usize| moved[k].map_or(views[k].buffer, |p| pairs[p].1);
        // (A recorded launch has at most MAX_BINDINGS views: `moved` holds
        // one entry per view.)
        let vouched = moved.iter().all(|m| m.is_none_or(|p| new[p].1))
            && (0..views.len())
                .all(|i| (0..i).all(|j| (views[i].buffer == views[j].buffer) == (to(i) == to(j))));
        if vouched {
            // Cloned straight into its slot, then patched there: a launch
            // is 320 bytes, and each move of one is a copy.
            lowered.push((index, r_launch.clone()));
            let launch = &mut lowered.last_mut().expect("just pushed").1;
            for ((raw, m), v) in launch
                .buffers
                .as_mut_slice()
                .iter_mut()
                .zip(moved)
                .zip(views)
            {
                if let Some(p) = m {
                    let meta = new[*p].0;
                    raw.buffer = meta.raw;
                    if v.len.is_none() {
                        raw.len = (meta.len - v.offset) as u64;
                    }
                }
            }
        } else {
            let mut call = r_call.clone();
            for v in call.buffers.iter_mut() {
                v.buffer = swap(pairs, v.buffer);
            }
            lowered.push((index, st.lower_keeping(&call, views)?));
        }
    }
    Ok(lowered)
}

/// The calls an update stores with its lowered launches.
enum NewCalls<'a> {
    /// One per change, in the changes' order.
    Given(Vec<OpCall>),
    /// Each changed launch's call with its buffers swapped by a rebind's pairs.
    Rebound(&'a [(BufferId, BufferId)]),
}

/// Patch or re-record `lowered` (launch index, validated launch; ascending
/// indices), then store them with their calls. `uses`: the graph's buffer
/// set afterwards, when the change alters it (a rebind). `regions`: the
/// graph's conditional bodies afterwards, when a rebind moved a condition
/// (recorded anew: backends patch launches only). Only the changed
/// launches are copied: the whole list is rebuilt only for a re-record.
fn apply(
    st: &mut State,
    target: GraphRef,
    lowered: Lowered,
    calls: NewCalls<'_>,
    uses: Option<BTreeSet<BufferId>>,
    regions: Option<Vec<Region>>,
) -> std::result::Result<(), ErrorKind> {
    if lowered.is_empty() && regions.is_none() {
        return Ok(());
    }
    st.replay_target(target)?;
    let mut native = false;
    let mut patched_partly = false;
    // A broken graph (an in-place update failed part-way and its re-record
    // failed too) is recorded again whole: patching only this update's
    // changes would leave what the failed one reached in place.
    let broken = st.entry(target)?.broken.is_some();
    if regions.is_none() && !broken && st.backend.update_support() == UpdateSupport::Native {
        match st.update_raw(target, &lowered) {
            Ok(()) => native = true,
            Err(_) => patched_partly = true,
        }
    }
    if !native {
        let mut changed = lowered.iter().peekable();
        let launches: Vec<Launch> = st
            .entry(target)?
            .record
            .launches
            .iter()
            .enumerate()
            .map(|(i, r)| match changed.next_if(|(at, _)| *at == i) {
                Some((_, l)) => l.clone(),
                None => r.clone(),
            })
            .collect();
        let structure = match &regions {
            Some(r) => r.clone(),
            None => st.entry(target)?.regions.clone(),
        };
        if let Err(e) = rerecord(st, target, &launches, &structure) {
            if patched_partly {
                let reason = format!("a failed in-place update could not be redone ({e})");
                st.entry_mut(target)?.broken = Some(reason);
            }
            return Err(e);
        }
    }
    let count = lowered.len();
    let entry = st.entry_mut(target)?;
    match calls {
        NewCalls::Given(calls) => {
            for ((index, launch), call) in lowered.into_iter().zip(calls) {
                entry.record.calls[index] = call;
                entry.record.launches[index] = launch;
            }
        }
        NewCalls::Rebound(pairs) => {
            // Stored by `clone_from`: each launch's live views copied, not
            // its whole inline list.
            for (index, launch) in &lowered {
                for v in entry.record.calls[*index].buffers.as_mut_slice() {
                    v.buffer = swap(pairs, v.buffer);
                }
                entry.record.launches[*index].clone_from(launch);
            }
        }
    }
    if let Some(uses) = uses {
        entry.uses = uses;
    }
    if let Some(regions) = regions {
        entry.regions = regions;
    }
    entry.broken = None;
    let graph = match target {
        GraphRef::Current => None,
        GraphRef::Handle(id) => Some(id.n),
    };
    // The same launch index names the same node, now with its new call.
    st.trace.forget(graph);
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
/// The graph keeps the node timing it was captured with, whatever the
/// device's is now.
fn rerecord(
    st: &mut State,
    target: GraphRef,
    launches: &[Launch],
    regions: &[Region],
) -> std::result::Result<(), ErrorKind> {
    let keep = st.entry(target)?.node_timed;
    if keep == st.node_timing {
        return record_again(st, target, launches, regions);
    }
    st.backend.set_node_timing(keep)?;
    let r = record_again(st, target, launches, regions);
    let back = st.backend.set_node_timing(st.node_timing);
    r.and(back)
}

fn record_again(
    st: &mut State,
    target: GraphRef,
    launches: &[Launch],
    regions: &[Region],
) -> std::result::Result<(), ErrorKind> {
    st.backend.begin_capture()?;
    // The capture calls that made the graph, its bodies' included (C14).
    let recorded = walk(launches.len(), regions, &mut |step| match step {
        Step::Launch(i) => st.launch_raw(&launches[i]),
        Step::Begin(r) => st.begin_conditional_raw(&r.raw),
        Step::End => st.backend.end_conditional(),
    });
    if let Err(e) = recorded {
        let _ = st.backend.abort_capture();
        return Err(e);
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
            if st.destroy_raw(old).is_err() {
                st.orphans.push(old);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
