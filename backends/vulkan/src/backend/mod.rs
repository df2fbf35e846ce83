//! `VulkanBackend`: the seam over the `raw` layer. Safe Rust only; the
//! decisions it implements are listed in the crate documentation.

mod arena;
mod staging;
mod timing;

use crate::dispatch;
use crate::raw::{Gpu, Instance, RawBuf};
use arena::Arena;
use ash::vk;
use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, DeviceSpan, ErrorKind, Launch, OpKind, RawBuffer,
    RawGraph, ReplayTarget, ResourceCounts,
};
use std::collections::{HashMap, VecDeque};
use std::ffi::CString;

/// Eager launches recorded before the batch is submitted on its own.
const EAGER_BATCH: usize = 256;

/// A command buffer being recorded, or recorded, with its descriptor sets.
struct Recording {
    cmd: vk::CommandBuffer,
    arena: Arena,
    launches: usize,
}

/// A recorded graph: the current exec or a handle.
struct Exec {
    rec: Recording,
    /// Serial of the last submission of `rec.cmd` (0: never submitted).
    last_serial: u64,
}

/// One queue submission.
struct Submission {
    serial: u64,
    fence: vk::Fence,
    /// The eager batch it carried, recycled once the fence signals.
    eager: Option<Recording>,
}

/// Something to destroy once a submission serial has completed.
enum Garbage {
    Buffer(RawBuf),
    Exec(Exec),
}

/// One Vulkan device behind the seam.
pub struct VulkanBackend {
    info: DeviceInfo,
    /// Buffers in mapped host-visible memory (CPU/UMA devices) rather than
    /// device-local memory behind a staging buffer.
    host_visible: bool,
    /// Per binding count 1..=3: descriptor set layout and pipeline layout.
    layouts: Vec<(vk::DescriptorSetLayout, vk::PipelineLayout)>,
    modules: HashMap<OpKind, vk::ShaderModule>,
    pipelines: HashMap<(OpKind, &'static str), vk::Pipeline>,
    cmd_pool: vk::CommandPool,
    buffers: HashMap<u64, RawBuf>,
    staging: Option<RawBuf>,
    next_id: u64,
    eager: Option<Recording>,
    /// Completed eager recordings, ready to record again.
    spare: Vec<Recording>,
    free_fences: Vec<vk::Fence>,
    in_flight: VecDeque<Submission>,
    /// Serial the next submission gets; serials start at 1.
    next_serial: u64,
    /// Every submission up to this serial has completed.
    completed: u64,
    garbage: Vec<(u64, Garbage)>,
    capture: Option<Recording>,
    current: Option<Exec>,
    graphs: HashMap<u64, Exec>,
    /// Timestamp queries for device timing (see `timing.rs`).
    timing: timing::Timing,
    gpu: Gpu,
}

impl VulkanBackend {
    /// Open `vulkan:<index>`: the index-th physical device with a compute queue.
    pub fn open(index: usize) -> Result<VulkanBackend, ErrorKind> {
        let unavailable = |reason: String| ErrorKind::Unavailable { reason };
        let instance = Instance::shared().map_err(unavailable)?;
        let adapters = instance.adapters().map_err(unavailable)?;
        let count = adapters.len();
        let adapter = adapters.into_iter().nth(index).ok_or_else(|| {
            unavailable(format!(
                "vulkan:{index} does not exist ({count} device(s) with a compute queue)"
            ))
        })?;
        let gpu = Gpu::new(instance, adapter)?;
        let a = &gpu.adapter;
        let uma = matches!(
            a.device_type,
            vk::PhysicalDeviceType::CPU | vk::PhysicalDeviceType::INTEGRATED_GPU
        );
        let coherent =
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let has_coherent = a.memory.memory_types[..a.memory.memory_type_count as usize]
            .iter()
            .any(|t| t.property_flags.contains(coherent));
        let forced_staging = std::env::var_os("SEAM_VULKAN_STAGING").is_some_and(|v| v == "1");
        let info = DeviceInfo {
            backend: "vulkan".into(),
            index,
            name: a.name.clone(),
            driver: a.driver.clone(),
        };
        let mut backend = VulkanBackend {
            info,
            host_visible: uma && has_coherent && !forced_staging,
            layouts: Vec::new(),
            modules: HashMap::new(),
            pipelines: HashMap::new(),
            cmd_pool: vk::CommandPool::null(),
            buffers: HashMap::new(),
            staging: None,
            next_id: 1,
            eager: None,
            spare: Vec::new(),
            free_fences: Vec::new(),
            in_flight: VecDeque::new(),
            next_serial: 1,
            completed: 0,
            garbage: Vec::new(),
            capture: None,
            current: None,
            graphs: HashMap::new(),
            timing: timing::Timing::default(),
            gpu,
        };
        // On failure, Drop releases whatever was created so far.
        for n in 1..=3 {
            let l = backend.gpu.create_layouts(n)?;
            backend.layouts.push(l);
        }
        backend.cmd_pool = backend.gpu.create_command_pool()?;
        Ok(backend)
    }

