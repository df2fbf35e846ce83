//! C2 for host transfers larger than a backend moves at once: the Vulkan
//! and wgpu backends' staging buffers hold 64 MiB, and a write or read
//! through one that is larger goes in chunks, each at its own offset. A
//! chunk placed at the wrong offset is invisible to every smaller transfer.

use crate::{Case, CaseResult, Ctx, Rule, Tag, ONCE};
use seam::ops;

const CAP: &[Tag] = &[Tag::NeedsCapture];

const MIB: usize = 1 << 20;
/// The buffer: 65 MiB of u32, one element-aligned MiB past a 64 MiB
/// staging chunk, so its whole write and whole read each go in two chunks.
const N: usize = 65 * MIB / 4;
/// The first element past 64 MiB: where a backend's second chunk starts.
const BOUNDARY: usize = 64 * MIB / 4;
/// What the graph copies: the buffer's last elements, in the second chunk.
const TAIL: usize = 1024;

/// `n` elements of a pattern that repeats every 4099 elements (a prime, so
/// no power-of-two chunk boundary maps the pattern onto itself), salted.
/// Built by copying one period over and over: a transfer case must cost
/// little more than its transfers, also in a debug build.
fn pattern(n: usize, salt: u32) -> Vec<u32> {
    let period: Vec<u32> = (0..4099u32)
        .map(|i| i.wrapping_mul(0x9E37_79B9) ^ salt)
        .collect();
    let mut v = Vec::with_capacity(n + period.len());
    while v.len() < n {
        v.extend_from_slice(&period);
    }
    v.truncate(n);
    v
}

/// The first index where `got` and `want` differ (or where one ends).
fn first_difference(got: &[u32], want: &[u32]) -> Option<usize> {
    got.iter()
        .zip(want)
        .position(|(g, w)| g != w)
        .or((got.len() != want.len()).then(|| got.len().min(want.len())))
}

/// Fail with the first difference of `got` from `want`, if any (compared
/// whole first: one memcmp, then the search only on a mismatch).
fn same(got: &[u32], want: &[u32], what: &str) -> CaseResult {
    if got == want {
        return Ok(());
    }
    let i = first_difference(got, want).unwrap_or(0);
    Err(crate::Failure(format!(
        "{what}: element {i} of {}: {:?} != {:?} (lengths {} and {})",
        want.len(),
        got.get(i),
        want.get(i),
        got.len(),
        want.len()
    )))
}

fn large_transfers(cx: &Ctx) -> CaseResult {
    let d = &cx.dev;
    let mut want = pattern(N, 0);
    // One write of 65 MiB, in two chunks where a backend stages it.
    let buf = d.buffer_from(&want)?;
    let out = d.buffer_from(&[0u32; TAIL])?;
    let scope = d.capture()?;
    d.launch(&ops::copy(
        buf.id().view(N - TAIL, TAIL),
        out.id(),
        TAIL as u32,
    ))?;
    let g = scope.end_graph()?;
    g.replay()?;
    same(
        &out.read()?,
        &want[N - TAIL..],
        "the replay after a 65 MiB write",
    )?;
    // One read of 65 MiB, in two chunks.
    same(&buf.read()?, &want, "a 65 MiB write read back whole")?;
    // A read across the 64 MiB boundary, from an odd element.
    let lo = BOUNDARY - 777;
    same(
        &d.read_range::<u32>(buf.id(), lo, 2000)?,
        &want[lo..lo + 2000],
        &format!("a read of 2000 elements from element {lo}"),
    )?;
    // A write at an odd element near the end is seen by the next replay.
    let at = N - 1501;
    let patch = pattern(1000, 0xA5A5_A5A5);
    d.write(buf.id(), at, &patch)?;
    want[at..at + 1000].copy_from_slice(&patch);
    g.replay()?;
    same(
        &out.read()?,
        &want[N - TAIL..],
        &format!("the replay after a write at element {at}"),
    )?;
    same(
        &d.read_range::<u32>(buf.id(), BOUNDARY, N - BOUNDARY)?,
        &want[BOUNDARY..],
        "the second chunk's elements after that write",
    )?;
    Ok(())
}

/// A 65 MiB buffer written and read whole (two chunks where a backend
/// stages transfers through a 64 MiB buffer, as the Vulkan and wgpu
/// backends do), a read across the 64 MiB boundary from an odd element, and
/// a replay of a graph that copies the buffer's last 1024 elements before
/// and after a write there: every transfer arrives whole and in place,
/// however a backend splits it.
///
/// Mutation: the CPU queue keeps only a write's first 64 MiB → red. On the
/// Vulkan staging path (`SEAM_VULKAN_STAGING=1`, lavapipe), each chunk of a
/// staged write or read placed at `i / STAGING_MAX` instead of
/// `i * STAGING_MAX` → red.
pub const C2_LARGE_TRANSFERS_ARRIVE_WHOLE: Case = Case {
    name: "c2_large_transfers_arrive_whole",
    rule: Rule::C2,
    tags: CAP,
    modes: ONCE,
    body: large_transfers,
};

#[cfg(test)]
mod tests {
    use super::first_difference;

    #[test]
    fn the_first_difference_is_found_and_lengths_count() {
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(first_difference(&[1, 9, 3], &[1, 2, 3]), Some(1));
        assert_eq!(first_difference(&[1, 2], &[1, 2, 3]), Some(2));
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2]), Some(2));
    }

    /// The pattern repeats every 4099 elements and nowhere sooner, and a
    /// salt changes every element.
    #[test]
    fn the_pattern_has_a_prime_period() {
        let p = super::pattern(3 * 4099 + 5, 0);
        assert_eq!(p.len(), 3 * 4099 + 5);
        assert_eq!(p[..4099], p[4099..2 * 4099]);
        assert!((1..4099).all(|k| p[..16] != p[k..k + 16]));
        let q = super::pattern(4099, 1);
        assert!(p.iter().zip(&q).all(|(a, b)| a != b));
    }
}
