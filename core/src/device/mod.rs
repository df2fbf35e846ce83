//! `Device`: the shared semantics, implemented once for every backend.
//!
//! It owns the capture state machine (C5, C6, C9), argument validation (C12),
//! replay counting and tracing (C10), and the bookkeeping that keeps a graph
//! from outliving the buffers it reads. Backends only ever see calls this
//! layer has already checked.
//!
//! - this file: the public API for work, accounting and tracing;
//! - `memory`: alloc, free, write, read;
//! - `capture`: begin/end/abort, replay, destroy;
//! - `conditional`: IF and WHILE bodies inside a capture (C14);
//! - `state`: the tables, the deferred-release sweep, teardown, the id space;
//! - `handles`: ids and the owned handles (`Buffer`, `Graph`, `CaptureScope`).

mod calls;
mod capture;
mod checked;
mod conditional;
mod handles;
mod memory;
mod state;
#[cfg(test)]
mod tests;
mod update;

pub use capture::LowLevel;
pub use handles::{Buffer, BufferId, CaptureScope, Graph, GraphId, GraphRef};
pub use update::Change;

use crate::backend::{Backend, CaptureSupport, DeviceInfo, NodeTiming, ResourceCounts, Subnormals};
use crate::dtype::{DType, Element};
use crate::error::{Error, ErrorKind, Result, Site};
use crate::ops::{OpCall, OpKind};
use crate::trace::{EventKind, TraceLog};
use state::State;
use std::sync::{Arc, Mutex, MutexGuard};

/// Live resources, as core and the backend each count them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    /// Buffers core holds (released ones not yet freed included).
    pub buffers: usize,
    /// Graph handles (not counting the current graph).
    pub graphs: usize,
    /// Whether the device holds a current graph ([`GraphRef::Current`]).
    pub current_graph: bool,
    /// Whether a capture is open.
    pub capturing: bool,
    /// Bytes of core's live buffers (elements × element size), released
    /// ones not yet freed included.
    pub bytes: u64,
    /// What the backend itself counts ([`Backend::live_resources`]).
    pub backend: ResourceCounts,
}

struct Inner {
    info: DeviceInfo,
    site: Arc<Site>,
    support: CaptureSupport,
    subnormals: Subnormals,
    state: Mutex<State>,
}

/// A device: a backend behind the shared semantics. Cheap to clone; all
/// clones are the same device. `Send + Sync`: calls from several threads are
/// serialised, and a capture belongs to the thread that began it.
///
/// Every call either does what it says or returns an [`Error`] naming the
/// backend, the device and the call; work is queued, so a launch or a
/// replay returns before it runs, and a read waits for it.
///
/// ```
/// # fn main() -> seam::Result<()> {
/// use seam::{ops, Device};
/// # let backend = Box::new(seam::testing::NullBackend::new(seam::CaptureSupport::Native));
/// // A device from discovery (`seam_backends::discover()`), or over any backend:
/// let dev = Device::new(backend);
/// let x = dev.buffer_from(&[1.0f32, 2.0, 3.0])?;
/// let y = dev.buffer::<f32>(3)?;
/// dev.launch(&ops::add(x.id(), x.id(), y.id(), 3))?; // queued
/// let scope = dev.capture()?;
/// dev.launch(&ops::copy(y.id(), x.id(), 3))?; // recorded, not run
/// let graph = scope.end_graph()?;
/// graph.replay()?;
/// dev.synchronize()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.inner.info.id())
            .finish()
    }
}

impl Device {
    /// A device over `backend`: the shared semantics (capture state machine,
    /// validation, counting, tracing) in front of it. Reads the backend's
    /// capture support and subnormal behaviour once.
    pub fn new(backend: Box<dyn Backend>) -> Device {
        let info = backend.info().clone();
        let support = backend.capture_support();
        let subnormals = backend.subnormals();
        let site = Arc::new(Site {
            backend: info.backend.clone(),
            device: info.id(),
            device_name: info.name.clone(),
        });
        let state = State::new(backend, info.id().into());
        let dev = Device {
            inner: Arc::new(Inner {
                site,
                info,
                support,
                subnormals,
                state: Mutex::new(state),
            }),
        };
        if std::env::var_os("SEAM_NODE_TIMING").is_some_and(|v| v == "1") {
            // Where the device cannot time nodes, its traces say why.
            let _ = dev.set_node_timing(true);
        }
        dev
    }

    /// Who the device is: backend, index, name, driver.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// `<backend>:<index>`.
    pub fn id(&self) -> String {
        self.inner.info.id()
    }

    /// How the device captures graphs (C9), as its backend reported when it
    /// opened. `capture_support().is_supported()` says whether
    /// [`Device::capture`] can succeed.
    pub fn capture_support(&self) -> &CaptureSupport {
        &self.inner.support
    }

    /// What the device guarantees for f32 subnormals (C11), as its backend
    /// reported when the device was opened.
    pub fn subnormals(&self) -> &Subnormals {
        &self.inner.subnormals
    }

