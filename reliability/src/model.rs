//! A reference model of the seam's observable semantics, written from the
//! contract and `Device`'s documented behaviour, independently of core's code:
//! buffers (dtype, length, contents), the open capture, graphs with their
//! recorded ops and replay counts, the current exec, and deferred frees and
//! destroys. The property test runs the same calls on this model and on a real
//! `Device` and demands the same answers.
//!
//! Handles are *slots*: the n-th buffer (graph) ever handed out is slot n, so a
//! sequence can name a buffer long after it was freed. Contents are `Option`:
//! a fresh allocation's contents are unspecified (C12 leaves them open), and
//! whatever is computed from them stays unspecified, so reads compare only the
//! elements the model knows.

use seam::{DType, ErrorKind, OpKind};
use std::collections::{BTreeMap, BTreeSet};

/// A handle slot (index of the buffer or graph among those handed out).
pub type Slot = usize;

/// A slot no handle ever has: stands for an unknown id.
pub const BOGUS: Slot = usize::MAX;

/// One op the model executes (only the u32-friendly elementwise ops).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MLaunch {
    pub op: OpKind,
    pub bufs: Vec<Slot>,
    pub n: u32,
    pub bits: u32,
}

/// A conditional body's kind (C14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MKind {
    If,
    While(u32),
}

/// One step of a captured program, in capture order: a launch (its index
/// among the graph's launches), a body's opening with its condition (a u32
/// buffer and element), a body's end.
#[derive(Clone, Debug, PartialEq, Eq)]
enum MStep {
    Launch(usize),
    Begin(MKind, Slot, usize),
    End,
}

/// One change of a graph update (C13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MChange {
    /// Every launch that binds the first buffer binds the second.
    Rebind(Slot, Slot),
    /// Launch `index`'s element count and value, over its recorded buffers.
    Params { index: usize, n: u32, bits: u32 },
    /// Launch `index` replaced by `launch` (the same op, any buffers).
    Launch { index: usize, launch: MLaunch },
}

/// Whose thread a call comes from: the capture belongs to the one that began it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Thread {
    Main,
    Other,
}

/// Which exec a replay targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MTarget {
    Current,
    Handle(Slot),
}

#[derive(Clone, Debug)]
struct MBuf {
    dtype: DType,
    data: Vec<Option<u32>>,
    /// Released by its owner; freed once nothing uses it and no capture is open.
    released: bool,
}

#[derive(Clone, Debug, Default)]
struct MExec {
    ops: Vec<MLaunch>,
    /// The launches and conditional bodies in capture order.
    prog: Vec<MStep>,
    /// Bodies open (while capturing).
    open: usize,
    uses: BTreeSet<Slot>,
    replays: u64,
    released: bool,
}

/// What `Device::live()` should say (backend counts are derived from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MLive {
    pub buffers: usize,
    pub graphs: usize,
    pub current_graph: bool,
    pub capturing: bool,
}

/// The reference model.
#[derive(Clone, Debug)]
pub struct Model {
    capture_supported: bool,
    conditional_supported: bool,
    bufs: BTreeMap<Slot, MBuf>,
    buf_slots: usize,
    graphs: BTreeMap<Slot, MExec>,
    graph_slots: usize,
    current: Option<MExec>,
    capture: Option<(Thread, MExec)>,
}

type R<T> = Result<T, ErrorKind>;

const MAX_ELEMENTS: usize = u32::MAX as usize;

/// The signature the model knows for each op: (binding names, accepted dtypes).
fn signature(op: OpKind) -> (&'static [&'static str], &'static [DType]) {
    use DType::*;
    match op {
        OpKind::Fill => (&["dst"], &[F32, F16, Bf16, I32, U32]),
        OpKind::Copy => (&["src", "dst"], &[F32, F16, Bf16, I32, U32]),
        OpKind::Add => (&["a", "b", "out"], &[F32, I32, U32]),
        other => unreachable!("the model does not implement {other}"),
    }
}

impl Model {
    pub fn new(capture_supported: bool, conditional_supported: bool) -> Model {
        Model {
            capture_supported,
            conditional_supported,
            bufs: BTreeMap::new(),
            buf_slots: 0,
            graphs: BTreeMap::new(),
            graph_slots: 0,
            current: None,
            capture: None,
        }
    }

    pub fn buffer_slots(&self) -> usize {
        self.buf_slots
    }

    pub fn graph_slots(&self) -> usize {
        self.graph_slots
    }

