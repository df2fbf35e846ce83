//! The thin layer over objc2-metal: every Metal call of the backend, each
//! `unsafe` block with its `SAFETY` reason, every failure an
//! [`ErrorKind::Driver`] naming the Metal call. Above this module the
//! backend is safe Rust that cannot leak or dangle a Metal object: every
//! object is a `Retained` released on drop, and an encoder is ended on drop.

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
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, ErrorKind>;

/// Byte stride of one command's `Params` (and of its sizes block) in a
/// graph's argument buffer: constant-buffer offsets must be 256-aligned on
/// some Macs.
const ARG_STRIDE: usize = 256;
/// Members of naga's `_mslBufferSizes` block a dispatch may carry.
pub const MAX_SIZES: usize = 8;
/// `threadgroup` arguments a kernel may take (gemm takes 2).
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

/// One Metal device.
pub struct Device {
    raw: Retained<ProtocolObject<dyn MTLDevice>>,
}

impl Device {
    /// The index-th device of `MTLCopyAllDevices`.
    pub fn open(index: usize) -> std::result::Result<Device, String> {
        pool(|| {
            let all = MTLCopyAllDevices();
            let count = all.count();
            if index >= count {
                return Err(format!(
                    "metal:{index} does not exist (MTLCopyAllDevices found {count})"
                ));
            }
            Ok(Device {
                raw: all.objectAtIndex(index),
            })
        })
    }

    pub fn name(&self) -> String {
        pool(|| self.raw.name().to_string())
    }

    /// Whether compute dispatches can be recorded into indirect command
    /// buffers: GPU family Apple3+ or Mac2, on an OS that has the compute
    /// half of the API (`MTLIndirectCommandTypeConcurrentDispatch`,
    /// `MTLIndirectComputeCommand.setBarrier`).
    pub fn supports_compute_icb(&self) -> bool {
        available!(macos = 11.0, ios = 13.0, tvos = 13.0, visionos = 1.0)
            && (self.raw.supportsFamily(MTLGPUFamily::Apple3)
                || self.raw.supportsFamily(MTLGPUFamily::Mac2))
    }

    /// A shared-storage buffer (CPU and GPU see the same memory).
    pub fn new_buffer(&self, bytes: usize) -> Result<Buffer> {
        let max = self.raw.maxBufferLength();
        if bytes > max {
            return Err(ErrorKind::TooLarge {
                what: "allocation",
                detail: format!("{bytes} bytes exceed the device's maxBufferLength {max}"),
            });
        }
        let raw = self
            .raw
            .newBufferWithLength_options(bytes, MTLResourceOptions::StorageModeShared)
            .ok_or_else(|| nil("newBufferWithLength:options:"))?;
        Ok(Buffer { raw, len: bytes })
    }

    pub fn new_queue(&self) -> Result<Queue> {
        let raw = self
            .raw
            .newCommandQueue()
            .ok_or_else(|| nil("newCommandQueue"))?;
        Ok(Queue { raw })
    }

    /// Compile MSL source, with fast math off (C11: results are compared
    /// with the CPU reference).
    pub fn new_library(&self, source: &str) -> Result<Library> {
        pool(|| {
            let options = MTLCompileOptions::new();
            // `mathMode` replaces it only from macOS 15 / iOS 18; this works everywhere.
            #[allow(deprecated)]
            options.setFastMathEnabled(false);
            let raw = self
                .raw
                .newLibraryWithSource_options_error(&NSString::from_str(source), Some(&options))
                .map_err(|e| {
                    ErrorKind::driver(
                        "newLibraryWithSource:options:error:",
                        e.localizedDescription(),
                    )
                })?;
            Ok(Library { raw })
        })
    }

