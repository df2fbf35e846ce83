//! What a graph's execs run, so that a C13 update back to launches the
//! graph ran before switches execs instead of patching every node.
//!
//! A rebind that alternates a graph between buffer sets (double-buffered
//! inputs, ping-pong activations) patches every node it moves, each time:
//! on the H100, the per-node `cudaGraphExecKernelNodeSetParams` of a chain
//! of 1000 one-thread kernels made a switch and replay 1.37× the replay
//! alone, while keeping one exec per buffer set and launching the other
//! ran at 1.00× (`bench/probes/update_probe.cu`, 2026-12-05; the probe's
//! other designs: a device table of pointers 1.13×, slowing every plain
//! replay by the same 13 %; `__constant__` slots 1.17×; whole-graph
//! `cudaGraphExecUpdate` 1.19× without the cost of building its source
//! graph).
//!
//! So each graph keeps the launch sets an in-place patch moved it away
//! from (the last [`LEFT`]), and up to [`SPARES`] other execs of the same
//! graph with what theirs run; what its current exec runs is core's record
//! of the graph, which every update passes in. An update whose result a
//! spare runs swaps that spare in: no node is touched. One whose result
//! the graph ran before but no exec runs now gets a fresh exec, instantiated
//! after its launches were set in the graph itself, and the current one is
//! kept as a spare: a set seen twice costs one instantiation, and every
//! switch between kept sets after that costs none. A current exec that was
//! patched in place is not kept (it replays slower, see `Runs::patched`):
//! its set is remembered and gets a clean exec of its own if it comes back. Anything else is patched in place as before, so
//! an update that never comes back (a KV-cache slot moving every step)
//! keeps no exec. A graph whose in-place patch failed part-way keeps
//! patching in place: what its exec runs is unknown.
//!
//! Whether a backend keeps execs is its driver's (`keeps_execs`): the
//! recording fake driver does, and CUDA unless `SEAM_CUDA_KEEP_EXECS=0`
//! (the suite ran green with them on an H100, 2026-12-05); HIP only with
//! `SEAM_HIP_KEEP_EXECS=1`, since it has never run on an AMD GPU.
//!
//! Soundness: a spare binds buffers the graph may no longer hold (a rebind
//! releases the old buffer to its owner). The backend drops every spare
//! and remembered set that names a buffer before that buffer is freed
//! ([`Runs::forget`]), so a kept exec only ever points at live memory, and
//! a buffer handle reused after a free can never match a stale exec.

use seam::{Launch, RawBuffer};

/// Execs kept besides the current one, per graph.
pub const SPARES: usize = 2;
/// Launch sets an in-place patch moved a graph away from, remembered per graph.
pub const LEFT: usize = 4;

/// An exec of the graph that is not the current one, and what its launches run.
struct Spare<E> {
    exec: E,
    runs: Vec<Launch>,
    /// Patched in place since it was instantiated (see [`Runs::patched`]).
    patched: bool,
}

/// How an update reaches the launch set it asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// The current exec runs it already: nothing to do.
    Nothing,
    /// A kept exec runs it: swap it in ([`Runs::swap`]).
    Swap(usize),
    /// The graph ran it before: a fresh exec of the graph, its kernel
    /// nodes set to it in the graph first ([`Runs::keep`]).
    Fresh,
    /// Patch the current exec's changed nodes ([`Runs::patched`]).
    InPlace,
}

