//! `VulkanBackend`: the seam over the `sys` layer. Safe Rust only; the
//! decisions it implements are listed in the crate documentation. Objects the
//! device may still use are kept alive by `sys` (a pending submission holds
//! its command buffer, which holds what it uses), so this layer simply drops
//! what it no longer needs: a freed buffer, a destroyed graph (C8), a
//! replaced current exec.

mod bodies;
mod eager;
mod nodes;
mod pipelines;
mod staging;
#[cfg(test)]
mod tests;
mod timing;
mod update;

use crate::dispatch;
use crate::sys::{self, Buffer, CommandBuffer, Gpu, Instance, Pipeline, Validation};
use ash::vk;
use seam::kept::Runs;
use seam::table::{Buffers, Graphs};
use seam::{
    Backend, CaptureSupport, Conditional, ConditionalSupport, DType, DeviceInfo, DeviceSpan,
    ErrorKind, Launch, NodeTiming, OpKind, RawBuffer, RawGraph, ReplayTarget, ResourceCounts,
    UpdateSupport,
};
use std::collections::{HashMap, VecDeque};
pub use update::UpdateCounts;

/// One Vulkan device behind the seam.
pub struct VulkanBackend {
    info: DeviceInfo,
    /// Buffers in mapped host-visible memory (CPU/UMA devices) rather than
    /// device-local memory behind a staging buffer.
    host_visible: bool,
    pipelines: HashMap<(OpKind, &'static str), Pipeline>,
    buffers: Buffers<Buffer>,
    staging: Option<Buffer>,
    /// Staging buffers made so far (one is kept and reused while it is
    /// large enough).
    staging_made: u64,
    /// The open eager batch.
    eager: Option<CommandBuffer>,
    /// The eager batches not open now, oldest submission first: each is
    /// recorded again once its submission has completed.
    batches: VecDeque<CommandBuffer>,
    capture: Option<CommandBuffer>,
    /// The open capture's conditional bodies and launch count (`bodies.rs`).
    bodies: bodies::Bodies,
    /// The open capture's timestamps, where it is node-timed (`nodes.rs`).
    capture_nodes: Option<nodes::NodeStamps>,
    /// The current graph and each handle's.
    graphs: Graphs<nodes::VkGraph>,
    /// Captures from now on are node-timed.
    node_timing: bool,
    /// The tag of the open timed bracket (`begin_timed` .. `end_timed`).
    bracket: Option<u64>,
    /// Timestamp queries for device timing (see `timing.rs`).
    timing: timing::Timing,
    /// `SEAM_VULKAN_VALIDATION`: validation messages fail the call that
    /// raised them, and the teardown of a device that saw any.
    validation: Validation,
    /// Every validation message this device's calls raised.
    raised: Vec<String>,
    /// Updates applied so far, by how (`update.rs`).
    updates: UpdateCounts,
    /// `SEAM_VULKAN_KEEP_VARIANTS` is not `0`: a graph keeps a command
    /// buffer per launch set it comes back to (`update.rs`).
    keep_variants: bool,
    /// `SEAM_VULKAN_BARRIERS=every`: a barrier before every dispatch, not
    /// only before one that depends on an access since the last.
    every_barrier: bool,
    /// Last: its `Drop` waits for (or, after a timeout, leaks) pending work.
    gpu: Gpu,
}

/// What `SEAM_VULKAN_BARRIERS` (its value) asks for: `every` a barrier
/// before every dispatch (true); unset or `hazards` one only where a
/// dispatch depends on an access since the last barrier (false).
fn every_barrier_asked(value: Option<std::ffi::OsString>) -> Result<bool, String> {
    match value.as_deref().map(|v| v.to_str()) {
        None | Some(Some("hazards")) => Ok(false),
        Some(Some("every")) => Ok(true),
        Some(v) => Err(format!(
            "SEAM_VULKAN_BARRIERS={}: expected `every` or `hazards`",
            v.unwrap_or("<not UTF-8>")
        )),
    }
}

/// Whether a switch's value is exactly `want`: `SEAM_VULKAN_STAGING`
/// asks for staging with `1` alone, `SEAM_VULKAN_KEEP_VARIANTS` turns kept
/// variants off with `0` alone; unset or any other value leaves the
/// default.
fn switch_is(value: Option<std::ffi::OsString>, want: &str) -> bool {
    value.is_some_and(|v| v == want)
}

impl VulkanBackend {
    /// Open `vulkan:<index>`: the index-th physical device with a compute queue.
    pub fn open(index: usize) -> Result<VulkanBackend, ErrorKind> {
        Self::open_as(index, false)
    }

