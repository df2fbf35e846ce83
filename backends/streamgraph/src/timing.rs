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
}

impl<D: GraphDriver> Default for EventTimer<D> {
    fn default() -> Self {
        EventTimer {
            on: false,
            base: None,
            open: None,
            done: Vec::new(),
            pool: Vec::new(),
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

    /// Spans of every bracketed piece of work, oldest first; waits for the
    /// last end event. A span's start is `base → start` and its length is
    /// `start → end` (measured directly, so a long trace does not cost the
    /// span's own precision).
    pub fn take(&mut self, d: &D) -> Result<Vec<DeviceSpan>, ErrorKind> {
        let Some((_, _, last_end)) = self.done.last() else {
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
                        spans.push(DeviceSpan {
                            tag,
                            start_ns,
                            end_ns: start_ns + ms_to_ns(len),
                        });
                    }
                    Err(e) => result = Err(e),
                }
            }
            self.pool.push(start);
            self.pool.push(end);
        }
        result.map(|()| spans)
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
