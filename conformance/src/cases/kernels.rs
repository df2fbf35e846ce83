//! Cases over user kernels (`seam::kernel`), written once and run once per
//! kernel of the run (`crate::kernels()`: seam's own, `seam_kernels::user`, or the
//! ones an engine passes to `harness::certify_with`). Every input comes
//! from the kernel's own definition: its signature, `extents`, `reads`
//! and `samples`; the oracle is its `cpu` implementation, run by the CPU
//! reference device.
//!
//! Each binding is a view at an odd element offset ([`GUARD`]) into a
//! buffer with [`GUARD`] elements on either side, so every launch also
//! shows that views bind where they say and that a kernel writes nothing
//! outside them.
//!
//! The runner registers the kernel before the body runs: a device whose
//! backend lacks the kernel's source gives an ignored trial naming it.

use crate::workloads::{compare, Rng};
use crate::{check, expect_err, Case, Failure, Mode, Rule, Tag, BOTH, ONCE};
use seam::kernel::{Field, KernelDef};
use seam::ops::{Access, Role};
use seam::{ops, BufferId, DType, Device, ErrorKind, OpCall, Params, Tolerance, View};

/// Elements before and after each view (odd, so 16-bit views start
/// mid-word and 32-bit ones off every vector alignment).
pub const GUARD: usize = 3;

/// The other placement C11 runs every sample at: 16 elements in, 16-byte
/// aligned for every element type, so a kernel's vector path (16-byte
/// loads where a view allows them) is compared with the oracle too.
pub const ALIGNED_GUARD: usize = 16;

/// One launch of a kernel over fresh buffers: binding `k` is `views[k]`,
/// `guard` elements into `buffers[k]` of `lens[k]` elements, with `after`
/// elements after it.
pub(super) struct Setup {
    buffers: Vec<BufferId>,
    lens: Vec<usize>,
    pub(super) views: Vec<View>,
    pub(super) call: OpCall,
    pub(super) guard: usize,
    pub(super) after: usize,
    seed: u64,
}

pub(super) fn dtype_of(def: &KernelDef, k: usize) -> DType {
    match def.bindings[k].role {
        Role::Fixed(d) => d,
        Role::Input => def.dtype().unwrap_or(DType::F32),
    }
}

pub(super) fn needs(def: &KernelDef, p: &Params) -> Vec<u64> {
    let mut out = vec![0; def.bindings.len()];
    (def.extents)(p, &mut out);
    out
}

/// Every binding's view contents for `seed`, random in [-2, 2], whatever
/// the placement. Written bindings get random bytes too: a kernel may read
/// what it writes (a residual updated in place), and one that writes
/// nothing still differs from the oracle, which writes. A workspace
/// (`Binding::workspace`) gets zeros, which is what its kernel may rely on
/// (the random bytes are still drawn, so the other bindings' do not depend
/// on whether a kernel has one).
fn contents(def: &KernelDef, need: &[u64], seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    (0..def.bindings.len())
        .map(|k| {
            let bytes = rng.bytes(dtype_of(def, k), need[k] as usize, 2.0);
            match def.bindings[k].zeroed {
                true => vec![0; bytes.len()],
                false => bytes,
            }
        })
        .collect()
}

/// The bytes of binding `k`'s guard elements of setup `s` (before, after).
fn guards(def: &KernelDef, k: usize, s: &Setup) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng::new(s.seed ^ 0x6A4D ^ (k as u64) << 32);
    let dt = dtype_of(def, k);
    (rng.bytes(dt, s.guard, 100.0), rng.bytes(dt, s.after, 100.0))
}

/// [`placed`] with `guard` elements on either side of each view.
pub(super) fn setup(
    d: &Device,
    def: &'static KernelDef,
    p: Params,
    seed: u64,
    guard: usize,
) -> seam::Result<Setup> {
    placed(d, def, p, seed, guard, guard)
}