/// What a graph's other execs run (see the module's docs). What its
/// current exec runs is core's record of the graph, passed to every call
/// that needs it (`now`): the stream backend keeps no copy of it.
pub struct Runs<E> {
    /// Most recently used last.
    spares: Vec<Spare<E>>,
    /// Most recent last.
    left: Vec<Vec<Launch>>,
    /// An in-place patch of the current exec failed part-way: what it
    /// runs is unknown, whatever record a caller passes, so it is never
    /// kept and no update is planned against a kept set. Core records
    /// such a graph again; a caller that does not (a test harness driving
    /// the backend directly) gets in-place patches only.
    lost: bool,
    /// The current exec was patched in place since it was instantiated.
    /// Such an exec replays slower than one instantiated with the same
    /// launches set in the graph (12 % on an H100 at 1000 one-thread
    /// kernels, 999 against 891 µs: `bench/probes/idle_probe.cu`), so it is
    /// never kept as a spare: a fresh exec drops it and remembers its set
    /// instead, to be instantiated clean if the graph comes back to it.
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
    /// switches execs costs a comparison of the graph's launches.
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
        // comparison per change, not per launch.
        let runs_it = |runs: &[Launch]| {
            runs.len() == now.len()
                && changes.iter().all(|(i, _)| Some(&runs[*i]) == asked[*i])
                && runs
                    .iter()
                    .zip(now)
                    .zip(&asked)
                    .all(|((r, n), a)| r == a.unwrap_or(n))
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

    /// Room for [`keep`](Runs::keep)'s spare where the current exec will be
    /// kept (it was not patched in place) and [`SPARES`] are kept: the least
    /// recently used one, taken out (the caller waits for the stream and
    /// destroys it before making the fresh exec).
    pub fn make_room(&mut self) -> Option<E> {
        (!self.patched && self.spares.len() >= SPARES).then(|| self.spares.remove(0).exec)
    }

    /// [`Plan::Swap`]: spare `i` becomes `exec`, and `exec`, which runs
    /// `now`, a spare; `now` is exchanged for the list the spare ran (what
    /// the update asked for: core's record lent mutably, no launch copied).
    pub fn swap(&mut self, exec: &mut E, i: usize, now: &mut Vec<Launch>) {
        let mut spare = self.spares.remove(i);
        std::mem::swap(exec, &mut spare.exec);
        std::mem::swap(now, &mut spare.runs);
        std::mem::swap(&mut self.patched, &mut spare.patched);
        self.spares.push(spare);
    }

    /// [`Plan::Fresh`]: `fresh` (instantiated with `want` set in the graph)
    /// becomes `exec`, and `now` becomes `want`. The old exec, which runs
    /// `now`, is kept as a spare ([`make_room`](Runs::make_room) made room)
    /// unless it was patched in place: then it is returned for the caller
    /// to destroy once the stream is idle, and `now` is remembered as a set
    /// left behind.
    #[must_use = "an exec returned is the caller's to destroy"]
    pub fn keep(
        &mut self,
        exec: &mut E,
        fresh: E,
        now: &mut Vec<Launch>,
        want: Vec<Launch>,
    ) -> Option<E> {
        let old = std::mem::replace(exec, fresh);
        self.left.retain(|l| *l != want);
        let ran = std::mem::replace(now, want);
        if std::mem::take(&mut self.patched) {
            self.remember(ran);
            return Some(old);
        }
        self.spares.push(Spare {
            exec: old,
            runs: ran,
            patched: false,
        });
        None
    }

    /// [`Plan::InPlace`] failed part-way: the current exec's launches are
    /// unknown from now on (`lost`), so every later update is planned in
    /// place; the spares stay valid and are destroyed with the graph or a
    /// freed buffer.
    pub fn lose(&mut self) {
        self.lost = true;
    }

    /// [`Plan::InPlace`] done: the exec that ran `now` runs it with
    /// `changes` applied, so `now` is remembered as a set left behind.
    pub fn patched(&mut self, now: &[Launch], changes: &[(usize, Launch)]) {
        if changes.iter().all(|(i, l)| now.get(*i) == Some(l)) {
            return;
        }
        self.patched = true;
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
    /// binds it is dropped; the spares' execs are returned for the caller
    /// to destroy (the stream is idle: a free waits for it).
    pub fn forget(&mut self, buffer: RawBuffer) -> Vec<E> {
        let binds = |runs: &[Launch]| {
            runs.iter()
                .any(|l| l.buffers.iter().any(|v| v.buffer == buffer))
        };
        self.left.retain(|l| !binds(l));
        let (gone, kept): (Vec<_>, Vec<_>) = self.spares.drain(..).partition(|s| binds(&s.runs));
        self.spares = kept;
        gone.into_iter().map(|s| s.exec).collect()
    }

    /// Every spare exec, for destruction with the graph.
    pub fn take_spares(&mut self) -> Vec<E> {
        self.left.clear();
        self.spares.drain(..).map(|s| s.exec).collect()
    }
}