    // ----- memory preferences -----

    fn buffer_memory(&self) -> &'static [vk::MemoryPropertyFlags] {
        const HOST: &[vk::MemoryPropertyFlags] = &[
            vk::MemoryPropertyFlags::from_raw(
                vk::MemoryPropertyFlags::DEVICE_LOCAL.as_raw()
                    | vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                    | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw(),
            ),
            vk::MemoryPropertyFlags::from_raw(
                vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
                    | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw(),
            ),
        ];
        const DEVICE: &[vk::MemoryPropertyFlags] = &[
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
        ];
        if self.host_visible {
            HOST
        } else {
            DEVICE
        }
    }

    fn buffer(&self, id: RawBuffer) -> Result<&RawBuf, ErrorKind> {
        self.buffers
            .get(&id.0)
            .ok_or(ErrorKind::UnknownBuffer { id: id.0 })
    }

    // ----- submissions and retirement -----

    /// Serial of the latest work that may use a resource now: the open eager
    /// batch (submitted next) if it has launches, else the last submission.
    fn pending_serial(&self) -> u64 {
        match &self.eager {
            Some(_) => self.next_serial,
            None => self.next_serial - 1,
        }
    }

    fn retire(&mut self, serial: u64, garbage: Garbage) {
        if serial <= self.completed {
            self.destroy_garbage(garbage);
        } else {
            self.garbage.push((serial, garbage));
        }
    }

    fn destroy_garbage(&mut self, garbage: Garbage) {
        match garbage {
            Garbage::Buffer(b) => self.gpu.destroy_buffer(b),
            Garbage::Exec(e) => self.destroy_recording(e.rec),
        }
    }

    fn destroy_recording(&mut self, rec: Recording) {
        self.gpu.free_command_buffer(self.cmd_pool, rec.cmd);
        rec.arena.destroy(&self.gpu);
    }

    /// Collect completed submissions (in order), recycle their fences and
    /// eager recordings, and destroy garbage they no longer need.
    fn poll(&mut self) -> Result<(), ErrorKind> {
        while let Some(front) = self.in_flight.front() {
            if !self.gpu.fence_signaled(front.fence)? {
                break;
            }
            let Some(done) = self.in_flight.pop_front() else {
                break;
            };
            self.completed = done.serial;
            self.gpu.reset_fence(done.fence)?;
            self.free_fences.push(done.fence);
            if let Some(mut rec) = done.eager {
                rec.arena.reset(&self.gpu)?;
                rec.launches = 0;
                self.spare.push(rec);
            }
        }
        if self.in_flight.is_empty() {
            self.completed = self.next_serial - 1;
        }
        let completed = self.completed;
        let (ready, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.garbage)
            .into_iter()
            .partition(|(s, _)| *s <= completed);
        self.garbage = keep;
        for (_, g) in ready {
            self.destroy_garbage(g);
        }
        Ok(())
    }

