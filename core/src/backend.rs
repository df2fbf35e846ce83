//! The seam: the one trait every backend implements. A backend author reads
//! this file, plus the types its signatures name: [`Launch`] and [`OpKind`]
//! (`ops.rs`: what one launch carries, already validated, in the vocabulary
//! of `signature.rs`) and [`ErrorKind`]
//! (`error.rs`: what a backend returns; core adds backend, device and call).
//!
//! Core (`Device`) owns the capture state machine, argument validation,
//! replay counting and tracing, and calls a backend only with arguments it
//! has checked, in an order it has checked. A backend turns those calls into
//! its API's and keeps what its native objects need (which buffers a
//! recorded command holds, for instance); it checks nothing core checked.

use crate::dtype::DType;
use crate::error::ErrorKind;
pub use crate::ids::{RawBuffer, RawGraph};
use crate::ops::{Launch, OpKind};
use serde::{Deserialize, Serialize};

/// What to replay: the exec made by [`Backend::end_capture_into_current`], or a handle
/// made by [`Backend::end_capture_graph`]. The two never alias (C3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayTarget {
    /// The exec the last `end_capture_into_current` made.
    Current,
    /// A graph handle `end_capture_graph` made.
    Graph(RawGraph),
}

/// How a device supports graph capture (C9: the report must match behaviour).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "reason")]
pub enum CaptureSupport {
    /// A driver graph or reusable command buffer: replay skips per-launch host work.
    Native,
    /// Recorded dispatches re-encoded on every replay: same semantics, no launch-cost saving.
    Emulated,
    /// begin_capture is refused with [`ErrorKind::CaptureUnsupported`].
    Unsupported(String),
}

impl CaptureSupport {
    /// Whether capture can succeed (`Native` or `Emulated`).
    pub fn is_supported(&self) -> bool {
        !matches!(self, CaptureSupport::Unsupported(_))
    }
}

/// How a device updates a captured graph without a new capture by the user
/// (C13: `Device::rebind`, `Device::update_params`). Reported like capture
/// support, and what the report says must be what happens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "reason")]
pub enum UpdateSupport {
    /// The backend patches the instantiated graph in place
    /// ([`Backend::update_launches`]): no re-capture, no re-instantiation.
    Native,
    /// Core re-records the graph from the launches it validated
    /// (begin_capture, launch…, end): the same semantics at the cost of a
    /// capture.
    Emulated,
    /// The device cannot capture, so there is nothing to update.
    Unsupported(String),
}

/// How a device times the nodes inside a replay (C10), reported like
/// capture support. Node timing is switched per device
/// ([`Device::set_node_timing`](crate::Device::set_node_timing), or
/// `SEAM_NODE_TIMING=1` when it opens) and applies to the graphs captured
/// while it is on: their traced replays get one device span per launch
/// (`Native`) or per piece of consecutive launches (`Coarse`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "reason")]
pub enum NodeTiming {
    /// One span per launch, on the device's clock.
    Native,
    /// One span per piece of consecutive launches; the reason says what a
    /// piece is.
    Coarse(String),
    /// No node spans, and why.
    Unavailable(String),
}

/// How a device runs conditional bodies inside a captured graph (C14:
/// [`CaptureScope::run_while`](crate::CaptureScope::run_while) and
/// [`CaptureScope::run_if`](crate::CaptureScope::run_if)), reported like
/// capture support; what it says must be what happens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "reason")]
pub enum ConditionalSupport {
    /// The driver's own conditional nodes decide on the device.
    Native,
    /// The same semantics without a driver primitive; the reason says how.
    Emulated(String),
    /// A conditional body is refused with
    /// [`ErrorKind::ConditionalUnsupported`], and why.
    Unsupported(String),
}

/// What decides whether a conditional body runs: IF runs it once when the
/// condition is non-zero; WHILE runs it while the condition is non-zero,
/// read before each iteration, at most `max_iterations` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConditionalKind {
    /// Run the body once if the condition is non-zero.
    If,
    /// Run the body while the condition is non-zero, at most
    /// `max_iterations` (≥ 1) times.
    While {
        /// The bound on iterations (core refuses 0).
        max_iterations: u32,
    },
}