    /// A compute pipeline for one kernel function; `icb`: usable from an
    /// indirect command buffer (`supportIndirectCommandBuffers = YES`).
    pub fn new_pipeline(
        &self,
        library: &Library,
        function: &str,
        threads_per_group: u64,
        icb: bool,
    ) -> Result<Pipeline> {
        pool(|| {
            let f = library
                .raw
                .newFunctionWithName(&NSString::from_str(function))
                .ok_or_else(|| {
                    ErrorKind::driver("newFunctionWithName", format!("no function `{function}`"))
                })?;
            let desc = MTLComputePipelineDescriptor::new();
            desc.setComputeFunction(Some(&f));
            if icb {
                // Only where ICBs are supported: the property is macOS 11+.
                desc.setSupportIndirectCommandBuffers(true);
            }
            let raw = self
                .raw
                .newComputePipelineStateWithDescriptor_options_reflection_error(
                    &desc,
                    MTLPipelineOption::None,
                    None,
                )
                .map_err(|e| {
                    ErrorKind::driver(
                        "newComputePipelineStateWithDescriptor:options:reflection:error:",
                        e.localizedDescription(),
                    )
                })?;
            let max = raw.maxTotalThreadsPerThreadgroup() as u64;
            if max < threads_per_group {
                return Err(ErrorKind::driver(
                    "maxTotalThreadsPerThreadgroup",
                    format!("{function} needs {threads_per_group} threads per threadgroup, the pipeline allows {max}"),
                ));
            }
            Ok(Pipeline { raw })
        })
    }

    /// Encode `dispatches` into a new indirect command buffer, in order, each
    /// with a barrier after the one before it (the Vulkan backend's barrier
    /// before every dispatch). Params and buffer sizes go into an argument
    /// buffer the returned [`Icb`] owns. Every pipeline must have been made
    /// with `icb = true`.
    pub fn new_icb(&self, dispatches: &[Dispatch<'_>]) -> Result<Icb> {
        let count = dispatches.len();
        if count == 0 {
            return Err(ErrorKind::driver(
                "newIndirectCommandBufferWithDescriptor:maxCommandCount:options:",
                "no commands",
            ));
        }
        for d in dispatches {
            d.check()?;
        }
        let args = self.new_buffer(count * 2 * ARG_STRIDE)?;
        for (i, d) in dispatches.iter().enumerate() {
            args.write(i * 2 * ARG_STRIDE, &d.params)?;
            let sizes: Vec<u8> = d.sizes.iter().flat_map(|s| s.to_ne_bytes()).collect();
            args.write((i * 2 + 1) * ARG_STRIDE, &sizes)?;
        }
        pool(|| {
            let desc = MTLIndirectCommandBufferDescriptor::new();
            desc.setCommandTypes(MTLIndirectCommandType::ConcurrentDispatch);
            desc.setInheritPipelineState(false);
            desc.setInheritBuffers(false);
            desc.setMaxKernelBufferBindCount(SIZES_INDEX + 1);
            // The property exists from macOS 14 / iOS 17; before it, compute
            // commands take threadgroup lengths without declaring a count.
            if available!(macos = 14.0, ios = 17.0, tvos = 17.0, visionos = 1.0) {
                // SAFETY: a small constant, within Metal's limit of 31.
                unsafe { desc.setMaxKernelThreadgroupMemoryBindCount(MAX_THREADGROUP_ARGS) };
            }
            // SAFETY: `count` is the number of commands encoded below, > 0.
            let raw = unsafe {
                self.raw
                    .newIndirectCommandBufferWithDescriptor_maxCommandCount_options(
                        &desc,
                        count,
                        MTLResourceOptions::StorageModeShared,
                    )
            }
            .ok_or_else(|| {
                nil("newIndirectCommandBufferWithDescriptor:maxCommandCount:options:")
            })?;
            for (i, d) in dispatches.iter().enumerate() {
                // SAFETY: i < count, the ICB's maxCommandCount.
                let cmd = unsafe { raw.indirectComputeCommandAtIndex(i) };
                encode_icb_command(&cmd, d, &args, i);
            }
            Ok(Icb { raw, count, args })
        })
    }
}

fn encode_icb_command(
    cmd: &ProtocolObject<dyn MTLIndirectComputeCommand>,
    d: &Dispatch<'_>,
    args: &Buffer,
    i: usize,
) {
    cmd.setComputePipelineState(&d.pipeline.raw);
    for (index, buf) in d.buffers.iter().enumerate() {
        // SAFETY: index < PARAMS_INDEX < maxKernelBufferBindCount (checked by
        // Dispatch::check); the graph holding this ICB keeps `buf` alive.
        unsafe { cmd.setKernelBuffer_offset_atIndex(&buf.raw, 0, index) };
    }
    // SAFETY: both offsets lie inside `args` (2 * ARG_STRIDE per command,
    // sized for every command), 256-aligned; the indices are below
    // maxKernelBufferBindCount; the Icb owns `args`.
    unsafe {
        cmd.setKernelBuffer_offset_atIndex(&args.raw, i * 2 * ARG_STRIDE, PARAMS_INDEX);
        cmd.setKernelBuffer_offset_atIndex(&args.raw, (i * 2 + 1) * ARG_STRIDE, SIZES_INDEX);
    }
    for (index, &len) in d.threadgroup_memory.iter().enumerate() {
        // SAFETY: index < MAX_THREADGROUP_ARGS = maxKernelThreadgroupMemoryBindCount
        // (checked by Dispatch::check); lengths are multiples of 16 (build.rs).
        unsafe { cmd.setThreadgroupMemoryLength_atIndex(len as usize, index) };
    }
    let [tx, ty, tz] = d.threads;
    cmd.concurrentDispatchThreadgroups_threadsPerThreadgroup(
        size(d.groups.0, d.groups.1, 1),
        size(tx, ty, tz),
    );
    if i > 0 {
        // Ordered after every earlier command in the ICB, as the eager
        // serial encoder orders dispatches.
        cmd.setBarrier();
    }
}

/// One kernel dispatch: what the eager path encodes directly and capture
/// records into an indirect command buffer.
pub struct Dispatch<'a> {
    pub pipeline: &'a Pipeline,
    /// Bound at indices 0.. in signature order.
    pub buffers: Vec<&'a Buffer>,
    /// The 32-byte `Params` block, at `PARAMS_INDEX`.
    pub params: [u8; 32],
    /// naga's `_mslBufferSizes` members, at `SIZES_INDEX`.
    pub sizes: Vec<u32>,
    /// Length of each `threadgroup` argument.
    pub threadgroup_memory: &'static [u32],
    /// Threadgroups in x and y.
    pub groups: (u32, u32),
    pub threads: [u32; 3],
}

