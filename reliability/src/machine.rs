//! Runs a generated sequence on the model and on a real `Device`, step by
//! step, and reports the first disagreement: a different Ok/Err outcome, a
//! different `ErrorKind` variant, an error that does not name its call,
//! different read contents or replay counts, different live counts (core's and
//! the backend's), or anything left alive once every handle is dropped.

use crate::faulty::{FaultPlan, Faults, FaultyBackend};
use crate::model::{MChange, MKind, MLaunch, MTarget, Model, Slot, Thread, BOGUS};
use crate::steps::{
    self, BufSel, ChangeSel, FillValue, GraphSel, IndexSel, Step, TargetSel, UseSel,
};
use crate::Opener;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use seam::{
    f16, BufferId, Change, DType, Device, Error, ErrorKind, GraphId, GraphRef, OpCall, OpKind,
    Params, ResourceCounts,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BOGUS_BUFFER: BufferId = BufferId::unknown();
const BOGUS_GRAPH: GraphId = GraphId::unknown();

/// The variant name of an error kind (`UnknownBuffer`, `NestedCapture`, ...).
pub fn kind_name(kind: &ErrorKind) -> String {
    let dbg = format!("{kind:?}");
    dbg.split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Outcome tallies: `call → (Ok | error variant) → count`, to show what a run covered.
pub type Coverage = BTreeMap<String, u64>;

/// One sequence's model, device and handle tables.
struct Run {
    dev: Device,
    plan: Arc<FaultPlan>,
    model: Model,
    bufs: Vec<BufferId>,
    graphs: Vec<GraphId>,
    coverage: Coverage,
}

/// Compare a model result with a device result; `Some` when both are Ok.
fn agree<A: std::fmt::Debug, B: std::fmt::Debug>(
    call: &'static str,
    m: Result<A, ErrorKind>,
    d: Result<B, Error>,
    cov: &mut Coverage,
) -> Result<Option<(A, B)>, String> {
    match (m, d) {
        (Ok(a), Ok(b)) => {
            *cov.entry(format!("{call}: Ok")).or_default() += 1;
            Ok(Some((a, b)))
        }
        (Err(mk), Err(de)) => {
            if std::mem::discriminant(&mk) != std::mem::discriminant(&de.kind) {
                return Err(format!(
                    "{call}: model says {}, device says {} ({de})",
                    kind_name(&mk),
                    kind_name(&de.kind)
                ));
            }
            if de.call != call {
                return Err(format!("{call}: the error names call `{}`: {de}", de.call));
            }
            *cov.entry(format!("{call}: {}", kind_name(&mk)))
                .or_default() += 1;
            Ok(None)
        }
        (Ok(a), Err(de)) => Err(format!("{call}: model says Ok({a:?}), device says {de}")),
        (Err(mk), Ok(b)) => Err(format!(
            "{call}: model says {} ({mk}), device says Ok({b:?})",
            kind_name(&mk)
        )),
    }
}

/// Host bits of a small number as an element of `dtype`.
fn encode(dtype: DType, v: u16) -> u32 {
    match dtype {
        DType::F32 => (v as f32).to_bits(),
        DType::F16 => f16::from_f32(v as f32).to_bits() as u32,
        _ => v as u32,
    }
}

fn dev_write(
    dev: &Device,
    id: BufferId,
    host: DType,
    off: usize,
    bits: &[u32],
) -> seam::Result<()> {
    match host {
        DType::U32 => dev.write(id, off, bits),
        DType::F32 => dev.write(
            id,
            off,
            &bits.iter().map(|b| f32::from_bits(*b)).collect::<Vec<_>>(),
        ),
        DType::F16 => dev.write(
            id,
            off,
            &bits
                .iter()
                .map(|b| f16::from_bits(*b as u16))
                .collect::<Vec<_>>(),
        ),
        other => unreachable!("sequences never use {other} host data"),
    }
}

fn dev_read(
    dev: &Device,
    id: BufferId,
    host: DType,
    range: Option<(usize, usize)>,
) -> seam::Result<Vec<u32>> {
    fn get<T: seam::Element>(
        dev: &Device,
        id: BufferId,
        range: Option<(usize, usize)>,
    ) -> seam::Result<Vec<T>> {
        match range {
            None => dev.read(id),
            Some((o, c)) => dev.read_range(id, o, c),
        }
    }
    Ok(match host {
        DType::U32 => get::<u32>(dev, id, range)?,
        DType::F32 => get::<f32>(dev, id, range)?
            .into_iter()
            .map(f32::to_bits)
            .collect(),
        DType::F16 => get::<f16>(dev, id, range)?
            .into_iter()
            .map(|h| h.to_bits() as u32)
            .collect(),
        other => unreachable!("sequences never use {other} host data"),
    })
}

/// Where the model knows an element, the device must hold exactly it.
fn same_contents(what: &str, model: &[Option<u32>], dev: &[u32]) -> Result<(), String> {
    if model.len() != dev.len() {
        return Err(format!(
            "{what}: model has {} elements, device {}",
            model.len(),
            dev.len()
        ));
    }
    for (i, (m, d)) in model.iter().zip(dev).enumerate() {
        if let Some(m) = m {
            if m != d {
                return Err(format!(
                    "{what}: element {i} is {d:#x} on the device, {m:#x} in the model"
                ));
            }
        }
    }
    Ok(())
}

/// Run `f` on a second thread (a call from outside the capturing thread).
fn on(thread: Thread, f: impl FnOnce() -> seam::Result<()> + Send) -> seam::Result<()> {
    match thread {
        Thread::Main => f(),
        Thread::Other => std::thread::scope(|s| {
            s.spawn(f)
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
    }
}

/// A launch step's call, for the model and for the device; a small fill
/// value is encoded for its first buffer's element type.
fn launch(
    m: &Model,
    bufs: &[BufferId],
    op: OpKind,
    sels: &[BufSel],
    n: u32,
    value: FillValue,
) -> (MLaunch, OpCall) {
    let sel: Vec<(Slot, BufferId)> = sels.iter().map(|b| buf(bufs, *b)).collect();
    let dst = sel.first().and_then(|(s, _)| m.dtype_of(*s));
    let bits = bits(dst, value);
    let ml = MLaunch {
        op,
        bufs: sel.iter().map(|(s, _)| *s).collect(),
        n,
        bits,
    };
    let oc = OpCall {
        op,
        buffers: sel.iter().map(|(_, id)| seam::View::from(*id)).collect(),
        params: params(n, bits),
    };
    (ml, oc)
}

/// A fill value's bits for a destination of `dtype` (u32 when unknown).
fn bits(dtype: Option<DType>, value: FillValue) -> u32 {
    match value {
        FillValue::Small(v) => encode(dtype.unwrap_or(DType::U32), v),
        FillValue::Raw(b) => b,
    }
}

/// The parameters of the model's ops: the element count and a value.
fn params(n: u32, bits: u32) -> Params {
    Params {
        d0: n,
        bits,
        ..Params::default()
    }
}

/// An update step's change, for the model and for the device: indices and
/// rebound buffers resolved against the graph the model holds. New
/// parameters encode a small value for the launch's recorded destination.
fn change(m: &Model, bufs: &[BufferId], t: MTarget, c: &ChangeSel) -> (MChange, Change) {
    let (launches, used) = m.graph_shape(t);
    let index = |i: &IndexSel| match *i {
        IndexSel::Within(i) => i % launches.max(1),
        IndexSel::Raw(i) => i,
    };
    match c {
        ChangeSel::Rebind(a, b) => {
            let (sa, ia) = match *a {
                UseSel::Used(i) if !used.is_empty() => {
                    let s = used[i % used.len()];
                    (s, bufs[s])
                }
                UseSel::Used(i) => buf(bufs, BufSel::Nth(i)),
                UseSel::Any(sel) => buf(bufs, sel),
            };
            let (sb, ib) = buf(bufs, *b);
            (MChange::Rebind(sa, sb), Change::Rebind { old: ia, new: ib })
        }
        ChangeSel::Params { index: i, n, value } => {
            let index = &index(i);
            let dst = m
                .recorded(t, *index)
                .and_then(|l| l.bufs.first())
                .and_then(|s| m.dtype_of(*s));
            let bits = bits(dst, *value);
            (
                MChange::Params {
                    index: *index,
                    n: *n,
                    bits,
                },
                Change::Params {
                    index: *index,
                    params: params(*n, bits),
                },
            )
        }
        ChangeSel::Launch {
            index: i,
            op,
            bufs: sels,
            n,
            value,
        } => {
            let index = &index(i);
            let (ml, oc) = launch(m, bufs, *op, sels, *n, *value);
            (
                MChange::Launch {
                    index: *index,
                    launch: ml,
                },
                Change::Launch {
                    index: *index,
                    call: oc,
                },
            )
        }
    }
}

fn buf(bufs: &[BufferId], s: BufSel) -> (Slot, BufferId) {
    match s {
        BufSel::Nth(i) if !bufs.is_empty() => {
            let k = i % bufs.len();
            (k, bufs[k])
        }
        _ => (BOGUS, BOGUS_BUFFER),
    }
}

fn graph(graphs: &[GraphId], s: GraphSel) -> (Slot, GraphId) {
    match s {
        GraphSel::Nth(i) if !graphs.is_empty() => {
            let k = i % graphs.len();
            (k, graphs[k])
        }
        _ => (BOGUS, BOGUS_GRAPH),
    }
}

fn target(graphs: &[GraphId], t: TargetSel) -> (MTarget, GraphRef) {
    match t {
        TargetSel::Current => (MTarget::Current, GraphRef::Current),
        TargetSel::Handle(g) => {
            let (s, id) = graph(graphs, g);
            (MTarget::Handle(s), GraphRef::Handle(id))
        }
    }
}

impl Run {
    fn step(&mut self, s: &Step) -> Result<(), String> {
        let call = s.call();
        let Run {
            dev: d,
            model: m,
            bufs,
            graphs,
            coverage: cov,
            ..
        } = self;
        match s {
            Step::Alloc { dtype, len } => {
                let len = len.unwrap_or(seam::validate::MAX_ELEMENTS as usize + 1);
                if let Some((slot, id)) =
                    agree(call, m.alloc(*dtype, len), d.alloc(*dtype, len), cov)?
                {
                    debug_assert_eq!(slot, bufs.len());
                    bufs.push(id);
                }
            }
            Step::Free(b) => {
                let (slot, id) = buf(bufs, *b);
                agree(call, m.free(slot), d.free(id), cov)?;
            }
            Step::Release(b) => {
                let (slot, id) = buf(bufs, *b);
                m.release_buffer(slot);
                d.low_level().release_buffer(id);
            }
            Step::Write {
                buf: b,
                host,
                offset,
                data,
            } => {
                let (slot, id) = buf(bufs, *b);
                let bits: Vec<u32> = data.iter().map(|v| encode(*host, *v)).collect();
                agree(
                    call,
                    m.write(slot, *host, *offset, &bits),
                    dev_write(d, id, *host, *offset, &bits),
                    cov,
                )?;
            }
            Step::Read {
                buf: b,
                host,
                range,
            } => {
                let (slot, id) = buf(bufs, *b);
                if let Some((mv, dv)) = agree(
                    call,
                    m.read(slot, *host, *range),
                    dev_read(d, id, *host, *range),
                    cov,
                )? {
                    same_contents(&format!("read of buffer slot {slot}"), &mv, &dv)?;
                }
            }
            Step::Launch {
                op,
                bufs: sels,
                n,
                value,
                thread,
            } => {
                let (ml, oc) = launch(m, bufs, *op, sels, *n, *value);
                let dev: &Device = d;
                agree(
                    call,
                    m.launch(&ml, *thread),
                    on(*thread, || dev.launch(&oc)),
                    cov,
                )?;
            }
            Step::Synchronize => {
                agree(call, m.synchronize(), d.synchronize(), cov)?;
            }
            Step::BeginCapture => {
                agree(
                    call,
                    m.begin_capture(Thread::Main),
                    d.low_level().begin_capture(),
                    cov,
                )?;
            }
            Step::EndCapture(t) => {
                let dev: &Device = d;
                agree(
                    call,
                    m.end_capture(*t),
                    on(*t, || dev.low_level().end_capture_into_current()),
                    cov,
                )?;
            }
            Step::EndCaptureGraph(t) => {
                let dev: &Device = d;
                let mut id = None;
                let dr = on(*t, || {
                    id = Some(dev.low_level().end_capture_graph()?);
                    Ok(())
                })
                .map(|()| id.expect("set on Ok"));
                if let Some((slot, id)) = agree(call, m.end_capture_graph(*t), dr, cov)? {
                    debug_assert_eq!(slot, graphs.len());
                    graphs.push(id);
                }
            }
            Step::AbortCapture(t) => {
                let dev: &Device = d;
                agree(
                    call,
                    m.abort_capture(*t),
                    on(*t, || dev.low_level().abort_capture()),
                    cov,
                )?;
            }
            Step::Replay(t) => {
                let (mt, dt) = target(graphs, *t);
                agree(call, m.replay(mt), d.replay(dt), cov)?;
            }
            Step::ReplayCount(t) => {
                let (mt, dt) = target(graphs, *t);
                if let Some((a, b)) = agree(call, m.replay_count(mt), d.replay_count(dt), cov)? {
                    if a != b {
                        return Err(format!("replay_count: model {a}, device {b}"));
                    }
                }
            }
            Step::Destroy(g) => {
                let (slot, id) = graph(graphs, *g);
                agree(call, m.destroy_graph(slot), d.destroy_graph(id), cov)?;
            }
            Step::ReleaseGraph(g) => {
                let (slot, id) = graph(graphs, *g);
                m.release_graph(slot);
                d.low_level().release_graph(id);
            }
            Step::BeginIf {
                cond,
                offset,
                thread,
            } => {
                let (slot, id) = buf(bufs, *cond);
                let dev: &Device = d;
                agree(
                    call,
                    m.begin_body(*thread, MKind::If, slot, *offset),
                    on(*thread, || dev.low_level().begin_if(id.view(*offset, 1))),
                    cov,
                )?;
            }
            Step::BeginWhile {
                cond,
                offset,
                max,
                thread,
            } => {
                let (slot, id) = buf(bufs, *cond);
                let dev: &Device = d;
                agree(
                    call,
                    m.begin_body(*thread, MKind::While(*max), slot, *offset),
                    on(*thread, || {
                        dev.low_level().begin_while(id.view(*offset, 1), *max)
                    }),
                    cov,
                )?;
            }
            Step::EndBody(t) => {
                let dev: &Device = d;
                agree(
                    call,
                    m.end_body(*t),
                    on(*t, || dev.low_level().end_body()),
                    cov,
                )?;
            }
            Step::Update(t, sels) => {
                let (mt, dt) = target(graphs, *t);
                let (mc, dc): (Vec<MChange>, Vec<Change>) =
                    sels.iter().map(|c| change(m, bufs, mt, c)).unzip();
                agree(call, m.update(mt, &mc), d.update(dt, &dc), cov)?;
            }
        }
        self.check_live()
    }

    /// Core's tables and the backend's live counts both match the model.
    fn check_live(&self) -> Result<(), String> {
        let m = self.model.live();
        let l = self.dev.live();
        let backend = ResourceCounts {
            buffers: m.buffers,
            graphs: m.graphs + usize::from(m.current_graph),
            // The model does not size buffers.
            bytes: l.backend.bytes,
        };
        if l.buffers != m.buffers
            || l.graphs != m.graphs
            || l.current_graph != m.current_graph
            || l.capturing != m.capturing
            || l.backend != backend
        {
            return Err(format!(
                "live(): device {l:?}, model {m:?} (backend should hold {backend:?})"
            ));
        }
        Ok(())
    }

    /// Compare every live buffer, then drop every handle and the device: only
    /// what the current exec still reads may stay, and nothing after the drop.
    fn finish(mut self) -> Result<Coverage, String> {
        if self.model.capturing() {
            let (m, d) = (&mut self.model, &self.dev);
            agree(
                "abort_capture",
                m.abort_capture(Thread::Main),
                d.low_level().abort_capture(),
                &mut self.coverage,
            )?;
        }
        for (slot, &id) in self.bufs.iter().enumerate() {
            if let Some((dtype, data)) = self.model.contents(slot) {
                let got = dev_read(&self.dev, id, dtype, None)
                    .map_err(|e| format!("final read of buffer slot {slot}: {e}"))?;
                same_contents(&format!("final contents of buffer slot {slot}"), data, &got)?;
            }
        }
        for (slot, &id) in self.graphs.iter().enumerate() {
            self.model.release_graph(slot);
            self.dev.low_level().release_graph(id);
        }
        for (slot, &id) in self.bufs.iter().enumerate() {
            self.model.release_buffer(slot);
            self.dev.low_level().release_buffer(id);
        }
        self.check_live()
            .map_err(|e| format!("after dropping every handle: {e}"))?;
        let m = self.model.live();
        if m.graphs != 0 || m.capturing {
            return Err(format!("model keeps {m:?} after dropping every handle"));
        }
        let current = usize::from(m.current_graph);
        let Run {
            dev,
            plan,
            coverage,
            ..
        } = self;
        drop(dev);
        let want = ResourceCounts {
            buffers: 0,
            graphs: current,
            bytes: 0,
        };
        match plan.live_at_drop() {
            Some(got) if got == want => {}
            got => {
                return Err(format!(
                "after dropping the device the backend holds {got:?}, expected {want:?} (only the current exec, freed with the backend)"
            ))
            }
        }
        Ok(coverage)
    }
}

/// Run one sequence on a fresh device from `open`; the first disagreement, if any.
pub fn run_sequence(open: &Opener, steps: &[Step]) -> Result<Coverage, String> {
    let plan = FaultPlan::new();
    let inner = open().map_err(|e| format!("opening the device: {e}"))?;
    let dev = Device::new(Box::new(FaultyBackend::new(inner, Faults(plan.clone()))));
    let mut run = Run {
        model: Model::new(
            dev.capture_support().is_supported(),
            !matches!(
                dev.conditional_support(),
                seam::ConditionalSupport::Unsupported(_)
            ),
        ),
        dev,
        plan,
        bufs: Vec::new(),
        graphs: Vec::new(),
        coverage: Coverage::new(),
    };
    for (i, s) in steps.iter().enumerate() {
        run.step(s).map_err(|e| format!("step {i} ({s:?}): {e}"))?;
    }
    run.finish()
}

/// How a property run is configured.
#[derive(Clone, Debug)]
pub struct PropConfig {
    pub cases: u32,
    pub max_len: usize,
    /// How every sequence opens.
    pub opening: steps::Opening,
    /// A fixed RNG seed (reproducible); `None` draws one (PROPTEST_RNG_SEED still applies).
    pub seed: Option<u64>,
}

/// What a passing property run did.
#[derive(Clone, Debug)]
pub struct PropReport {
    pub cases: u32,
    pub seed: u64,
    pub steps: u64,
    pub elapsed: Duration,
    pub coverage: Coverage,
}

/// Run `cfg.cases` random sequences against the model on devices from `open`.
/// On a disagreement, returns proptest's shrunk (minimal) sequence and why.
pub fn check_against_model(open: &Opener, cfg: &PropConfig) -> Result<PropReport, String> {
    let mut config = Config {
        cases: cfg.cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    // Always a fixed seed, so a failure prints how to reproduce it.
    let seed = cfg
        .seed
        .or_else(|| std::env::var("PROPTEST_RNG_SEED").ok()?.parse().ok())
        .unwrap_or_else(fresh_seed);
    config.rng_seed = RngSeed::Fixed(seed);
    let mut runner = TestRunner::new(config);
    let totals = Mutex::new((0u64, Coverage::new()));
    let start = Instant::now();
    let result = runner.run(&steps::sequence(cfg.max_len, cfg.opening), |seq| {
        let cov = run_sequence(open, &seq).map_err(TestCaseError::fail)?;
        let mut t = totals.lock().unwrap_or_else(|p| p.into_inner());
        t.0 += seq.len() as u64;
        for (k, v) in cov {
            *t.1.entry(k).or_default() += v;
        }
        Ok(())
    });
    let elapsed = start.elapsed();
    match result {
        Ok(()) => {
            let (steps, coverage) = totals.into_inner().unwrap_or_else(|p| p.into_inner());
            Ok(PropReport {
                cases: cfg.cases,
                seed,
                steps,
                elapsed,
                coverage,
            })
        }
        Err(TestError::Fail(why, seq)) => {
            let mut s = format!(
                "minimal failing sequence ({} steps; reproduce with PROPTEST_RNG_SEED={seed}):\n",
                seq.len()
            );
            for (i, st) in seq.iter().enumerate() {
                s.push_str(&format!("  {i:2}: {st:?}\n"));
            }
            s.push_str(&format!("fails with: {why}"));
            Err(s)
        }
        Err(TestError::Abort(why)) => Err(format!("PROPTEST_RNG_SEED={seed}: aborted: {why}")),
    }
}

/// A seed that differs between runs and between tests started together.
fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}
