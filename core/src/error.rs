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
    /// What went wrong.
    pub kind: ErrorKind,
}

/// What went wrong. Backends return these; core adds the context.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum ErrorKind {
    // --- capture state machine (C5, C6, C9) ---
    #[error("graph capture is not supported by this device: {reason}")]
    /// The device cannot capture graphs (C9).
    CaptureUnsupported {
        /// Why.
        reason: String,
    },
    #[error("a capture is already open on this device (nested begin_capture)")]
    /// A capture is already open.
    NestedCapture,
    #[error("no capture is open on this device")]
    /// No capture is open to end or abort.
    NotCapturing,
    #[error("allocation inside a capture region is refused (C5): allocate before the capture")]
    /// An allocation inside a capture (C5).
    AllocInCapture,
    #[error("free inside a capture region is refused (C5): free after the capture ends")]
    /// A free inside a capture (C5).
    FreeInCapture,
    // `what` is the call (`write`, `read`, ...), which the error already names.
    #[error("host access inside a capture region is refused: it would not be part of the graph")]
    /// A host read, write or wait inside a capture.
    HostAccessInCapture {
        /// The call or step refused.
        what: &'static str,
    },
    #[error("replay inside a capture region is refused")]
    /// A replay inside a capture.
    ReplayInCapture,
    #[error("destroying a graph inside a capture region is refused")]
    /// A graph destroyed inside a capture.
    DestroyInCapture,
    #[error("launch from another thread while a capture is open on thread {owner}")]
    /// A capture call from a thread that does not own the open capture.
    CrossThreadCapture {
        /// The device that owns it (e.g. `cuda:0`).
        owner: String,
    },
    #[error("unknown or destroyed graph {id}")]
    /// A graph id this device does not hold (never made, or destroyed).
    UnknownGraph {
        /// The id, as the caller gave it.
        id: u64,
    },
    #[error(
        "graph {id} belongs to device {owner}, not this one: graphs are not shared between devices"
    )]
    /// A graph of another device.
    ForeignGraph {
        /// The id, as the caller gave it.
        id: u64,
        /// The device that owns it (e.g. `cuda:0`).
        owner: String,
    },
    #[error("no current graph: no capture has ended into it (CaptureScope::end_into_current)")]
    /// The current graph was asked for before one was made.
    NoCurrentGraph,
    // --- graph update (C13) ---
    #[error("updating a graph inside a capture region is refused")]
    /// A graph update inside a capture.
    UpdateInCapture,
    #[error("the graph does not use buffer {id}: nothing to rebind")]
    /// A rebind of a buffer the graph does not use.
    NotUsedByGraph {
        /// The id, as the caller gave it.
        id: u64,
    },
    #[error("buffer {new} cannot stand in for buffer {old}: {reason}")]
    /// A rebind to a buffer that cannot stand in for the old one.
    RebindMismatch {
        /// The buffer the graph uses.
        old: u64,
        /// The buffer given in its place.
        new: u64,
        /// Why.
        reason: String,
    },
    #[error("the graph has {launches} launches; there is no launch {index}")]
    /// An update of a launch index past the graph's launches.
    NoSuchLaunch {
        /// The launch, in capture order.
        index: usize,
        /// The launches the graph holds.
        launches: usize,
    },
    #[error("launch {index} is {recorded}; an update cannot make it {requested}")]
    /// An update that would change a launch's op.
    UpdateChangesOp {
        /// The launch, in capture order.
        index: usize,
        /// The op the graph recorded there.
        recorded: OpKind,
        /// The op the update asked for.
        requested: OpKind,
    },
    #[error("launch {index} runs on {recorded}; an update cannot make it {requested}")]
    /// An update that would change the element type a launch runs on (its
    /// kernel was chosen for the recorded one).
    UpdateChangesDtype {
        /// The launch, in capture order.
        index: usize,
        /// The element type the graph recorded there.
        recorded: DType,
        /// The element type the update asked for.
        requested: DType,
    },
    #[error("invalid update: {reason}")]
    /// An update that is malformed as a whole (an index changed twice).
    InvalidUpdate {
        /// Why.
        reason: String,
    },
    #[error("this backend cannot update a captured graph in place")]
    /// The backend cannot patch a graph in place.
    UpdateUnsupported,
    #[error("the graph is unusable: {reason}; rebind it again or destroy it")]
    /// A graph a failed update left unusable.
    GraphBroken {
        /// Why.
        reason: String,
    },
    #[error("op {op} with {dtype} needs prepare() before capture: its vendor resources are not initialised")]
    /// A vendor op captured before `prepare` initialised it (C7).
    NotPrepared {
        /// The op.
        op: OpKind,
        /// The element type.
        dtype: DType,
    },

    // --- conditional bodies (C14) ---
    #[error("conditional bodies are not supported here: {reason}")]
    /// A conditional body on a device that runs none.
    ConditionalUnsupported {
        /// Why (the device's `conditional_support`).
        reason: String,
    },
    #[error("a WHILE body needs max_iterations of at least 1")]
    /// A WHILE whose bound is 0.
    ZeroIterations,
    #[error("a condition is one u32; buffer {id} holds {found}")]
    /// A condition in a buffer of another element type.
    ConditionDType {
        /// The buffer's id.
        id: u64,
        /// Its element type.
        found: DType,
    },
    #[error("the condition at element {offset} lies past the end of buffer {id} ({len} elements)")]
    /// A condition outside its buffer.
    ConditionOutOfRange {
        /// The buffer's id.
        id: u64,
        /// The element asked for.
        offset: usize,
        /// The buffer's length.
        len: usize,
    },
    #[error(
        "{open} conditional body(ies) still open: close them (end_body) before ending the capture"
    )]
    /// A capture ended with a conditional body open; the capture stays open.
    UnclosedConditional {
        /// How many bodies are open.
        open: usize,
    },
    #[error("no conditional body is open to close")]
    /// `end_body` with no body open.
    NoOpenConditional,

    // --- argument validation (C12) ---
    #[error("unknown or freed buffer {id}")]
    /// A buffer id this device does not hold (never made, or freed).
    UnknownBuffer {
        /// The id, as the caller gave it.
        id: u64,
    },
    #[error("buffer {id} belongs to device {owner}, not this one: buffers are not shared between devices")]
    /// A buffer of another device.
    ForeignBuffer {
        /// The id, as the caller gave it.
        id: u64,
        /// The device that owns it (e.g. `cuda:0`).
        owner: String,
    },
    #[error(
        "buffer {id} is read by {}; destroy them (or end the capture) first",
        GraphUser::list(users)
    )]
    /// A free of a buffer a graph, the current graph or the open capture uses.
    BufferInUse {
        /// The id, as the caller gave it.
        id: u64,
        /// What uses it.
        users: Vec<GraphUser>,
    },
    #[error("{op} takes {expected} buffers, got {found}")]
    /// A launch with the wrong number of bindings.
    ArityMismatch {
        /// The op.
        op: OpKind,
        /// What is needed.
        expected: usize,
        /// What was given.
        found: usize,
    },
    #[error("{op}: binding `{binding}` must be {expected}, buffer is {found}")]
    /// A binding of the wrong element type.
    DtypeMismatch {
        /// The op.
        op: OpKind,
        /// The binding, by its signature's name.
        binding: &'static str,
        /// What is needed.
        expected: DType,
        /// What was given.
        found: DType,
    },
    #[error("{op} does not support {dtype}")]
    /// An op given an element type it does not take.
    UnsupportedDtype {
        /// The op.
        op: OpKind,
        /// The element type.
        dtype: DType,
    },
    #[error("{what}: expected {expected} elements, got {found}")]
    /// Data of the wrong size.
    SizeMismatch {
        /// The call or step refused.
        what: &'static str,
        /// What is needed.
        expected: usize,
        /// What was given.
        found: usize,
    },
    // `what` is the call, which the error already names.
    #[error("host data is {found}, buffer holds {expected}")]
    /// Host data of another element type than the buffer's.
    HostDtypeMismatch {
        /// The call or step refused.
        what: &'static str,
        /// What is needed.
        expected: DType,
        /// What was given.
        found: DType,
    },
    #[error("{op}: binding `{binding}` needs {needed} elements, its view holds {len}")]
    /// A view shorter than the op needs.
    OutOfRange {
        /// The op.
        op: OpKind,
        /// The binding, by its signature's name.
        binding: &'static str,
        /// The elements the op needs.
        needed: u64,
        /// The length in elements.
        len: u64,
    },
    #[error("{op}: binding `{binding}`: a view of {} from element {offset} lies outside the buffer's {buffer_len} elements", len.map_or("the rest".to_string(), |l| format!("{l} elements")))]
    /// A view that does not lie inside its buffer.
    ViewOutOfRange {
        /// The op.
        op: OpKind,
        /// The binding, by its signature's name.
        binding: &'static str,
        /// The first element asked for.
        offset: u64,
        /// The length in elements.
        len: Option<u64>,
        /// The buffer's length in elements.
        buffer_len: u64,
    },
    #[error("{op}: output `{output}` overlaps `{other}` without being the same range: in place means the very same view, and two outputs never overlap")]
    /// A written view overlapping another binding's.
    ViewsOverlap {
        /// The op.
        op: OpKind,
        /// The written binding.
        output: &'static str,
        /// The other binding.
        other: &'static str,
    },
    // `what` is the call, which the error already names.
    #[error("{count} elements at offset {offset} exceed the buffer's {len}")]
    /// A host read or write past the buffer's end.
    HostRange {
        /// The call or step refused.
        what: &'static str,
        /// The first element asked for.
        offset: usize,
        /// The elements asked for.
        count: usize,
        /// The length in elements.
        len: usize,
    },
    #[error("{what} is zero-sized")]
    /// A zero-sized allocation or launch.
    ZeroSize {
        /// The call or step refused.
        what: &'static str,
    },
    #[error("{what} is too large: {detail}")]
    /// An allocation or launch past what any backend can address.
    TooLarge {
        /// The call or step refused.
        what: &'static str,
        /// The view and its declared extent.
        detail: String,
    },
    #[error("{op}: invalid parameter `{name}`: {reason}")]
    /// A parameter the op or kernel refuses.
    InvalidParam {
        /// The op.
        op: OpKind,
        /// The parameter.
        name: &'static str,
        /// Why.
        reason: String,
    },
    #[error("{op}: output `{output}` must not alias input `{input}`")]
    /// A written view the same as a read one where the op does not run in place.
    AliasNotAllowed {
        /// The op.
        op: OpKind,
        /// The written binding.
        output: &'static str,
        /// The read binding.
        input: &'static str,
    },

    #[error(
        "kernel {kernel}: one buffer is bound to `{read_only}`, which the kernel's WGSL declares \
         var<storage, read>, and to `{other}`, declared read_write: WebGPU refuses a buffer used \
         read-only and read-write in one dispatch; bind another buffer, or declare \
         `{read_only}` var<storage, read_write>"
    )]
    /// One buffer bound to a binding a kernel's WGSL declares `read` and to a `read_write` one.
    ReadOnlyShared {
        /// The kernel's name.
        kernel: &'static str,
        /// The binding the WGSL declares `read`.
        read_only: &'static str,
        /// The other binding.
        other: &'static str,
    },

    #[error(
        "kernel {kernel} wrote element {element} of the buffer bound to `{binding}`, outside \
         the extents it declares ({detail}); checked mode put the buffers back as they were"
    )]
    /// Checked mode: a kernel wrote outside the extents it declares.
    WroteOutsideExtents {
        /// The kernel's name.
        kernel: &'static str,
        /// The binding, by its signature's name.
        binding: &'static str,
        /// The element written, counted from the buffer's start.
        element: u64,
        /// The view and its declared extent.
        detail: String,
    },

    // --- user kernels ---
    #[error("kernel {kernel} is not registered on this device: call register_kernel first")]
    /// A user kernel launched on a device it was not registered on.
    KernelNotRegistered {
        /// The kernel's name.
        kernel: &'static str,
    },
    #[error("kernel {kernel} is malformed: {reason}")]
    /// A kernel definition no backend can take.
    BadKernel {
        /// The kernel's name.
        kernel: &'static str,
        /// Why.
        reason: String,
    },
    #[error("kernel {kernel} has no {source_kind}, which this backend runs")]
    /// A kernel without the source this backend runs.
    KernelSourceMissing {
        /// The kernel's name.
        kernel: &'static str,
        /// The source the backend needs.
        source_kind: &'static str,
    },
    #[error("kernel {kernel} failed to compile ({compiler}):\n{log}")]
    /// A kernel source that does not compile, with the compiler's log.
    KernelCompile {
        /// The kernel's name.
        kernel: &'static str,
        /// The compiler.
        compiler: String,
        /// Its message.
        log: String,
    },

    // --- backend / driver ---
    #[error("{op} with {dtype} is not implemented by this backend")]
    /// An op this backend does not implement.
    OpUnsupported {
        /// The op.
        op: OpKind,
        /// The element type.
        dtype: DType,
    },
    #[error("driver call {driver_call} failed: {message}")]
    /// A driver call failed.
    Driver {
        /// The driver function.
        driver_call: String,
        /// What the driver said.
        message: String,
    },
    #[error("backend unavailable: {reason}")]
    /// The backend cannot be used here.
    Unavailable {
        /// Why.
        reason: String,
    },
    #[error("injected fault in {call} (fault injection)")]
    /// A fault injected by a test double.
    Injected {
        /// The call the fault was injected into.
        call: &'static str,
    },
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

/// What keeps a buffer alive: a graph handle, the current graph, or the
/// open capture that has recorded a launch reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphUser {
    /// A graph handle, by id.
    Handle(u64),
    /// The current graph.
    Current,
    /// The open capture.
    OpenCapture,
}

impl std::fmt::Display for GraphUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GraphUser::Handle(id) => write!(f, "graph {id}"),
            GraphUser::Current => f.write_str("the current graph"),
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

/// A seam call's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