impl Dispatch<'_> {
    /// The bounds the unsafe calls rely on.
    fn check(&self) -> Result<()> {
        if self.buffers.len() > PARAMS_INDEX
            || self.sizes.is_empty()
            || self.sizes.len() > MAX_SIZES
            || self.threadgroup_memory.len() > MAX_THREADGROUP_ARGS
        {
            return Err(ErrorKind::driver(
                "dispatch",
                format!(
                    "{} buffers, {} sizes, {} threadgroup arguments exceed the binding layout",
                    self.buffers.len(),
                    self.sizes.len(),
                    self.threadgroup_memory.len()
                ),
            ));
        }
        Ok(())
    }
}

/// A shared-storage `MTLBuffer`.
pub struct Buffer {
    raw: Retained<ProtocolObject<dyn MTLBuffer>>,
    len: usize,
}

// SAFETY: MTLBuffer objects may be used from any thread (Metal resources are
// thread-safe to reference); the contents are only touched by `write`/`read`,
// which take `&self` but are called by the backend under its `&mut self`
// after the GPU work using the buffer has completed.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

impl Buffer {
    pub fn len(&self) -> usize {
        self.len
    }

    fn range(&self, what: &'static str, offset: usize, count: usize) -> Result<()> {
        if offset.checked_add(count).is_none_or(|end| end > self.len) {
            return Err(ErrorKind::HostRange {
                what,
                offset,
                count,
                len: self.len,
            });
        }
        Ok(())
    }

