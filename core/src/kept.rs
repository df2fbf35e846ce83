//! Kept variants of a captured graph: what each runs, so that a C13
//! update back to launches the graph ran before switches to a variant kept
//! for them instead of patching every node it moves. For backends that
//! update graphs in place ([`UpdateSupport::Native`](crate::UpdateSupport));
//! a variant (`E`) is the backend's executable form of the graph: a CUDA or
//! HIP graph exec, a Vulkan command buffer with its descriptor sets.
//!
//! A rebind that alternates a graph between buffer sets (double-buffered
//! inputs, ping-pong activations) patches every node it moves, each time.
//! On the H100, the per-node `cudaGraphExecKernelNodeSetParams` of a chain
//! of 1000 one-thread kernels made a switch and replay 1.37× the replay
//! alone, while keeping one exec per buffer set and launching the other
//! ran at 1.00× (`bench/probes/update_probe.cu`, 2026-12-05; the probe's
//! other designs: a device table of pointers 1.13×, slowing every plain
//! replay by the same 13 %; `__constant__` slots 1.17×; whole-graph
//! `cudaGraphExecUpdate` 1.19× without the cost of building its source
//! graph). On Vulkan the patch is a descriptor write per moved binding.
//!
//! So each graph keeps the launch sets an in-place patch moved it away
//! from (the last [`LEFT`]), and up to [`SPARES`] other variants of the
//! same graph with what theirs run; what its current variant runs is core's
//! record of the graph, which every update passes in. An update whose
//! result a spare runs swaps that spare in: no node is touched. One whose
//! result the graph ran before but no variant runs now gets a fresh
//! variant, made by the backend with those launches, and the current one
//! is kept as a spare: a set seen twice costs one fresh variant, and every
//! switch between kept sets after that costs none. A current variant that
//! was patched in place is not kept where the backend says such a variant
//! is slower ([`Runs::patched`]): its set is remembered and gets a clean
//! variant of its own if it comes back. Anything else is patched in place
//! as before, so an update that never comes back (a KV-cache slot moving
//! every step) keeps no variant. A graph whose in-place patch failed
//! part-way keeps patching in place: what its variant runs is unknown.
//!
//! Soundness: a spare binds buffers the graph may no longer hold (a rebind
//! releases the old buffer to its owner). The backend drops every spare
//! and remembered set that names a buffer before that buffer is freed
//! ([`Runs::forget`]), so a kept variant only ever points at live memory;
//! and a buffer id is never reused after a free (`table.rs`), so a stale
//! set could never match a new buffer anyway.

use crate::{Launch, RawBuffer};

/// Variants kept besides the current one, per graph.
pub const SPARES: usize = 2;
/// Launch sets an in-place patch moved a graph away from, remembered per graph.
pub const LEFT: usize = 4;

/// A variant of the graph that is not the current one, and what its launches run.
struct Spare<E> {
    variant: E,
    runs: Vec<Launch>,
    /// Patched in place since it was made, on a backend where that makes
    /// it slower (see [`Runs::patched`]).
    patched: bool,
}

/// How an update reaches the launch set it asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// The current variant runs it already: nothing to do.
    Nothing,
    /// A kept variant runs it: swap it in ([`Runs::swap`]).
    Swap(usize),
    /// The graph ran it before: a fresh variant of the graph made with
    /// it ([`Runs::keep`]).
    Fresh,
    /// Patch the current variant's changed nodes ([`Runs::patched`]).
    InPlace,
}

/// What a graph's other variants run (see the module's docs). What its
/// current variant runs is core's record of the graph, passed to every
/// call that needs it (`now`, as [`Backend::update_launches`](crate::Backend::update_launches)
/// lends it): the backend keeps no copy of it.
pub struct Runs<E> {
    /// Most recently used last.
    spares: Vec<Spare<E>>,
    /// Most recent last.
    left: Vec<Vec<Launch>>,
    /// An in-place patch of the current variant failed part-way: what it
    /// runs is unknown, whatever record a caller passes, so it is never
    /// kept and no update is planned against a kept set. Core records
    /// such a graph again; a caller that does not (a test harness driving
    /// the backend directly) gets in-place patches only.
    lost: bool,
    /// The current variant was patched in place since it was made, on a
    /// backend where that makes it slower ([`Runs::patched`]): it is never
    /// kept as a spare; a fresh variant drops it and remembers its set
    /// instead, to be made clean if the graph comes back to it.
    patched: bool,
}

impl<E> Default for Runs<E> {
    fn default() -> Self {
        Runs {
            spares: Vec::new(),
            left: Vec::new(),
            lost: false,
            patched: false,
        }
    }
}

/// What a graph running `now` would run with `changes` (launch index,
/// new launch; indices the graph holds) applied.
pub fn after(now: &[Launch], changes: &[(usize, Launch)]) -> Vec<Launch> {
    let mut want = now.to_vec();
    for (index, l) in changes {
        want[*index] = l.clone();
    }
    want
}

