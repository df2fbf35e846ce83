//! Device timing with timestamp queries.
//!
//! Markers are timestamps recorded into the open eager batch, so they sit in
//! the queue exactly where core asks for them: `begin_timed` lands before a
//! replay's submission (`replay` flushes the batch first) and `end_timed` in
//! the next batch, after it. Both are written at BOTTOM_OF_PIPE, i.e. once
//! every command submitted earlier has finished. For the begin marker that is
//! the moment the bracketed work can start (each dispatch begins with a
//! barrier on all earlier work), so a span covers exactly its own work, spans
//! never overlap and their starts follow queue order. A TOP_OF_PIPE begin
//! would be stamped as soon as the queue reaches it, before the previous
//! replay has finished, and overlap it.
//!
//! Marker `i` is query `i % QUERIES_PER_POOL` of pool `i / QUERIES_PER_POOL`.
//! Pools are created when timing is switched on (more as markers need them)
//! and reset on the queue before their first write in each cycle; a cycle
//! ends when the spans are taken. Pools are released when the spans are taken
//! with timing off, and at teardown.

use super::VulkanBackend;
use crate::sys::QueryPool;
use ash::vk;
use seam::{DeviceSpan, ErrorKind};
use std::collections::HashMap;

/// Timestamp queries per pool (512 spans).
const QUERIES_PER_POOL: u32 = 1024;

struct Pool {
    pool: QueryPool,
    /// Its queries must be reset (on the queue) before the next write.
    dirty: bool,
}

/// Timing state of one backend.
#[derive(Default)]
pub(super) struct Timing {
    on: bool,
    pools: Vec<Pool>,
    /// Every marker recorded since the spans were last taken: (tag, begin?).
    marks: Vec<(u64, bool)>,
    /// How many of `marks` are in submitted batches (a prefix; the rest are
    /// in the open eager batch).
    submitted: usize,
    /// Pools whose reset is recorded in the open eager batch.
    reset_in_batch: Vec<usize>,
    /// Node spans read from graphs' stamps, not yet taken (`nodes.rs`).
    pub(super) node_spans: Vec<DeviceSpan>,
    /// Stamps of graphs gone from the table with a replay still unread.
    pub(super) retired: Vec<super::nodes::NodeStamps>,
}

impl Timing {
    /// Whether device timing is on.
    pub(super) fn on(&self) -> bool {
        self.on
    }
}

/// The device's timestamp counter: its valid bits and tick length.
#[derive(Clone, Copy)]
pub(super) struct Clock {
    mask: u64,
    period: f64,
}

impl Clock {
    /// A counter of `bits` valid bits (`timestampValidBits`, 1 to 64) whose
    /// tick lasts `period` ns (`timestampPeriod`).
    fn new(bits: u32, period: f32) -> Clock {
        Clock {
            mask: if bits >= 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            },
            period: f64::from(period),
        }
    }

    /// Ticks as nanoseconds.
    fn ns(self, t: u64) -> u64 {
        if self.period == 1.0 {
            t
        } else {
            (t as f64 * self.period) as u64
        }
    }

    /// The start (ns) and length (ns) of the stretch between two stamps; the
    /// counter may wrap at its valid bits between them.
    pub(super) fn span(self, start: u64, end: u64) -> (u64, u64) {
        let start = start & self.mask;
        let ticks = (end & self.mask).wrapping_sub(start) & self.mask;
        (self.ns(start), self.ns(ticks))
    }
}

/// Whether queue family `family` of device `name`, reporting
/// `timestampValidBits` = `bits` and `timestampPeriod` = `period`, can time
/// anything, or why not: it writes timestamps (some bits valid) that
/// convert to time (a positive period).
fn timestamps_usable(bits: u32, period: f32, family: u32, name: &str) -> Result<(), String> {
    if bits == 0 {
        return Err(format!(
            "queue family {family} of {name} reports timestampValidBits = 0: it cannot write timestamps"
        ));
    }
    if period.is_nan() || period <= 0.0 {
        return Err(format!(
            "{name} reports timestampPeriod = {period}: timestamps cannot be converted to time"
        ));
    }
    Ok(())
}

impl VulkanBackend {
    /// Whether the queue family can write timestamps, or why not.
    pub(super) fn timing_support(&self) -> Result<(), String> {
        let a = self.gpu.adapter();
        timestamps_usable(
            a.timestamp_valid_bits,
            a.timestamp_period,
            a.queue_family,
            &a.name,
        )
    }

