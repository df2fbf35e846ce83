//! One error type for the whole seam. Every error names the backend, the
//! device and the seam call it came from; the [`ErrorKind`] says what went
//! wrong and is what tests match on.

use crate::dtype::DType;
use crate::ops::OpKind;
use thiserror::Error;

/// Where an error happened: the backend and the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Backend kind, e.g. `cpu`, `cuda`.
    pub backend: String,
    /// Device id, e.g. `cuda:0`.
    pub device: String,
    /// Human-readable device name, e.g. `NVIDIA H200`.
    pub device_name: String,
}

/// An error from a seam call: where it happened, and what.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("{} device {} ({}): {call}: {kind}", site.backend, site.device, site.device_name)]
pub struct Error {
    /// The backend and device (shared, so errors stay small).
    pub site: std::sync::Arc<Site>,
    /// The seam call that failed, e.g. `begin_capture`.
    pub call: &'static str,
    pub kind: ErrorKind,
}

/// What went wrong. Backends return these; core adds the context.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum ErrorKind {
    // --- capture state machine (C5, C6, C9) ---
    #[error("graph capture is not supported by this device: {reason}")]
    CaptureUnsupported { reason: String },
    #[error("a capture is already open on this device (nested begin_capture)")]
    NestedCapture,
    #[error("no capture is open on this device")]
    NotCapturing,
    #[error("allocation inside a capture region is refused (C5): allocate before begin_capture")]
    AllocInCapture,
    #[error("free inside a capture region is refused (C5): free after the capture ends")]
    FreeInCapture,
    // `what` is the call (`write`, `read`, ...), which the error already names.
    #[error("host access inside a capture region is refused: it would not be part of the graph")]
    HostAccessInCapture { what: &'static str },
    #[error("replay inside a capture region is refused")]
    ReplayInCapture,
    #[error("destroying a graph inside a capture region is refused")]
    DestroyInCapture,
    #[error("launch from another thread while a capture is open on thread {owner}")]
    CrossThreadCapture { owner: String },
    #[error("unknown or destroyed graph {id}")]
    UnknownGraph { id: u64 },
    #[error(
        "graph {id} belongs to device {owner}, not this one: graphs are not shared between devices"
    )]
    ForeignGraph { id: u64, owner: String },
    #[error("no current exec: end_capture_into_current has not made one")]
    NoCurrentExec,
    // --- graph update (C13) ---
    #[error("updating a graph inside a capture region is refused")]
    UpdateInCapture,
    #[error("the graph does not use buffer {id}: nothing to rebind")]
    NotUsedByGraph { id: u64 },
    #[error("buffer {new} cannot stand in for buffer {old}: {reason}")]
    RebindMismatch { old: u64, new: u64, reason: String },
    #[error("the graph has {launches} launches; there is no launch {index}")]
    NoSuchLaunch { index: usize, launches: usize },
    #[error("launch {index} is {recorded}; an update cannot make it {requested}")]
    UpdateChangesOp {
        index: usize,
        recorded: OpKind,
        requested: OpKind,
    },
    #[error("invalid update: {reason}")]
    InvalidUpdate { reason: String },
    #[error("this backend cannot update a captured graph in place")]
    UpdateUnsupported,
    #[error("the graph is unusable: {reason}; rebind it again or destroy it")]
    GraphBroken { reason: String },
    #[error("op {op} with {dtype} needs prepare() before capture: its vendor resources are not initialised")]
    NotPrepared { op: OpKind, dtype: DType },

    // --- argument validation (C12) ---
    #[error("unknown or freed buffer {id}")]
    UnknownBuffer { id: u64 },
    #[error("buffer {id} belongs to device {owner}, not this one: buffers are not shared between devices")]
    ForeignBuffer { id: u64, owner: String },
    #[error(
        "buffer {id} is read by {}; destroy them (or end the capture) first",
        GraphUser::list(users)
    )]
    BufferInUse { id: u64, users: Vec<GraphUser> },
    #[error("{op} takes {expected} buffers, got {found}")]
    ArityMismatch {
        op: OpKind,
        expected: usize,
        found: usize,
    },
    #[error("{op}: binding `{binding}` must be {expected}, buffer is {found}")]
    DtypeMismatch {
        op: OpKind,
        binding: &'static str,
        expected: DType,
        found: DType,
    },
    #[error("{op} does not support {dtype}")]
    UnsupportedDtype { op: OpKind, dtype: DType },
    #[error("{what}: expected {expected} elements, got {found}")]
    SizeMismatch {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    // `what` is the call, which the error already names.
    #[error("host data is {found}, buffer holds {expected}")]
    HostDtypeMismatch {
        what: &'static str,
        expected: DType,
        found: DType,
    },
    #[error("{op}: binding `{binding}` needs {needed} elements, its view holds {len}")]
    OutOfRange {
        op: OpKind,
        binding: &'static str,
        needed: u64,
        len: u64,
    },
    #[error("{op}: binding `{binding}`: a view of {} from element {offset} lies outside the buffer's {buffer_len} elements", len.map_or("the rest".to_string(), |l| format!("{l} elements")))]
    ViewOutOfRange {
        op: OpKind,
        binding: &'static str,
        offset: u64,
        len: Option<u64>,
        buffer_len: u64,
    },
    #[error("{op}: output `{output}` overlaps `{other}` without being the same range: in place means the very same view, and two outputs never overlap")]
    ViewsOverlap {
        op: OpKind,
        output: &'static str,
        other: &'static str,
    },
    // `what` is the call, which the error already names.
    #[error("{count} elements at offset {offset} exceed the buffer's {len}")]
    HostRange {
        what: &'static str,
        offset: usize,
        count: usize,
        len: usize,
    },
    #[error("{what} is zero-sized")]
    ZeroSize { what: &'static str },
    #[error("{what} is too large: {detail}")]
    TooLarge { what: &'static str, detail: String },
    #[error("{op}: invalid parameter `{name}`: {reason}")]
    InvalidParam {
        op: OpKind,
        name: &'static str,
        reason: String,
    },
    #[error("{op}: output `{output}` must not alias input `{input}`")]
    AliasNotAllowed {
        op: OpKind,
        output: &'static str,
        input: &'static str,
    },

    #[error(
        "kernel {kernel}: one buffer is bound to `{read_only}`, which the kernel's WGSL declares \
         var<storage, read>, and to `{other}`, declared read_write: WebGPU refuses a buffer used \
         read-only and read-write in one dispatch; bind another buffer, or declare \
         `{read_only}` var<storage, read_write>"
    )]
    ReadOnlyShared {
        kernel: &'static str,
        read_only: &'static str,
        other: &'static str,
    },

    #[error(
        "kernel {kernel} wrote element {element} of the buffer bound to `{binding}`, outside \
         the extents it declares ({detail}); checked mode put the buffers back as they were"
    )]
    WroteOutsideExtents {
        kernel: &'static str,
        binding: &'static str,
        element: u64,
        detail: String,
    },

    // --- user kernels ---
    #[error("kernel {kernel} is not registered on this device: call register_kernel first")]
    KernelNotRegistered { kernel: &'static str },
    #[error("kernel {kernel} is malformed: {reason}")]
    BadKernel {
        kernel: &'static str,
        reason: String,
    },
    #[error("kernel {kernel} has no {source_kind}, which this backend runs")]
    KernelSourceMissing {
        kernel: &'static str,
        source_kind: &'static str,
    },
    #[error("kernel {kernel} failed to compile ({compiler}):\n{log}")]
    KernelCompile {
        kernel: &'static str,
        compiler: String,
        log: String,
    },

    // --- backend / driver ---
    #[error("{op} with {dtype} is not implemented by this backend")]
    OpUnsupported { op: OpKind, dtype: DType },
    #[error("driver call {driver_call} failed: {message}")]
    Driver {
        driver_call: String,
        message: String,
    },
    #[error("backend unavailable: {reason}")]
    Unavailable { reason: String },
    #[error("injected fault in {call} (fault injection)")]
    Injected { call: &'static str },
}

impl ErrorKind {
    /// A driver failure, naming the driver call.
    pub fn driver(driver_call: impl Into<String>, message: impl ToString) -> Self {
        ErrorKind::Driver {
            driver_call: driver_call.into(),
            message: message.to_string(),
        }
    }
}

/// What keeps a buffer alive: a graph handle, the current exec, or the
/// open capture that has recorded a launch reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphUser {
    Handle(u64),
    Current,
    OpenCapture,
}

impl std::fmt::Display for GraphUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GraphUser::Handle(id) => write!(f, "graph {id}"),
            GraphUser::Current => f.write_str("the current exec"),
            GraphUser::OpenCapture => f.write_str("the open capture"),
        }
    }
}

impl GraphUser {
    fn list(users: &[GraphUser]) -> String {
        let names: Vec<String> = users.iter().map(ToString::to_string).collect();
        names.join(", ")
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