    fn err(&self, call: &'static str, kind: ErrorKind) -> Error {
        Error {
            site: self.inner.site.clone(),
            call,
            kind,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A backend call that panics leaves the tables as they were before
        // it (every table update that depends on a backend call follows it;
        // the one that precedes one, taking the open capture in `end_*` and
        // `abort_capture`, is what a failed backend call leads to anyway), so
        // a poisoned lock is still safe to use.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` under the lock, attaching the call's context to any error.
    fn with<T>(
        &self,
        call: &'static str,
        f: impl FnOnce(&mut State) -> std::result::Result<T, ErrorKind>,
    ) -> Result<T> {
        let mut st = self.state();
        f(&mut st).map_err(|k| self.err(call, k))
    }

    // ----- work -----

    /// Validate and queue (or, while capturing, record) one op.
    pub fn launch(&self, call: &OpCall) -> Result<()> {
        let me = std::thread::current().id();
        self.with("launch", |st| {
            if let Some(cap) = &st.capture {
                if cap.thread != me {
                    return Err(ErrorKind::CrossThreadCapture {
                        owner: format!("{:?}", cap.thread),
                    });
                }
            }
            if let OpKind::User(k) = call.op {
                if !st.registered(k) {
                    return Err(ErrorKind::KernelNotRegistered { kernel: k.name() });
                }
            }
            let launch = st.lower(call)?;
            let before = st.checked_snapshot(call)?;
            let timed = st.trace.enabled() && st.capture.is_none();
            let tag = st.trace.next_seq();
            if timed {
                st.backend.begin_timed(tag)?;
            }
            st.launch_raw(&launch)?;
            if timed {
                st.backend.end_timed(tag)?;
            }
            let captured = if let Some(cap) = &mut st.capture {
                cap.uses.extend(call.buffers.iter().map(|v| v.buffer));
                cap.record.push(call.clone(), launch);
                true
            } else {
                false
            };
            st.trace.record(|| EventKind::Launch {
                op: call.op.name().into(),
                captured,
            });
            match before {
                Some(before) => st.check_writes(call, before),
                None => Ok(()),
            }
        })
    }

    /// Checked mode: hold every eager launch of a user kernel to the
    /// extents its definition declares ([`KernelDef::extents`](crate::kernel::KernelDef::extents)).
    /// The launch waits for the device; every element of the buffers it
    /// binds that it changed outside the declared range of a written
    /// binding (a neighbour in the same buffer, or past a buffer's end into
    /// a guard of 64 elements that buffers allocated while
    /// the mode is on carry) makes the launch fail with
    /// [`ErrorKind::WroteOutsideExtents`], naming the kernel, the binding
    /// and the element, and the buffers are put back as they were. For
    /// finding a kernel's bad declarations (the conformance suite runs with
    /// it on), not for production: each checked launch reads its buffers
    /// twice and waits.
    pub fn set_checked(&self, on: bool) {
        self.state().checked = on;
    }

    /// Wait for all queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.with("synchronize", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::HostAccessInCapture {
                    what: "synchronize",
                });
            }
            st.backend.synchronize()
        })
    }

    /// Materialise lazy resources for these ops, so capturing them allocates nothing (C7).
    pub fn prepare(&self, ops: &[(OpKind, DType)]) -> Result<()> {
        self.with("prepare", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::HostAccessInCapture { what: "prepare" });
            }
            for &(op, dtype) in ops {
                if let OpKind::User(k) = op {
                    if !st.registered(k) {
                        return Err(ErrorKind::KernelNotRegistered { kernel: k.name() });
                    }
                }
                if !op.dtypes().contains(&dtype) {
                    return Err(ErrorKind::UnsupportedDtype { op, dtype });
                }
            }
            st.backend.prepare(ops)
        })
    }

    /// Register a user kernel (`seam::kernel`) on this device: check its
    /// definition, then have the backend compile it (the module is cached
    /// for the device's life), so that it can be launched, captured and
    /// prepared like a catalogue op. Registering it again is a no-op. A
    /// malformed definition is [`ErrorKind::BadKernel`], a missing source
    /// [`ErrorKind::KernelSourceMissing`], a failed compile
    /// [`ErrorKind::KernelCompile`] with the compiler's log; none leaves the
    /// kernel registered.
    pub fn register_kernel(&self, def: &'static crate::kernel::KernelDef) -> Result<()> {
        let kernel = crate::kernel::Kernel::new(def);
        self.with("register_kernel", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::HostAccessInCapture {
                    what: "register_kernel",
                });
            }
            if st.registered(kernel) {
                return Ok(());
            }
            def.well_formed().map_err(|reason| ErrorKind::BadKernel {
                kernel: def.name,
                reason,
            })?;
            if st.kernels.iter().any(|(k, _)| k.name() == def.name) {
                return Err(ErrorKind::BadKernel {
                    kernel: def.name,
                    reason: "another kernel of that name is registered on this device".into(),
                });
            }
            // WGSL is checked here, on every device (a CPU-only machine
            // included), not only by the backends that compile it.
            let mut read_only = 0u8;
            if def.wgsl.is_some() {
                let m = crate::wgsl::compile(kernel)?;
                for (k, ro) in m.read_only.iter().enumerate() {
                    read_only |= u8::from(*ro) << k;
                }
            }
            let dtype = def.dtype().expect("well_formed: bindings have fixed types");
            st.backend.prepare(&[(OpKind::User(kernel), dtype)])?;
            st.kernels.push((kernel, read_only));
            Ok(())
        })
    }

    // ----- accounting and tracing -----

    /// Live resources as core and the backend each count them (for leak
    /// checks: equal before and after a piece of work that frees what it
    /// made).
    pub fn live(&self) -> Live {
        let st = self.state();
        Live {
            buffers: st.buffers.len(),
            graphs: st.graphs.len(),
            current_graph: st.current.is_some(),
            capturing: st.capture.is_some(),
            bytes: st
                .buffers
                .values()
                .map(|b| (b.meta.len * b.meta.dtype.size()) as u64)
                .sum(),
            backend: st.backend.live_resources(),
        }
    }

    /// Turn event recording on or off (off by default; C10). Where the
    /// backend can time the device, replays and eager launches also get
    /// device spans (see [`Device::take_trace_log`]).
    pub fn set_tracing(&self, on: bool) {
        let mut st = self.state();
        st.trace.set_enabled(on);
        if st.backend.device_timing().is_ok() {
            // A backend that fails to switch timing still records host events.
            let _ = st.backend.set_device_timing(on);
        }
    }

    /// How this device times the launches inside a replay (C10), as its
    /// backend reports it.
    pub fn node_timing(&self) -> NodeTiming {
        self.state().backend.node_timing()
    }

    /// Turn node timing on or off (off by default; `SEAM_NODE_TIMING=1`
    /// turns it on when the device opens). It applies to the graphs
    /// captured from now on: each traced replay of one of them gets a
    /// device span per launch (per piece where the device's node timing is
    /// coarse), inside the replay's span, named by the launch's op
    /// ([`TraceLog::node_spans`]). A graph keeps what it was captured
    /// with, through updates. Refused with `Unavailable`, and the reason,
    /// where the device cannot time nodes.
    pub fn set_node_timing(&self, on: bool) -> Result<()> {
        self.with("set_node_timing", |st| {
            if let NodeTiming::Unavailable(reason) = st.backend.node_timing() {
                if on {
                    return Err(ErrorKind::Unavailable { reason });
                }
                st.node_timing = false;
                return Ok(());
            }
            st.backend.set_node_timing(on)?;
            st.node_timing = on;
            Ok(())
        })
    }

    /// Take the host events and device spans recorded so far (the events
    /// are gone from the device afterwards), for inspection or export
    /// ([`crate::trace::chrome_trace`]). Waits for queued work so every
    /// finished span is included; refused inside a capture.
    pub fn take_trace_log(&self, label: &str) -> Result<TraceLog> {
        self.with("take_trace_log", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::HostAccessInCapture {
                    what: "take_trace_log",
                });
            }
            let timing = st.backend.device_timing();
            let (node_spans, device_spans) = if timing.is_ok() {
                st.backend.take_device_spans()?
            } else {
                Vec::new()
            }
            .into_iter()
            .partition(|s| s.nodes.is_some());
            let node_timing_unavailable = match (&timing, st.backend.node_timing()) {
                (Err(why), _) => Some(why.clone()),
                (Ok(()), NodeTiming::Unavailable(why)) => Some(why),
                (Ok(()), _) => None,
            };
            Ok(TraceLog {
                device: self.inner.info.id(),
                device_name: self.inner.info.name.clone(),
                label: label.to_string(),
                events: st.trace.take(),
                device_spans,
                device_timing_unavailable: timing.err(),
                node_spans,
                node_timing_unavailable,
            })
        })
    }

    // ----- owned handles -----

    /// Allocate a typed, owned buffer (released on drop).
    pub fn buffer<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        let id = self.alloc(T::DTYPE, len)?;
        Ok(Buffer {
            dev: self.clone(),
            id,
            len,
            _t: std::marker::PhantomData,
        })
    }

    /// Allocate and fill from a slice.
    pub fn buffer_from<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        let b = self.buffer(data.len())?;
        self.write(b.id, 0, data)?;
        Ok(b)
    }

    /// Begin a capture on this thread whose scope aborts it on drop unless
    /// ended. The scope stays on this thread (it is not `Send`).
    pub fn capture(&self) -> Result<CaptureScope<'_>> {
        self.begin_capture()?;
        Ok(CaptureScope {
            dev: self,
            open: true,
            _owning_thread: std::marker::PhantomData,
        })
    }
}
