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
//! the graph ran before but no exec runs now gets a fresh exec of the
//! graph, patched to it, and the current one is kept as a spare: a set
//! seen twice costs one instantiation, and every switch between kept sets
//! after that costs none. Anything else is patched in place as before, so
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
}

/// How an update reaches the launch set it asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// The current exec runs it already: nothing to do.
    Nothing,
    /// A kept exec runs it: swap it in ([`Runs::swap`]).
    Swap(usize),
    /// The graph ran it before: a fresh exec of the graph, patched to it
    /// ([`Runs::keep`]).
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
}

impl<E> Default for Runs<E> {
    fn default() -> Self {
        Runs {
            spares: Vec::new(),
            left: Vec::new(),
            lost: false,
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

    /// Room for [`keep`](Runs::keep)'s spare: where [`SPARES`] are kept,
    /// the least recently used one, taken out (the caller waits for the
    /// stream and destroys it before making the fresh exec).
    pub fn make_room(&mut self) -> Option<E> {
        (self.spares.len() >= SPARES).then(|| self.spares.remove(0).exec)
    }

    /// [`Plan::Swap`]: spare `i` becomes `exec`, and `exec`, which runs
    /// `now`, a spare; `now` is exchanged for the list the spare ran (what
    /// the update asked for: core's record lent mutably, no launch copied).
    pub fn swap(&mut self, exec: &mut E, i: usize, now: &mut Vec<Launch>) {
        let mut spare = self.spares.remove(i);
        std::mem::swap(exec, &mut spare.exec);
        std::mem::swap(now, &mut spare.runs);
        self.spares.push(spare);
    }

    /// [`Plan::Fresh`]: `fresh` (patched to `want`) becomes `exec`; the
    /// old one, which runs `now`, is kept as a spare
    /// ([`make_room`](Runs::make_room) made room), and `now` becomes `want`.
    pub fn keep(&mut self, exec: &mut E, fresh: E, now: &mut Vec<Launch>, want: Vec<Launch>) {
        let old = std::mem::replace(exec, fresh);
        self.left.retain(|l| *l != want);
        self.spares.push(Spare {
            exec: old,
            runs: std::mem::replace(now, want),
        });
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
        self.left.retain(|l| l != now);
        if self.left.len() >= LEFT {
            self.left.remove(0);
        }
        self.left.push(now.to_vec());
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
