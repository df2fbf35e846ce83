//! Device timing with stream events, shared by CUDA and HIP:
//! an event is recorded on the stream before and after each traced replay or
//! eager launch; a span's times are elapsed-time queries against one base
//! event per backend, so every span of a device is on one clock.
//!
//! The base event is recorded lazily at the first `begin`, never when timing
//! is switched on: core may switch tracing on while a capture is open, and an
//! event recorded on a capturing stream would become a graph node.

use crate::driver::GraphDriver;
use seam::{DeviceSpan, ErrorKind};

/// Start/end events of one stream's traced work, oldest first.
pub struct EventTimer<D: GraphDriver> {
    on: bool,
    /// Every span's start and end are measured from this event.
    base: Option<D::Event>,
    /// A `begin` without its `end` yet.
    open: Option<(u64, D::Event)>,
    /// Bracketed work, oldest first: (tag, start, end).
    done: Vec<(u64, D::Event, D::Event)>,
    /// Events to reuse, so steady tracing creates none.
    pool: Vec<D::Event>,
    /// Node timing of bracketed replays, read and not yet taken: (tag,
    /// each launch's start after the replay's start event and its length,
    /// in ns).
    nodes: Vec<(u64, Vec<(u64, u64)>)>,
}

/// The events a node-timed graph records: one before its first launch and
/// one after each launch (event record nodes), and the tag of a traced
/// replay of it that is not read yet.
pub struct NodeEvents<E> {
    pub events: Vec<E>,
    pub unread: Option<u64>,
}

impl<D: GraphDriver> Default for EventTimer<D> {
    fn default() -> Self {
        EventTimer {
            on: false,
            base: None,
            open: None,
            done: Vec::new(),
            pool: Vec::new(),
            nodes: Vec::new(),
        }
    }
}