/// A conditional body as a backend is told of it: its kind and the `u32`
/// condition, `byte_offset` bytes into `cond` (core checked the word lies
/// in the buffer and that the buffer holds `u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conditional {
    /// IF or WHILE.
    pub kind: ConditionalKind,
    /// The buffer holding the condition.
    pub cond: RawBuffer,
    /// Where in it, in bytes (a multiple of 4).
    pub byte_offset: u64,
}

/// What a device guarantees for subnormal (denormal) f32 values in shader
/// arithmetic (C11). `Preserved`: every f32 kernel gives the CPU
/// reference's bits with subnormal inputs and results too. `MayFlush`: a
/// kernel may flush subnormal inputs and results to zero of the same sign
/// (why is the reason); each element is then either the exact result or
/// that flushed one, never anything else. Reported at run time, like
/// capture support; `c11_subnormals_as_declared` holds each device to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "reason")]
pub enum Subnormals {
    /// Every f32 kernel keeps subnormal inputs and results.
    Preserved,
    /// A kernel may flush subnormals to zero of the same sign; the reason
    /// says why.
    MayFlush(String),
}

/// Who a device is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Backend kind: `cpu`, `cuda`, `hip`, `vulkan`, `metal`, `wgpu`.
    pub backend: String,
    /// Index among this backend's devices.
    pub index: usize,
    /// Device name as the driver reports it.
    pub name: String,
    /// Driver / runtime version string.
    pub driver: String,
}

impl DeviceInfo {
    /// `<backend>:<index>`, e.g. `cuda:0`.
    pub fn id(&self) -> String {
        format!("{}:{}", self.backend, self.index)
    }
}

/// Live resources a backend holds, for leak checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceCounts {
    /// Live allocations.
    pub buffers: usize,
    /// Live graphs, the current graph counted.
    pub graphs: usize,
    /// Device bytes the backend holds for buffers (as allocated: a backend
    /// that rounds sizes up counts the rounded size). Frees it has accepted
    /// count as given back even if the memory is released later.
    pub bytes: u64,
}