    /// Open `vulkan:<index>` with every buffer device-local behind a
    /// staging buffer, as on a discrete GPU, whatever the device's memory
    /// (what `SEAM_VULKAN_STAGING=1` does to every device).
    pub fn open_staging(index: usize) -> Result<VulkanBackend, ErrorKind> {
        Self::open_as(index, true)
    }

    fn open_as(index: usize, staging: bool) -> Result<VulkanBackend, ErrorKind> {
        let unavailable = |reason: String| ErrorKind::Unavailable { reason };
        crate::SPIN
            .get()
            .map_err(|e| ErrorKind::driver("open", e))?;
        let every_barrier = every_barrier_asked(std::env::var_os("SEAM_VULKAN_BARRIERS"))
            .map_err(|e| ErrorKind::driver("open", e))?;
        let instance = Instance::shared().map_err(unavailable)?;
        let adapters = instance.adapters().map_err(unavailable)?;
        let count = adapters.len();
        let adapter = adapters.into_iter().nth(index).ok_or_else(|| {
            unavailable(format!(
                "vulkan:{index} does not exist ({count} device(s) with a compute queue)"
            ))
        })?;
        let gpu = Gpu::new(instance, adapter)?;
        let a = gpu.adapter();
        let uma = matches!(
            a.device_type,
            vk::PhysicalDeviceType::CPU | vk::PhysicalDeviceType::INTEGRATED_GPU
        );
        let has_coherent = a.memory.memory_types[..a.memory.memory_type_count as usize]
            .iter()
            .any(|t| t.property_flags.contains(sys::HOST_COHERENT));
        let forced_staging = staging || switch_is(std::env::var_os("SEAM_VULKAN_STAGING"), "1");
        let info = DeviceInfo {
            backend: "vulkan".into(),
            index,
            name: a.name.clone(),
            driver: a.driver.clone(),
        };
        Ok(VulkanBackend {
            info,
            host_visible: uma && has_coherent && !forced_staging,
            pipelines: HashMap::new(),
            buffers: Buffers::new(),
            staging: None,
            staging_made: 0,
            eager: None,
            batches: VecDeque::new(),
            capture: None,
            bodies: bodies::Bodies::default(),
            capture_nodes: None,
            graphs: Graphs::new(),
            node_timing: false,
            bracket: None,
            timing: timing::Timing::default(),
            validation: Validation::from_env().map_err(|e| ErrorKind::driver("open", e))?,
            raised: Vec::new(),
            updates: UpdateCounts::default(),
            keep_variants: !switch_is(std::env::var_os("SEAM_VULKAN_KEEP_VARIANTS"), "0"),
            every_barrier,
            gpu,
        })
    }

    /// Whether a rebind (C13) rewrites the graph's descriptor sets with no
    /// re-record of its command buffer (UPDATE_AFTER_BIND storage buffers,
    /// `Adapter::update_after_bind`); `Err` says why not (then the command
    /// buffer is recorded again from its log).
    pub fn rebind_in_place(&self) -> Result<(), String> {
        self.gpu.adapter().update_after_bind.clone()
    }

    /// Command buffers `target` keeps besides its current one, for launch
    /// sets it ran before (`update.rs`).
    pub fn kept_variants(&self, target: ReplayTarget) -> Result<usize, ErrorKind> {
        Ok(self.graphs.target(target)?.runs.spares())
    }

    /// Updates this backend applied (`update_launches` that succeeded),
    /// by how.
    pub fn update_counts(&self) -> UpdateCounts {
        self.updates
    }

