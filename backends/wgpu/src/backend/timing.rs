//! Device timing and node timing (C10) with timestamp queries written
//! inside compute passes (`wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES`).
//!
//! - **Markers.** `begin_timed`/`end_timed` put a stamp into the open eager
//!   batch at its current position, so it sits in the queue exactly where
//!   core asks: a replay's begin marker is encoded after the batch before
//!   it, in the pass of the replay's first piece; its end marker at the
//!   start of the next batch. An eager launch's markers sit around its
//!   dispatch in the batch.
//! - **Nodes.** A traced replay of a graph captured with node timing on
//!   writes a stamp before its first dispatch and one after each dispatch,
//!   into the replay's pieces: launch `i` runs from stamp `i` to `i + 1`. A
//!   wgpu replay is encoded anew each time, so every replay gets stamps of
//!   its own: replays are never serialised with the host, unlike graphs
//!   recorded once (Vulkan, CUDA).
//! - **What a stamp measures.** wgpu-hal writes pass timestamps at
//!   BOTTOM_OF_PIPE on Vulkan (`vkCmdWriteTimestamp`): once every earlier
//!   command has finished. wgpu puts a barrier between dependent dispatches
//!   only, so a stamp after launch `i` is when it and everything before it
//!   finished: launches that depend on the one before (a decode step, the
//!   suite's chain) get their own time; independent ones that overlap on
//!   the GPU share theirs out in capture order.
//! - **Cycles.** Stamps are numbered from 0 in the order they are queued;
//!   query sets are made as stamps need them and kept for the device's
//!   life. A cycle ends when the spans are taken: every stamp of the cycle
//!   is resolved (`resolve_query_set`) into one buffer, copied to a
//!   `MAP_READ` buffer and read, ticks × `Queue::get_timestamp_period` in
//!   nanoseconds; the next cycle starts again from stamp 0. A submission
//!   that fails loses its stamps: the numbering goes back to the last one
//!   submitted, and markers and nodes that used a lost stamp are dropped.

use super::WgpuBackend;
use crate::gpu::{Gpu, TIMESTAMPS};
use crate::replay::QUERIES_PER_SET;
use seam::{DeviceSpan, ErrorKind};

/// One begin or end marker of a bracket.
struct Mark {
    tag: u64,
    begin: bool,
    stamp: u32,
}

/// The node stamps of one traced replay: `launches + 1` from `first`.
struct Replay {
    tag: u64,
    first: u32,
    launches: u32,
    /// The launch each step is, where the graph has conditional bodies
    /// (`Graph::launch_of`); none: step `i` is launch `i`.
    launch_of: Option<std::sync::Arc<[Option<u32>]>>,
}

/// Timing state of one backend.
#[derive(Default)]
pub(super) struct Timing {
    /// Device timing is on (tracing).
    pub(super) on: bool,
    /// Graphs captured from now on are node-timed.
    pub(super) nodes_on: bool,
    /// The tag of the open bracket (`begin_timed` … `end_timed`).
    pub(super) bracket: Option<u64>,
    pub(super) sets: Vec<wgpu::QuerySet>,
    /// Stamps numbered this cycle.
    next: u32,
    /// Stamps in command buffers submitted (a prefix of `0..next`).
    submitted: u32,
    /// Markers in the open eager batch: (dispatches before it, stamp).
    pub(super) in_batch: Vec<(usize, u32)>,
    marks: Vec<Mark>,
    replays: Vec<Replay>,
}

