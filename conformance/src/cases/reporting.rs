//! C9 truthful reporting and C10 every replay counted.

use crate::{check, check_eq, expect_err, Case, CaseResult, Ctx, Rule, Tag, ONCE};
use seam::{ops, CaptureSupport, ErrorKind, EventKind, GraphRef};
use std::collections::HashMap;

/// The capture report matches behaviour: Unsupported refuses begin_capture
/// with CaptureUnsupported (and supports_capture() is false); Native or
/// Emulated begins, ends and replays a capture. (That such a device also
/// passes C1–C8 is the rest of this suite.)
///
/// The report must also match the capture support the backend declares in
/// its `Registration`, so a silent regression to `Unsupported` (which would
/// turn every capture case into an ignored trial) is a failure.
///
/// Mutations: make the CPU backend report `Unsupported` → red (declared
/// native); make the CPU backend's `begin_capture` return an error while
/// reporting Native → red.
pub const C9_REPORT_MATCHES_BEHAVIOUR: Case = Case {
    name: "c9_report_matches_behaviour",
    rule: Rule::C9,
    tags: &[],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let reg = cx.registration;
        check!(
            reg.declares_capture(d.capture_support()),
            "{} declares capture `{}` but the device reports `{}`: change the registration's \
             capture kinds (`Registration::with_capture`) or the backend's `capture_support`",
            reg.name,
            reg.declared_capture(),
            seam::CaptureKind::of(d.capture_support()).name()
        );
        match d.capture_support().clone() {
            CaptureSupport::Unsupported(reason) => {
                check!(
                    !d.capture_support().is_supported(),
                    "capture_support().is_supported() disagrees with Unsupported"
                );
                check!(!reason.is_empty(), "Unsupported must say why");
                expect_err!(
                    d.low_level().begin_capture(),
                    ErrorKind::CaptureUnsupported { .. }
                );
                check!(!d.capturing(), "a refused begin leaves no capture open");
            }
            CaptureSupport::Native | CaptureSupport::Emulated => {
                check!(
                    d.capture_support().is_supported(),
                    "capture_support().is_supported() disagrees with the report"
                );
                let x = d.buffer_from(&[2.0f32; 4])?;
                let y = d.buffer_from(&[0.0f32; 4])?;
                let s = d.capture()?;
                d.launch(&ops::scale_add(x.id(), y.id(), 4, 3.0, 0.5))?;
                let g = s.end_graph()?;
                g.replay()?;
                check_eq!(
                    y.read()?,
                    vec![6.5f32; 4],
                    "a reported-capable device replays"
                );
            }
        }
        Ok(())
    },
};

/// A window of N replays records exactly N replay events, in order, with
/// indices 0..N, for N in {1, 4, 32, 128}; the per-handle count is N; and the
/// work really ran N times.
///
/// Mutation: make `Device::replay` record the trace event only for even
/// indices (or not increment the count) → red.
pub const C10_EVERY_REPLAY_COUNTED: Case = Case {
    name: "c10_every_replay_counted",
    rule: Rule::C10,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        for n in [1u64, 4, 32, 128] {
            window(cx, n)?;
        }
        Ok(())
    },
};

fn window(cx: &Ctx, n: u64) -> CaseResult {
    let d = &cx.dev;
    let one = d.buffer_from(&[1u32; 4])?;
    let dst = d.buffer_from(&[0u32; 4])?;
    d.set_tracing(true);
    let s = d.capture()?;
    d.launch(&ops::add(one.id(), dst.id(), dst.id(), 4))?;
    let g = s.end_graph()?;
    for _ in 0..n {
        g.replay()?;
    }
    d.set_tracing(false);
    let events = d.take_trace_log("c10")?.events;
    let ended = events.iter().any(|e| {
        e.kind
            == EventKind::EndCaptureGraph {
                graph: g.id().number(),
                launches: 1,
            }
    });
    check!(ended, "the capture's end is recorded with its 1 launch");
    let replays: Vec<u64> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Replay { graph, index } if graph == Some(g.id().number()) => Some(index),
            _ => None,
        })
        .collect();
    check_eq!(replays.len() as u64, n, "replay events in a window of {n}");
    check!(
        replays.iter().enumerate().all(|(i, idx)| *idx == i as u64),
        "replay indices out of order: {replays:?}"
    );
    check!(
        events
            .windows(2)
            .all(|w| w[0].seq < w[1].seq && w[0].host_ns <= w[1].host_ns),
        "events are not in order"
    );
    check_eq!(g.replay_count()?, n, "replay_count");
    check_eq!(
        dst.read()?,
        vec![n as u32; 4],
        "the work ran once per counted replay"
    );
    Ok(())
}