    /// Copy `data` into the buffer at byte `offset`. The caller has waited
    /// for every GPU command that uses the buffer.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.range("write", offset, data.len())?;
        let base = self.raw.contents().cast::<u8>();
        // SAFETY: shared storage: `contents` maps all `len` bytes for the CPU;
        // offset + data.len() <= len was checked; the GPU is not using the
        // buffer (caller's contract); `data` cannot overlap Metal's memory.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), base.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copy from byte `offset` into `out`. The caller has waited for every
    /// GPU command that uses the buffer.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.range("read", offset, out.len())?;
        let base = self.raw.contents().cast::<u8>();
        // SAFETY: as in `write`, reading instead.
        unsafe {
            std::ptr::copy_nonoverlapping(base.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    fn resource(&self) -> &ProtocolObject<dyn MTLResource> {
        ProtocolObject::from_ref(&*self.raw)
    }
}

/// A compiled MSL library.
pub struct Library {
    raw: Retained<ProtocolObject<dyn MTLLibrary>>,
}

/// A compute pipeline state.
pub struct Pipeline {
    raw: Retained<ProtocolObject<dyn MTLComputePipelineState>>,
}

/// A recorded graph's indirect command buffer and the argument buffer its
/// commands read `Params` and buffer sizes from.
pub struct Icb {
    raw: Retained<ProtocolObject<dyn MTLIndirectCommandBuffer>>,
    count: usize,
    args: Buffer,
}

// SAFETY: an MTLIndirectCommandBuffer is a Metal resource (thread-safe to
// reference); it is encoded once, in `Device::new_icb`, and only read by the
// GPU afterwards.
unsafe impl Send for Icb {}
// SAFETY: as above.
unsafe impl Sync for Icb {}

/// The device's command queue.
pub struct Queue {
    raw: Retained<ProtocolObject<dyn MTLCommandQueue>>,
}

impl Queue {
    /// A command buffer that retains the objects its commands reference.
    pub fn command_buffer(&self) -> Result<CommandBuffer> {
        pool(|| {
            let raw = self
                .raw
                .commandBuffer()
                .ok_or_else(|| nil("commandBuffer"))?;
            Ok(CommandBuffer { raw })
        })
    }
}

/// Where a committed command buffer stands.
#[derive(Debug, PartialEq)]
pub enum Status {
    Pending,
    Completed,
    Failed(String),
}

pub struct CommandBuffer {
    raw: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
}

// SAFETY: a command buffer is used by one thread at a time: the backend owns
// it and is only reached through `&mut self` behind core's lock.
unsafe impl Send for CommandBuffer {}

impl CommandBuffer {
    /// A serial compute encoder: dispatches run in order.
    pub fn encoder(&self) -> Result<Encoder> {
        pool(|| {
            let raw = self
                .raw
                .computeCommandEncoder()
                .ok_or_else(|| nil("computeCommandEncoder"))?;
            Ok(Encoder { raw: Some(raw) })
        })
    }

    /// Submit. Every encoder of it must have ended (the backend ends the
    /// batch encoder before committing).
    pub fn commit(&self) {
        self.raw.commit();
    }

    pub fn status(&self) -> Status {
        match self.raw.status() {
            MTLCommandBufferStatus::Completed => Status::Completed,
            MTLCommandBufferStatus::Error => Status::Failed(pool(|| {
                self.raw
                    .error()
                    .map(|e| e.localizedDescription().to_string())
                    .unwrap_or_else(|| "command buffer failed".into())
            })),
            _ => Status::Pending,
        }
    }

    /// Wait for a committed command buffer to finish (completed or failed),
    /// up to `WAIT_LIMIT`: polls `status` (spinning briefly, then sleeping)
    /// instead of the unbounded `waitUntilCompleted`. Err: still running.
    pub fn wait(&self) -> Result<Status> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            match self.status() {
                Status::Pending => {}
                done => return Ok(done),
            }
            if start.elapsed() > WAIT_LIMIT {
                return Err(ErrorKind::driver(
                    "MTLCommandBuffer.status",
                    format!("not completed after {} s", WAIT_LIMIT.as_secs()),
                ));
            }
            if spins < 1000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }
}

/// A compute command encoder; ended on drop if not ended before.
pub struct Encoder {
    raw: Option<Retained<ProtocolObject<dyn MTLComputeCommandEncoder>>>,
}

// SAFETY: as `CommandBuffer`: owned by the backend, used by one thread at a time.
unsafe impl Send for Encoder {}

impl Encoder {
    /// Encode one dispatch: pipeline, buffers 0.., `Params` and sizes with
    /// `setBytes`, threadgroup memory lengths, then the threadgroups.
    pub fn dispatch(&self, d: &Dispatch<'_>) -> Result<()> {
        d.check()?;
        let Some(enc) = &self.raw else {
            return Err(nil("computeCommandEncoder (ended)"));
        };
        enc.setComputePipelineState(&d.pipeline.raw);
        for (index, buf) in d.buffers.iter().enumerate() {
            // SAFETY: index < PARAMS_INDEX (checked); the command buffer
            // retains `buf` (created with `commandBuffer`, retained references).
            unsafe { enc.setBuffer_offset_atIndex(Some(&buf.raw), 0, index) };
        }
        let params = NonNull::from(&d.params).cast::<c_void>();
        // SAFETY: `params` points at 32 live bytes; Metal copies them now.
        unsafe { enc.setBytes_length_atIndex(params, d.params.len(), PARAMS_INDEX) };
        let sizes = NonNull::from(d.sizes.as_slice()).cast::<c_void>();
        // SAFETY: `sizes` points at sizes.len() live u32s (checked non-empty);
        // Metal copies them now.
        unsafe { enc.setBytes_length_atIndex(sizes, d.sizes.len() * 4, SIZES_INDEX) };
        for (index, &len) in d.threadgroup_memory.iter().enumerate() {
            // SAFETY: index < MAX_THREADGROUP_ARGS (checked), within Metal's
            // 31 threadgroup slots; lengths are multiples of 16 (build.rs).
            unsafe { enc.setThreadgroupMemoryLength_atIndex(len as usize, index) };
        }
        let [tx, ty, tz] = d.threads;
        enc.dispatchThreadgroups_threadsPerThreadgroup(
            size(d.groups.0, d.groups.1, 1),
            size(tx, ty, tz),
        );
        Ok(())
    }

    /// Run a recorded graph: declare every buffer its commands use
    /// (`useResource:usage:`, which also orders it after earlier writers),
    /// then execute every command.
    pub fn execute(&self, icb: &Icb, buffers: &[&Buffer]) -> Result<()> {
        let Some(enc) = &self.raw else {
            return Err(nil("computeCommandEncoder (ended)"));
        };
        let rw = MTLResourceUsage::Read | MTLResourceUsage::Write;
        for buf in buffers {
            enc.useResource_usage(buf.resource(), rw);
        }
        enc.useResource_usage(icb.args.resource(), MTLResourceUsage::Read);
        let range = NSRange {
            location: 0,
            length: icb.count,
        };
        // SAFETY: the range is exactly the commands encoded in `new_icb`;
        // the caller keeps the Icb (and every buffer it references) alive
        // until this command buffer completes.
        unsafe { enc.executeCommandsInBuffer_withRange(&icb.raw, range) };
        Ok(())
    }

    /// `endEncoding`; required before the command buffer is committed or
    /// another encoder is made.
    pub fn end(mut self) {
        if let Some(enc) = self.raw.take() {
            enc.endEncoding();
        }
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        if let Some(enc) = self.raw.take() {
            enc.endEncoding();
        }
    }
}
