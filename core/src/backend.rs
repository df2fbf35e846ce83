//! The seam: the one trait every backend implements. A backend author reads
//! this file, plus the types its signatures name: [`Launch`] and [`OpKind`]
//! (`ops.rs`: what one launch carries, already validated) and [`ErrorKind`]
//! (`error.rs`: what a backend returns; core adds backend, device and call).
//!
//! Backends are deliberately dumb. Core (`Device`) owns the capture state
//! machine, argument validation, replay counting and tracing, and only calls
//! a backend with arguments it has already checked and in an order it has
//! already checked. A backend translates, it does not decide.

use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::ops::{Launch, OpKind};
use serde::{Deserialize, Serialize};

/// A backend's handle for an allocation. Opaque to core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RawBuffer(pub u64);

/// A backend's handle for a captured, instantiated graph. Opaque to core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RawGraph(pub u64);

/// What to replay: the exec made by [`Backend::end_capture_into_current`], or a handle
/// made by [`Backend::end_capture_graph`]. The two never alias (C3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayTarget {
    Current,
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
    Preserved,
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
    pub buffers: usize,
    pub graphs: usize,
    /// Device bytes the backend holds for buffers (as allocated: a backend
    /// that rounds sizes up counts the rounded size). Frees it has accepted
    /// count as given back even if the memory is released later.
    pub bytes: u64,
}

/// The seam. Object-safe; core holds it as `Box<dyn Backend>` behind a lock,
/// so methods take `&mut self` and are never called concurrently.
///
/// Ordering guarantees core gives every backend:
/// - `alloc`, `free`, `write`, `read`, `synchronize`, `replay`, `destroy_graph`
///   and `prepare` are never called while a capture is open;
/// - `launch` is called while capturing only from the capturing thread;
/// - `end_capture*`/`abort_capture` only follow a successful `begin_capture`
///   (and `abort_capture` also follows a failed `end_capture*`/`abort_capture`);
/// - every `RawBuffer`/`RawGraph` passed in is live and was made by this backend;
/// - `free` is never called on a buffer a live graph or the current exec uses.
pub trait Backend: Send {
    fn info(&self) -> &DeviceInfo;

    fn capture_support(&self) -> CaptureSupport;

    /// Capture op 1 of 6: whether begin_capture can succeed.
    fn supports_capture(&self) -> bool {
        self.capture_support().is_supported()
    }

    // --- memory ---
    /// Allocate `bytes` (> 0) of device memory. Contents are unspecified.
    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind>;
    fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind>;
    /// Ordered after all previously queued work; returns once `data` may be reused.
    fn write(&mut self, buffer: RawBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind>;
    /// Ordered after all previously queued work; returns with `out` filled.
    fn read(&mut self, buffer: RawBuffer, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind>;

    // --- work ---
    /// Queue one op (or record it, while capturing). May return before it runs.
    fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind>;
    /// Wait for all queued work.
    fn synchronize(&mut self) -> Result<(), ErrorKind>;
    /// Materialise every lazily-initialised resource these ops need (kernel
    /// modules, vendor library handles, workspaces) so capturing them allocates nothing (C7).
    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind>;

    // --- capture: ops 2..6 ---
    /// Capture op 2: start recording launches instead of running them.
    fn begin_capture(&mut self) -> Result<(), ErrorKind>;
    /// Capture op 3: stop recording; the result replaces the backend's current exec.
    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind>;
    /// Capture op 4: stop recording; the result is a new, independent graph.
    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind>;
    /// Capture op 5: queue one re-execution of the target over the buffers' current contents (C1).
    fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind>;
    /// Capture op 6: release a graph. A replay of it may still be running:
    /// the backend waits or defers, but the replay completes correctly (C8).
    fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind>;
    /// Drop whatever was recorded since begin_capture; the device stays usable.
    /// Core also calls this after a failed `end_capture`, `end_capture_graph`
    /// or `abort_capture`, when the backend may or may not still be
    /// recording: it must then end any recording (an error is ignored).
    fn abort_capture(&mut self) -> Result<(), ErrorKind>;

    /// Live allocations and graphs (the current exec counts as a graph), for leak checks.
    fn live_resources(&self) -> ResourceCounts;

    // --- graph update (C13; optional) ---
    /// How this backend updates captured graphs. The default, `Emulated`,
    /// needs nothing from the backend: core re-records the graph through
    /// the capture calls above.
    fn update_support(&self) -> UpdateSupport {
        UpdateSupport::Emulated
    }
    /// Replace launches of a captured graph in place. `changes` are (index
    /// in capture order, new launch), validated by core; each has the op
    /// and dtype of the launch it replaces. Replays queued before this call
    /// must still run the old launches. Called only when `update_support()`
    /// is `Native` and never while capturing; on an error core re-records
    /// the graph instead, so a partial update must not be left looking like
    /// a finished one.
    fn update_launches(
        &mut self,
        _target: ReplayTarget,
        _changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        Err(ErrorKind::UpdateUnsupported)
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
    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        Ok(Vec::new())
    }
}

/// The device-side start and end of one traced replay or launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSpan {
    /// The `seq` of the trace event it belongs to.
    pub tag: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}