    /// Element type of a buffer the table still holds.
    pub fn dtype_of(&self, slot: Slot) -> Option<DType> {
        self.bufs.get(&slot).map(|b| b.dtype)
    }

    /// Contents the model knows of a buffer its owner still holds.
    pub fn contents(&self, slot: Slot) -> Option<(DType, &[Option<u32>])> {
        self.bufs
            .get(&slot)
            .filter(|b| !b.released)
            .map(|b| (b.dtype, b.data.as_slice()))
    }

    pub fn capturing(&self) -> bool {
        self.capture.is_some()
    }

    pub fn live(&self) -> MLive {
        MLive {
            buffers: self.bufs.len(),
            graphs: self.graphs.len(),
            current_graph: self.current.is_some(),
            capturing: self.capture.is_some(),
        }
    }

    fn users(&self, slot: Slot) -> bool {
        self.graphs.values().any(|g| g.uses.contains(&slot))
            || self
                .current
                .as_ref()
                .is_some_and(|c| c.uses.contains(&slot))
            || self
                .capture
                .as_ref()
                .is_some_and(|(_, c)| c.uses.contains(&slot))
    }

    /// Deferred destroys and frees that have become legal.
    fn sweep(&mut self) {
        if self.capture.is_some() {
            return;
        }
        self.graphs.retain(|_, g| !g.released);
        let gone: Vec<Slot> = self
            .bufs
            .iter()
            .filter(|(s, b)| b.released && !self.users(**s))
            .map(|(s, _)| *s)
            .collect();
        for s in gone {
            self.bufs.remove(&s);
        }
    }

    // ----- memory -----

    pub fn alloc(&mut self, dtype: DType, len: usize) -> R<Slot> {
        if self.capture.is_some() {
            return Err(ErrorKind::AllocInCapture);
        }
        if len == 0 {
            return Err(ErrorKind::ZeroSize { what: "allocation" });
        }
        if len > MAX_ELEMENTS {
            return Err(ErrorKind::TooLarge {
                what: "allocation",
                detail: String::new(),
            });
        }
        let slot = self.buf_slots;
        self.buf_slots += 1;
        self.bufs.insert(
            slot,
            MBuf {
                dtype,
                data: vec![None; len],
                released: false,
            },
        );
        Ok(slot)
    }

    pub fn free(&mut self, slot: Slot) -> R<()> {
        if self.capture.is_some() {
            return Err(ErrorKind::FreeInCapture);
        }
        if !self.bufs.contains_key(&slot) {
            return Err(ErrorKind::UnknownBuffer { id: slot as u64 });
        }
        if self.users(slot) {
            return Err(ErrorKind::BufferInUse {
                id: slot as u64,
                users: Vec::new(),
            });
        }
        self.bufs.remove(&slot);
        Ok(())
    }

    /// What an owned `Buffer` does on drop: free now or as soon as legal.
    pub fn release_buffer(&mut self, slot: Slot) {
        if let Some(b) = self.bufs.get_mut(&slot) {
            b.released = true;
        }
        self.sweep();
    }

    fn host_check(
        &self,
        slot: Slot,
        host: DType,
        offset: usize,
        count: usize,
        what: &'static str,
    ) -> R<()> {
        if self.capture.is_some() {
            return Err(ErrorKind::HostAccessInCapture { what });
        }
        let b = self
            .bufs
            .get(&slot)
            .filter(|b| !b.released)
            .ok_or(ErrorKind::UnknownBuffer { id: slot as u64 })?;
        if b.dtype != host {
            return Err(ErrorKind::HostDtypeMismatch {
                what,
                expected: b.dtype,
                found: host,
            });
        }
        if count == 0 {
            return Err(ErrorKind::ZeroSize { what });
        }
        if offset
            .checked_add(count)
            .is_none_or(|end| end > b.data.len())
        {
            return Err(ErrorKind::HostRange {
                what,
                offset,
                count,
                len: b.data.len(),
            });
        }
        Ok(())
    }

    /// `data` holds element bit patterns of `host`.
    pub fn write(&mut self, slot: Slot, host: DType, offset: usize, data: &[u32]) -> R<()> {
        self.host_check(slot, host, offset, data.len(), "write")?;
        let b = self.bufs.get_mut(&slot).expect("checked");
        for (i, v) in data.iter().enumerate() {
            b.data[offset + i] = Some(*v);
        }
        Ok(())
    }

