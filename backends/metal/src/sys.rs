//! The thin layer over objc2-metal: every Metal call of the backend, each
//! `unsafe` block with its `SAFETY` reason, every failure an
//! [`ErrorKind::Driver`] naming the Metal call. Above this module the
//! backend is safe Rust that cannot leak or dangle a Metal object: every
//! object is a `Retained` released on drop, and an encoder is ended on drop.
//! Nothing here relies on how the caller uses it:
//! - a [`CommandBuffer`] holds every buffer, pipeline and indirect command
//!   buffer its commands use until it is seen completed (or, if it is
//!   dropped while still running, leaks them);
//! - an [`Icb`] holds the pipelines and buffers its commands reference;
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
        Ok(Buffer(Arc::new(BufferInner {
            raw,
            len: bytes,
            users: AtomicUsize::new(0),
            host: Mutex::new(()),
        })))
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
        let mut buffers: Vec<Buffer> = Vec::new();
        for b in dispatches.iter().flat_map(|d| &d.buffers) {
            if !buffers.iter().any(|x| Arc::ptr_eq(&x.0, &b.0)) {
                buffers.push((*b).clone());
            }
        }
        let pipelines = dispatches.iter().map(|d| d.pipeline.raw.clone()).collect();
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
            Ok(Icb(Arc::new(IcbInner {
                raw,
                count,
                args,
                buffers,
                _pipelines: pipelines,
            })))
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
        // Dispatch::check); the `Icb` holds `buf` (and every command buffer
        // executing it holds the `Icb`).
        unsafe { cmd.setKernelBuffer_offset_atIndex(&buf.0.raw, 0, index) };
    }
    // SAFETY: both offsets lie inside `args` (2 * ARG_STRIDE per command,
    // sized for every command), 256-aligned; the indices are below
    // maxKernelBufferBindCount; the Icb owns `args`.
    unsafe {
        cmd.setKernelBuffer_offset_atIndex(&args.0.raw, i * 2 * ARG_STRIDE, PARAMS_INDEX);
        cmd.setKernelBuffer_offset_atIndex(&args.0.raw, (i * 2 + 1) * ARG_STRIDE, SIZES_INDEX);
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

struct BufferInner {
    raw: Retained<ProtocolObject<dyn MTLBuffer>>,
    len: usize,
    /// Command buffers that use it and have not been seen completed.
    users: AtomicUsize,
    /// Serialises host access to the contents.
    host: Mutex<()>,
}

// SAFETY: MTLBuffer objects may be used from any thread (Metal resources are
// thread-safe to reference); the contents are touched only by
// `Buffer::write`/`read`, under the `host` lock and only while no command
// buffer that uses the buffer may run (`users == 0`).
unsafe impl Send for BufferInner {}
// SAFETY: as above.
unsafe impl Sync for BufferInner {}

/// A shared-storage `MTLBuffer`. Clones share it.
#[derive(Clone)]
pub struct Buffer(Arc<BufferInner>);

impl Buffer {
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// The contents, for the host: refused while a command buffer that uses
    /// the buffer has not been seen completed (wait for it first).
    fn host(&self, what: &'static str, offset: usize, count: usize) -> Result<MutexGuard<'_, ()>> {
        if offset.checked_add(count).is_none_or(|end| end > self.0.len) {
            return Err(ErrorKind::HostRange {
                what,
                offset,
                count,
                len: self.0.len,
            });
        }
        let guard = self.0.host.lock().unwrap_or_else(|p| p.into_inner());
        let users = self.0.users.load(Ordering::Acquire);
        if users > 0 {
            return Err(ErrorKind::driver(
                "MTLBuffer.contents",
                format!("{what}: {users} command buffer(s) using the buffer have not completed"),
            ));
        }
        Ok(guard)
    }

    /// Copy `data` into the buffer at byte `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let _host = self.host("write", offset, data.len())?;
        let base = self.0.raw.contents().cast::<u8>();
        // SAFETY: shared storage: `contents` maps all `len` bytes for the CPU;
        // offset + data.len() <= len was checked; no command buffer using
        // the buffer may run and no other host access runs (both checked
        // under the lock); `data` cannot overlap Metal's memory.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), base.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copy from byte `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let _host = self.host("read", offset, out.len())?;
        let base = self.0.raw.contents().cast::<u8>();
        // SAFETY: as in `write`, reading instead; `out` is a distinct Rust
        // borrow.
        unsafe {
            std::ptr::copy_nonoverlapping(base.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    fn resource(&self) -> &ProtocolObject<dyn MTLResource> {
        ProtocolObject::from_ref(&*self.0.raw)
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

struct IcbInner {
    raw: Retained<ProtocolObject<dyn MTLIndirectCommandBuffer>>,
    count: usize,
    args: Buffer,
    /// Every buffer its commands reference, once each (for `useResource`).
    buffers: Vec<Buffer>,
    /// Every pipeline its commands reference (an ICB does not retain them).
    _pipelines: Vec<Retained<ProtocolObject<dyn MTLComputePipelineState>>>,
}

// SAFETY: an MTLIndirectCommandBuffer and pipeline states are Metal objects
// that are thread-safe to reference; the ICB is encoded once, in
// `Device::new_icb`, before it is shared, and only read by the GPU afterwards.
unsafe impl Send for IcbInner {}
// SAFETY: as above.
unsafe impl Sync for IcbInner {}

/// A recorded graph's indirect command buffer, the argument buffer its
/// commands read `Params` and buffer sizes from, and everything they use.
#[derive(Clone)]
pub struct Icb(Arc<IcbInner>);

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
            Ok(CommandBuffer {
                raw,
                uses: Arc::new(Mutex::new(Uses::default())),
            })
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

/// What a command buffer's commands use, held until it is seen completed.
#[derive(Default)]
struct Uses {
    buffers: Vec<Buffer>,
    icbs: Vec<Icb>,
    pipelines: Vec<Retained<ProtocolObject<dyn MTLComputePipelineState>>>,
    /// An encoder of it has not ended (Metal allows one at a time).
    encoding: bool,
    committed: bool,
    /// Seen completed or failed: `buffers`' use counts were given back.
    released: bool,
}

impl Uses {
    fn hold(&mut self, buffer: &Buffer) {
        if !self.buffers.iter().any(|b| Arc::ptr_eq(&b.0, &buffer.0)) {
            buffer.0.users.fetch_add(1, Ordering::AcqRel);
            self.buffers.push(buffer.clone());
        }
    }

    /// The commands will not run (again): give back the use counts.
    fn release(&mut self) {
        if !self.released {
            self.released = true;
            for b in self.buffers.drain(..) {
                b.0.users.fetch_sub(1, Ordering::AcqRel);
            }
            self.icbs.clear();
            self.pipelines.clear();
        }
    }
}

fn lock(uses: &Mutex<Uses>) -> MutexGuard<'_, Uses> {
    uses.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct CommandBuffer {
    raw: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
    /// Shared with its encoder.
    uses: Arc<Mutex<Uses>>,
}

// SAFETY: Metal command buffers may be encoded and committed from any thread,
// one at a time; `Send` without `Sync` allows exactly that. What it holds is
// behind a `Mutex`.
unsafe impl Send for CommandBuffer {}

impl CommandBuffer {
    /// A serial compute encoder: dispatches run in order. Refused while
    /// another encoder of it is open or once it is committed.
    pub fn encoder(&self) -> Result<Encoder> {
        let mut uses = lock(&self.uses);
        if uses.encoding || uses.committed {
            return Err(ErrorKind::driver(
                "computeCommandEncoder",
                "an encoder is open or the command buffer is committed",
            ));
        }
        pool(|| {
            let raw = self
                .raw
                .computeCommandEncoder()
                .ok_or_else(|| nil("computeCommandEncoder"))?;
            uses.encoding = true;
            Ok(Encoder {
                raw: Some(raw),
                uses: self.uses.clone(),
            })
        })
    }

    /// Submit. Refused while an encoder of it is open, or a second time.
    pub fn commit(&self) -> Result<()> {
        let mut uses = lock(&self.uses);
        if uses.encoding || uses.committed {
            return Err(ErrorKind::driver(
                "commit",
                "an encoder is open or the command buffer is committed",
            ));
        }
        uses.committed = true;
        self.raw.commit();
        Ok(())
    }

    /// Where it stands; once completed or failed, what it holds is released.
    pub fn status(&self) -> Status {
        let status = match self.raw.status() {
            MTLCommandBufferStatus::Completed => Status::Completed,
            MTLCommandBufferStatus::Error => Status::Failed(pool(|| {
                self.raw
                    .error()
                    .map(|e| e.localizedDescription().to_string())
                    .unwrap_or_else(|| "command buffer failed".into())
            })),
            _ => return Status::Pending,
        };
        lock(&self.uses).release();
        status
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

impl Drop for CommandBuffer {
    fn drop(&mut self) {
        let mut uses = lock(&self.uses);
        if !uses.committed {
            // Never submitted: nothing of it runs.
            uses.release();
        } else if !uses.released
            && matches!(
                self.raw.status(),
                MTLCommandBufferStatus::Completed | MTLCommandBufferStatus::Error
            )
        {
            uses.release();
        } else if !uses.released {
            // Still running: keep what it uses alive and its buffers marked
            // in use, for good.
            std::mem::forget(std::mem::take(&mut *uses));
        }
    }
}

/// A compute command encoder; ended on drop if not ended before.
pub struct Encoder {
    raw: Option<Retained<ProtocolObject<dyn MTLComputeCommandEncoder>>>,
    uses: Arc<Mutex<Uses>>,
}

// SAFETY: as `CommandBuffer`: an encoder may be used from any thread, one at
// a time, which `Send` without `Sync` allows.
unsafe impl Send for Encoder {}

impl Encoder {
    /// Encode one dispatch: pipeline, buffers 0.., `Params` and sizes with
    /// `setBytes`, threadgroup memory lengths, then the threadgroups.
    pub fn dispatch(&self, d: &Dispatch<'_>) -> Result<()> {
        d.check()?;
        let Some(enc) = &self.raw else {
            return Err(nil("computeCommandEncoder (ended)"));
        };
        let mut uses = lock(&self.uses);
        enc.setComputePipelineState(&d.pipeline.raw);
        uses.pipelines.push(d.pipeline.raw.clone());
        for (index, buf) in d.buffers.iter().enumerate() {
            // SAFETY: index < PARAMS_INDEX (checked); the command buffer
            // holds `buf` until it is seen completed (below), and Metal
            // retains it too (`commandBuffer`: retained references).
            unsafe { enc.setBuffer_offset_atIndex(Some(&buf.0.raw), 0, index) };
            uses.hold(buf);
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
    pub fn execute(&self, icb: &Icb) -> Result<()> {
        let Some(enc) = &self.raw else {
            return Err(nil("computeCommandEncoder (ended)"));
        };
        let mut uses = lock(&self.uses);
        let rw = MTLResourceUsage::Read | MTLResourceUsage::Write;
        for buf in &icb.0.buffers {
            enc.useResource_usage(buf.resource(), rw);
            uses.hold(buf);
        }
        enc.useResource_usage(icb.0.args.resource(), MTLResourceUsage::Read);
        uses.hold(&icb.0.args);
        let range = NSRange {
            location: 0,
            length: icb.0.count,
        };
        // SAFETY: the range is exactly the commands encoded in `new_icb`;
        // every buffer and pipeline they reference is held by the Icb, which
        // this command buffer holds (below) until it is seen completed.
        unsafe { enc.executeCommandsInBuffer_withRange(&icb.0.raw, range) };
        uses.icbs.push(icb.clone());
        Ok(())
    }

    /// `endEncoding`; required before the command buffer is committed or
    /// another encoder is made.
    pub fn end(self) {
        drop(self);
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        if let Some(enc) = self.raw.take() {
            enc.endEncoding();
            lock(&self.uses).encoding = false;
        }
    }
}