/// The seam. Object-safe; core holds it as `Box<dyn Backend>` behind a lock,
/// so methods take `&mut self` and are never called concurrently.
///
/// # The trust boundary
///
/// A backend trusts what core gives it and checks nothing again: a launch's
/// views lie in their buffers (so a kernel may index without bounds
/// checks), a buffer handle is live, a graph handle names a graph. The
/// methods whose soundness rests on that are `unsafe fn`, like wgpu-hal's
/// device methods under wgpu-core: safe code reaches a backend only through
/// [`Device`](crate::Device), which proves each call's arguments first. A
/// [`Launch`] cannot be built outside core except by the `unsafe`
/// [`Launch::new_unchecked`]. Calling these methods directly (a forwarding
/// wrapper such as [`testing::Forward`](crate::testing::Forward), a
/// backend's own unit tests) takes an `unsafe` block whose `// SAFETY:`
/// says why the guarantees below hold; without one, a call does not
/// compile:
///
/// ```compile_fail
/// fn forged(backend: &mut dyn seam::Backend, launch: &seam::Launch) {
///     let _ = backend.launch(launch); // error: call to unsafe function
/// }
/// ```
///
/// A backend's own tests drive it through
/// [`testing::Direct`](crate::testing::Direct), which checks these
/// guarantees instead of assuming them. A wrapper forwards each `unsafe`
/// method in an `unsafe` block that says why its caller's guarantees hold
/// for the backend it wraps ([`testing::Forward`](crate::testing::Forward)
/// does this for every method, with hooks around each call):
///
/// ```
/// use seam::testing::{Forward, Hooks, NullBackend};
/// use seam::{CaptureSupport, Device};
///
/// /// Counts the calls that reach the device.
/// struct Count(usize);
/// impl Hooks for Count {
///     fn before(&mut self, _call: &'static str) -> Result<(), seam::ErrorKind> {
///         self.0 += 1;
///         Ok(())
///     }
/// }
/// let inner = Box::new(NullBackend::new(CaptureSupport::Native));
/// let dev = Device::new(Box::new(Forward::new(inner, Count(0))));
/// let x = dev.buffer::<u32>(4).unwrap();
/// dev.launch(&seam::ops::fill(x.id(), 4, 7)).unwrap();
/// ```
///
/// Guarantees core gives every backend (what each `# Safety` section
/// below refers to):
/// - **Live handles.** Every `RawBuffer` passed in was returned by this
///   backend's `alloc` and not yet passed to `free`; every `RawGraph` was
///   returned by this backend's `end_capture_graph` and not yet passed to
///   `destroy_graph`.
/// - **In range.** `write` and `read` address `offset .. offset + len`
///   bytes within the buffer's allocation.
/// - **Validated launches.** Every launch is one core's validation made
///   (C12): the op's arity and element types, each view within its
///   buffer and holding what the op needs, writes overlapping nothing they
///   must not, a user kernel's params accepted by its definition and the
///   kernel registered on this backend (`prepare`).
/// - **Nothing in use is freed.** `free` is never called on a buffer a live
///   graph or the current graph uses; work already queued that reads or
///   writes it is the backend's to wait for (or to defer the free past).
/// - **Order.** `alloc`, `free`, `write`, `read`, `synchronize`, `replay`,
///   `destroy_graph` and `prepare` are never called while a capture is
///   open; `launch` is called while capturing only from the capturing
///   thread; `end_capture*`/`abort_capture` only follow a successful
///   `begin_capture` (and `abort_capture` also follows a failed
///   `end_capture*`/`abort_capture`); `begin_conditional` and
///   `end_conditional` come only inside a capture, paired, and
///   `end_capture*` only once every body is closed.
///
/// # Errors
///
/// A backend returns an [`ErrorKind`]; core adds the backend, the device
/// and the call once. Work is queued, so an error of work that already
/// ran (a kernel fault, a lost device) surfaces at the next call that
/// waits for it (`synchronize`, `read`, `write`, `free`), as that call's
/// error.
pub trait Backend: Send {
    /// Who this device is (constant for its lifetime).
    fn info(&self) -> &DeviceInfo;

    /// How this device captures graphs; what it says must be what happens (C9).
    fn capture_support(&self) -> CaptureSupport;

    // --- memory ---
    /// Allocate `bytes` (> 0) of device memory. Contents are unspecified.
    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind>;
    /// Release an allocation once every piece of work already queued that
    /// uses it has finished (wait, or defer the release).
    ///
    /// # Safety
    /// `buffer` is live, and no live graph or current graph uses it (the
    /// trait's guarantees: live handles, nothing in use is freed).
    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind>;
    /// Ordered after all previously queued work; returns once `data` may be reused.
    ///
    /// # Safety
    /// `buffer` is live and `offset + data.len()` is within its allocation.
    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind>;
    /// Ordered after all previously queued work; returns with `out` filled.
    ///
    /// # Safety
    /// `buffer` is live and `offset + out.len()` is within its allocation.
    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind>;

    // --- work ---
    /// Queue one op (or record it, while capturing). May return before it
    /// runs; its errors may surface at a later call that waits for it.
    ///
    /// # Safety
    /// `launch` is one core's validation made against this backend's live
    /// buffers (the trait's guarantees: validated launches, live handles).
    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind>;
    /// Wait for all queued work.
    fn synchronize(&mut self) -> Result<(), ErrorKind>;
    /// Materialise every lazily-initialised resource these ops need (kernel
    /// modules, vendor library handles, workspaces) so capturing them
    /// allocates nothing (C7). This is also how a user kernel reaches a
    /// backend: `Device::register_kernel` prepares `OpKind::User(kernel)`,
    /// and the backend compiles its source here (or refuses it with
    /// `KernelSourceMissing` / `KernelCompile`).
    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind>;