    /// `range: None` reads the whole buffer (`Device::read`), else `read_range`.
    pub fn read(
        &self,
        slot: Slot,
        host: DType,
        range: Option<(usize, usize)>,
    ) -> R<Vec<Option<u32>>> {
        let (offset, count) = match range {
            Some(r) => r,
            // `read` looks the length up first, through the whole table.
            None => {
                let b = self
                    .bufs
                    .get(&slot)
                    .ok_or(ErrorKind::UnknownBuffer { id: slot as u64 })?;
                (0, b.data.len())
            }
        };
        self.host_check(slot, host, offset, count, "read")?;
        Ok(self.bufs[&slot].data[offset..offset + count].to_vec())
    }

    // ----- work -----

    fn validate(&self, l: &MLaunch) -> R<()> {
        self.validate_keeping(l, &[])
    }

    /// [`Self::validate`] for a launch of a graph update: a buffer of `kept`
    /// (what the launch bound before) may be one its owner released, which
    /// the graph still holds.
    fn validate_keeping(&self, l: &MLaunch, kept: &[Slot]) -> R<()> {
        let op = l.op;
        let (names, dtypes) = signature(op);
        if l.bufs.len() != names.len() {
            return Err(ErrorKind::ArityMismatch {
                op,
                expected: names.len(),
                found: l.bufs.len(),
            });
        }
        let mut metas = Vec::new();
        for &s in &l.bufs {
            let b = self
                .bufs
                .get(&s)
                .filter(|b| !b.released || kept.contains(&s))
                .ok_or(ErrorKind::UnknownBuffer { id: s as u64 })?;
            metas.push((b.dtype, b.data.len()));
        }
        let dtype = metas[0].0;
        if !dtypes.contains(&dtype) {
            return Err(ErrorKind::UnsupportedDtype { op, dtype });
        }
        for (name, (d, _)) in names.iter().zip(&metas) {
            if *d != dtype {
                return Err(ErrorKind::DtypeMismatch {
                    op,
                    binding: name,
                    expected: dtype,
                    found: *d,
                });
            }
        }
        if l.n == 0 {
            return Err(ErrorKind::ZeroSize { what: "n" });
        }
        for (name, (_, len)) in names.iter().zip(&metas) {
            if l.n as usize > *len {
                return Err(ErrorKind::OutOfRange {
                    op,
                    binding: name,
                    needed: l.n as u64,
                    len: *len as u64,
                });
            }
        }
        if op == OpKind::Fill && dtype.size() == 2 && l.bits > 0xFFFF {
            return Err(ErrorKind::InvalidParam {
                op,
                name: "value_bits",
                reason: String::new(),
            });
        }
        Ok(())
    }

    /// Run one validated launch over the buffers' current contents.
    fn execute(&mut self, l: &MLaunch) {
        let n = l.n as usize;
        let get = |m: &Self, s: Slot| -> Vec<Option<u32>> { m.bufs[&s].data[..n].to_vec() };
        let (out_slot, out): (Slot, Vec<Option<u32>>) = match l.op {
            OpKind::Fill => (l.bufs[0], vec![Some(l.bits); n]),
            OpKind::Copy => (l.bufs[1], get(self, l.bufs[0])),
            OpKind::Add => {
                let dtype = self.bufs[&l.bufs[0]].dtype;
                let (a, b) = (get(self, l.bufs[0]), get(self, l.bufs[1]));
                let sum = a
                    .iter()
                    .zip(&b)
                    .map(|(x, y)| Some(add(dtype, (*x)?, (*y)?)))
                    .collect();
                (l.bufs[2], sum)
            }
            other => unreachable!("the model does not implement {other}"),
        };
        self.bufs.get_mut(&out_slot).expect("validated").data[..n].copy_from_slice(&out);
    }

    pub fn launch(&mut self, l: &MLaunch, thread: Thread) -> R<()> {
        if let Some((owner, _)) = &self.capture {
            if *owner != thread {
                return Err(ErrorKind::CrossThreadCapture {
                    owner: String::new(),
                });
            }
        }
        self.validate(l)?;
        match &mut self.capture {
            Some((_, cap)) => {
                cap.uses.extend(l.bufs.iter().copied());
                cap.prog.push(MStep::Launch(cap.ops.len()));
                cap.ops.push(l.clone());
            }
            None => self.execute(l),
        }
        Ok(())
    }

    pub fn synchronize(&mut self) -> R<()> {
        if self.capture.is_some() {
            return Err(ErrorKind::HostAccessInCapture {
                what: "synchronize",
            });
        }
        Ok(())
    }