impl<D: GraphDriver> EventTimer<D> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Switch timing. Switching off drops an unmatched start; spans already
    /// bracketed stay until taken.
    pub fn set(&mut self, on: bool) {
        self.on = on;
        if !on {
            if let Some((_, ev)) = self.open.take() {
                self.pool.push(ev);
            }
        }
    }

    /// Record the start event of `tag` (never called while capturing).
    pub fn begin(&mut self, d: &D, tag: u64) -> Result<(), ErrorKind> {
        if !self.on {
            return Ok(());
        }
        if self.base.is_none() {
            let base = self.event(d)?;
            if let Err(e) = d.record_event(&base) {
                self.pool.push(base);
                return Err(e);
            }
            self.base = Some(base);
        }
        // A start left open by work that failed to queue is dropped.
        if let Some((_, stale)) = self.open.take() {
            self.pool.push(stale);
        }
        let start = self.event(d)?;
        if let Err(e) = d.record_event(&start) {
            self.pool.push(start);
            return Err(e);
        }
        self.open = Some((tag, start));
        Ok(())
    }

    /// Record the end event of `tag`, pairing it with its start.
    pub fn end(&mut self, d: &D, tag: u64) -> Result<(), ErrorKind> {
        let Some((open_tag, start)) = self.open.take() else {
            return Ok(());
        };
        if open_tag != tag || !self.on {
            self.pool.push(start);
            return Ok(());
        }
        let end = match self.event(d) {
            Ok(e) => e,
            Err(e) => {
                self.pool.push(start);
                return Err(e);
            }
        };
        if let Err(e) = d.record_event(&end) {
            self.pool.push(start);
            self.pool.push(end);
            return Err(e);
        }
        self.done.push((tag, start, end));
        Ok(())
    }

    /// Read the node events of the replay tagged `tag` (its bracket is
    /// among the ended ones) once they have completed: each launch's start
    /// after the replay's start event, chained from launch to launch so the
    /// spans tile in capture order, and its length. A replay whose bracket
    /// is gone (timing switched off in between) is skipped.
    pub fn read_nodes(&mut self, d: &D, tag: u64, events: &[D::Event]) -> Result<(), ErrorKind> {
        let (Some(last), Some((_, start, _))) =
            (events.last(), self.done.iter().find(|(t, _, _)| *t == tag))
        else {
            return Ok(());
        };
        d.wait_event(last)?;
        let mut at = ms_to_ns(d.elapsed_ms(start, &events[0])?);
        let mut launches = Vec::with_capacity(events.len().saturating_sub(1));
        for pair in events.windows(2) {
            let len = ms_to_ns(d.elapsed_ms(&pair[0], &pair[1])?);
            launches.push((at, len));
            at += len;
        }
        self.nodes.push((tag, launches));
        Ok(())
    }

    /// [`read_nodes`](EventTimer::read_nodes) for a graph whose launches
    /// are marked with stamp kernels: `first` is its event before the
    /// first stamp, `stamps` the device clock (ns) of the stamp before its
    /// first launch and after each, read once the replay completed. Launch
    /// `i` runs from stamp `i` to stamp `i + 1`; the first stamp is placed
    /// at `first`'s time after the replay's start event (the stamp kernel
    /// runs right after that event node), so the spans tile in capture
    /// order from there. A stamp earlier than the one before it (a clock
    /// that went back) gives a span of zero length.
    pub fn read_stamps(
        &mut self,
        d: &D,
        tag: u64,
        first: &D::Event,
        stamps: &[u64],
    ) -> Result<(), ErrorKind> {
        let Some((_, start, _)) = self.done.iter().find(|(t, _, _)| *t == tag) else {
            return Ok(());
        };
        d.wait_event(first)?;
        let mut at = ms_to_ns(d.elapsed_ms(start, first)?);
        let mut launches = Vec::with_capacity(stamps.len().saturating_sub(1));
        for pair in stamps.windows(2) {
            let len = pair[1].saturating_sub(pair[0]);
            launches.push((at, len));
            at += len;
        }
        self.nodes.push((tag, launches));
        Ok(())
    }

    /// Spans of every bracketed piece of work, oldest first, then the node
    /// spans read of them ([`EventTimer::read_nodes`]); waits for the
    /// last end event. A span's start is `base → start` and its length is
    /// `start → end` (measured directly, so a long trace does not cost the
    /// span's own precision).
    pub fn take(&mut self, d: &D) -> Result<Vec<DeviceSpan>, ErrorKind> {
        let Some((_, _, last_end)) = self.done.last() else {
            self.nodes.clear();
            return Ok(Vec::new());
        };
        d.wait_event(last_end)?;
        let base = self
            .base
            .as_ref()
            .ok_or_else(|| ErrorKind::driver(d.api(), "timed spans without a base event"))?;
        let mut spans = Vec::with_capacity(self.done.len());
        let mut result = Ok(());
        for (tag, start, end) in self.done.drain(..) {
            if result.is_ok() {
                let measured = d
                    .elapsed_ms(base, &start)
                    .and_then(|s| Ok((s, d.elapsed_ms(&start, &end)?)));
                match measured {
                    Ok((s, len)) => {
                        let start_ns = ms_to_ns(s);
                        spans.push(DeviceSpan::whole(tag, start_ns, start_ns + ms_to_ns(len)));
                    }
                    Err(e) => result = Err(e),
                }
            }
            self.pool.push(start);
            self.pool.push(end);
        }
        let nodes = std::mem::take(&mut self.nodes);
        result?;
        let starts: std::collections::HashMap<u64, u64> =
            spans.iter().map(|s| (s.tag, s.start_ns)).collect();
        for (tag, launches) in nodes {
            let Some(&start) = starts.get(&tag) else {
                continue;
            };
            for (i, (off, len)) in launches.into_iter().enumerate() {
                spans.push(DeviceSpan::node(
                    tag,
                    i as u32,
                    start + off,
                    start + off + len,
                ));
            }
        }
        Ok(spans)
    }

    /// Destroy every event (the backend's `Drop`, after the stream is idle).
    pub fn release_all(&mut self, d: &D) {
        let open = self.open.take().map(|(_, e)| e);
        let done = self.done.drain(..).flat_map(|(_, s, e)| [s, e]);
        for ev in open
            .into_iter()
            .chain(done)
            .chain(self.pool.drain(..))
            .chain(self.base.take())
            .collect::<Vec<_>>()
        {
            d.destroy_event(ev);
        }
    }

    fn event(&mut self, d: &D) -> Result<D::Event, ErrorKind> {
        match self.pool.pop() {
            Some(e) => Ok(e),
            None => d.create_event(),
        }
    }
}

/// Milliseconds (as the drivers report) to whole nanoseconds; negative
/// readings (clock jitter) clamp to zero.
fn ms_to_ns(ms: f32) -> u64 {
    (f64::from(ms) * 1e6).round().max(0.0) as u64
}