/// One launch over fresh buffers, each view `guard` elements into its
/// buffer with `after` elements after it (none: the view ends where its
/// buffer does).
fn placed(
    d: &Device,
    def: &'static KernelDef,
    p: Params,
    seed: u64,
    guard: usize,
    after: usize,
) -> seam::Result<Setup> {
    let need = needs(def, &p);
    let lens: Vec<usize> = need.iter().map(|&n| n as usize + guard + after).collect();
    let buffers = lens
        .iter()
        .enumerate()
        .map(|(k, &len)| d.alloc(dtype_of(def, k), len))
        .collect::<seam::Result<Vec<_>>>()?;
    let views: Vec<View> = buffers
        .iter()
        .zip(&need)
        .map(|(b, &n)| b.view(guard, n as usize))
        .collect();
    let s = Setup {
        buffers,
        lens,
        views,
        call: ops::user(def, &[], p),
        guard,
        after,
        seed,
    };
    refill(d, def, &s, seed)?;
    Ok(Setup {
        call: ops::user(def, &s.views, p),
        ..s
    })
}

/// Write every binding's contents for `seed`, guards included (what
/// [`setup`] with that seed starts from).
fn refill(d: &Device, def: &KernelDef, s: &Setup, seed: u64) -> seam::Result<()> {
    let need: Vec<u64> = s.views.iter().map(|v| v.len.unwrap_or(0) as u64).collect();
    for (k, view) in contents(def, &need, seed).into_iter().enumerate() {
        let (before, after) = guards(def, k, s);
        d.write_bytes(s.buffers[k], 0, &[before, view, after].concat())?;
    }
    Ok(())
}

/// Every buffer's bytes, in binding order.
pub(super) fn snapshot(d: &Device, s: &Setup) -> seam::Result<Vec<Vec<u8>>> {
    s.buffers.iter().map(|&b| d.read_bytes(b)).collect()
}

pub(super) fn free(d: &Device, s: Setup) -> seam::Result<()> {
    s.buffers.into_iter().try_for_each(|b| d.free(b))
}

/// What the CPU reference gives for one launch of `def` with `p` over the
/// contents for `seed`, each view a whole buffer of its own (no offset, no
/// guards): every binding's bytes afterwards. The placement differs from
/// the device's on purpose, so a device that binds a view anywhere but
/// where it says disagrees even when that device is the CPU itself.
fn oracle(
    reference: fn() -> Device,
    def: &'static KernelDef,
    p: Params,
    seed: u64,
) -> Result<Vec<Vec<u8>>, Failure> {
    oracle_fed(reference, def, p, seed, &[])
}

/// [`oracle`] with the views of some bindings given instead: `(k, bytes)`
/// puts `bytes` (the whole view) in binding `k` before the launch.
pub(super) fn oracle_fed(
    reference: fn() -> Device,
    def: &'static KernelDef,
    p: Params,
    seed: u64,
    fed: &[(usize, Vec<u8>)],
) -> Result<Vec<Vec<u8>>, Failure> {
    let r = reference();
    r.register_kernel(def)?;
    let s = setup(&r, def, p, seed, 0)?;
    for (k, bytes) in fed {
        r.write_bytes(s.buffers[*k], 0, bytes)?;
    }
    r.launch(&s.call)?;
    Ok(snapshot(&r, &s)?)
}

/// The device's buffers `got` (of setup `s`) agree with the oracle's
/// `want`: each written view within the kernel's tolerance, read views bit
/// for bit, and the guard elements exactly as written.
fn agree(
    def: &KernelDef,
    s: &Setup,
    got: &[Vec<u8>],
    want: &[Vec<u8>],
    what: &str,
) -> Result<(), Failure> {
    (0..def.bindings.len()).try_for_each(|k| agree_binding(def, s, k, &got[k], &want[k], what))
}

/// [`agree`] for binding `k` alone.
pub(super) fn agree_binding(
    def: &KernelDef,
    s: &Setup,
    k: usize,
    got: &[u8],
    want: &[u8],
    what: &str,
) -> Result<(), Failure> {
    let (b, dt) = (&def.bindings[k], dtype_of(def, k));
    let (lo, hi) = (s.guard * dt.size(), got.len() - s.after * dt.size());
    if b.zeroed {
        // A workspace comes back as it went in, whatever the oracle left.
        if let Some(i) = got[lo..hi].iter().position(|&byte| byte != 0) {
            return Err(Failure(format!(
                "{}: {what}: workspace `{}` is not zero after the launch (byte {i})",
                def.name, b.name
            )));
        }
    } else {
        let tol = match b.access {
            Access::Write => def.tolerance,
            Access::Read => Tolerance::BitExact,
        };
        compare(dt, tol, &got[lo..hi], want)
            .map_err(|e| Failure(format!("{}: {what}: binding `{}`: {e}", def.name, b.name)))?;
    }
    let (before, after) = guards(def, k, s);
    check!(
        got[..lo] == before[..] && got[hi..] == after[..],
        "{}: {what}: binding `{}` changed outside its view",
        def.name,
        b.name
    );
    Ok(())
}

