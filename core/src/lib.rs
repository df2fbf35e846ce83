//! # seam
//!
//! One trait every GPU backend implements ([`Backend`]), including graph
//! capture and replay, and one [`Device`] that implements the shared
//! semantics once: the capture state machine, argument validation, replay
//! counting and tracing. Backend authors read `backend.rs`; users touch
//! [`Device`], [`Buffer`], [`Graph`] and [`CaptureScope`].
//!
//! The contract every backend is held to (C1–C14) is in `docs/contract.md`
//! and pinned by the `seam-conformance` suite.
#![warn(missing_docs)]

#[allow(unsafe_code)] // the trait declares the `unsafe` methods of the trust boundary
pub mod backend;
mod buffer_list;
pub mod device;
pub mod dtype;
pub mod error;
pub mod ids;
pub mod kept;
pub mod kernel;
pub mod ops;
pub mod registration;
pub mod signature;
pub mod table;
pub mod testing;
pub mod trace;
pub mod validate;
pub mod view;
pub mod wait;
pub mod wgsl;

pub use backend::{
    Backend, CaptureSupport, Conditional, ConditionalKind, ConditionalSupport, DeviceInfo,
    DeviceSpan, NodeTiming, Nodes, ReplayTarget, ResourceCounts, Subnormals, UpdateSupport,
};
pub use device::{Buffer, CaptureScope, Change, Device, Graph, GraphRef, Live, LowLevel};
pub use dtype::{DType, Element};
pub use error::{Error, ErrorKind, GraphUser, Result, Site};
pub use half::{bf16, f16};
pub use ids::{BufferId, GraphId, RawBuffer, RawGraph};
pub use kernel::{Kernel, KernelDef};
pub use ops::{Launch, OpCall, OpKind, RawView, View};
pub use registration::{
    Capability, CaptureKind, DeclaredNodeTiming, DeclaredTiming, Expectation, Registration,
    ALL_CAPABILITIES,
};
pub use signature::{Params, Tolerance};
pub use trace::{chrome_trace, EventKind, NodeDesc, TraceEvent, TraceLog};