    // --- capture: ops 2..6 ---
    /// Capture op 2: start recording launches instead of running them.
    fn begin_capture(&mut self) -> Result<(), ErrorKind>;
    /// Capture op 3: stop recording; the result replaces the backend's current graph.
    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind>;
    /// Capture op 4: stop recording; the result is a new, independent graph.
    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind>;
    /// Capture op 5: queue one re-execution of the target over the buffers'
    /// current contents (C1). Returns once queued, not once run.
    ///
    /// # Safety
    /// The target is live (a graph handle not destroyed, or a current graph
    /// that exists) and every buffer it uses is live.
    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind>;
    /// Capture op 6: release a graph. A replay of it may still be running:
    /// the backend waits or defers, but the replay completes correctly (C8).
    ///
    /// # Safety
    /// `graph` is live (made by this backend's `end_capture_graph` and not
    /// destroyed since).
    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind>;
    /// Drop whatever was recorded since begin_capture; the device stays usable.
    /// Core also calls this after a failed `end_capture`, `end_capture_graph`
    /// or `abort_capture`, when the backend may or may not still be
    /// recording: it must then end any recording (an error is ignored).
    fn abort_capture(&mut self) -> Result<(), ErrorKind>;

    /// Live allocations and graphs (the current graph counts as a graph), for leak checks.
    fn live_resources(&self) -> ResourceCounts;

    // --- graph update (C13; optional) ---
    /// How this backend updates captured graphs. The default, `Emulated`,
    /// needs nothing from the backend: core re-records the graph through
    /// the capture calls above.
    fn update_support(&self) -> UpdateSupport {
        UpdateSupport::Emulated
    }
    /// Replace launches of a captured graph in place. `now` is what the
    /// graph runs before this update, every launch in capture order: core's
    /// record of it, lent for the call, so a backend need keep no copy of
    /// its own (the stream backend compares it with the launch sets of its
    /// kept execs). Where the call returns `Ok`, the backend may leave in
    /// `now` instead a list equal to it with `changes` applied (the stream
    /// backend exchanges it for the list a kept exec runs, which saves a
    /// copy of every launch); core applies `changes` to it afterwards
    /// either way. `changes` are (index in capture order, new launch),
    /// validated by core; each has the op and dtype of the launch it
    /// replaces. Replays queued before this call
    /// must still run the old launches. Called only when `update_support()`
    /// is `Native` and never while capturing; on an error core re-records
    /// the graph instead, so a partial update must not be left looking like
    /// a finished one.
    ///
    /// # Safety
    /// The target is live, every index is below the graph's launch count,
    /// and every launch is one core's validation made against this
    /// backend's live buffers, with the op and dtype of the launch it
    /// replaces. `now` is what the target runs: never a graph that an
    /// update failing part-way left partly patched (core records such a
    /// graph again before it is updated or replayed).
    unsafe fn update_launches(
        &mut self,
        _target: ReplayTarget,
        _now: &mut Vec<Launch>,
        _changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        Err(ErrorKind::UpdateUnsupported)
    }

    // --- conditional bodies (C14; optional) ---
    /// How this device runs conditional bodies. The default runs none.
    fn conditional_support(&self) -> ConditionalSupport {
        ConditionalSupport::Unsupported(format!(
            "the {} backend has no conditional bodies",
            self.info().backend
        ))
    }
    /// Open a conditional body inside the open capture: the launches (and
    /// nested bodies) until the matching [`Backend::end_conditional`] are
    /// its body. Called only while capturing, from the capturing thread,
    /// and only where `conditional_support()` is not `Unsupported`.
    ///
    /// # Safety
    /// `c.cond` is live and `c.byte_offset + 4` lies within it (core keeps
    /// it alive as long as the graph).
    unsafe fn begin_conditional(&mut self, _c: &Conditional) -> Result<(), ErrorKind> {
        Err(ErrorKind::ConditionalUnsupported {
            reason: format!(
                "the {} backend has no conditional bodies",
                self.info().backend
            ),
        })
    }
    /// Close the innermost open conditional body.
    fn end_conditional(&mut self) -> Result<(), ErrorKind> {
        Err(ErrorKind::ConditionalUnsupported {
            reason: format!(
                "the {} backend has no conditional bodies",
                self.info().backend
            ),
        })
    }

