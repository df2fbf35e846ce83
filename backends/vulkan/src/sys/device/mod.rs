//! The logical device, its objects and the queue timeline.
//!
//! Every object is an owning type whose `Drop` destroys it. What the device
//! may still use is kept alive by reference counts, not by the caller's
//! bookkeeping: a command buffer holds the buffers, pipelines and query pools
//! it records, and every pending submission holds its command buffer until
//! its fence has signalled. So dropping anything from safe code is sound, and
//! so is re-recording (a pending command buffer cannot be borrowed mutably).
//! The queue timeline (submission, polls, waits) is `queue.rs`.

mod queue;

use super::command::{CommandBuffer, QueryOp};
use super::{drv, Adapter, Instance, FENCE_TIMEOUT_NS};
use ash::vk;
use seam::ErrorKind;
use std::collections::VecDeque;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The `ash::Device` and what every object made from it shares.
pub(super) struct Shared {
    pub(super) device: ash::Device,
    pub(super) adapter: Adapter,
    /// Validation is on: messages raised destroying the device are a panic.
    validation: bool,
    /// Set when a wait timed out: work may still run, so nothing is destroyed.
    leaked: AtomicBool,
    /// Every submission up to this serial has completed.
    completed: AtomicU64,
    /// `descriptorBindingStorageBufferUpdateAfterBind` is enabled, every
    /// set layout's bindings are UPDATE_AFTER_BIND (layouts
    /// UPDATE_AFTER_BIND_POOL, pools UPDATE_AFTER_BIND), so a graph's
    /// descriptor set can be rewritten after its command buffer bound it,
    /// once no submission of it is pending, without invalidating it: the
    /// next submission uses the new descriptors (C13 rebinds, no re-record).
    pub(super) rebind_in_place: bool,
    /// Keeps the process-wide instance alive; dropped after the device.
    _instance: Arc<Instance>,
}

impl Shared {
    /// Whether destroying objects is forbidden (see [`Gpu`]'s `Drop`).
    pub(super) fn leaked(&self) -> bool {
        self.leaked.load(Ordering::Acquire)
    }

    pub(super) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.leaked() {
            return;
        }
        // SAFETY: every object made from the device holds an `Arc<Shared>`,
        // so all of them are gone; `Gpu`'s `Drop` waited for every
        // submission (or set `leaked`). The instance outlives this call.
        unsafe { self.device.destroy_device(None) };
        let raised = super::validation::take();
        if self.validation && !raised.is_empty() && !std::thread::panicking() {
            panic!(
                "vulkan device ({}): vkDestroyDevice: validation: {}",
                self.adapter.name,
                raised.join(" | ")
            );
        }
    }
}

/// Lock a mutex whose data stays consistent even if a holder panicked.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A descriptor set layout of `bindings` storage buffers and, after them,
/// the uniform buffer of the parameter block; the pipeline layout of that
/// one set.
pub(super) struct Layout {
    pub(super) shared: Arc<Shared>,
    pub(super) set_layout: vk::DescriptorSetLayout,
    pub(super) layout: vk::PipelineLayout,
    pub(super) bindings: usize,
}

