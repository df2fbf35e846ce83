//! Opening the raw device and closing it: the instance, the physical
//! device the backend would pick (`vulkan:0`), the logical device and its
//! queue, the objects the chain records with (pipeline, descriptor set,
//! command buffers, fence), and their destruction once the queue is idle.

use super::{kernel, vkerr, RawVulkan};
use ash::vk;
use seam::OpKind;
use std::time::Duration;

impl RawVulkan {
    /// Open the first physical device with a compute queue (what seam calls
    /// `vulkan:0`), or say why there is none.
    pub fn open() -> Result<RawVulkan, String> {
        // SAFETY: loading libvulkan runs its initialisers; the loader is
        // designed to be dlopen'ed and has no preconditions.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("no Vulkan loader: {e}"))?;
        // SAFETY: a global query on a loaded loader.
        let loader_api = match unsafe { entry.try_enumerate_instance_version() } {
            Ok(Some(v)) => v,
            Ok(None) => vk::API_VERSION_1_0,
            Err(e) => return Err(format!("vkEnumerateInstanceVersion: {e}")),
        };
        let api = loader_api.min(vk::API_VERSION_1_3);
        let app = vk::ApplicationInfo::default()
            .application_name(c"seam-bench-raw")
            .api_version(api);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: `info` and the application info it points to live across the call.
        let instance = unsafe { entry.create_instance(&info, None) }
            .map_err(|e| format!("vkCreateInstance: {e}"))?;
        let device = match Self::pick(&instance, api) {
            Ok(found) => found,
            Err(e) => {
                // SAFETY: nothing was made from the instance.
                unsafe { instance.destroy_instance(None) };
                return Err(e);
            }
        };
        let (pd, family, device, name, denorm_preserve, timeline_ok) = device;
        // SAFETY: `pd` belongs to this live instance.
        let props = unsafe { instance.get_physical_device_properties(pd) };
        // SAFETY: as above.
        let memory = unsafe { instance.get_physical_device_memory_properties(pd) };
        let uma = matches!(
            props.device_type,
            vk::PhysicalDeviceType::CPU | vk::PhysicalDeviceType::INTEGRATED_GPU
        );
        let coherent =
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let has_coherent = memory.memory_types[..memory.memory_type_count as usize]
            .iter()
            .any(|t| t.property_flags.contains(coherent));
        let forced_staging = std::env::var_os("SEAM_VULKAN_STAGING").is_some_and(|v| v == "1");
        let spin_us = match std::env::var("SEAM_VULKAN_SPIN_US") {
            Ok(v) if !v.trim().is_empty() => v.trim().parse::<u64>().unwrap_or(50),
            _ => 50,
        };
        // SAFETY: the device was created with one queue of this family.
        let queue = unsafe { device.get_device_queue(family, 0) };
        let mut raw = RawVulkan {
            _entry: entry,
            instance,
            device,
            queue,
            name,
            denorm_preserve,
            host_visible: uma && has_coherent && !forced_staging,
            memory,
            api,
            max_group_count: props.limits.max_compute_work_group_count,
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            desc_pool: vk::DescriptorPool::null(),
            set: vk::DescriptorSet::null(),
            cmd_pool: vk::CommandPool::null(),
            chain: vk::CommandBuffer::null(),
            xfer: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            timeline: None,
            spin: Duration::from_micros(spin_us),
            x: None,
            staging: None,
            pending: false,
        };
        // On failure `raw`'s Drop destroys what was made (null handles are
        // ignored), then the device and the instance.
        raw.objects(family)?;
        if std::env::var("SEAM_BENCH_RAW_WAIT").is_ok_and(|v| v == "timeline") {
            if !timeline_ok {
                return Err(
                    "SEAM_BENCH_RAW_WAIT=timeline: the device has no timelineSemaphore".into(),
                );
            }
            let mut kind = vk::SemaphoreTypeCreateInfo::default()
                .semaphore_type(vk::SemaphoreType::TIMELINE)
                .initial_value(0);
            let info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
            // SAFETY: the device was created with timelineSemaphore enabled
            // (`timeline_ok`); the create info lives across the call.
            let sem = unsafe { raw.device.create_semaphore(&info, None) }
                .map_err(vkerr("vkCreateSemaphore"))?;
            raw.timeline = Some((sem, 0));
        }
        Ok(raw)
    }