    /// What this device guarantees for f32 subnormals (C11). The default
    /// promises nothing: a backend that has not looked may flush.
    fn subnormals(&self) -> Subnormals {
        Subnormals::MayFlush(format!(
            "the {} backend declares nothing about f32 subnormals",
            self.info().backend
        ))
    }

    // --- device timing (optional; every replay on the record) ---
    /// Whether this device can time work on the device itself; `Err` says why not.
    fn device_timing(&self) -> Result<(), String> {
        Err(format!(
            "the {} backend does not time the device",
            self.info().backend
        ))
    }
    /// Turn device timing on or off. Core calls this when tracing is switched.
    fn set_device_timing(&mut self, _on: bool) -> Result<(), ErrorKind> {
        Ok(())
    }
    /// Queue a start marker tagged `tag` (like recording a CUDA event or
    /// writing a Vulkan timestamp): core brackets each traced replay and
    /// eager launch with `begin_timed`/`end_timed`. Never called while capturing.
    fn begin_timed(&mut self, _tag: u64) -> Result<(), ErrorKind> {
        Ok(())
    }
    /// Queue the matching end marker.
    fn end_timed(&mut self, _tag: u64) -> Result<(), ErrorKind> {
        Ok(())
    }
    /// Spans of every bracketed piece of work that has finished, oldest first,
    /// in nanoseconds of the device's clock. May wait for queued work.
    /// Where node timing is on (below), also the node spans of each
    /// bracketed replay of a node-timed graph, tagged with the replay's tag.
    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        Ok(Vec::new())
    }

    // --- node timing (optional; inside every traced replay) ---
    /// How this device times the launches inside a replay. The default
    /// times none.
    fn node_timing(&self) -> NodeTiming {
        NodeTiming::Unavailable(format!(
            "the {} backend does not time the nodes of a replay",
            self.info().backend
        ))
    }
    /// Turn node timing on or off for the graphs captured from now on
    /// (from the next `begin_capture`; a graph keeps what it was captured
    /// with, through native updates too). Core calls it only where
    /// [`Backend::node_timing`] is not `Unavailable`. A replay of a
    /// node-timed graph bracketed by `begin_timed(tag)`/`end_timed(tag)`
    /// while device timing is on yields, besides the replay's span, one
    /// span per launch (`nodes: Some(Nodes { first: i, count: 1 })`, or
    /// per piece where coarse) tagged `tag`, inside the replay's span.
    fn set_node_timing(&mut self, _on: bool) -> Result<(), ErrorKind> {
        Ok(())
    }
}

/// The launches of a replay one device span covers: `first..first + count`
/// in capture order (`count` is 1 where node timing is native).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nodes {
    /// The first launch's index in the graph.
    pub first: u32,
    /// How many consecutive launches.
    pub count: u32,
}

/// The device-side start and end of one traced replay or launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSpan {
    /// The `seq` of the trace event it belongs to.
    pub tag: u64,
    /// When the work began, in nanoseconds of the device's clock.
    pub start_ns: u64,
    /// When it ended, on the same clock.
    pub end_ns: u64,
    /// `Some` for a node span: the launches of the replayed graph it
    /// covers (the replay is the one tagged `tag`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Nodes>,
}

impl DeviceSpan {
    /// A replay's or eager launch's span.
    pub fn whole(tag: u64, start_ns: u64, end_ns: u64) -> DeviceSpan {
        DeviceSpan {
            tag,
            start_ns,
            end_ns,
            nodes: None,
        }
    }

    /// The span of launch `index` of the replay tagged `tag`.
    pub fn node(tag: u64, index: u32, start_ns: u64, end_ns: u64) -> DeviceSpan {
        DeviceSpan {
            tag,
            start_ns,
            end_ns,
            nodes: Some(Nodes {
                first: index,
                count: 1,
            }),
        }
    }
}