/// Counts are per handle: replays of A do not count for B or the current exec;
/// tracing switched off records nothing (that it is off by default is a unit
/// test in core).
///
/// Mutation: make `Device::replay` increment the first graph's count whatever
/// the target → red.
pub const C10_COUNTS_ARE_PER_HANDLE: Case = Case {
    name: "c10_counts_are_per_handle",
    rule: Rule::C10,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let one = d.buffer_from(&[1u32; 4])?;
        let dst = d.buffer_from(&[0u32; 4])?;
        let mk = || -> seam::Result<seam::Graph> {
            let s = d.capture()?;
            d.launch(&ops::add(one.id(), dst.id(), dst.id(), 4))?;
            s.end_graph()
        };
        // The harness may be tracing (`--trace`); this case checks that off means off.
        d.set_tracing(false);
        d.take_trace_log("c10")?;
        let (a, b) = (mk()?, mk()?);
        let s = d.capture()?;
        d.launch(&ops::add(one.id(), dst.id(), dst.id(), 4))?;
        s.end_into_current()?;
        for _ in 0..3 {
            a.replay()?;
        }
        b.replay()?;
        for _ in 0..5 {
            d.replay(GraphRef::Current)?;
        }
        check_eq!(a.replay_count()?, 3, "A");
        check_eq!(b.replay_count()?, 1, "B");
        check_eq!(d.replay_count(GraphRef::Current)?, 5, "current exec");
        check!(
            d.take_trace_log("c10")?.events.is_empty(),
            "tracing off recorded nothing"
        );
        check_eq!(dst.read()?, vec![9u32; 4], "9 replays ran");
        Ok(())
    },
};

/// Every replay on the record with its device time: for N in {1, 4, 32, 128},
/// a traced window gives exactly N device spans tagged with the N replay
/// events, plus one for each of two traced eager launches after them (one
/// over 4 Mi elements, one over 64), each with end ≥ start; the spans of
/// the replays and the launches start in the order their work was queued,
/// and the large launch's span is longer than the small one's (a span
/// measures its own work); the Chrome trace export of the window parses
/// back with N replay slices. Whether a device times itself is what its backend's
/// registration declares (`DeclaredTiming`): a declared-timed device that
/// does not time fails (a backend that stops timing cannot skip these
/// checks), and an untimed one must say why and record no spans.
///
/// Mutations: make the CPU backend's `take_device_spans` drop the last span
/// → red; make the CPU backend's `device_timing` return `Err` → red at "cpu
/// declares device timing, but the device does not time". Also red: spans
/// of two pieces of work given each other's tags, and eager spans of zero
/// length (each planted in a copy of the outside backend's wrapper).
pub const C10_DEVICE_SPANS_MATCH_REPLAYS: Case = Case {
    name: "c10_device_spans_match_replays",
    rule: Rule::C10,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        for n in [1usize, 4, 32, 128] {
            spans_window(cx, n)?;
        }
        Ok(())
    },
};

/// Elements of the large eager launch of [`spans_window`].
const LARGE: usize = 1 << 22;