    /// The first device with a compute queue, its queue family, the logical
    /// device, its name and whether kernels get `DenormPreserve 32`.
    #[allow(clippy::type_complexity)]
    fn pick(
        instance: &ash::Instance,
        api: u32,
    ) -> Result<(vk::PhysicalDevice, u32, ash::Device, String, bool, bool), String> {
        // SAFETY: the instance is live.
        let phys = unsafe { instance.enumerate_physical_devices() }
            .map_err(vkerr("vkEnumeratePhysicalDevices"))?;
        let (pd, family) = phys
            .into_iter()
            .find_map(|pd| {
                // SAFETY: `pd` was just enumerated from this live instance.
                let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
                families
                    .iter()
                    .position(|f| {
                        f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0
                    })
                    .map(|q| (pd, q as u32))
            })
            .ok_or("no Vulkan device with a compute queue")?;
        // SAFETY: `pd` belongs to this live instance.
        let props = unsafe { instance.get_physical_device_properties(pd) };
        let name = props
            .device_name_as_c_str()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The backend's rule: DenormPreserve where instance and device are
        // at Vulkan 1.2 or later and the device reports the property.
        let denorm_preserve =
            api >= vk::API_VERSION_1_2 && props.api_version >= vk::API_VERSION_1_2 && {
                let mut fc = vk::PhysicalDeviceFloatControlsProperties::default();
                let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut fc);
                // SAFETY: instance and device are at 1.2 or later (checked),
                // so properties2 and the float-controls struct are core.
                unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
                fc.shader_denorm_preserve_float32 == vk::TRUE
            };
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        // Timeline semaphores (core in 1.2), enabled where reported, for
        // `SEAM_BENCH_RAW_WAIT=timeline`.
        let timeline_ok =
            api >= vk::API_VERSION_1_2 && props.api_version >= vk::API_VERSION_1_2 && {
                let mut ts = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
                let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut ts);
                // SAFETY: instance and device are at 1.2 or later (checked).
                unsafe { instance.get_physical_device_features2(pd, &mut f2) };
                ts.timeline_semaphore == vk::TRUE
            };
        let mut enable =
            vk::PhysicalDeviceTimelineSemaphoreFeatures::default().timeline_semaphore(true);
        let mut info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        if timeline_ok {
            info = info.push_next(&mut enable);
        }
        // SAFETY: `pd` belongs to the live instance; `info`, its queue
        // array and the feature struct live across the call.
        let device =
            unsafe { instance.create_device(pd, &info, None) }.map_err(vkerr("vkCreateDevice"))?;
        Ok((pd, family, device, name, denorm_preserve, timeline_ok))
    }
    /// The pipeline, descriptor set, command buffers and fence.
    fn objects(&mut self, family: u32) -> Result<(), String> {
        let (words, entry) = kernel()?;
        let bindings = OpKind::ScaleAdd.signature().len() as u32;
        let pipe = self.pipe(words, &entry, bindings)?;
        (self.set_layout, self.layout, self.pipeline) =
            (pipe.set_layout, pipe.layout, pipe.pipeline);
        let d = &self.device;
        let set_layouts = [self.set_layout];
        let sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(bindings)];
        let info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(1)
            .pool_sizes(&sizes);
        // SAFETY: valid create info living across the call.
        self.desc_pool = unsafe { d.create_descriptor_pool(&info, None) }
            .map_err(vkerr("vkCreateDescriptorPool"))?;
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(self.desc_pool)
            .set_layouts(&set_layouts);
        // SAFETY: live pool with room for one set of this layout.
        self.set = unsafe { d.allocate_descriptor_sets(&info) }
            .map_err(vkerr("vkAllocateDescriptorSets"))?[0];
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create info for the device's queue family.
        self.cmd_pool =
            unsafe { d.create_command_pool(&info, None) }.map_err(vkerr("vkCreateCommandPool"))?;
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.cmd_pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(2);
        // SAFETY: live pool.
        let cmds = unsafe { d.allocate_command_buffers(&info) }
            .map_err(vkerr("vkAllocateCommandBuffers"))?;
        (self.chain, self.xfer) = (cmds[0], cmds[1]);
        // SAFETY: valid create info.
        self.fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(vkerr("vkCreateFence"))?;
        Ok(())
    }
}

impl Drop for RawVulkan {
    fn drop(&mut self) {
        let d = &self.device;
        // SAFETY: after the queue is idle no submission uses any object;
        // each is destroyed once (null handles are ignored by Vulkan), the
        // device after its objects and the instance last.
        unsafe {
            if d.queue_wait_idle(self.queue).is_err() {
                // Work may still run: leak everything rather than destroy it.
                return;
            }
            if let Some(m) = self.x.take() {
                d.destroy_buffer(m.buffer, None);
                d.free_memory(m.memory, None);
            }
            if let Some((m, _)) = self.staging.take() {
                d.destroy_buffer(m.buffer, None);
                d.free_memory(m.memory, None);
            }
            d.destroy_fence(self.fence, None);
            if let Some((sem, _)) = self.timeline {
                d.destroy_semaphore(sem, None);
            }
            d.destroy_command_pool(self.cmd_pool, None);
            d.destroy_descriptor_pool(self.desc_pool, None);
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