    /// Submit an executable command buffer; returns its serial.
    fn submit(
        &mut self,
        cmd: vk::CommandBuffer,
        eager: Option<Recording>,
    ) -> Result<u64, ErrorKind> {
        // Recycle what has completed, so replays without a synchronize
        // between them reuse fences instead of creating one per replay.
        if let Err(e) = self.poll() {
            if let Some(rec) = eager {
                self.destroy_recording(rec);
            }
            return Err(e);
        }
        let fence = match self.free_fences.pop() {
            Some(f) => f,
            None => match self.gpu.create_fence() {
                Ok(f) => f,
                Err(e) => {
                    if let Some(rec) = eager {
                        self.destroy_recording(rec);
                    }
                    return Err(e);
                }
            },
        };
        if let Err(e) = self.gpu.submit(cmd, fence) {
            self.free_fences.push(fence);
            if let Some(rec) = eager {
                self.destroy_recording(rec);
            }
            return Err(e);
        }
        let serial = self.next_serial;
        self.next_serial += 1;
        self.in_flight.push_back(Submission {
            serial,
            fence,
            eager,
        });
        Ok(serial)
    }

    /// Submit the open eager batch, if any.
    fn flush(&mut self) -> Result<(), ErrorKind> {
        let Some(rec) = self.eager.take() else {
            return Ok(());
        };
        let submitted = match self.gpu.end(rec.cmd) {
            Ok(()) => self.submit(rec.cmd, Some(rec)).map(drop),
            Err(e) => {
                self.destroy_recording(rec);
                Err(e)
            }
        };
        // On failure the batch was destroyed: its timestamps never happen.
        self.timing_batch_done(submitted.is_ok());
        submitted?;
        self.poll()
    }

    /// Submit the eager batch and wait for every submission.
    fn wait_all(&mut self) -> Result<(), ErrorKind> {
        self.flush()?;
        let fences: Vec<vk::Fence> = self.in_flight.iter().map(|s| s.fence).collect();
        self.gpu.wait(&fences)?;
        self.poll()
    }

    /// The open eager batch, starting one if needed.
    fn eager(&mut self) -> Result<&mut Recording, ErrorKind> {
        if self.eager.is_none() {
            let rec = match self.spare.pop() {
                Some(rec) => rec,
                None => Recording {
                    cmd: self.gpu.allocate_command_buffer(self.cmd_pool)?,
                    arena: Arena::default(),
                    launches: 0,
                },
            };
            if let Err(e) = self.gpu.begin(rec.cmd, false) {
                self.spare.push(rec);
                return Err(e);
            }
            self.eager = Some(rec);
        }
        self.eager
            .as_mut()
            .ok_or_else(|| ErrorKind::driver("eager batch", "could not start one"))
    }

    // ----- pipelines -----

    /// The pipeline of an (op, dtype) pair with its layouts, created on first use.
    fn pipeline(
        &mut self,
        op: OpKind,
        dtype: DType,
    ) -> Result<(vk::Pipeline, vk::DescriptorSetLayout, vk::PipelineLayout), ErrorKind> {
        let n = op.signature().len();
        let (set_layout, layout) = *self
            .layouts
            .get(n.wrapping_sub(1))
            .ok_or(ErrorKind::OpUnsupported { op, dtype })?;
        let key = (op, seam_kernels::variant(op, dtype));
        if let Some(&p) = self.pipelines.get(&key) {
            return Ok((p, set_layout, layout));
        }
        let module = match self.modules.get(&op) {
            Some(&m) => m,
            None => {
                let words =
                    seam_kernels::spirv(op).ok_or(ErrorKind::OpUnsupported { op, dtype })?;
                let m = self.gpu.create_shader_module(words)?;
                self.modules.insert(op, m);
                m
            }
        };
        let entry = CString::new(seam_kernels::entry_point(op, dtype))
            .map_err(|e| ErrorKind::driver("vkCreateComputePipelines", e))?;
        let p = self.gpu.create_compute_pipeline(layout, module, &entry)?;
        self.pipelines.insert(key, p);
        Ok((p, set_layout, layout))
    }
}