    /// Run one backend call. A validation message raised inside it (the
    /// layer reports synchronously, on this thread) turns its result into an
    /// error quoting the message.
    fn validated<T>(
        &mut self,
        name: &'static str,
        call: impl FnOnce(&mut Self) -> Result<T, ErrorKind>,
    ) -> Result<T, ErrorKind> {
        let result = call(self);
        if self.validation == Validation::Off {
            return result;
        }
        let raised = sys::take_validation_messages();
        if raised.is_empty() {
            return result;
        }
        let mut message = raised.join(" | ");
        if let Err(e) = result {
            message = format!("{message} (and the call failed: {e})");
        }
        self.raised.push(format!("{name}: {message}"));
        Err(ErrorKind::driver("validation", message))
    }

    // ----- memory preferences -----

    /// Memory for buffers the host maps (a CPU or integrated device with
    /// coherent memory): device-local if it can be, host-visible and
    /// coherent in any case.
    const HOST_MEMORY: &'static [vk::MemoryPropertyFlags] = &[
        vk::MemoryPropertyFlags::from_raw(
            vk::MemoryPropertyFlags::DEVICE_LOCAL.as_raw() | sys::HOST_COHERENT.as_raw(),
        ),
        sys::HOST_COHERENT,
    ];
    /// Memory for buffers behind a staging buffer: device-local if any is,
    /// else any.
    const DEVICE_MEMORY: &'static [vk::MemoryPropertyFlags] = &[
        vk::MemoryPropertyFlags::DEVICE_LOCAL,
        vk::MemoryPropertyFlags::empty(),
    ];

    /// The memory preferences of this device's buffers.
    fn buffer_memory(host_visible: bool) -> &'static [vk::MemoryPropertyFlags] {
        if host_visible {
            Self::HOST_MEMORY
        } else {
            Self::DEVICE_MEMORY
        }
    }

    /// The staging buffer's size (`None` before the first staged
    /// transfer), and how many staging buffers were made so far.
    pub fn staging_buffer(&self) -> (Option<u64>, u64) {
        (self.staging.as_ref().map(Buffer::size), self.staging_made)
    }

    /// Whether this device keeps its buffers behind a staging buffer
    /// (device-local memory, as on a discrete GPU) rather than mapping them.
    pub fn stages(&self) -> bool {
        !self.host_visible
    }

    fn buffer(&self, id: RawBuffer) -> Result<&Buffer, ErrorKind> {
        self.buffers.get(id)
    }
}

