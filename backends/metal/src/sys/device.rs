//! The device: buffers, libraries, pipelines and indirect command buffers it makes.

use super::memory::BufferInner;
use super::*;

/// One Metal device.
pub struct Device {
    pub(super) raw: Retained<ProtocolObject<dyn MTLDevice>>,
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

    /// Most threadgroup memory one threadgroup may use, in bytes.
    pub fn max_threadgroup_memory(&self) -> usize {
        self.raw.maxThreadgroupMemoryLength()
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
        self.compile_library(source)
            .map_err(|message| ErrorKind::driver("newLibraryWithSource:options:error:", message))
    }

    /// [`Device::new_library`], failing with the compiler's message (a user
    /// kernel's `KernelCompile` log).
    pub fn compile_library(&self, source: &str) -> std::result::Result<Library, String> {
        pool(|| {
            let options = MTLCompileOptions::new();
            // `mathMode` replaces it only from macOS 15 / iOS 18; this works everywhere.
            #[allow(deprecated)]
            options.setFastMathEnabled(false);
            let raw = self
                .raw
                .newLibraryWithSource_options_error(&NSString::from_str(source), Some(&options))
                .map_err(|e| e.localizedDescription().to_string())?;
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
        let commands: Vec<Held> = dispatches.iter().map(Held::of).collect();
        for (i, d) in dispatches.iter().enumerate() {
            write_args(&args, i, d)?;
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
                buffers: held_buffers(&commands),
                commands,
            })))
        })
    }
}

/// Command `i`'s `Params` and buffer sizes, into its slots of `args`
/// (refused while a command buffer that uses `args` may run).
fn write_args(args: &Buffer, i: usize, d: &Dispatch<'_>) -> Result<()> {
    args.write(i * 2 * ARG_STRIDE, &d.params)?;
    let sizes: Vec<u8> = d.sizes.iter().flat_map(|s| s.to_ne_bytes()).collect();
    args.write((i * 2 + 1) * ARG_STRIDE, &sizes)
}

/// Every buffer the commands bind, once each (for `useResource`).
fn held_buffers(commands: &[Held]) -> Vec<Buffer> {
    crate::update::union(commands.iter().map(|c| c.buffers.as_slice()), |x, y| {
        Arc::ptr_eq(&x.0, &y.0)
    })
}

fn encode_icb_command(
    cmd: &ProtocolObject<dyn MTLIndirectComputeCommand>,
    d: &Dispatch<'_>,
    args: &Buffer,
    i: usize,
) {
    cmd.setComputePipelineState(&d.pipeline.raw);
    for (index, buf) in d.buffers.iter().enumerate() {
        // SAFETY: index < PARAMS_INDEX < maxKernelBufferBindCount =
        // SIZES_INDEX + 1 (checked by Dispatch::check); the `Icb` holds `buf` (and every command buffer
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
        // (checked by Dispatch::check); lengths are multiples of 16 (lowering.rs).
        unsafe { cmd.setThreadgroupMemoryLength_atIndex(len as usize, index) };
    }
    let [tx, ty, tz] = d.threads;
    let [gx, gy, gz] = d.groups;
    cmd.concurrentDispatchThreadgroups_threadsPerThreadgroup(size(gx, gy, gz), size(tx, ty, tz));
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
    /// The 64-byte immediate block (`Launch::immediates`: `Params`, then
    /// each binding's view offset), at `PARAMS_INDEX`.
    pub params: [u8; seam::ops::IMMEDIATE_BYTES],
    /// naga's `_mslBufferSizes` members, at `SIZES_INDEX`.
    pub sizes: Vec<u32>,
    /// Length of each `threadgroup` argument.
    pub threadgroup_memory: &'a [u32],
    /// Threadgroups in x, y and z.
    pub groups: [u32; 3],
    pub threads: [u32; 3],
}