impl Backend for VulkanBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn capture_support(&self) -> CaptureSupport {
        CaptureSupport::Native
    }

    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        // Kernels address every buffer as 32-bit words.
        let size = (bytes as u64).div_ceil(4) * 4;
        let max = self.gpu.adapter.max_storage_buffer_range;
        if size > max {
            return Err(ErrorKind::TooLarge {
                what: "allocation",
                detail: format!("{size} bytes exceed the device's maxStorageBufferRange {max}"),
            });
        }
        let buf = self.gpu.create_buffer(size, self.buffer_memory())?;
        if self.host_visible && buf.mapped.is_none() {
            self.gpu.destroy_buffer(buf);
            return Err(ErrorKind::driver(
                "vkMapMemory",
                "host-visible buffer is not mapped",
            ));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.buffers.insert(id, buf);
        Ok(RawBuffer(id))
    }

    fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        let buf = self
            .buffers
            .remove(&buffer.0)
            .ok_or(ErrorKind::UnknownBuffer { id: buffer.0 })?;
        // Queued work or an earlier replay may still read it: retire, don't destroy.
        let serial = self.pending_serial();
        self.retire(serial, Garbage::Buffer(buf));
        Ok(())
    }

    fn write(&mut self, buffer: RawBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        self.buffer(buffer)?;
        if !self.host_visible {
            return self.staged_write(buffer, offset, data);
        }
        self.wait_all()?;
        let buf = self.buffer(buffer)?;
        buf.mapped
            .as_ref()
            .ok_or_else(|| ErrorKind::driver("vkMapMemory", "buffer is not mapped"))?
            .write(offset, data)
    }

    fn read(&mut self, buffer: RawBuffer, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.buffer(buffer)?;
        if !self.host_visible {
            return self.staged_read(buffer, offset, out);
        }
        self.wait_all()?;
        let buf = self.buffer(buffer)?;
        buf.mapped
            .as_ref()
            .ok_or_else(|| ErrorKind::driver("vkMapMemory", "buffer is not mapped"))?
            .read(offset, out)
    }

    fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        let (pipeline, set_layout, layout) = self.pipeline(launch.op, launch.dtype)?;
        let groups = dispatch::grid(
            dispatch::workgroups(launch),
            self.gpu.adapter.max_group_count,
        )?;
        let buffers = launch
            .buffers
            .iter()
            .map(|b| self.buffer(*b).map(|r| r.buffer))
            .collect::<Result<Vec<_>, _>>()?;
        let params = launch.params.to_bytes();
        let capturing = self.capture.is_some();
        if !capturing {
            self.eager()?;
        }
        let rec = if capturing {
            self.capture.as_mut()
        } else {
            self.eager.as_mut()
        }
        .ok_or_else(|| {
            ErrorKind::driver("vkBeginCommandBuffer", "no command buffer to record into")
        })?;
        let set = rec.arena.set(&self.gpu, set_layout, &buffers)?;
        self.gpu.barrier(rec.cmd);
        self.gpu
            .dispatch(rec.cmd, pipeline, layout, set, &params, groups);
        rec.launches += 1;
        if !capturing && rec.launches >= EAGER_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.wait_all()
    }

    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        for &(op, dtype) in ops {
            self.pipeline(op, dtype)?;
        }
        Ok(())
    }

    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        if self.capture.is_some() {
            return Err(ErrorKind::NestedCapture);
        }
        let cmd = self.gpu.allocate_command_buffer(self.cmd_pool)?;
        if let Err(e) = self.gpu.begin(cmd, true) {
            self.gpu.free_command_buffer(self.cmd_pool, cmd);
            return Err(e);
        }
        self.capture = Some(Recording {
            cmd,
            arena: Arena::default(),
            launches: 0,
        });
        Ok(())
    }

    fn end_capture(&mut self) -> Result<(), ErrorKind> {
        let exec = self.finish_capture()?;
        if let Some(old) = self.current.replace(exec) {
            // A replay of the old exec may be in flight.
            self.retire(old.last_serial, Garbage::Exec(old));
        }
        Ok(())
    }

    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        let exec = self.finish_capture()?;
        let id = self.next_id;
        self.next_id += 1;
        self.graphs.insert(id, exec);
        Ok(RawGraph(id))
    }

    fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        let cmd = self.exec(target)?.rec.cmd;
        // Launches queued before the replay run before it.
        self.flush()?;
        let serial = self.submit(cmd, None)?;
        if let Ok(exec) = self.exec(target) {
            exec.last_serial = serial;
        }
        Ok(())
    }

    fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        let exec = self
            .graphs
            .remove(&graph.0)
            .ok_or(ErrorKind::UnknownGraph { id: graph.0 })?;
        // C8: a replay may be in flight; the command buffer is freed once its
        // last submission has completed, never while pending.
        let poll = self.poll();
        self.retire(exec.last_serial, Garbage::Exec(exec));
        poll
    }

    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        let rec = self.capture.take().ok_or(ErrorKind::NotCapturing)?;
        // A command buffer in the recording state was never submitted.
        self.destroy_recording(rec);
        Ok(())
    }

    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.len() + usize::from(self.current.is_some()),
        }
    }

    fn device_timing(&self) -> Result<(), String> {
        self.timing_support()
    }

    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.set_timing(on)
    }

    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.mark(tag, true)
    }

    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.mark(tag, false)
    }

    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.take_spans()
    }
}