#[allow(unsafe_code)] // the trait's `unsafe fn`s (the trust boundary, seam::Backend)
impl Backend for VulkanBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn capture_support(&self) -> CaptureSupport {
        CaptureSupport::Native
    }

    /// Preserved exactly where every pipeline is compiled with
    /// `DenormPreserve 32` (`sys::Gpu::compute_pipeline`).
    fn subnormals(&self) -> seam::Subnormals {
        match &self.gpu.adapter().denorm_preserve_f32 {
            Ok(()) => seam::Subnormals::Preserved,
            Err(why) => seam::Subnormals::MayFlush(why.clone()),
        }
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.validated("alloc", |b| {
            // Kernels address every buffer as 32-bit words, and gemm reads
            // b in 16-byte quads (seam_kernels::BUFFER_ROUND).
            let size =
                (bytes as u64).div_ceil(seam_kernels::BUFFER_ROUND) * seam_kernels::BUFFER_ROUND;
            let max = b.gpu.adapter().max_storage_buffer_range;
            if size > max {
                return Err(ErrorKind::TooLarge {
                    what: "allocation",
                    detail: format!("{size} bytes exceed the device's maxStorageBufferRange {max}"),
                });
            }
            let buf = b
                .gpu
                .create_buffer(size, Self::buffer_memory(b.host_visible))?;
            if b.host_visible && !buf.is_mapped() {
                return Err(ErrorKind::driver(
                    "vkMapMemory",
                    "host-visible buffer is not mapped",
                ));
            }
            let size = buf.size();
            Ok(b.buffers.insert(buf, size))
        })
    }

    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        self.validated("free", |b| {
            // Queued work or a pending replay may still use it: those hold it
            // until they have completed. Kept variants that bind it go
            // (`update.rs`): they would hold its memory, for a set no
            // update can ask for again.
            b.forget_variants(buffer);
            b.buffers.remove(buffer).map(drop)
        })
    }

    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        self.validated("write", |b| {
            b.buffer(buffer)?;
            if !b.host_visible {
                return b.staged_write(buffer, offset, data);
            }
            b.wait_all()?;
            b.buffer(buffer)?.write(offset, data)
        })
    }

    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        self.validated("read", |b| {
            b.buffer(buffer)?;
            if !b.host_visible {
                return b.staged_read(buffer, offset, out);
            }
            b.wait_all()?;
            b.buffer(buffer)?.read(offset, out)
        })
    }

    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        self.validated("launch", |b| {
            let pipeline = b.pipeline(launch.op, launch.dtype)?;
            let groups = dispatch::groups(launch, b.gpu.adapter().max_group_count)?;
            for v in launch.buffers.iter() {
                b.buffer(v.buffer)?;
            }
            // Whole buffers are bound; each view's offset reaches the kernel
            // in the immediate block (`p.o<k>`).
            let params = launch.immediates();
            if b.capture.is_none() {
                b.eager()?;
            } else if b.bodies.is_open() {
                // Recorded, unrolled, when its outermost body closes.
                b.bodies.hold(launch, pipeline, groups);
                return Ok(());
            }
            // The buffers are borrowed from `buffers` while the batch or
            // capture records (disjoint fields), and the bindings built on
            // the stack: an eager launch allocates nothing here.
            let VulkanBackend {
                buffers,
                capture,
                capture_nodes,
                eager,
                every_barrier,
                ..
            } = &mut *b;
            let sig = launch.op.signature();
            let binding = |i: usize| {
                let buf = buffers
                    .get(launch.buffers[i].buffer)
                    .expect("looked up above");
                (buf, sig[i].access)
            };
            // A node-timed graph keeps a barrier before every dispatch, so
            // its node spans tile the replay in capture order (`nodes.rs`).
            let every = *every_barrier || capture_nodes.is_some() && capture.is_some();
            let rec = capture.as_mut().or(eager.as_mut()).ok_or_else(|| {
                ErrorKind::driver("vkBeginCommandBuffer", "no command buffer to record into")
            })?;
            crate::stack::with_slice(launch.buffers.len().min(sig.len()), binding, |bindings| {
                if every {
                    rec.barrier()?;
                } else {
                    rec.barrier_for(bindings)?;
                }
                rec.dispatch(&pipeline, bindings, &params, groups)
            })?;
            if b.capture.is_some() {
                let index = b.bodies.launches;
                b.bodies.launches += 1;
                b.node_stamp(Some(index))?;
            }
            if b.capture.is_none() && eager::rec_full(b.eager.as_ref()) {
                b.flush()?;
            }
            Ok(())
        })
    }

    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.validated("synchronize", |b| b.wait_all())
    }

    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        self.validated("prepare", |b| {
            for &(op, dtype) in ops {
                b.pipeline(op, dtype)?;
            }
            Ok(())
        })
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.validated("begin_capture", |b| {
            if b.capture.is_some() {
                return Err(ErrorKind::NestedCapture);
            }
            let mut cmd = b.gpu.command_buffer()?;
            cmd.begin(true)?;
            b.capture = Some(cmd);
            b.bodies = bodies::Bodies::default();
            b.begin_node_stamps()
        })
    }

    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        self.validated("end_capture_into_current", |b| {
            let exec = b.finish_capture()?;
            // A replay of the old exec may be in flight: it holds the exec.
            if let Some(old) = b.graphs.set_current(exec) {
                b.retire(old);
            }
            Ok(())
        })
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.validated("end_capture_graph", |b| {
            let exec = b.finish_capture()?;
            Ok(b.graphs.insert(exec))
        })
    }

    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        self.validated("replay", |b| {
            b.graphs.target(target)?;
            // Launches queued before the replay run before it.
            b.flush()?;
            b.before_node_replay(target)?;
            b.gpu.submit(&b.graphs.target(target)?.cmd)?;
            b.after_node_replay(target)
        })
    }

    /// Unrolled bodies of indirect dispatches, each copy gated on the
    /// device (`bodies.rs`, `seam_kernels::conditional`).
    fn conditional_support(&self) -> ConditionalSupport {
        ConditionalSupport::Emulated(seam_kernels::conditional::HOW.into())
    }

    unsafe fn begin_conditional(&mut self, c: &Conditional) -> Result<(), ErrorKind> {
        self.validated("begin_conditional", |b| b.begin_body(c))
    }

    fn end_conditional(&mut self) -> Result<(), ErrorKind> {
        self.validated("end_conditional", |b| b.end_body())
    }

    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.validated("destroy_graph", |b| {
            // C8: a replay may be in flight; it holds the command buffer, which
            // is freed once that submission has completed, never while pending.
            let old = b.graphs.remove(graph)?;
            b.retire(old);
            b.gpu.poll()
        })
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.validated("abort_capture", |b| {
            // A command buffer in the recording state was never submitted.
            b.capture_nodes = None;
            b.bodies = bodies::Bodies::default();
            b.capture.take().map(drop).ok_or(ErrorKind::NotCapturing)
        })
    }

    fn update_support(&self) -> UpdateSupport {
        UpdateSupport::Native
    }

    unsafe fn update_launches(
        &mut self,
        target: ReplayTarget,
        now: &mut Vec<Launch>,
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        self.validated("update_launches", |b| b.update(target, now, changes))
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.len(),
            bytes: self.buffers.bytes(),
        }
    }

    fn device_timing(&self) -> Result<(), String> {
        self.timing_support()
    }

    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.validated("set_device_timing", |b| b.set_timing(on))
    }

    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.validated("begin_timed", |b| {
            b.mark(tag, true)?;
            b.bracket = Some(tag);
            Ok(())
        })
    }

    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.validated("end_timed", |b| {
            b.bracket = None;
            b.mark(tag, false)
        })
    }

    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.validated("take_device_spans", |b| b.take_spans())
    }

    /// Timestamps between the dispatches of a node-timed graph (`nodes.rs`).
    fn node_timing(&self) -> NodeTiming {
        match self.timing_support() {
            Ok(()) => NodeTiming::Native,
            Err(why) => NodeTiming::Unavailable(why),
        }
    }

    fn set_node_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.validated("set_node_timing", |b| b.set_node_timing_on(on))
    }
}