impl Dispatch<'_> {
    /// The bounds the unsafe calls rely on.
    pub(super) fn check(&self) -> Result<()> {
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

/// A compiled MSL library.
pub struct Library {
    pub(super) raw: Retained<ProtocolObject<dyn MTLLibrary>>,
}

/// A compute pipeline state.
pub struct Pipeline {
    pub(super) raw: Retained<ProtocolObject<dyn MTLComputePipelineState>>,
}

/// What one ICB command references: an ICB retains neither its commands'
/// pipeline nor their buffers, so the `Icb` does, per command, and a
/// re-encoded command's holdings are replaced with it.
pub(super) struct Held {
    buffers: Vec<Buffer>,
    _pipeline: Retained<ProtocolObject<dyn MTLComputePipelineState>>,
}

impl Held {
    fn of(d: &Dispatch<'_>) -> Held {
        Held {
            buffers: d.buffers.iter().map(|b| (*b).clone()).collect(),
            _pipeline: d.pipeline.raw.clone(),
        }
    }
}

pub(super) struct IcbInner {
    pub(super) raw: Retained<ProtocolObject<dyn MTLIndirectCommandBuffer>>,
    pub(super) count: usize,
    pub(super) args: Buffer,
    /// Every buffer its commands reference, once each (for `useResource`).
    pub(super) buffers: Vec<Buffer>,
    /// Per command (index = ICB command index), what it references.
    commands: Vec<Held>,
}

// SAFETY: an MTLIndirectCommandBuffer and pipeline states are Metal objects
// that are thread-safe to reference. The ICB's commands are encoded in
// `Device::new_icb` before it is shared, and re-encoded only by
// `Icb::reencode`, through `Arc::get_mut`: only while no other `Icb` clone
// exists, so no other thread references it and no command buffer that may
// run it holds it (each holds a clone until seen completed, or for good).
unsafe impl Send for IcbInner {}
// SAFETY: as above.
unsafe impl Sync for IcbInner {}

/// A recorded graph's indirect command buffer, the argument buffer its
/// commands read `Params` and buffer sizes from, and everything they use.
#[derive(Clone)]
pub struct Icb(pub(super) Arc<IcbInner>);

impl Icb {
    /// How many commands it holds (one per recorded dispatch).
    pub fn commands(&self) -> usize {
        self.0.count
    }

    /// Re-encode commands in place (C13): for each (command index,
    /// dispatch), `indirectComputeCommandAtIndex` → `reset` → pipeline,
    /// buffers, `Params` and sizes, threadgroup memory, threadgroups and
    /// barrier, exactly as `Device::new_icb` encoded it; the command's
    /// holdings follow (the old buffers and pipeline are let go, the new
    /// ones held). Refused, changing nothing, while any command buffer
    /// holds this ICB (one that executes it and has not been seen
    /// completed, or one still being encoded), or while another clone of
    /// it exists: the GPU never reads a command being rewritten, and a
    /// replay queued before the call runs the old commands. Every index and
    /// dispatch is checked before anything changes; a failed argument
    /// write (only if those checks were wrong) leaves it partly updated and
    /// is an error.
    pub fn reencode(&mut self, changes: &[(usize, Dispatch<'_>)]) -> Result<()> {
        let call = "indirectComputeCommandAtIndex";
        let inner = Arc::get_mut(&mut self.0).ok_or_else(|| {
            ErrorKind::driver(
                call,
                "the indirect command buffer is held by a command buffer not seen completed",
            )
        })?;
        for (i, d) in changes {
            if *i >= inner.count {
                return Err(ErrorKind::driver(
                    call,
                    format!("command {i} of {}", inner.count),
                ));
            }
            d.check()?;
        }
        for (i, d) in changes {
            write_args(&inner.args, *i, d)?;
        }
        pool(|| {
            for (i, d) in changes {
                // SAFETY: i < count, the ICB's maxCommandCount (checked above).
                let cmd = unsafe { inner.raw.indirectComputeCommandAtIndex(*i) };
                cmd.reset();
                encode_icb_command(&cmd, d, &inner.args, *i);
                inner.commands[*i] = Held::of(d);
            }
        });
        inner.buffers = held_buffers(&inner.commands);
        Ok(())
    }
}
