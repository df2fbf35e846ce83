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
//! Cost: planning an update costs per change, not per launch of the
//! graph, unless it switches variants. Each launch set is known by a
//! fingerprint, a sum over its launches of a hash of (index, launch), so
//! an update's result is fingerprinted from the current set's by its
//! changes alone; a set left behind is remembered by its fingerprint only;
//! and a spare is compared launch by launch only where its fingerprint is
//! the result's. An update that never comes back (a KV-cache slot moving
//! every step) thus costs the same in a graph of ten launches or ten
//! thousand. Two sets of one fingerprint cost time, never correctness: a
//! swap is decided by comparing the launches, and a fresh variant is made
//! from the launches the update asks for, not from what was remembered.
//!
//! Soundness: a spare binds buffers the graph may no longer hold (a rebind
//! releases the old buffer to its owner). The backend drops every spare
//! that names a buffer before that buffer is freed ([`Runs::forget`]), so
//! a kept variant only ever points at live memory. A remembered set is no
//! variant, only a fingerprint: it binds nothing, and matching it makes a
//! fresh variant from the update's own (validated, live) launches.

use crate::{Launch, RawBuffer};
use std::cell::Cell;
use std::hash::{Hash, Hasher};

/// Variants kept besides the current one, per graph.
pub const SPARES: usize = 2;
/// Launch sets an in-place patch moved a graph away from, remembered per graph.
pub const LEFT: usize = 4;