impl Timing {
    /// Number `n` stamps from the cycle's next, making query sets on `gpu`
    /// as they are needed; the first one's number.
    pub(super) fn stamps(&mut self, gpu: &Gpu, n: u32) -> Result<u32, ErrorKind> {
        let first = self.next;
        let end = first.checked_add(n).ok_or_else(|| {
            ErrorKind::driver("wgpu::Device::create_query_set", "more than 2^32 stamps")
        })?;
        while (self.sets.len() as u64) * u64::from(QUERIES_PER_SET) < u64::from(end) {
            let set = gpu.checked("wgpu::Device::create_query_set", || {
                gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("seam timing"),
                    ty: wgpu::QueryType::Timestamp,
                    count: QUERIES_PER_SET,
                })
            })?;
            self.sets.push(set);
        }
        self.next = end;
        Ok(first)
    }

    /// The stamps of the next submission are all queued: they count as
    /// submitted.
    pub(super) fn sent(&mut self) {
        self.submitted = self.next;
        self.in_batch.clear();
    }

    /// The submission being made failed: its stamps are never written.
    pub(super) fn lost(&mut self) {
        let kept = self.submitted;
        self.next = kept;
        self.in_batch.clear();
        self.marks.retain(|m| m.stamp < kept);
        self.replays.retain(|r| r.first + r.launches < kept);
    }

    /// A traced replay of a node-timed graph of `launches` launches was
    /// submitted with stamps `first..=first + launches`.
    pub(super) fn replayed(
        &mut self,
        tag: u64,
        first: u32,
        launches: u32,
        launch_of: Option<std::sync::Arc<[Option<u32>]>>,
    ) {
        self.replays.push(Replay {
            tag,
            first,
            launches,
            launch_of,
        });
    }
}

impl WgpuBackend {
    /// Whether this device can time itself; `Err` says why not.
    pub(super) fn timing_support(&self) -> Result<(), String> {
        timestamps_in(self.gpu.device.features())
    }

    /// A begin (`begin`) or end marker tagged `tag` in the open eager batch.
    pub(super) fn mark(&mut self, tag: u64, begin: bool) -> Result<(), ErrorKind> {
        if !self.timing.on {
            return Ok(());
        }
        let stamp = self.timing.stamps(&self.gpu, 1)?;
        let at = self.pending.len();
        self.timing.in_batch.push((at, stamp));
        self.timing.marks.push(Mark { tag, begin, stamp });
        Ok(())
    }

    /// Every span of the cycle: each bracket's, oldest first, then each
    /// traced replay's node spans. Flushes the open batch and waits for
    /// the stamps. The cycle ends whatever happens.
    pub(super) fn take_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.submit(None)?;
        let used = self.timing.next;
        let marks = std::mem::take(&mut self.timing.marks);
        let replays = std::mem::take(&mut self.timing.replays);
        self.timing.next = 0;
        self.timing.submitted = 0;
        if used == 0 {
            return Ok(Vec::new());
        }
        let ticks = self.read_stamps(used)?;
        let period = self.gpu.queue.get_timestamp_period();
        Ok(spans(&marks, &replays, |stamp| {
            to_ns(ticks[stamp as usize], period)
        }))
    }

    /// The ticks of stamps `0..used`, once every submission writing them
    /// has finished.
    fn read_stamps(&self, used: u32) -> Result<Vec<u64>, ErrorKind> {
        let bytes = u64::from(used) * 8;
        let buffer = |label, usage| {
            self.gpu.checked("wgpu::Device::create_buffer", || {
                self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size: bytes,
                    usage,
                    mapped_at_creation: false,
                })
            })
        };
        use wgpu::BufferUsages as U;
        let resolved = buffer("seam stamps", U::QUERY_RESOLVE | U::COPY_SRC)?;
        let readback = buffer("seam stamps read", U::MAP_READ | U::COPY_DST)?;
        let mut encoder = self
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("seam stamps"),
            });
        for (k, set) in self.timing.sets.iter().enumerate() {
            let first = k as u32 * QUERIES_PER_SET;
            if first >= used {
                break;
            }
            let n = (used - first).min(QUERIES_PER_SET);
            // Offsets are whole sets: 32 KiB, a multiple of the 256 bytes
            // wgpu asks of a resolve.
            encoder.resolve_query_set(set, 0..n, &resolved, u64::from(first) * 8);
        }
        encoder.copy_buffer_to_buffer(&resolved, 0, &readback, 0, bytes);
        let commands = self
            .gpu
            .checked("wgpu::CommandEncoder::finish", || encoder.finish())?;
        let index = self
            .gpu
            .checked("wgpu::Queue::submit", || self.gpu.queue.submit([commands]))?;
        let raw = self.map_read(&readback, bytes, index)?;
        Ok(raw
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect())
    }
}

/// `ticks` of a clock that ticks every `period` nanoseconds, in
/// nanoseconds. A period of exactly 1 (lavapipe's, NVIDIA's) keeps every
/// tick exact; others go through `f64`, exact below 2^53 ticks.
fn to_ns(ticks: u64, period: f32) -> u64 {
    if period == 1.0 {
        ticks
    } else {
        (ticks as f64 * f64::from(period)).round() as u64
    }
}