    pub(super) fn set_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        if on {
            self.timing_support()
                .map_err(|reason| ErrorKind::Unavailable { reason })?;
            if self.timing.pools.is_empty() {
                self.add_query_pool()?;
            }
        }
        self.timing.on = on;
        Ok(())
    }

    fn add_query_pool(&mut self) -> Result<(), ErrorKind> {
        let pool = self.gpu.create_query_pool(QUERIES_PER_POOL)?;
        self.timing.pools.push(Pool { pool, dirty: true });
        self.timing.marks.reserve(QUERIES_PER_POOL as usize);
        Ok(())
    }

    /// Record one marker into the eager batch (nothing when timing is off).
    pub(super) fn mark(&mut self, tag: u64, begin: bool) -> Result<(), ErrorKind> {
        if !self.timing.on {
            return Ok(());
        }
        let i = self.timing.marks.len();
        let (p, query) = (
            i / QUERIES_PER_POOL as usize,
            (i % QUERIES_PER_POOL as usize) as u32,
        );
        if p == self.timing.pools.len() {
            self.add_query_pool()?;
        }
        self.eager()?;
        let batch = self
            .eager
            .as_mut()
            .ok_or_else(|| ErrorKind::driver("vkCmdWriteTimestamp", "no eager batch"))?;
        let pool = &mut self.timing.pools[p];
        if pool.dirty {
            // Every earlier write to this pool was read back (or never
            // submitted): reset all of it, ahead of this write in the queue.
            batch.reset_queries(&pool.pool, 0, QUERIES_PER_POOL)?;
            pool.dirty = false;
            self.timing.reset_in_batch.push(p);
        }
        batch.write_timestamp(vk::PipelineStageFlags::BOTTOM_OF_PIPE, &pool.pool, query)?;
        self.timing.marks.push((tag, begin));
        Ok(())
    }

    /// The open eager batch was submitted (`true`) or lost (`false`: its
    /// recording was destroyed, so its markers and resets never happen).
    pub(super) fn timing_batch_done(&mut self, submitted: bool) {
        let t = &mut self.timing;
        if submitted {
            t.submitted = t.marks.len();
        } else {
            // The lost markers are the newest ones: dropping them keeps the
            // query indices of the rest contiguous. A pool reset only in the
            // lost batch holds no submitted marker, and is reset again before
            // its next write.
            t.marks.truncate(t.submitted);
            for &p in &t.reset_in_batch {
                t.pools[p].dirty = true;
            }
        }
        t.reset_in_batch.clear();
    }

    /// Wait for every marker and node stamp, read them: the replays' and
    /// eager launches' spans, then the node spans (`nodes.rs`).
    pub(super) fn take_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        let mut spans = self.take_marker_spans()?;
        if self.has_unread_nodes() {
            self.wait_all()?;
            spans.extend(self.take_node_spans()?);
        }
        Ok(spans)
    }

    /// Wait for every marker, read them and pair them into spans.
    fn take_marker_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        if self.timing.marks.is_empty() && (self.timing.on || self.timing.pools.is_empty()) {
            return Ok(Vec::new());
        }
        // After this every marker is in a completed submission, so reading
        // with WAIT returns at once.
        self.wait_all()?;
        let marks = std::mem::take(&mut self.timing.marks);
        self.timing.submitted = 0;
        let used = marks.len().div_ceil(QUERIES_PER_POOL as usize);
        for pool in &mut self.timing.pools[..used] {
            pool.dirty = true;
        }
        let mut ticks = vec![0u64; marks.len()];
        for (chunk, pool) in ticks
            .chunks_mut(QUERIES_PER_POOL as usize)
            .zip(&self.timing.pools)
        {
            self.gpu.query_results(&pool.pool, 0, chunk)?;
        }
        if !self.timing.on {
            // Nothing pending or open uses them (wait_all flushed and waited).
            self.release_query_pools();
        }
        Ok(self.spans(&marks, &ticks))
    }

    /// The device's timestamp counter.
    pub(super) fn clock(&self) -> Clock {
        let a = self.gpu.adapter();
        Clock::new(a.timestamp_valid_bits, a.timestamp_period)
    }

    fn spans(&self, marks: &[(u64, bool)], ticks: &[u64]) -> Vec<DeviceSpan> {
        let clock = self.clock();
        let mut open = HashMap::new();
        let mut spans = Vec::with_capacity(marks.len() / 2);
        for (&(tag, begin), &t) in marks.iter().zip(ticks) {
            if begin {
                open.insert(tag, t);
            } else if let Some(start) = open.remove(&tag) {
                let (start_ns, len) = clock.span(start, t);
                spans.push(DeviceSpan::whole(
                    tag,
                    start_ns,
                    start_ns.saturating_add(len),
                ));
            }
        }
        spans
    }

    /// Query pools made for device timing and kept now.
    #[cfg(test)]
    pub(super) fn query_pools(&self) -> usize {
        self.timing.pools.len()
    }

    /// Drop every query pool (command buffers that use one hold it).
    pub(super) fn release_query_pools(&mut self) {
        self.timing.pools = Vec::new();
        self.timing.marks = Vec::new();
        self.timing.submitted = 0;
        self.timing.reset_in_batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::{timestamps_usable, Clock};

    /// A queue family times work where it writes timestamps and their
    /// period is a positive number of nanoseconds; otherwise the reason
    /// names the device, the family and the value. (lavapipe's 64 bits and
    /// period of 1 pass, so only this test sees the others.)
    #[test]
    fn timing_needs_valid_bits_and_a_positive_period() {
        assert!(timestamps_usable(64, 1.0, 0, "gpu").is_ok());
        assert!(timestamps_usable(1, 0.001, 0, "gpu").is_ok());
        let e = timestamps_usable(0, 1.0, 2, "gpu").unwrap_err();
        assert!(
            e.contains("queue family 2 of gpu") && e.contains("timestampValidBits = 0"),
            "{e}"
        );
        for period in [0.0, -1.0, f32::NAN] {
            let e = timestamps_usable(36, period, 0, "gpu").unwrap_err();
            assert!(e.contains("gpu reports timestampPeriod"), "{period}: {e}");
        }
    }

    /// A counter of fewer than 64 valid bits wraps at them: a span across
    /// the wrap is its true length, and bits above the valid ones (which
    /// the spec leaves undefined) are ignored. lavapipe's counter has all
    /// 64, so only this test sees a narrower one.
    #[test]
    fn a_narrow_counter_wraps_at_its_valid_bits() {
        let c = Clock::new(36, 1.0);
        let top = (1u64 << 36) - 1;
        assert_eq!(c.span(top - 9, 5), (top - 9, 15));
        assert_eq!(c.span((7 << 36) | 100, (7 << 36) | 130), (100, 30));
        let wide = Clock::new(64, 1.0);
        assert_eq!(wide.span(u64::MAX - 1, 3), (u64::MAX - 1, 5));
        // Ticks of 2.5 ns.
        assert_eq!(Clock::new(36, 2.5).span(0, 4), (0, 10));
    }
}