    // ----- capture -----

    pub fn begin_capture(&mut self, thread: Thread) -> R<()> {
        if !self.capture_supported {
            return Err(ErrorKind::CaptureUnsupported {
                reason: String::new(),
            });
        }
        if self.capture.is_some() {
            return Err(ErrorKind::NestedCapture);
        }
        self.capture = Some((thread, MExec::default()));
        Ok(())
    }

    /// The open capture, from its owner's thread.
    fn owned_capture(&mut self, thread: Thread) -> R<&mut MExec> {
        match &mut self.capture {
            None => Err(ErrorKind::NotCapturing),
            Some((owner, _)) if *owner != thread => Err(ErrorKind::CrossThreadCapture {
                owner: String::new(),
            }),
            Some((_, cap)) => Ok(cap),
        }
    }

    fn take_capture(&mut self, thread: Thread) -> R<MExec> {
        self.owned_capture(thread)?;
        Ok(self.capture.take().expect("checked").1)
    }

    /// An end of the capture: refused, the capture left open, while a body is.
    fn take_closed_capture(&mut self, thread: Thread) -> R<MExec> {
        let open = self.owned_capture(thread)?.open;
        if open > 0 {
            return Err(ErrorKind::UnclosedConditional { open });
        }
        self.take_capture(thread)
    }

    /// A condition (C14): a live u32 buffer holding element `offset`.
    fn check_condition(&self, cond: Slot, offset: usize) -> R<()> {
        let b = self
            .bufs
            .get(&cond)
            .filter(|b| !b.released)
            .ok_or(ErrorKind::UnknownBuffer { id: cond as u64 })?;
        if b.dtype != DType::U32 {
            return Err(ErrorKind::ConditionDType {
                id: cond as u64,
                found: b.dtype,
            });
        }
        if offset >= b.data.len() {
            return Err(ErrorKind::ConditionOutOfRange {
                id: cond as u64,
                offset,
                len: b.data.len(),
            });
        }
        Ok(())
    }

    /// Open a conditional body in the capture (C14).
    pub fn begin_body(&mut self, thread: Thread, kind: MKind, cond: Slot, offset: usize) -> R<()> {
        self.owned_capture(thread)?;
        if kind == MKind::While(0) {
            return Err(ErrorKind::ZeroIterations);
        }
        if !self.conditional_supported {
            return Err(ErrorKind::ConditionalUnsupported {
                reason: String::new(),
            });
        }
        self.check_condition(cond, offset)?;
        let cap = self.owned_capture(thread)?;
        cap.uses.insert(cond);
        cap.prog.push(MStep::Begin(kind, cond, offset));
        cap.open += 1;
        Ok(())
    }

    /// Close the innermost open body.
    pub fn end_body(&mut self, thread: Thread) -> R<()> {
        let cap = self.owned_capture(thread)?;
        if cap.open == 0 {
            return Err(ErrorKind::NoOpenConditional);
        }
        cap.prog.push(MStep::End);
        cap.open -= 1;
        Ok(())
    }

    pub fn end_capture(&mut self, thread: Thread) -> R<()> {
        let cap = self.take_closed_capture(thread)?;
        self.current = Some(cap);
        self.sweep();
        Ok(())
    }

    pub fn end_capture_graph(&mut self, thread: Thread) -> R<Slot> {
        let cap = self.take_closed_capture(thread)?;
        let slot = self.graph_slots;
        self.graph_slots += 1;
        self.graphs.insert(slot, cap);
        self.sweep();
        Ok(slot)
    }

    pub fn abort_capture(&mut self, thread: Thread) -> R<()> {
        self.take_capture(thread)?;
        self.sweep();
        Ok(())
    }

    pub fn replay(&mut self, target: MTarget) -> R<()> {
        if self.capture.is_some() {
            return Err(ErrorKind::ReplayInCapture);
        }
        let exec = match target {
            MTarget::Current => self.current.as_mut().ok_or(ErrorKind::NoCurrentGraph)?,
            MTarget::Handle(s) => self
                .graphs
                .get_mut(&s)
                .ok_or(ErrorKind::UnknownGraph { id: s as u64 })?,
        };
        exec.replays += 1;
        // C1: every replay re-runs the recorded program over the current contents.
        let (ops, prog) = (exec.ops.clone(), exec.prog.clone());
        self.run(&ops, &prog);
        Ok(())
    }