/// Whether a device with `features` has what timing needs
/// ([`TIMESTAMPS`]); `Err` names what it lacks.
fn timestamps_in(features: wgpu::Features) -> Result<(), String> {
    let missing = TIMESTAMPS - features;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the adapter lacks wgpu's {missing:?}: no timestamps inside compute passes"
        ))
    }
}

/// The spans the cycle's `marks` and `replays` give with stamp times `ns`:
/// each begin marker paired with the next end marker of its tag (a marker
/// without its pair is dropped), oldest first; then each replay's launch
/// `i` from stamp `first + i` to `first + i + 1`.
fn spans(marks: &[Mark], replays: &[Replay], ns: impl Fn(u32) -> u64) -> Vec<DeviceSpan> {
    let mut out = Vec::with_capacity(marks.len() / 2);
    let mut open: Option<&Mark> = None;
    for m in marks {
        match (m.begin, open) {
            (true, _) => open = Some(m),
            (false, Some(b)) if b.tag == m.tag => {
                out.push(DeviceSpan::whole(m.tag, ns(b.stamp), ns(m.stamp)));
                open = None;
            }
            (false, _) => open = None,
        }
    }
    for r in replays {
        for i in 0..r.launches {
            let at = r.first + i;
            let launch = match &r.launch_of {
                Some(map) => match map[i as usize] {
                    Some(l) => l,
                    None => continue, // a gate
                },
                None => i,
            };
            out.push(DeviceSpan::node(r.tag, launch, ns(at), ns(at + 1)));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{spans, timestamps_in, to_ns, Mark, Replay, Timing, TIMESTAMPS};
    use crate::backend::WgpuBackend;
    use crate::replay::QUERIES_PER_SET;
    use libtest_mimic::Completion;
    use seam::testing::{Direct, RawCall};
    use seam::{Backend, DType, DeviceSpan, OpKind, Params, RawView, ReplayTarget};
    use wgpu::Features as F;

    /// Ticks become nanoseconds: exactly where a tick is a nanosecond
    /// (past 2^53 too), scaled and rounded otherwise. Mutations: the exact
    /// case taken for every period (`==` → `!=`), `*` → `+` / `/` → red.
    pub fn ticks_become_nanoseconds() {
        let big = (1u64 << 60) + 1;
        assert_eq!(to_ns(big, 1.0), big);
        assert_eq!(to_ns(1_000, 1.0), 1_000);
        assert_eq!(to_ns(1_000, 41.666_668), 41_667);
        assert_eq!(to_ns(3, 0.5), 2);
        assert_eq!(to_ns(0, 41.666_668), 0);
    }

    /// A traced replay of a node-timed graph of 3 launches numbers 6
    /// stamps: its begin marker, 4 node stamps, its end marker; taking the
    /// spans gives its span and 3 node spans and starts the numbering
    /// again. Query sets are made as stamps need them: one for exactly
    /// 4,096, a second for one more. Mutations: the node stamps numbered
    /// one short (`+ 1` → `- 1` / `* 1`), a set made early (`<` → `<=`),
    /// the sets' capacity miscounted (`*` → `+` / `/`) → red.
    pub fn stamps_are_numbered_once_each(mut b: Direct<WgpuBackend>) -> Completion {
        let buf = b.alloc(64).expect("alloc");
        let add = RawCall {
            op: OpKind::Add,
            dtype: DType::U32,
            buffers: [buf, buf, buf].map(|r| RawView::whole(r, 16)).into(),
            params: Params {
                d0: 16,
                ..Default::default()
            },
        };
        b.set_device_timing(true).expect("timing");
        b.set_node_timing(true).expect("node timing");
        b.begin_capture().expect("capture");
        for _ in 0..3 {
            b.launch(&add).expect("launch");
        }
        let g = b.end_capture_graph().expect("end");
        b.begin_timed(1).expect("begin");
        b.replay(ReplayTarget::Graph(g)).expect("replay");
        assert_eq!(b.timing.next, 5, "a begin marker and 4 node stamps");
        b.end_timed(1).expect("end");
        assert_eq!(b.timing.next, 6);
        let spans = b.take_device_spans().expect("spans");
        assert_eq!(spans.iter().filter(|s| s.nodes.is_none()).count(), 1);
        assert_eq!(spans.iter().filter(|s| s.nodes.is_some()).count(), 3);
        assert_eq!(b.timing.next, 0, "a new cycle");
        let mut t = Timing::default();
        assert_eq!(t.stamps(&b.gpu, QUERIES_PER_SET).expect("stamps"), 0);
        assert_eq!(t.sets.len(), 1, "4,096 stamps fill one set");
        assert_eq!(t.stamps(&b.gpu, 1).expect("stamps"), QUERIES_PER_SET);
        assert_eq!(t.sets.len(), 2, "one more needs a second");
        assert_eq!(
            t.stamps(&b.gpu, 2 * QUERIES_PER_SET - 1).expect("stamps"),
            QUERIES_PER_SET + 1
        );
        assert_eq!(t.sets.len(), 3);
        b.set_device_timing(false).expect("timing off");
        b.destroy_graph(g).expect("destroy");
        b.free(buf).expect("free");
        Completion::Completed
    }

    /// Timing needs both timestamp features, and names the one missing.
    /// Mutations: `timestamps_in` → `Ok(())`, `-` → `&` (the features
    /// present taken as missing) → red.
    pub fn timing_needs_timestamps_inside_passes() {
        assert_eq!(timestamps_in(TIMESTAMPS | F::IMMEDIATES), Ok(()));
        let why = timestamps_in(F::TIMESTAMP_QUERY | F::IMMEDIATES).expect_err("lacks one");
        assert!(why.contains("TIMESTAMP_QUERY_INSIDE_PASSES"), "{why}");
        assert!(!why.contains("TIMESTAMP_QUERY |"), "{why}");
        assert!(!why.contains("IMMEDIATES"), "{why}");
        assert!(timestamps_in(F::empty()).is_err());
    }

    fn mark(tag: u64, begin: bool, stamp: u32) -> Mark {
        Mark { tag, begin, stamp }
    }

    /// Brackets pair a begin with the next end of its tag, in queue order;
    /// an end without its begin (lost with a failed submission) and a
    /// begin without its end give nothing; node spans run from stamp
    /// `first + i` to the next. Mutations: pairing an end with another
    /// tag's begin, a node span ending at its own start (`at + 1` → `at`),
    /// the last launch dropped (`0..launches` → `0..launches - 1`) → red.
    pub fn spans_pair_markers_and_tile_nodes() {
        let ns = |s: u32| 1000 + 10 * u64::from(s);
        let marks = [
            mark(1, true, 0),
            mark(1, false, 1),
            mark(2, true, 2),
            mark(3, false, 3),
            mark(4, true, 4),
            mark(4, false, 9),
            mark(5, true, 10),
        ];
        let replays = [Replay {
            tag: 4,
            first: 5,
            launches: 3,
            launch_of: None,
        }];
        assert_eq!(
            spans(&marks, &replays, ns),
            vec![
                DeviceSpan::whole(1, 1000, 1010),
                DeviceSpan::whole(4, 1040, 1090),
                DeviceSpan::node(4, 0, 1050, 1060),
                DeviceSpan::node(4, 1, 1060, 1070),
                DeviceSpan::node(4, 2, 1070, 1080),
            ]
        );
    }

    /// A failed submission loses the stamps after the last submitted one:
    /// numbering resumes there and whatever used them is dropped; what was
    /// submitted stays. Mutations: `retain` keeping lost markers (`<` →
    /// `<=`), a replay whose last stamp was lost kept → red.
    pub fn lost_submission_drops_what_used_its_stamps() {
        let mut t = Timing::default();
        t.marks.push(mark(1, true, 0));
        t.marks.push(mark(1, false, 1));
        t.replays.push(Replay {
            tag: 1,
            first: 2,
            launches: 2,
            launch_of: None,
        });
        t.next = 5;
        t.sent();
        assert_eq!(t.submitted, 5);
        t.marks.push(mark(2, true, 5));
        t.replays.push(Replay {
            tag: 2,
            first: 4,
            launches: 1,
            launch_of: None,
        });
        t.in_batch.push((0, 5));
        t.next = 7;
        t.lost();
        assert_eq!(t.next, 5);
        assert!(t.in_batch.is_empty());
        assert_eq!(t.marks.iter().map(|m| m.stamp).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(t.replays.len(), 1);
        assert_eq!(t.replays[0].tag, 1);
    }
}