impl Drop for Layout {
    fn drop(&mut self) {
        if self.shared.leaked() {
            return;
        }
        // SAFETY: the last reference is gone: every pipeline made with it
        // (and every command buffer binding such a pipeline) held one.
        unsafe {
            self.shared
                .device
                .destroy_pipeline_layout(self.layout, None);
            self.shared
                .device
                .destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

pub(super) struct PipelineInner {
    pub(super) pipeline: vk::Pipeline,
    pub(super) layout: Arc<Layout>,
}

impl Drop for PipelineInner {
    fn drop(&mut self) {
        let shared = &self.layout.shared;
        if shared.leaked() {
            return;
        }
        // SAFETY: the last reference is gone; command buffers that bind the
        // pipeline hold one, so no pending work uses it.
        unsafe { shared.device.destroy_pipeline(self.pipeline, None) };
    }
}

/// A compute pipeline with its layouts.
#[derive(Clone)]
pub struct Pipeline(pub(super) Arc<PipelineInner>);

pub(super) struct QueryPoolInner {
    pub(super) shared: Arc<Shared>,
    pub(super) pool: vk::QueryPool,
    pub(super) count: u32,
    /// Per query, whether it holds a timestamp, as the queue will see it:
    /// updated in submission order by [`Gpu::submit`], which refuses a write
    /// to a query not reset since its last write.
    pub(super) written: Mutex<Vec<bool>>,
    pub(super) last_use: AtomicU64,
}

impl Drop for QueryPoolInner {
    fn drop(&mut self) {
        if self.shared.leaked() {
            return;
        }
        // SAFETY: the last reference is gone; command buffers that use the
        // pool hold one, so no pending or recording work uses it.
        unsafe { self.shared.device.destroy_query_pool(self.pool, None) };
    }
}

/// A pool of timestamp queries. Its queries start unwritten and must be reset
/// on the queue ([`CommandBuffer::reset_queries`]) before each write.
#[derive(Clone)]
pub struct QueryPool(pub(super) Arc<QueryPoolInner>);

/// Host-access locks a submission holds without allocating (more spill to
/// a `Vec`).
const HOST_LOCKS_INLINE: usize = 16;

/// Submissions pending at once: the next waits for the oldest. The host
/// runs at most this far ahead of the device, and the in-flight queue and
/// the spare fences, reserved at this size, never grow.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// One queue submission, holding what it uses until its fence signals.
struct Submission {
    serial: u64,
    fence: vk::Fence,
    _cmd: CommandBuffer,
}

/// A logical device, its queue and the submissions on it.
pub struct Gpu {
    pub(super) shared: Arc<Shared>,
    queue: vk::Queue,
    in_flight: VecDeque<Submission>,
    free_fences: Vec<vk::Fence>,
    /// Serial the next submission gets; serials start at 1.
    next_serial: u64,
    /// Per binding count 1..=3, created on first use.
    layouts: Vec<Option<Arc<Layout>>>,
}

impl Gpu {
    pub fn new(instance: Arc<Instance>, adapter: Adapter) -> Result<Gpu, ErrorKind> {
        if adapter.of != instance.instance.handle() {
            return Err(ErrorKind::driver(
                "vkCreateDevice",
                "the adapter was enumerated from another instance",
            ));
        }
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(adapter.queue_family)
            .queue_priorities(&priorities)];
        // A rebind rewrites descriptors the graph's own dispatches use: that
        // needs UPDATE_AFTER_BIND (UPDATE_UNUSED_WHILE_PENDING only allows
        // rewriting descriptors a command buffer does not use; on the H200,
        // NVIDIA 580.159.04, a graph rewritten that way kept replaying its
        // old buffers). Where the device has it, it is enabled and a rebind
        // rewrites the sets in place once the graph's replays have retired;
        // elsewhere it rewrites them and re-records from the log.
        let rebind_in_place = adapter.update_after_bind.is_ok();
        let mut indexing = vk::PhysicalDeviceDescriptorIndexingFeatures::default()
            .descriptor_binding_storage_buffer_update_after_bind(true);
        let mut info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        if rebind_in_place {
            info = info.push_next(&mut indexing);
        }
        // SAFETY: `adapter.phys` was enumerated from this live instance
        // (checked above); `info`, its queue array and the feature chain
        // live across the call; the one feature enabled is one the device
        // reports (`Adapter::update_after_bind`, at Vulkan 1.2 on both sides).
        let device = unsafe { instance.instance.create_device(adapter.phys, &info, None) }
            .map_err(drv("vkCreateDevice"))?;
        // SAFETY: the device was created with one queue of this family.
        let queue = unsafe { device.get_device_queue(adapter.queue_family, 0) };
        Ok(Gpu {
            shared: Arc::new(Shared {
                device,
                adapter,
                validation: instance.validating(),
                leaked: AtomicBool::new(false),
                completed: AtomicU64::new(0),
                rebind_in_place,
                _instance: instance,
            }),
            queue,
            in_flight: VecDeque::with_capacity(MAX_IN_FLIGHT),
            free_fences: Vec::with_capacity(MAX_IN_FLIGHT),
            next_serial: 1,
            layouts: Vec::new(),
        })
    }

    pub fn adapter(&self) -> &Adapter {
        &self.shared.adapter
    }

    // ----- pipelines -----

    /// The layouts for `bindings` storage buffers (1..=3), created on first use.
    fn layout(&mut self, bindings: usize) -> Result<Arc<Layout>, ErrorKind> {
        if !(1..=super::MAX_BINDINGS).contains(&bindings) {
            return Err(ErrorKind::driver(
                "vkCreateDescriptorSetLayout",
                format!(
                    "{bindings} bindings: kernels take 1 to {} buffers",
                    super::MAX_BINDINGS
                ),
            ));
        }
        if self.layouts.len() < bindings {
            self.layouts.resize(bindings, None);
        }
        if let Some(l) = &self.layouts[bindings - 1] {
            return Ok(l.clone());
        }
        let d = &self.shared.device;
        // Storage buffers 0..n, then the parameter block (a uniform buffer:
        // `crate::spirv::params_as_uniform`).
        let list: Vec<_> = (0..bindings as u32)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .chain([vk::DescriptorSetLayoutBinding::default()
                .binding(bindings as u32)
                .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)])
            .collect();
        // Bindings a rebind rewrites after they are bound, once no replay
        // is pending (C13); their sets come from UPDATE_AFTER_BIND pools.
        // The parameter block's descriptor never changes (an update writes
        // the block itself).
        let mut flags = vec![vk::DescriptorBindingFlags::UPDATE_AFTER_BIND; bindings];
        flags.push(vk::DescriptorBindingFlags::empty());
        let mut binding_flags =
            vk::DescriptorSetLayoutBindingFlagsCreateInfo::default().binding_flags(&flags);
        let mut info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&list);
        if self.shared.rebind_in_place {
            info = info
                .flags(vk::DescriptorSetLayoutCreateFlags::UPDATE_AFTER_BIND_POOL)
                .push_next(&mut binding_flags);
        }
        // SAFETY: valid create info living across the call; the binding
        // flags (one per binding: the storage buffers UPDATE_AFTER_BIND, the
        // uniform buffer not) and the pool flag they need only where
        // `descriptorBindingStorageBufferUpdateAfterBind` is enabled
        // (`rebind_in_place`), within its per-set limits (checked by
        // `Adapter::update_after_bind`).
        let set_layout = unsafe { d.create_descriptor_set_layout(&info, None) }
            .map_err(drv("vkCreateDescriptorSetLayout"))?;
        let set_layouts = [set_layout];
        let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
        // SAFETY: as above; `set_layout` is live.
        let layout = match unsafe { d.create_pipeline_layout(&info, None) } {
            Ok(layout) => layout,
            Err(e) => {
                // SAFETY: the set layout is unused.
                unsafe { d.destroy_descriptor_set_layout(set_layout, None) };
                return Err(ErrorKind::driver("vkCreatePipelineLayout", e));
            }
        };
        let l = Arc::new(Layout {
            shared: self.shared.clone(),
            set_layout,
            layout,
            bindings,
        });
        self.layouts[bindings - 1] = Some(l.clone());
        Ok(l)
    }