    /// Run a program (C14: a body's condition read when the replay reaches
    /// it, before each iteration of a WHILE, at most its bound of times).
    /// Where a condition is not known (never written), what the body writes
    /// is not known either.
    fn run(&mut self, ops: &[MLaunch], prog: &[MStep]) {
        let mut i = 0;
        while i < prog.len() {
            match &prog[i] {
                MStep::Launch(k) => {
                    self.execute(&ops[*k]);
                    i += 1;
                }
                MStep::End => unreachable!("a body's end is consumed with its body"),
                MStep::Begin(kind, cond, offset) => {
                    let end = i + body_len(&prog[i..]);
                    let body = &prog[i + 1..end];
                    let bound = match kind {
                        MKind::If => 1,
                        MKind::While(max) => *max,
                    };
                    for _ in 0..bound {
                        match self.bufs[cond].data[*offset] {
                            Some(0) => break,
                            Some(_) => self.run(ops, body),
                            None => {
                                self.forget(ops, body);
                                break;
                            }
                        }
                    }
                    i = end + 1;
                }
            }
        }
    }

    /// What the launches of `prog` write becomes unknown.
    fn forget(&mut self, ops: &[MLaunch], prog: &[MStep]) {
        for step in prog {
            if let MStep::Launch(k) = step {
                let l = &ops[*k];
                let out = match l.op {
                    OpKind::Fill => l.bufs[0],
                    OpKind::Copy => l.bufs[1],
                    _ => l.bufs[2],
                };
                let n = l.n as usize;
                if let Some(b) = self.bufs.get_mut(&out) {
                    b.data[..n].fill(None);
                }
            }
        }
    }

    fn exec(&self, target: MTarget) -> R<&MExec> {
        match target {
            MTarget::Current => self.current.as_ref().ok_or(ErrorKind::NoCurrentGraph),
            MTarget::Handle(s) => self
                .graphs
                .get(&s)
                .ok_or(ErrorKind::UnknownGraph { id: s as u64 }),
        }
    }

    /// How many launches a graph holds, and the buffers they bind (none for
    /// a graph the target does not name).
    pub fn graph_shape(&self, target: MTarget) -> (usize, Vec<Slot>) {
        self.exec(target)
            .map(|e| (e.ops.len(), e.uses.iter().copied().collect()))
            .unwrap_or_default()
    }

    /// The launch a graph recorded at `index`, if it has one.
    pub fn recorded(&self, target: MTarget, index: usize) -> Option<&MLaunch> {
        self.exec(target).ok()?.ops.get(index)
    }