fn spans_window(cx: &Ctx, n: usize) -> CaseResult {
    let d = &cx.dev;
    let one = d.buffer_from(&[1u32; 64])?;
    let dst = d.buffer_from(&[0u32; 64])?;
    let big = d.buffer_from(&vec![1u32; LARGE])?;
    let s = d.capture()?;
    d.launch(&ops::add(one.id(), dst.id(), dst.id(), 64))?;
    let g = s.end_graph()?;
    d.set_tracing(true);
    for _ in 0..n {
        g.replay()?;
    }
    d.launch(&ops::add(big.id(), big.id(), big.id(), LARGE as u32))?;
    d.launch(&ops::add(one.id(), dst.id(), dst.id(), 64))?;
    d.set_tracing(false);
    let log = d.take_trace_log("c10")?;
    let replay_tags: Vec<u64> = log
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Replay { .. }))
        .map(|e| e.seq)
        .collect();
    check_eq!(replay_tags.len(), n, "replay events");
    let trace = seam::chrome_trace(std::slice::from_ref(&log));
    let parsed: serde_json::Value = serde_json::from_str(&trace.to_string())
        .map_err(|e| crate::Failure(format!("the exported trace does not parse: {e}")))?;
    let slices = parsed["traceEvents"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| {
                    e["ph"] == "X" && e["name"].as_str().is_some_and(|s| s.starts_with("replay"))
                })
                .count()
        })
        .unwrap_or(0);
    let declared = cx.registration.device_timing;
    match (&log.device_timing_unavailable, declared) {
        (Some(why), seam::DeclaredTiming::Timed) => {
            return Err(crate::Failure(format!(
                "{} declares device timing, but the device does not time: {why}; declare \
                 `DeclaredTiming::Untimed` (`Registration::with_timing`) or time the device",
                cx.registration.name
            )))
        }
        (None, seam::DeclaredTiming::Untimed(reason)) => {
            return Err(crate::Failure(format!(
                "{} declares no device timing ({reason}), but the device times: declare \
                 `DeclaredTiming::Timed` (`Registration::with_timing`)",
                cx.registration.name
            )))
        }
        (None, seam::DeclaredTiming::Timed) => {
            let by_tag: HashMap<u64, &seam::DeviceSpan> =
                log.device_spans.iter().map(|s| (s.tag, s)).collect();
            check_eq!(
                log.device_spans.len(),
                n + 2,
                "device spans (N replays + 2 eager launches)"
            );
            check_eq!(slices, n, "replay slices in the exported trace");
            // The eager launches, after the replays.
            let launches: Vec<u64> = (log.events.iter())
                .filter(|e| {
                    matches!(
                        e.kind,
                        EventKind::Launch {
                            captured: false,
                            ..
                        }
                    )
                })
                .map(|e| e.seq)
                .collect();
            check_eq!(launches.len(), 2, "traced eager launches");
            // Every span, replays then launches, in the order their work was queued.
            let work = (replay_tags
                .iter()
                .enumerate()
                .map(|(i, t)| (format!("replay #{i}"), *t)))
            .chain((launches.iter().enumerate()).map(|(i, t)| (format!("eager launch #{i}"), *t)));
            let mut last_start = 0;
            let mut eager = Vec::new();
            for (what, tag) in work {
                let span = by_tag.get(&tag).ok_or_else(|| {
                    crate::Failure(format!("{what} (seq {tag}) has no device span"))
                })?;
                check!(
                    span.end_ns >= span.start_ns,
                    "{what}: span ends before it starts"
                );
                check!(
                    span.start_ns >= last_start,
                    "{what} starts at {} ns, before the work queued ahead of it (at \
                     {last_start} ns): spans out of queue order, or given to the wrong work",
                    span.start_ns
                );
                last_start = span.start_ns;
                if launches.contains(&tag) {
                    eager.push(span.end_ns - span.start_ns);
                }
            }
            check!(
                eager[0] > eager[1],
                "the launch over {LARGE} elements took {} ns, the one over 64 {} ns: a span \
                 must measure its own work",
                eager[0],
                eager[1]
            );
        }
        (Some(why), seam::DeclaredTiming::Untimed(_)) => {
            check!(!why.is_empty(), "an untimed device must say why");
            check!(
                log.device_spans.is_empty(),
                "an untimed device recorded spans"
            );
        }
    }
    check_eq!(
        dst.read()?,
        vec![n as u32 + 1; 64],
        "every traced replay ran"
    );
    Ok(())
}
