//! A probe, not a bench arm: what a timestamp after each dispatch costs a
//! chain of dependent dispatches on the raw device, by the pipeline stage
//! it is written at. `seam-bench probe vulkan-stamps`.
//!
//! The Vulkan backend times the nodes of a replay with a timestamp before
//! the first dispatch and after each (`backends/vulkan/src/backend/nodes.rs`),
//! written at BOTTOM_OF_PIPE. Here the raw chain (`RawVulkan::chain`: one
//! global barrier and one `scale_add` dispatch per node, everything bound
//! once) is recorded without timestamps and with them at each stage that
//! orders a timestamp after a compute dispatch, and each is timed, the
//! variants interleaved round by round: submit and wait, the median of
//! `REPLAYS` per round. One line per variant: the median over the rounds
//! of its time ÷ the plain chain's in the same round, the range, and µs;
//! then whether the last replay's stamps rose, per variant. A last variant
//! puts the chain's buffer in host-visible memory (no timestamps), where a
//! minimal loop of dependent dispatches measured 2.26 µs a dispatch on an
//! H200 against 2.79 for this chain in device-local memory.

use super::{vkerr, RawVulkan};
use ash::vk;

/// Replays timed per variant and round.
const REPLAYS: usize = 20;

/// The variants: a name, the stage of the timestamps (none: the plain
/// chain) and whether the chain's buffer is host-visible memory (the
/// backend's choice on a discrete GPU is device-local).
fn variants() -> [(&'static str, Option<vk::PipelineStageFlags>, bool); 5] {
    use vk::PipelineStageFlags as S;
    [
        ("no timestamps", None, false),
        ("BOTTOM_OF_PIPE", Some(S::BOTTOM_OF_PIPE), false),
        ("COMPUTE_SHADER", Some(S::COMPUTE_SHADER), false),
        ("ALL_COMMANDS", Some(S::ALL_COMMANDS), false),
        ("no timestamps, host-visible buffer", None, true),
    ]
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl RawVulkan {
    fn query_pool(&self, queries: u32) -> Result<vk::QueryPool, String> {
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(queries);
        // SAFETY: a valid create info; the pool is destroyed by `run`
        // after the last submission using it was waited for.
        unsafe { self.device.create_query_pool(&info, None) }.map_err(vkerr("vkCreateQueryPool"))
    }

    /// The stamps of the last completed submission.
    fn stamps(&self, pool: vk::QueryPool, queries: u32) -> Result<Vec<u64>, String> {
        let mut out = vec![0u64; queries as usize];
        // SAFETY: the pool is live with `queries` queries, every one written
        // by the submission waited for; `out` holds one u64 per query.
        unsafe {
            self.device.get_query_pool_results(
                pool,
                0,
                &mut out,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(vkerr("vkGetQueryPoolResults"))?;
        Ok(out)
    }
}

/// `seam-bench probe vulkan-stamps`: the chain of `n` nodes, `rounds` rounds.
pub fn run(n: u32, rounds: usize, out: &mut dyn FnMut(String)) -> Result<(), String> {
    let mut raw = RawVulkan::open()?;
    let pool = raw.query_pool(n + 1)?;
    let result = measure(&mut raw, pool, n, rounds, out);
    let _ = raw.wait();
    // SAFETY: no submission is pending (waited above, or none was made).
    unsafe { raw.device.destroy_query_pool(pool, None) };
    result
}

fn measure(
    raw: &mut RawVulkan,
    pool: vk::QueryPool,
    n: u32,
    rounds: usize,
    out: &mut dyn FnMut(String),
) -> Result<(), String> {
    let x0 = [1.0f32];
    out(format!(
        "vulkan-stamps,{},N={n},{rounds} rounds of {REPLAYS} replays,submit + {}",
        raw.name,
        raw.wait_kind()
    ));
    let kinds = variants();
    // per variant: µs per round; ratio to the plain chain per round
    let mut us: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    let mut rising = vec![true; kinds.len()];
    for _ in 0..rounds.max(1) {
        for (k, (_, stage, host)) in kinds.iter().enumerate() {
            if raw.host_visible != *host {
                // The chain's buffer made again in the other memory.
                raw.wait()?;
                raw.host_visible = *host;
                if let Some(x) = raw.x.take() {
                    raw.destroy(x);
                }
            }
            raw.chain_stamped(&x0, n, 0.999, 0.001, stage.map(|s| (pool, s)))?;
            us[k].push(raw.time_recorded(REPLAYS)?);
            if stage.is_some() {
                let stamps = raw.stamps(pool, n + 1)?;
                rising[k] &= stamps.windows(2).all(|w| w[1] >= w[0]);
            }
        }
    }
    for (k, (name, stage, _)) in kinds.iter().enumerate() {
        let mut ratios: Vec<f64> = us[k].iter().zip(&us[0]).map(|(a, b)| a / b).collect();
        let (lo, hi) = (
            ratios.iter().copied().fold(f64::MAX, f64::min),
            ratios.iter().copied().fold(f64::MIN, f64::max),
        );
        let r = median(&mut ratios);
        let t = median(&mut us[k].clone());
        let order = match stage {
            None => String::new(),
            Some(_) => format!(",stamps rose in every round: {}", rising[k]),
        };
        out(format!(
            "vulkan-stamps,{name},{r:.3}x ({lo:.3}-{hi:.3}),{t:.1} us a replay,{:.3} us a node{order}",
            t / f64::from(n)
        ));
    }
    Ok(())
}
