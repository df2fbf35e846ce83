//! A user kernel's launches chained with no host call between them: what
//! one launch writes, the next reads, as a decode stack's layers do.

use super::kernels::{
    agree_binding, dtype_of, free, needs, oracle_fed, setup, snapshot, Setup, ALIGNED_GUARD,
};
use crate::{Case, Failure, Rule, BOTH};
use seam::kernel::KernelDef;
use seam::ops::{self, Access};

/// Launches in a chain.
const LINKS: usize = 4;

/// Which read binding each written binding feeds in the next launch:
/// `(written, read)`, each written binding (a workspace aside) paired with
/// the first read binding not yet paired of its element type and extent.
/// Empty where none matches: the links then run back to back over their
/// own inputs.
fn feeds(def: &KernelDef, need: &[u64]) -> Vec<(usize, usize)> {
    let mut taken = vec![false; def.bindings.len()];
    let mut pairs = Vec::new();
    for (w, b) in def.bindings.iter().enumerate() {
        if b.access != Access::Write || b.zeroed {
            continue;
        }
        let found = (0..def.bindings.len()).find(|&r| {
            !taken[r]
                && def.bindings[r].access == Access::Read
                && dtype_of(def, r) == dtype_of(def, w)
                && need[r] == need[w]
        });
        if let Some(r) = found {
            taken[r] = true;
            pairs.push((w, r));
        }
    }
    pairs
}

/// Binding `k`'s view in `bytes`, the whole buffer of setup `s`.
fn view_of<'a>(def: &KernelDef, s: &Setup, k: usize, bytes: &'a [u8]) -> &'a [u8] {
    let size = dtype_of(def, k).size();
    &bytes[s.guard * size..bytes.len() - s.after * size]
}

/// Every sample of the kernel, [`LINKS`] launches deep, eager and captured,
/// with no host call between the launches: each written binding of a
/// launch is the view the next launch reads for its first read binding of
/// the same element type and extent (`y` → `x` of the fused decode layer;
/// the residual `r` → `x` of `add_rms_norm`; `y` → `x` of RoPE). Each
/// launch agrees with the CPU implementation over the inputs it was given,
/// its predecessor's output as the device left it, so an error does not
/// grow along the chain and a link that read too early is named. Views are
/// 16-byte aligned (the vector paths), and each link's own views start
/// from their random contents, so reading a view before the launch that
/// writes it has written it gives other numbers.
///
/// No other case chains a kernel's own launches. A kernel that may start
/// before the launch before it has ended (`CudaSource::starts_early`) and
/// reads before `seam_prior_wait()` reads its predecessor's output early
/// only here: `norm_gemv_silu_add.cu` with both its waits deleted was red
/// here, captured, and green in every other user-kernel case, on one H100
/// and one H200 (docs/results/h100-0ca65c1, h200-0ca65c1: "sample 0
/// (captured), link 1 of 4: binding `y`"). A backend that leaves out the
/// barrier between two dependent dispatches of one kernel shows it here
/// too (the Vulkan barrier audit).
///
/// Mutation: replay runs the recorded launches in reverse
/// (`(next..hi).for_each(run)` → `(next..hi).rev().for_each(run)` in the
/// CPU backend's `program.rs`) → red on cpu:0, captured ("link 1 of 4:
/// binding `y`").
pub const C11_USER_KERNEL_CHAIN_AGREES_WITH_CPU: Case = Case {
    name: "c11_user_kernel_chain_agrees_with_cpu",
    rule: Rule::C11,
    tags: &[],
    modes: BOTH,
    body: |cx| {
        let (def, d) = (cx.kernel()?, &cx.dev);
        for (i, &p) in def.samples.iter().enumerate() {
            let pairs = feeds(def, &needs(def, &p));
            let seeds: Vec<u64> = (0..LINKS)
                .map(|j| 0xC11C0 + (i * LINKS + j) as u64)
                .collect();
            let mut links: Vec<Setup> = Vec::with_capacity(LINKS);
            for &seed in &seeds {
                let mut s = setup(d, def, p, seed, ALIGNED_GUARD)?;
                if let Some(prev) = links.last() {
                    let mut views = s.views.clone();
                    for &(w, r) in &pairs {
                        views[r] = prev.views[w];
                    }
                    s.call = ops::user(def, &views, p);
                }
                links.push(s);
            }
            cx.run(|d| links.iter().try_for_each(|s| d.launch(&s.call)))?;
            let got = links
                .iter()
                .map(|s| snapshot(d, s))
                .collect::<seam::Result<Vec<_>>>()?;
            for j in 0..LINKS {
                let fed: Vec<(usize, Vec<u8>)> = match j {
                    0 => Vec::new(),
                    _ => pairs
                        .iter()
                        .map(|&(w, r)| (r, view_of(def, &links[j - 1], w, &got[j - 1][w]).to_vec()))
                        .collect(),
                };
                let want = oracle_fed(cx.reference, def, p, seeds[j], &fed)?;
                let what = format!("sample {i} ({}), link {j} of {LINKS}", cx.mode);
                for k in 0..def.bindings.len() {
                    // A fed binding is its predecessor's output view,
                    // checked as that link's.
                    if fed.iter().any(|(r, _)| *r == k) {
                        continue;
                    }
                    agree_binding(def, &links[j], k, &got[j][k], &want[k], &what)?;
                }
                got[j].iter().for_each(|b| cx.digest_bytes(b));
            }
            links.into_iter().try_for_each(|s| free(d, s))?;
        }
        Ok::<(), Failure>(())
    },
};

#[cfg(test)]
mod tests {
    use super::feeds;
    use seam_kernels::user::{ADD_RMS_NORM, NORM_GEMV_SILU_ADD, ROPE};

    #[test]
    fn seams_kernels_chain_output_into_input() {
        let need = |def: &seam::KernelDef| super::needs(def, &def.samples[1]);
        // y → x
        assert_eq!(
            feeds(&NORM_GEMV_SILU_ADD, &need(&NORM_GEMV_SILU_ADD)),
            [(3, 0)]
        );
        // r → x; `out` has no read binding of its extent left
        assert_eq!(feeds(&ADD_RMS_NORM, &need(&ADD_RMS_NORM)), [(1, 0)]);
        // y → x
        assert_eq!(feeds(&ROPE, &need(&ROPE)), [(2, 0)]);
    }
}