/// The kernel's first sample (the C1, C2 and C12 cases run one).
fn first_sample(def: &KernelDef) -> Result<Params, Failure> {
    def.samples
        .first()
        .copied()
        .ok_or_else(|| Failure(format!("{}: the kernel has no samples", def.name)))
}

/// `call` captured alone into a graph handle.
fn capture_one(d: &Device, call: &OpCall) -> seam::Result<seam::Graph> {
    let scope = d.capture()?;
    d.launch(call)?;
    scope.end_graph()
}

/// Every sample of the kernel agrees with its CPU implementation, eager
/// and captured, over views at odd offsets, again over 16-byte aligned
/// ones, and again at odd offsets with each view ending where its buffer
/// ends, touching nothing outside them.
///
/// The flush placement is the only one where a view's last elements are
/// its buffer's: a backend that binds or bounds-checks a buffer short of
/// its end (a range rounded down, a length off by one) reads zeros or
/// drops writes there and nowhere else. Its buffers are allocated with
/// checked mode off (checked allocations carry a guard past their end).
/// On lavapipe, the Vulkan backend's descriptors bound 16 bytes short of
/// each buffer's end (`.range(vk::WHOLE_SIZE)` → `size − 16` in
/// `sets.rs`) were red in this placement alone, for each of the three
/// user kernels seam had then, eager and captured, and green in every
/// other user-kernel case.
///
/// The aligned placement is what reaches a vector path: on an H100
/// (docs/results/h100-6671f36) a fault planted in `norm_gemv_silu_add.cu`'s
/// aligned four-row loop (`b[u].x` where `b[u].y` belongs) was red on
/// cuda:0 at sample 4, views 16 elements in, and green with both
/// placements 3 elements in.
///
/// Mutation: make the CPU backend ignore the view offset of user kernels
/// (`let (start, len) = (view.byte_offset as usize, …)` → `(0, …)` in
/// `reference::execute_user`) → red on cpu:0, eager and captured ("sample
/// 0 (eager, views 3 elements in): binding `y`: bit-exact mismatch"): the oracle places each
/// view at offset 0, the device at [`GUARD`], so even the CPU disagrees
/// with itself when a view is bound anywhere but where it says.
pub const C11_USER_KERNEL_AGREES_WITH_CPU: Case = Case {
    name: "c11_user_kernel_agrees_with_cpu",
    rule: Rule::C11,
    tags: &[],
    modes: BOTH,
    body: |cx| {
        let def = cx.kernel()?;
        check!(
            !def.samples.is_empty(),
            "{}: the kernel has no samples",
            def.name
        );
        for (i, &p) in def.samples.iter().enumerate() {
            let seed = 0xC11 + i as u64;
            let want = oracle(cx.reference, def, p, seed)?;
            for (guard, after) in [(GUARD, GUARD), (ALIGNED_GUARD, ALIGNED_GUARD), (GUARD, 0)] {
                // The runner checks every user-kernel trial (`set_checked`),
                // whose allocations carry a canary guard past their end: a
                // flush view is allocated unchecked, so that its buffer's end
                // is the backend's too, and launched checked.
                cx.dev.set_checked(after != 0);
                let s = placed(&cx.dev, def, p, seed, guard, after);
                cx.dev.set_checked(true);
                let s = s?;
                cx.run(|d| d.launch(&s.call))?;
                let got = snapshot(&cx.dev, &s)?;
                let flush = if after == 0 {
                    ", flush with their buffers' ends"
                } else {
                    ""
                };
                let what = format!("sample {i} ({}, views {guard} elements in{flush})", cx.mode);
                agree(def, &s, &got, &want, &what)?;
                got.iter().for_each(|b| cx.digest_bytes(b));
                free(&cx.dev, s)?;
            }
        }
        Ok(())
    },
};