impl VulkanBackend {
    fn finish_capture(&mut self) -> Result<Exec, ErrorKind> {
        let rec = self.capture.take().ok_or(ErrorKind::NotCapturing)?;
        if let Err(e) = self.gpu.end(rec.cmd) {
            self.destroy_recording(rec);
            return Err(e);
        }
        Ok(Exec {
            rec,
            last_serial: 0,
        })
    }

    fn exec(&mut self, target: ReplayTarget) -> Result<&mut Exec, ErrorKind> {
        match target {
            ReplayTarget::Current => self.current.as_mut().ok_or(ErrorKind::NoCurrentExec),
            ReplayTarget::Graph(g) => self
                .graphs
                .get_mut(&g.0)
                .ok_or(ErrorKind::UnknownGraph { id: g.0 }),
        }
    }
}

impl Drop for VulkanBackend {
    fn drop(&mut self) {
        if let Some(rec) = self.capture.take() {
            self.destroy_recording(rec);
        }
        if self.wait_all().is_err() {
            // Something may still run: destroying it would be undefined
            // behaviour, so everything is leaked instead.
            self.gpu.leak();
            return;
        }
        for (_, g) in std::mem::take(&mut self.garbage) {
            self.destroy_garbage(g);
        }
        let execs: Vec<Exec> = self
            .graphs
            .drain()
            .map(|(_, e)| e)
            .chain(self.current.take())
            .collect();
        for e in execs {
            self.destroy_recording(e.rec);
        }
        for rec in std::mem::take(&mut self.spare) {
            self.destroy_recording(rec);
        }
        self.release_query_pools();
        for (_, b) in std::mem::take(&mut self.buffers) {
            self.gpu.destroy_buffer(b);
        }
        if let Some(s) = self.staging.take() {
            self.gpu.destroy_buffer(s);
        }
        for f in std::mem::take(&mut self.free_fences) {
            self.gpu.destroy_fence(f);
        }
        for (_, p) in std::mem::take(&mut self.pipelines) {
            self.gpu.destroy_pipeline(p);
        }
        for (_, m) in std::mem::take(&mut self.modules) {
            self.gpu.destroy_shader_module(m);
        }
        for (s, l) in std::mem::take(&mut self.layouts) {
            self.gpu.destroy_layouts(s, l);
        }
        if self.cmd_pool != vk::CommandPool::null() {
            self.gpu.destroy_command_pool(self.cmd_pool);
        }
    }
}