impl VulkanBackend {
    fn finish_capture(&mut self) -> Result<nodes::VkGraph, ErrorKind> {
        let mut rec = self.capture.take().ok_or(ErrorKind::NotCapturing)?;
        let nodes = self.capture_nodes.take();
        if let Some(e) = std::mem::take(&mut self.bodies).failed {
            return Err(e);
        }
        rec.end()?;
        Ok(nodes::VkGraph {
            cmd: rec,
            nodes,
            runs: Runs::default(),
        })
    }
}

impl Drop for VulkanBackend {
    fn drop(&mut self) {
        // Run what was launched; `Gpu`'s own `Drop` then waits for it (or
        // leaks the device if it does not finish).
        let _ = self.flush();
        if self.validation == Validation::Off {
            return;
        }
        // A device that saw a validation message fails its teardown too, so
        // a message whose error a caller swallowed still fails the trial
        // (messages from destroying the device itself: `sys::Shared`).
        self.raised.extend(
            sys::take_validation_messages()
                .into_iter()
                .map(|m| format!("teardown: {m}")),
        );
        if !self.raised.is_empty() && !std::thread::panicking() {
            panic!(
                "vulkan device {}:{} ({}): drop: validation: {}",
                self.info.backend,
                self.info.index,
                self.info.name,
                self.raised.join(" | ")
            );
        }
    }
}