/// A variant of the graph that is not the current one, and what its launches run.
struct Spare<E> {
    variant: E,
    runs: Vec<Launch>,
    /// `runs`' fingerprint (`fingerprint`).
    print: u64,
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
    /// The fingerprints of the sets left behind, most recent last.
    left: Vec<u64>,
    /// The fingerprint of what the current variant runs (core's record),
    /// once a call has needed it: every later change to the current set
    /// goes through this type (a swap, a fresh variant, a patch), which
    /// keeps it up to date per change. Only speed rests on it (see the
    /// module's docs).
    now: Cell<Option<u64>>,
    /// The hash of one launch of a set ([`term`]; the tests give one that
    /// makes every set collide).
    term: fn(usize, &Launch) -> u64,
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
            now: Cell::new(None),
            term,
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

/// The hash of launch `index` of a set, one term of `fingerprint`:
/// every field a launch compares by (its parameters by their bytes).
fn term(index: usize, l: &Launch) -> u64 {
    let mut h = Mix(0);
    index.hash(&mut h);
    l.op.hash(&mut h);
    l.dtype.hash(&mut h);
    l.buffers.as_slice().hash(&mut h);
    l.params.to_bytes().hash(&mut h);
    h.finish()
}

/// A fast hasher for [`term`]: each 8 bytes written (every integer a
/// launch hashes reaches `write` as its bytes) folded in by a rotate, an
/// exclusive or and a multiply by an odd constant, then a finalizer. A
/// fingerprint is a filter, so speed matters more than strength: a
/// collision costs a fresh variant, never a wrong one.
struct Mix(u64);

impl Hasher for Mix {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 =
                (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    /// splitmix64's finalizer, so that every bit of the state reaches
    /// every bit of the term: without it, the sums of terms of a graph
    /// whose one launch's parameter moves every update collided within 21
    /// updates (`kept::tests`).
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A launch set's fingerprint: the wrapping sum of its launches' terms, so
/// that changing launch `i` from `a` to `b` moves it by `term(i, b) -
/// term(i, a)`.
fn fingerprint(set: &[Launch], term: fn(usize, &Launch) -> u64) -> u64 {
    set.iter()
        .enumerate()
        .fold(0, |sum, (i, l)| sum.wrapping_add(term(i, l)))
}

/// Whether `changes` changes name most of a graph of `len` launches:
/// then fingerprinting the result costs more than comparing it with a
/// kept set (a rebind of a buffer every launch binds).
fn most_of(changes: usize, len: usize) -> bool {
    changes * 2 > len
}

/// `changes` as they apply (the last change of an index wins, as
/// [`after`] applies them), by ascending index; `None` where one names an
/// index past `len`.
fn effective(len: usize, changes: &[(usize, Launch)]) -> Option<Vec<(usize, &Launch)>> {
    let mut last: Vec<(usize, &Launch)> = Vec::with_capacity(changes.len());
    for (index, l) in changes {
        if *index >= len {
            return None;
        }
        last.push((*index, l));
    }
    // Stable: the changes of one index stay in order, the last one last.
    last.sort_by_key(|(i, _)| *i);
    let mut out: Vec<(usize, &Launch)> = Vec::with_capacity(last.len());
    for c in last {
        match out.last_mut() {
            Some(prev) if prev.0 == c.0 => *prev = c,
            _ => out.push(c),
        }
    }
    Some(out)
}

impl<E> Runs<E> {
    /// The fingerprint of `now`, what the current variant runs: kept, or
    /// computed once (per launch) and kept.
    fn now_print(&self, now: &[Launch]) -> u64 {
        match self.now.get() {
            Some(p) => p,
            None => {
                let p = fingerprint(now, self.term);
                self.now.set(Some(p));
                p
            }
        }
    }

    /// The fingerprint of `now` with `changes` (effective, [`effective`])
    /// applied: per change.
    /// Where the changes are most of the graph ([`most_of`]), the result's
    /// terms summed afresh: one term a launch instead of two a change.
    fn print_after(&self, now: &[Launch], changes: &[(usize, &Launch)]) -> u64 {
        if most_of(changes.len(), now.len()) {
            let mut named = changes.iter().peekable();
            return now.iter().enumerate().fold(0u64, |p, (i, n)| {
                let l = named.next_if(|(at, _)| *at == i).map_or(n, |c| c.1);
                p.wrapping_add((self.term)(i, l))
            });
        }
        changes.iter().fold(self.now_print(now), |p, (i, l)| {
            p.wrapping_sub((self.term)(*i, &now[*i]))
                .wrapping_add((self.term)(*i, l))
        })
    }

    /// How to reach what a graph running `now` would run with `changes`
    /// applied. Costs per change unless a kept variant's fingerprint is
    /// the result's; that one is then compared launch by launch, nothing
    /// copied.
    pub fn plan(&self, now: &[Launch], changes: &[(usize, Launch)]) -> Plan {
        if self.lost {
            return Plan::InPlace;
        }
        let Some(asked) = effective(now.len(), changes) else {
            return Plan::InPlace;
        };
        if asked.iter().all(|(i, l)| now[*i] == **l) {
            return Plan::Nothing;
        }
        // The launches the update names first, then the others against
        // what the graph runs now: each launch is compared once.
        let runs_it = |runs: &[Launch]| {
            let mut named = asked.iter().peekable();
            runs.len() == now.len()
                && asked.iter().all(|(i, l)| runs[*i] == **l)
                && runs
                    .iter()
                    .zip(now)
                    .enumerate()
                    .all(|(i, (r, n))| named.next_if(|(at, _)| *at == i).is_some() || r == n)
        };
        // Where the update changes most of the graph, comparing a spare
        // costs less than fingerprinting the result (a rebind that
        // alternates buffer sets finds its spare so, with no hash at all);
        // elsewhere only a spare of the result's fingerprint is compared.
        let most = most_of(asked.len(), now.len());
        if most {
            if let Some(i) = self.spares.iter().position(|s| runs_it(&s.runs)) {
                return Plan::Swap(i);
            }
        }
        let want = self.print_after(now, &asked);
        if !most {
            if let Some(i) = self
                .spares
                .iter()
                .position(|s| s.print == want && runs_it(&s.runs))
            {
                return Plan::Swap(i);
            }
        }
        if self.left.contains(&want) {
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
        let was = self.now_print(now);
        self.now.set(Some(spare.print));
        spare.print = was;
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
        let ran_print = self.now_print(now);
        let want_print = fingerprint(&want, self.term);
        self.left.retain(|l| *l != want_print);
        let ran = std::mem::replace(now, want);
        self.now.set(Some(want_print));
        if std::mem::take(&mut self.patched) {
            self.remember(ran_print);
            return Some(old);
        }
        self.spares.push(Spare {
            variant: old,
            runs: ran,
            print: ran_print,
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
        let Some(applied) = effective(now.len(), changes) else {
            // An index past the graph: what the variant runs is unknown.
            self.now.set(None);
            return;
        };
        self.patched |= slower;
        let left = self.now_print(now);
        self.now.set(Some(self.print_after(now, &applied)));
        self.remember(left);
    }

    /// Remember the set of fingerprint `print` as one the graph left (the
    /// most recent of [`LEFT`]).
    fn remember(&mut self, print: u64) {
        self.left.retain(|l| *l != print);
        if self.left.len() >= LEFT {
            self.left.remove(0);
        }
        self.left.push(print);
    }

    /// `buffer` is about to be freed: every spare that binds it is
    /// dropped, and its variant returned for the caller to destroy once no
    /// replay uses it. Sets left behind are fingerprints, which bind
    /// nothing (see the module's docs): they stay.
    pub fn forget(&mut self, buffer: RawBuffer) -> Vec<E> {
        let binds = |runs: &[Launch]| {
            runs.iter()
                .any(|l| l.buffers.iter().any(|v| v.buffer == buffer))
        };
        let (gone, kept): (Vec<_>, Vec<_>) = self.spares.drain(..).partition(|s| binds(&s.runs));
        self.spares = kept;
        gone.into_iter().map(|s| s.variant).collect()
    }

    /// Every spare variant, for destruction with the graph.
    pub fn take_spares(&mut self) -> Vec<E> {
        self.left.clear();
        self.now.set(None);
        self.spares.drain(..).map(|s| s.variant).collect()
    }

    /// How many variants are kept besides the current one.
    pub fn spares(&self) -> usize {
        self.spares.len()
    }
}

#[cfg(test)]
mod tests;
