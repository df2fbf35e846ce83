//! C2 stream order: eager launches, host writes and replays run in the order
//! the host issued them, with no host call in between to flush anything.

use crate::{check_eq, Case, Rule, Tag, ONCE};
use seam::{ops, GraphRef};

/// Elements of the long eager chain: enough that the queue is still busy
/// with it when the replay behind it is issued.
const N: usize = 1 << 16;
/// Eager launches in that chain.
const STEPS: usize = 24;

/// Eager work and replays share one stream, with no host call between them
/// to force a flush: (a) a long eager chain (`acc += one`, 24 times)
/// immediately followed by a replay that copies `acc` (the replay sees all
/// 24 adds); (b) a replay that copies `b` immediately followed by an eager
/// fill that overwrites `b` (the replay used the old value); (c) replays of
/// `acc += a` interleaved with host writes of `a` (1, 10, 100, …), never
/// waiting (each replay reads the `a` written just before it); (d) 16
/// alternating eager `x = x * 2` and replayed `x = x + 1`, whose result
/// (2^17 − 1 from x = 1) depends on every step running in order.
/// Only the final reads wait.
///
/// Mutation: make the CPU backend's `replay` run the graph at once on the
/// calling thread (another path than the queue, ahead of queued eager work
/// and host writes) → red on cpu:0 at "(a) the replay copied acc after the
/// 24 eager adds before it: (1, 1) != (24, 24)". On lavapipe: delete the
/// `b.flush()?` before the submit in the Vulkan backend's `replay` (the
/// replay is submitted ahead of the pending eager batch) → red on vulkan:0
/// at "(a) …: (0, 0) != (24, 24)"; encode the replay's dispatches ahead of
/// the pending batch in the wgpu backend's `submit` → the same red on
/// wgpu:0. Before this case every such mutation passed the suite: every
/// other case puts a read, write or synchronize between the two.
pub const C2_EAGER_WORK_AND_REPLAYS_KEEP_STREAM_ORDER: Case = Case {
    name: "c2_eager_work_and_replays_keep_stream_order",
    rule: Rule::C2,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&vec![1u32; N])?;
        let acc = d.buffer_from(&vec![0u32; N])?;
        let seen = d.buffer_from(&vec![0u32; N])?;
        let b = d.buffer_from(&vec![3u32; N])?;
        let seen_b = d.buffer_from(&vec![0u32; N])?;
        let a = d.buffer_from(&[0u32; 8])?;
        let sum = d.buffer_from(&[0u32; 8])?;
        let x = d.buffer_from(&[1u32; 8])?;
        let two = d.buffer_from(&[2u32; 8])?;
        let n = N as u32;

        let s = d.capture()?;
        d.launch(&ops::copy(acc.id(), seen.id(), n))?;
        let copy_acc = s.end_graph()?;
        let s = d.capture()?;
        d.launch(&ops::copy(b.id(), seen_b.id(), n))?;
        let copy_b = s.end_graph()?;
        let s = d.capture()?;
        d.launch(&ops::add(a.id(), sum.id(), sum.id(), 8))?;
        let accumulate = s.end_graph()?;
        let s = d.capture()?;
        d.launch(&ops::add(x.id(), one.id(), x.id(), 8))?;
        s.end_into_current()?;
        d.synchronize()?;

        // (a) eager chain, then at once a replay reading its output.
        for _ in 0..STEPS {
            d.launch(&ops::add(acc.id(), one.id(), acc.id(), n))?;
        }
        copy_acc.replay()?;
        // (b) a replay, then at once eager work overwriting its input.
        copy_b.replay()?;
        d.launch(&ops::fill(b.id(), n, 9))?;
        // (c) replays interleaved with host writes, no wait.
        let mut want_sum = 0u32;
        for i in 0..6 {
            let v = 10u32.pow(i);
            a.write(&[v; 8])?;
            accumulate.replay()?;
            want_sum += v;
        }
        // (d) alternating eager and replayed steps: x = 2x, then x + 1.
        let mut want_x = 1u32;
        for _ in 0..16 {
            d.launch(&ops::mul(x.id(), two.id(), x.id(), 8))?;
            d.replay(GraphRef::Current)?;
            want_x = want_x * 2 + 1;
        }

        let got = seen.read()?;
        check_eq!(
            (got[0], got[N - 1]),
            (STEPS as u32, STEPS as u32),
            "(a) the replay copied acc after the {STEPS} eager adds before it"
        );
        let got = seen_b.read()?;
        check_eq!(
            (got[0], got[N - 1]),
            (3, 3),
            "(b) the replay copied b before the eager fill after it"
        );
        check_eq!(b.read()?[N - 1], 9, "(b) the fill ran after the replay");
        check_eq!(
            sum.read()?,
            vec![want_sum; 8],
            "(c) each replay read the a written just before it (1, 10, 100, …)"
        );
        check_eq!(
            x.read()?,
            vec![want_x; 8],
            "(d) 16 alternating eager x*2 and replayed x+1 from 1"
        );
        cx.digest_bytes(&d.read_bytes(x.id())?);
        Ok(())
    },
};
