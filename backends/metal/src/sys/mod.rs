//! The thin layer over objc2-metal: every Metal call of the backend, each
//! `unsafe` block with its `SAFETY` reason, every failure an
//! [`ErrorKind::Driver`] naming the Metal call. Above this module the
//! backend is safe Rust that cannot leak or dangle a Metal object: every
//! object is a `Retained` released on drop, and an encoder is ended on drop.
//! Nothing here relies on how the caller uses it:
//! - a [`CommandBuffer`] holds every buffer, pipeline and indirect command
//!   buffer its commands use until it is seen completed (or, if it is
//!   dropped while still running, leaks them);
//! - an [`Icb`] holds the pipelines and buffers its commands reference, and
//!   re-encodes a command only while nothing else holds it (no command
//!   buffer that may run it, no other clone);
//! - host access to a [`Buffer`] is refused while a command buffer that uses
//!   it has not been seen completed, and is serialised by a lock.

use crate::msl::{PARAMS_INDEX, SIZES_INDEX};
use objc2::available;
use objc2::rc::{autoreleasepool, Retained};
use objc2::runtime::ProtocolObject;
use objc2_foundation::{NSProcessInfo, NSRange, NSString};
use objc2_metal::{
    MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder, MTLCommandQueue,
    MTLCompileOptions, MTLComputeCommandEncoder, MTLComputePipelineDescriptor,
    MTLComputePipelineState, MTLCopyAllDevices, MTLDevice, MTLGPUFamily, MTLIndirectCommandBuffer,
    MTLIndirectCommandBufferDescriptor, MTLIndirectCommandType, MTLIndirectComputeCommand,
    MTLLibrary, MTLPipelineOption, MTLResource, MTLResourceOptions, MTLResourceUsage, MTLSize,
};
use seam::ErrorKind;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, ErrorKind>;

/// Byte stride of one command's `Params` (and of its sizes block) in a
/// graph's argument buffer: constant-buffer offsets must be 256-aligned on
/// some Macs.
const ARG_STRIDE: usize = 256;
/// Members of naga's `_mslBufferSizes` block a dispatch may carry (one per
/// binding at most).
pub const MAX_SIZES: usize = crate::msl::MAX_BINDINGS;
/// `threadgroup` arguments a kernel may take (gemm takes 2; a user kernel
/// with more is refused at registration).
pub const MAX_THREADGROUP_ARGS: usize = 4;
/// How long a wait for the GPU may take before it is an error.
pub const WAIT_LIMIT: Duration = Duration::from_secs(20);

fn nil(call: &str) -> ErrorKind {
    ErrorKind::driver(call, "returned nil")
}

fn size(x: u32, y: u32, z: u32) -> MTLSize {
    MTLSize {
        width: x as usize,
        height: y as usize,
        depth: z as usize,
    }
}

/// Run `f` inside an autorelease pool, so objects Metal hands back
/// autoreleased (encoders, command buffers, errors) are released here rather
/// than piling up on a thread that has no run loop.
pub fn pool<R>(f: impl FnOnce() -> R) -> R {
    autoreleasepool(|_| f())
}

/// Number of Metal devices (`MTLCopyAllDevices`).
pub fn device_count() -> usize {
    pool(|| MTLCopyAllDevices().count())
}

/// The operating system version, for `DeviceInfo::driver` (Metal has no
/// separate driver version).
pub fn os_version() -> String {
    pool(|| {
        NSProcessInfo::processInfo()
            .operatingSystemVersionString()
            .to_string()
    })
}

mod command;
mod device;
mod memory;

pub use command::{CommandBuffer, Encoder, Queue, Status};
pub use device::{Device, Dispatch, Icb, Library, Pipeline};
pub use memory::Buffer;