    /// A compute pipeline for entry point `entry` of the SPIR-V module
    /// `words`, whose kernel binds `bindings` storage buffers (set 0,
    /// bindings 0..n) and its parameter block (binding n, a uniform buffer,
    /// where the module read push constants: `crate::spirv`). The module is validated:
    /// naga produced it at build time and `seam-kernels` checks it. Where
    /// the adapter can preserve f32 subnormals
    /// ([`Adapter::denorm_preserve_f32`]) the module is compiled with
    /// `DenormPreserve 32` on every entry point (`float_controls.rs`).
    pub fn compute_pipeline(
        &mut self,
        bindings: usize,
        words: &[u32],
        entry: &CStr,
    ) -> Result<Pipeline, ErrorKind> {
        let layout = self.layout(bindings)?;
        let patch = |e: String| ErrorKind::driver("vkCreateShaderModule", e);
        let mut words = crate::spirv::params_as_uniform(words, bindings as u32).map_err(patch)?;
        if self.shared.adapter.denorm_preserve_f32.is_ok() {
            words = crate::float_controls::denorm_preserve_f32(&words).map_err(patch)?;
        }
        let d = &self.shared.device;
        let info = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: `words` is a SPIR-V module produced and validated by naga,
        // its parameter block moved from push constants to the uniform
        // buffer the layout binds after the storage buffers (the variable's
        // storage class and two decorations; unit-tested on every module),
        // and patched with float controls only where the device supports them: the
        // DenormPreserve capability and its execution mode (SPV_KHR_float_controls,
        // core in the Vulkan 1.2 the adapter check requires) where it reports
        // shaderDenormPreserveFloat32 (unit-tested on every module, and
        // accepted by spirv-val for vulkan1.2).
        let module =
            unsafe { d.create_shader_module(&info, None) }.map_err(drv("vkCreateShaderModule"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(entry);
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(layout.layout)];
        // SAFETY: live module and layout; the create info lives across the call.
        let made = unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &info, None) };
        // SAFETY: a module is only needed while pipelines are created from it.
        unsafe { d.destroy_shader_module(module, None) };
        let pipeline = made
            .map_err(|(_, e)| ErrorKind::driver("vkCreateComputePipelines", e))?
            .into_iter()
            .next()
            .ok_or_else(|| ErrorKind::driver("vkCreateComputePipelines", "returned no pipeline"))?;
        Ok(Pipeline(Arc::new(PipelineInner { pipeline, layout })))
    }

    // ----- timestamp queries -----

    pub fn create_query_pool(&self, count: u32) -> Result<QueryPool, ErrorKind> {
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(count);
        // SAFETY: valid create info living across the call.
        let pool = unsafe { self.shared.device.create_query_pool(&info, None) }
            .map_err(drv("vkCreateQueryPool"))?;
        Ok(QueryPool(Arc::new(QueryPoolInner {
            shared: self.shared.clone(),
            pool,
            count,
            written: Mutex::new(vec![false; count as usize]),
            last_use: AtomicU64::new(0),
        })))
    }

    /// Read queries `first..first + out.len()` of `pool` as 64-bit ticks.
    /// Refused unless every submission that used the pool has completed and
    /// wrote each of those queries.
    pub fn query_results(
        &mut self,
        pool: &QueryPool,
        first: u32,
        out: &mut [u64],
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkGetQueryPoolResults";
        if out.is_empty() {
            return Ok(());
        }
        self.poll()?;
        let p = &pool.0;
        let last = p.last_use.load(Ordering::Acquire);
        if last > self.shared.completed() {
            return Err(ErrorKind::driver(
                CALL,
                format!("submission {last} has not completed"),
            ));
        }
        let end = first as usize + out.len();
        let written = lock(&p.written);
        if end > p.count as usize || !written[first as usize..end].iter().all(|&w| w) {
            return Err(ErrorKind::driver(
                CALL,
                format!("queries {first}..{end} are not all written"),
            ));
        }
        // SAFETY: live pool, range inside it (checked); `out` holds one u64
        // per query (TYPE_64). Every query was written by a completed
        // submission (checked), so WAIT returns at once.
        unsafe {
            self.shared.device.get_query_pool_results(
                p.pool,
                first,
                out,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(drv(CALL))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.wait_idle().is_err() {
            // Work may still run: destroying what it uses would be undefined
            // behaviour, so every object of this device is leaked instead.
            self.shared.leaked.store(true, Ordering::Release);
            std::mem::forget(std::mem::take(&mut self.in_flight));
            return;
        }
        for f in self.free_fences.drain(..) {
            // SAFETY: every submission completed; the fence is in none.
            unsafe { self.shared.device.destroy_fence(f, None) };
        }
    }
}