    /// One graph update (C13), all or nothing. Checked in this order, the
    /// first failure refusing the whole update: no capture open; the graph;
    /// each rebind (its old buffer named once, used by the graph; its new
    /// one live, of the old one's element type); each `Params` index; no
    /// launch changed twice; each `Launch` index; then every launch that
    /// changes, in capture order, as a launch is validated (the same op and
    /// element type as recorded; a buffer it bound before may be one its
    /// owner released). Applied: the changes, then the rebinds over every
    /// launch; the graph holds what its launches bind, and released buffers
    /// it no longer binds are freed.
    pub fn update(&mut self, target: MTarget, changes: &[MChange]) -> R<()> {
        if self.capture.is_some() {
            return Err(ErrorKind::UpdateInCapture);
        }
        let exec = self.exec(target)?;
        let pairs: Vec<(Slot, Slot)> = changes
            .iter()
            .filter_map(|c| match c {
                MChange::Rebind(old, new) => Some((*old, *new)),
                _ => None,
            })
            .collect();
        for (i, &(old, new)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(o, _)| *o == old) {
                return Err(ErrorKind::InvalidUpdate {
                    reason: String::new(),
                });
            }
            if !exec.uses.contains(&old) {
                return Err(ErrorKind::NotUsedByGraph { id: old as u64 });
            }
            let n = self
                .bufs
                .get(&new)
                .filter(|b| !b.released)
                .ok_or(ErrorKind::UnknownBuffer { id: new as u64 })?;
            if n.dtype != self.bufs[&old].dtype {
                return Err(ErrorKind::RebindMismatch {
                    old: old as u64,
                    new: new as u64,
                    reason: String::new(),
                });
            }
        }
        let len = exec.ops.len();
        let mut changed: BTreeMap<usize, MLaunch> = BTreeMap::new();
        let mut twice = false;
        for c in changes {
            let (index, l) = match c {
                MChange::Rebind(..) => continue,
                MChange::Params { index, n, bits } => {
                    let was = exec.ops.get(*index).ok_or(ErrorKind::NoSuchLaunch {
                        index: *index,
                        launches: len,
                    })?;
                    let l = MLaunch {
                        n: *n,
                        bits: *bits,
                        ..was.clone()
                    };
                    (*index, l)
                }
                MChange::Launch { index, launch } => (*index, launch.clone()),
            };
            twice |= changed.insert(index, l).is_some();
        }
        if twice {
            return Err(ErrorKind::InvalidUpdate {
                reason: String::new(),
            });
        }
        if let Some(&index) = changed.keys().find(|&&i| i >= len) {
            return Err(ErrorKind::NoSuchLaunch {
                index,
                launches: len,
            });
        }
        let swap = |s: Slot| pairs.iter().find(|(o, _)| *o == s).map_or(s, |(_, n)| *n);
        // Conditions move with their buffers, checked as when captured.
        let mut prog = exec.prog.clone();
        for step in prog.iter_mut() {
            if let MStep::Begin(_, cond, offset) = step {
                let to = swap(*cond);
                if to != *cond {
                    self.check_condition(to, *offset)?;
                    *cond = to;
                }
            }
        }
        let mut ops = exec.ops.clone();
        for (i, was) in exec.ops.iter().enumerate() {
            let mut l = changed.get(&i).cloned().unwrap_or_else(|| was.clone());
            l.bufs.iter_mut().for_each(|b| *b = swap(*b));
            if l == *was {
                continue;
            }
            if l.op != was.op {
                return Err(ErrorKind::UpdateChangesOp {
                    index: i,
                    recorded: was.op,
                    requested: l.op,
                });
            }
            self.validate_keeping(&l, &was.bufs)?;
            let dtype = |l: &MLaunch| self.bufs[&l.bufs[0]].dtype;
            if dtype(&l) != dtype(was) {
                return Err(ErrorKind::UpdateChangesDtype {
                    index: i,
                    recorded: dtype(was),
                    requested: dtype(&l),
                });
            }
            ops[i] = l;
        }
        let exec = match target {
            MTarget::Current => self.current.as_mut().expect("checked"),
            MTarget::Handle(s) => self.graphs.get_mut(&s).expect("checked"),
        };
        exec.uses = (ops.iter().flat_map(|l| l.bufs.iter().copied()))
            .chain(prog.iter().filter_map(|s| match s {
                MStep::Begin(_, cond, _) => Some(*cond),
                _ => None,
            }))
            .collect();
        exec.ops = ops;
        exec.prog = prog;
        self.sweep();
        Ok(())
    }

    pub fn replay_count(&self, target: MTarget) -> R<u64> {
        match target {
            MTarget::Current => self
                .current
                .as_ref()
                .map(|e| e.replays)
                .ok_or(ErrorKind::NoCurrentGraph),
            MTarget::Handle(s) => self
                .graphs
                .get(&s)
                .map(|e| e.replays)
                .ok_or(ErrorKind::UnknownGraph { id: s as u64 }),
        }
    }

    pub fn destroy_graph(&mut self, slot: Slot) -> R<()> {
        if self.capture.is_some() {
            return Err(ErrorKind::DestroyInCapture);
        }
        self.graphs
            .remove(&slot)
            .ok_or(ErrorKind::UnknownGraph { id: slot as u64 })?;
        self.sweep();
        Ok(())
    }

    /// What an owned `Graph` does on drop.
    pub fn release_graph(&mut self, slot: Slot) {
        if let Some(g) = self.graphs.get_mut(&slot) {
            g.released = true;
        }
        self.sweep();
    }
}

/// Elementwise add of two bit patterns of `dtype` (wrapping for integers).
fn add(dtype: DType, a: u32, b: u32) -> u32 {
    match dtype {
        DType::F32 => (f32::from_bits(a) + f32::from_bits(b)).to_bits(),
        DType::U32 | DType::I32 => a.wrapping_add(b),
        other => unreachable!("add over {other} is refused by validation"),
    }
}

/// How many steps a body spans from its `Begin` (at `prog[0]`) to its
/// matching `End`, exclusive of the end.
fn body_len(prog: &[MStep]) -> usize {
    let mut depth = 0usize;
    for (i, s) in prog.iter().enumerate() {
        match s {
            MStep::Begin(..) => depth += 1,
            MStep::End => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            MStep::Launch(_) => {}
        }
    }
    unreachable!("a captured program closes every body")
}