impl<E> Runs<E> {
    /// How to reach what a graph running `now` would run with `changes`
    /// applied. Compared launch by launch, nothing copied: an update that
    /// switches variants costs a comparison of the graph's launches.
    pub fn plan(&self, now: &[Launch], changes: &[(usize, Launch)]) -> Plan {
        if self.lost {
            return Plan::InPlace;
        }
        // The launch each index asks for where a change names it (the last
        // change of an index wins, as `after` applies them).
        let mut asked: Vec<Option<&Launch>> = vec![None; now.len()];
        for (index, l) in changes {
            match asked.get_mut(*index) {
                Some(slot) => *slot = Some(l),
                None => return Plan::InPlace,
            }
        }
        // The launches the update names first: a set that differs from
        // the result usually differs there (a KV-cache position that moves
        // every step never matches a set it left), so most misses cost a
        // comparison per change, not per launch. Then the launches no
        // change names, against what the graph runs now: each launch is
        // compared once.
        let runs_it = |runs: &[Launch]| {
            runs.len() == now.len()
                && changes.iter().all(|(i, _)| Some(&runs[*i]) == asked[*i])
                && runs
                    .iter()
                    .zip(now)
                    .zip(&asked)
                    .all(|((r, n), a)| a.is_some() || r == n)
        };
        if changes.iter().all(|(i, l)| now[*i] == *l) {
            return Plan::Nothing;
        }
        if let Some(i) = self.spares.iter().position(|s| runs_it(&s.runs)) {
            return Plan::Swap(i);
        }
        if self.left.iter().any(|l| runs_it(l)) {
            Plan::Fresh
        } else {
            Plan::InPlace
        }
    }

    /// Room for [`keep`](Runs::keep)'s spare where the current variant
    /// will be kept (it is not [`patched`](Runs::patched) slower) and
    /// [`SPARES`] are kept: the least recently used one, taken out (the
    /// caller destroys it once no replay uses it, before making the fresh
    /// variant).
    pub fn make_room(&mut self) -> Option<E> {
        (!self.patched && self.spares.len() >= SPARES).then(|| self.spares.remove(0).variant)
    }

    /// [`Plan::Swap`]: spare `i` becomes `current`, and `current`, which
    /// runs `now`, a spare; `now` is exchanged for the list the spare ran
    /// (what the update asked for: core's record lent mutably, no launch
    /// copied).
    pub fn swap(&mut self, current: &mut E, i: usize, now: &mut Vec<Launch>) {
        let mut spare = self.spares.remove(i);
        std::mem::swap(current, &mut spare.variant);
        std::mem::swap(now, &mut spare.runs);
        std::mem::swap(&mut self.patched, &mut spare.patched);
        self.spares.push(spare);
    }

    /// [`Plan::Fresh`]: `fresh` (made with `want`) becomes `current`, and
    /// `now` becomes `want`. The old variant, which runs `now`, is kept as
    /// a spare ([`make_room`](Runs::make_room) made room) unless it was
    /// patched slower: then it is returned for the caller to destroy once
    /// no replay uses it, and `now` is remembered as a set left behind.
    #[must_use = "a variant returned is the caller's to destroy"]
    pub fn keep(
        &mut self,
        current: &mut E,
        fresh: E,
        now: &mut Vec<Launch>,
        want: Vec<Launch>,
    ) -> Option<E> {
        let old = std::mem::replace(current, fresh);
        self.left.retain(|l| *l != want);
        let ran = std::mem::replace(now, want);
        if std::mem::take(&mut self.patched) {
            self.remember(ran);
            return Some(old);
        }
        self.spares.push(Spare {
            variant: old,
            runs: ran,
            patched: false,
        });
        None
    }

    /// [`Plan::InPlace`] failed part-way: the current variant's launches
    /// are unknown from now on (`lost`), so every later update is planned
    /// in place; the spares stay valid and are destroyed with the graph or
    /// a freed buffer.
    pub fn lose(&mut self) {
        self.lost = true;
    }

    /// [`Plan::InPlace`] done: the variant that ran `now` runs it with
    /// `changes` applied, so `now` is remembered as a set left behind.
    /// `slower`: a variant patched in place replays slower than a fresh
    /// one on this backend, so it is not kept once a fresh one replaces it
    /// (CUDA: an exec patched by `cuGraphExecKernelNodeSetParams` replayed
    /// 12 % slower than one instantiated with the same launches set in the
    /// graph, 999 against 891 µs at 1000 one-thread kernels on an H100,
    /// `bench/probes/idle_probe.cu`; a Vulkan command buffer whose
    /// descriptor sets were rewritten runs as recorded).
    pub fn patched(&mut self, now: &[Launch], changes: &[(usize, Launch)], slower: bool) {
        if changes.iter().all(|(i, l)| now.get(*i) == Some(l)) {
            return;
        }
        self.patched |= slower;
        self.remember(now.to_vec());
    }

    /// Remember `set` as one the graph left (the most recent of [`LEFT`]).
    fn remember(&mut self, set: Vec<Launch>) {
        self.left.retain(|l| *l != set);
        if self.left.len() >= LEFT {
            self.left.remove(0);
        }
        self.left.push(set);
    }

    /// `buffer` is about to be freed: every spare and remembered set that
    /// binds it is dropped; the spares' variants are returned for the
    /// caller to destroy once no replay uses them.
    pub fn forget(&mut self, buffer: RawBuffer) -> Vec<E> {
        let binds = |runs: &[Launch]| {
            runs.iter()
                .any(|l| l.buffers.iter().any(|v| v.buffer == buffer))
        };
        self.left.retain(|l| !binds(l));
        let (gone, kept): (Vec<_>, Vec<_>) = self.spares.drain(..).partition(|s| binds(&s.runs));
        self.spares = kept;
        gone.into_iter().map(|s| s.variant).collect()
    }

    /// Every spare variant, for destruction with the graph.
    pub fn take_spares(&mut self) -> Vec<E> {
        self.left.clear();
        self.spares.drain(..).map(|s| s.variant).collect()
    }

    /// How many variants are kept besides the current one.
    pub fn spares(&self) -> usize {
        self.spares.len()
    }
}

#[cfg(test)]
mod tests;