/// A captured launch of the kernel runs nothing at capture and re-runs over
/// the buffers' current contents at every replay (C1): new inputs written
/// by the host between replays give the oracle's output over those inputs.
///
/// Mutation: the CPU worker's `Command::RunGraph` skipping `OpKind::User`
/// launches (`.filter(|l| l.op.user().is_none())`) → red on cpu:0
/// ("replay 1: binding `y`: bit-exact mismatch").
pub const C1_USER_KERNEL_REPLAY_REEXECUTES: Case = Case {
    name: "c1_user_kernel_replay_reexecutes",
    rule: Rule::C1,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let (def, d) = (cx.kernel()?, &cx.dev);
        let p = first_sample(def)?;
        let s = setup(d, def, p, 1, GUARD)?;
        let before = snapshot(d, &s)?;
        let graph = capture_one(d, &s.call)?;
        check!(
            snapshot(d, &s)? == before,
            "{}: capturing the launch changed a buffer: capture must not execute",
            def.name
        );
        for (round, seed) in [(1, 1u64), (2, 2), (3, 3)] {
            refill(d, def, &s, seed)?;
            graph.replay()?;
            let got = snapshot(d, &s)?;
            let want = oracle(cx.reference, def, p, seed)?;
            agree(def, &s, &got, &want, &format!("replay {round}"))?;
        }
        drop(graph);
        Ok(free(d, s)?)
    },
};

/// Host writes, replays and eager launches run in the order issued, with
/// no host call between them to flush anything: write inputs A, replay,
/// eager copy of the first output away, write inputs B, replay, copy again;
/// only then synchronize. Each saved output is the oracle's for its inputs.
///
/// Mutation: the CPU worker's `Command::RunGraph` skipping `OpKind::User`
/// launches → red on cpu:0 ("saved after replay A: binding `y`"); the
/// view-offset mutation of `c11_user_kernel_agrees_with_cpu` too.
pub const C2_USER_KERNEL_KEEPS_STREAM_ORDER: Case = Case {
    name: "c2_user_kernel_keeps_stream_order",
    rule: Rule::C2,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let (def, d) = (cx.kernel()?, &cx.dev);
        let p = first_sample(def)?;
        let out = def
            .bindings
            .iter()
            .position(|b| b.access == Access::Write)
            .ok_or_else(|| Failure("no written binding".into()))?;
        let s = setup(d, def, p, 10, GUARD)?;
        let (dt, len) = (dtype_of(def, out), s.lens[out]);
        let saved = [d.alloc(dt, len)?, d.alloc(dt, len)?];
        let graph = capture_one(d, &s.call)?;
        for (seed, keep) in [(20u64, saved[0]), (21, saved[1])] {
            refill(d, def, &s, seed)?;
            graph.replay()?;
            d.launch(&ops::copy(s.buffers[out], keep, len as u32))?;
        }
        d.synchronize()?;
        for (seed, keep, what) in [
            (20u64, saved[0], "saved after replay A"),
            (21, saved[1], "saved after replay B"),
        ] {
            let want = oracle(cx.reference, def, p, seed)?;
            agree_binding(def, &s, out, &d.read_bytes(keep)?, &want[out], what)?;
        }
        drop(graph);
        saved.into_iter().try_for_each(|b| d.free(b))?;
        Ok(free(d, s)?)
    },
};

/// Eager and captured launches of every sample give byte-identical
/// buffers on the same device (C4).
///
/// Mutation: the CPU worker's `Command::RunGraph` skipping `OpKind::User`
/// launches (replays differ from eager launches) → red on cpu:0 ("sample
/// 0: captured output differs from eager").
pub const C4_USER_KERNEL_EAGER_AND_CAPTURED_IDENTICAL: Case = Case {
    name: "c4_user_kernel_eager_and_captured_identical",
    rule: Rule::C4,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let (def, d) = (cx.kernel()?, &cx.dev);
        for (i, &p) in def.samples.iter().enumerate() {
            let mut outs = Vec::new();
            for mode in [Mode::Eager, Mode::Captured] {
                let s = setup(d, def, p, 40 + i as u64, GUARD)?;
                crate::run_in_mode(d, mode, |d| d.launch(&s.call))?;
                outs.push(snapshot(d, &s)?);
                free(d, s)?;
            }
            check!(
                outs[0] == outs[1],
                "{}: sample {i}: captured output differs from eager",
                def.name
            );
            outs[0].iter().for_each(|b| cx.digest_bytes(b));
        }
        Ok(())
    },
};

/// Bad launches generated from the kernel's definition are each a named
/// error before any work is queued, and change nothing: a wrong arity;
/// each binding of another element type; each view one element short, one
/// past its buffer's end, or starting beyond it; a written view the same
/// as a read one where the kernel forbids aliasing, or overlapping it
/// partly; one buffer bound to a binding the kernel's WGSL declares `read`
/// and to one it declares `read_write`; each `Params` field the kernel
/// does not read set non-zero; and the kernel on a device it was not
/// registered on.
///
/// Mutations: drop the view bounds check in `seam::validate::lower`
/// (`if offset > buffer_len || …` → `if false`) → red on cpu:0 ("view
/// past the end of binding …: expected ViewOutOfRange, but it succeeded");
/// skip the `ReadOnlyShared` check in `seam::validate::lower` → red on
/// cpu:0 for every one of seam's user kernels.
pub const C12_USER_KERNEL_BAD_LAUNCHES_REFUSED: Case = Case {
    name: "c12_user_kernel_bad_launches_refused",
    rule: Rule::C12,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let (def, d) = (cx.kernel()?, &cx.dev);
        let p = first_sample(def)?;
        let s = setup(d, def, p, 50, GUARD)?;
        let before = snapshot(d, &s)?;
        let need = needs(def, &p);
        let with = |k: usize, v: View| {
            let mut views = s.views.clone();
            views[k] = v;
            ops::user(def, &views, p)
        };
        let mut rows = 0;
        let mut refuse = |call: OpCall, what: String, ok: fn(&ErrorKind) -> bool| {
            rows += 1;
            match d.launch(&call) {
                Ok(()) => Err(Failure(format!("{}: {what}: accepted", def.name))),
                Err(e) if ok(&e.kind) => Ok(()),
                Err(e) => Err(Failure(format!("{}: {what}: wrong error: {e}", def.name))),
            }
        };

        let short = ops::user(def, &s.views[..s.views.len() - 1], p);
        refuse(short, "one binding too few".into(), |e| {
            matches!(e, ErrorKind::ArityMismatch { .. })
        })?;
        let mut extra = s.views.clone();
        extra.push(s.views[0]);
        refuse(
            ops::user(def, &extra, p),
            "one binding too many".into(),
            |e| matches!(e, ErrorKind::ArityMismatch { .. }),
        )?;

        let mut spares = Vec::new();
        for (k, b) in def.bindings.iter().enumerate() {
            let len = s.lens[k];
            if need[k] == 0 {
                continue;
            }
            let other = if dtype_of(def, k) == DType::F32 {
                DType::I32
            } else {
                DType::F32
            };
            let wrong = d.alloc(other, len)?;
            spares.push(wrong);
            refuse(
                with(k, wrong.view(GUARD, need[k] as usize)),
                format!("binding `{}` of {other}", b.name),
                |e| {
                    matches!(
                        e,
                        ErrorKind::DtypeMismatch { .. } | ErrorKind::UnsupportedDtype { .. }
                    )
                },
            )?;
            let buf = s.buffers[k];
            refuse(
                with(k, buf.view(GUARD, need[k] as usize - 1)),
                format!("binding `{}` one element short", b.name),
                |e| matches!(e, ErrorKind::OutOfRange { .. }),
            )?;
            refuse(
                with(k, buf.from_offset(len - need[k] as usize + 1)),
                format!("binding `{}` running one element past the end", b.name),
                |e| matches!(e, ErrorKind::OutOfRange { .. }),
            )?;
            refuse(
                with(k, buf.view(len - need[k] as usize + 1, need[k] as usize)),
                format!("view past the end of binding `{}`", b.name),
                |e| matches!(e, ErrorKind::ViewOutOfRange { .. }),
            )?;
            refuse(
                with(k, buf.from_offset(len + 1)),
                format!("view of binding `{}` starting beyond its buffer", b.name),
                |e| matches!(e, ErrorKind::ViewOutOfRange { .. }),
            )?;
        }

        // A written view on a read one's elements: the same range where
        // aliasing is forbidden, one element off wherever.
        for (w, wb) in def.bindings.iter().enumerate() {
            if wb.access != Access::Write {
                continue;
            }
            for (r, rb) in def.bindings.iter().enumerate() {
                if rb.access != Access::Read || dtype_of(def, r) != dtype_of(def, w) {
                    continue;
                }
                let n = need[w].max(need[r]) as usize;
                let shared = d.alloc(dtype_of(def, w), n + 1)?;
                spares.push(shared);
                let mut views = s.views.clone();
                views[r] = shared.view(0, need[r] as usize);
                views[w] = shared.view(0, need[w] as usize);
                if !def.allows_aliasing && need[w] == need[r] {
                    refuse(
                        ops::user(def, &views, p),
                        format!("`{}` the same view as `{}`", wb.name, rb.name),
                        |e| matches!(e, ErrorKind::AliasNotAllowed { .. }),
                    )?;
                }
                if need[r] < 2 {
                    continue; // one element off overlaps nothing
                }
                views[w] = shared.view(1, need[w] as usize);
                refuse(
                    ops::user(def, &views, p),
                    format!("`{}` overlapping `{}` one element off", wb.name, rb.name),
                    |e| matches!(e, ErrorKind::ViewsOverlap { .. }),
                )?;
            }
        }

        // One buffer under a binding the WGSL declares `read` and under one
        // it declares `read_write`, over disjoint ranges: refused on every
        // device (WebGPU refuses the pair in one dispatch, in place or not).
        let read_only = match def.wgsl {
            Some(_) => {
                seam::wgsl::compile(seam::kernel::Kernel::new(def))
                    .map_err(|e| Failure(format!("{}: its WGSL: {e}", def.name)))?
                    .read_only
            }
            None => vec![false; def.bindings.len()],
        };
        for (r, rb) in def
            .bindings
            .iter()
            .enumerate()
            .filter(|&(r, _)| read_only[r])
        {
            for (o, ob) in def.bindings.iter().enumerate() {
                if read_only[o] || dtype_of(def, o) != dtype_of(def, r) {
                    continue;
                }
                let (nr, no) = (need[r] as usize, need[o] as usize);
                let shared = d.alloc(dtype_of(def, r), nr + no)?;
                spares.push(shared);
                let mut views = s.views.clone();
                views[r] = shared.view(0, nr);
                views[o] = shared.view(nr, no);
                refuse(
                    ops::user(def, &views, p),
                    format!(
                        "`{}` (WGSL `read`) and `{}` (WGSL `read_write`) in one buffer",
                        rb.name, ob.name
                    ),
                    |e| matches!(e, ErrorKind::ReadOnlyShared { .. }),
                )?;
            }
        }

        for f in Field::ALL.into_iter().filter(|f| !def.reads.contains(f)) {
            let mut q = p;
            match f {
                Field::D0 => q.d0 = 1,
                Field::D1 => q.d1 = 1,
                Field::D2 => q.d2 = 1,
                Field::Bits => q.bits = 1,
                Field::S0 => q.s0 = 1.0,
                Field::S1 => q.s1 = 1.0,
            }
            refuse(
                ops::user(def, &s.views, q),
                format!("unread field {} set", f.name()),
                |e| matches!(e, ErrorKind::InvalidParam { .. }),
            )?;
        }

        let fresh = (cx.reference)();
        let e = expect_err!(fresh.launch(&s.call), ErrorKind::KernelNotRegistered { .. });
        check!(
            e.to_string().contains(def.name),
            "{e}: does not name the kernel"
        );

        d.synchronize()?;
        check!(
            snapshot(d, &s)? == before,
            "{}: a refused launch changed a buffer",
            def.name
        );
        check!(rows > 0, "no bad launch generated");
        // The device is still usable: the good launch runs.
        d.launch(&s.call)?;
        d.synchronize()?;
        spares.into_iter().try_for_each(|b| d.free(b))?;
        Ok(free(d, s)?)
    },
};

#[cfg(test)]
mod tests;
