//! The loader, the instance and device discovery.

use super::validation::{self, Validation};
use super::INSTALL_HINT;
use ash::vk;
use std::ffi::{c_char, CStr};
use std::sync::{Arc, OnceLock};
/// The loader and one instance.
pub struct Instance {
    entry: ash::Entry,
    pub(super) instance: ash::Instance,
    /// Instance API version actually requested (≥ 1.1 enables properties2).
    pub(super) api: u32,
    /// The validation messenger, when `SEAM_VULKAN_VALIDATION` is set.
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
}

impl Instance {
    /// The one instance of this process, created on first use and never
    /// destroyed (like a CUDA primary context). Creating and destroying an
    /// instance per device open made the NVIDIA ICD refuse `vkCreateInstance`
    /// after ~27 cycles in one process (seen on the H200, driver 580); real
    /// runtimes keep one instance anyway. A failure is remembered too: the
    /// loader does not appear mid-process.
    pub fn shared() -> Result<Arc<Instance>, String> {
        static SHARED: OnceLock<Result<Arc<Instance>, String>> = OnceLock::new();
        SHARED.get_or_init(|| Instance::new().map(Arc::new)).clone()
    }
}

/// A physical device with a compute queue, as discovery sees it.
#[derive(Clone, Debug)]
pub struct Adapter {
    /// Private: only [`Instance::adapters`] makes one, so `phys` belongs to
    /// the instance `of`, which [`super::Gpu::new`] checks.
    pub(super) phys: vk::PhysicalDevice,
    pub(super) of: vk::Instance,
    pub name: String,
    pub driver: String,
    /// The API versions of the instance and of the device
    /// (`VkPhysicalDeviceProperties::apiVersion`): what gates the 1.1 and
    /// 1.2 queries below (the device tests check those answers against it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub api: (u32, u32),
    pub device_type: vk::PhysicalDeviceType,
    pub queue_family: u32,
    pub memory: vk::PhysicalDeviceMemoryProperties,
    pub max_storage_buffer_range: u64,
    /// `minUniformBufferOffsetAlignment`: where a dispatch's parameter
    /// block may start in a command buffer's parameter buffer.
    pub min_uniform_offset_alignment: u64,
    pub max_group_count: [u32; 3],
    /// Whether buffers get dedicated allocations
    /// (`VkMemoryDedicatedAllocateInfo`, core in Vulkan 1.1: instance and
    /// device at 1.1 or later). On the H200's driver a GEMV over the decode
    /// stack's 8 GiB of weights ran 88.3 µs from plain allocations and
    /// 68.9 µs from dedicated ones (docs/results/bench/probes.md).
    pub dedicated: bool,
    /// `maxComputeWorkGroupInvocations` and `maxComputeWorkGroupSize`.
    pub max_workgroup_invocations: u32,
    pub max_workgroup_size: [u32; 3],
    /// `timestampValidBits` of the queue family (0: no timestamps on it).
    pub timestamp_valid_bits: u32,
    /// Nanoseconds per timestamp tick (`limits.timestampPeriod`).
    pub timestamp_period: f32,
    /// Whether kernels can be compiled with SPIR-V `DenormPreserve` for
    /// 32-bit floats (the device reports `shaderDenormPreserveFloat32`, at
    /// Vulkan ≥ 1.2 on both the instance and the device); `Err` says why not.
    /// [`super::Gpu::compute_pipeline`] patches every module where it is `Ok`.
    pub denorm_preserve_f32: Result<(), String>,
    /// Whether storage-buffer descriptors can be created UPDATE_AFTER_BIND
    /// (Vulkan 1.2 `descriptorBindingStorageBufferUpdateAfterBind`, with
    /// room for every set this backend allocates); `Err` says why not.
    /// Where it is `Ok`, [`super::Gpu::new`] enables it and a C13 rebind
    /// rewrites a graph's descriptor sets with no re-record.
    pub update_after_bind: Result<(), String>,
}

/// `maxUpdateAfterBindDescriptorsInAllPools` below this keeps a device on
/// the re-record path: every descriptor set (eager batches' too) then comes
/// from UPDATE_AFTER_BIND pools, up to four descriptors per dispatch
/// (three buffers and the parameter block), so a small
/// limit would make pool creation fail where it succeeds today.
const MIN_UPDATE_AFTER_BIND_DESCRIPTORS: u32 = 1 << 20;

impl Instance {
    /// Open the loader and create an instance. `SEAM_VULKAN_VALIDATION=1`
    /// enables the Khronos validation layer with a messenger (`=sync` adds
    /// synchronization validation); see `validation.rs`. Asked for and not
    /// installed, it is an error, not a silent pass.
    pub fn new() -> Result<Instance, String> {
        Self::with(Validation::from_env()?)
    }

    /// Open the loader and create an instance with validation `mode`.
    pub(in crate::sys) fn with(mode: Validation) -> Result<Instance, String> {
        // SAFETY: loading libvulkan runs its initialisers; the Vulkan loader is
        // designed to be dlopen'ed and has no preconditions.
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| format!("{INSTALL_HINT} (loading libvulkan.so.1: {e})"))?;
        // SAFETY: `entry` holds a loaded loader; this global query has no inputs.
        let loader_api = match unsafe { entry.try_enumerate_instance_version() } {
            Ok(Some(v)) => v,
            Ok(None) => vk::API_VERSION_1_0,
            Err(e) => return Err(format!("{INSTALL_HINT} (vkEnumerateInstanceVersion: {e})")),
        };
        let api = loader_api.min(vk::API_VERSION_1_3);
        let app = vk::ApplicationInfo::default()
            .application_name(c"seam")
            .engine_name(c"seam-vulkan")
            .api_version(api);
        let layer = c"VK_LAYER_KHRONOS_validation";
        let (layers, extensions): (Vec<*const c_char>, Vec<*const c_char>) = if mode
            == Validation::Off
        {
            (Vec::new(), Vec::new())
        } else {
            // SAFETY: global query on a loaded loader.
            let layers_available = unsafe { entry.enumerate_instance_layer_properties() }
                .unwrap_or_default()
                .iter()
                .any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == layer));
            if !layers_available {
                return Err(format!(
                    "SEAM_VULKAN_VALIDATION is set but {} is not installed (apt-get install vulkan-validationlayers)",
                    layer.to_string_lossy()
                ));
            }
            let mut ext = vec![ash::ext::debug_utils::NAME.as_ptr()];
            if mode == Validation::Sync {
                ext.push(ash::ext::validation_features::NAME.as_ptr());
            }
            (vec![layer.as_ptr()], ext)
        };
        let sync = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&sync);
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions);
        if mode == Validation::Sync {
            info = info.push_next(&mut features);
        }
        // SAFETY: `info` and everything it points to (app, layer and
        // extension names, the validation features) live until the call
        // returns; the extensions are the validation layer's own.
        let instance = unsafe { entry.create_instance(&info, None) }
            .map_err(|e| format!("{INSTALL_HINT} (vkCreateInstance: {e})"))?;
        let messenger = if mode == Validation::Off {
            None
        } else {
            let utils = ash::ext::debug_utils::Instance::new(&entry, &instance);
            // SAFETY: VK_EXT_debug_utils is enabled on this live instance; the
            // callback is a plain function that never unwinds, and the create
            // info (no user data) lives across the call.
            match unsafe { utils.create_debug_utils_messenger(&validation::messenger_info(), None) }
            {
                Ok(m) => Some((utils, m)),
                Err(e) => {
                    // SAFETY: nothing was made from the instance yet.
                    unsafe { instance.destroy_instance(None) };
                    return Err(format!("vkCreateDebugUtilsMessengerEXT: {e}"));
                }
            }
        };
        Ok(Instance {
            entry,
            instance,
            api,
            messenger,
        })
    }

    /// Whether the validation messenger is registered.
    pub fn validating(&self) -> bool {
        self.messenger.is_some()
    }

    /// Every physical device that has a compute queue, in enumeration order.
    pub fn adapters(&self) -> Result<Vec<Adapter>, String> {
        // SAFETY: the instance is live.
        let phys = unsafe { self.instance.enumerate_physical_devices() }
            .map_err(|e| format!("{INSTALL_HINT} (vkEnumeratePhysicalDevices: {e})"))?;
        let mut out = Vec::new();
        for pd in phys {
            // SAFETY: `pd` was just enumerated from this live instance.
            let families = unsafe {
                self.instance
                    .get_physical_device_queue_family_properties(pd)
            };
            let Some(queue_family) = families
                .iter()
                // Every family has at least one queue (queueCount ≥ 1).
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            else {
                continue;
            };
            let timestamp_valid_bits = families[queue_family].timestamp_valid_bits;
            // SAFETY: as above.
            let props = unsafe { self.instance.get_physical_device_properties(pd) };
            // SAFETY: as above.
            let memory = unsafe { self.instance.get_physical_device_memory_properties(pd) };
            let name = props
                .device_name_as_c_str()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "unnamed Vulkan device".into());
            let api = format!(
                "Vulkan {}.{}.{}",
                vk::api_version_major(props.api_version),
                vk::api_version_minor(props.api_version),
                vk::api_version_patch(props.api_version)
            );
            let driver = match self.driver_properties(pd, props.api_version) {
                Some((name, info)) => format!("{name} {info}, {api}"),
                None => format!("driver version {:#x}, {api}", props.driver_version),
            };
            out.push(Adapter {
                phys: pd,
                of: self.instance.handle(),
                name,
                driver,
                api: (self.api, props.api_version),
                device_type: props.device_type,
                queue_family: queue_family as u32,
                memory,
                max_storage_buffer_range: props.limits.max_storage_buffer_range as u64,
                min_uniform_offset_alignment: props.limits.min_uniform_buffer_offset_alignment,
                max_group_count: props.limits.max_compute_work_group_count,
                dedicated: both_at_least(self.api, props.api_version, vk::API_VERSION_1_1),
                max_workgroup_invocations: props.limits.max_compute_work_group_invocations,
                max_workgroup_size: props.limits.max_compute_work_group_size,
                timestamp_valid_bits,
                timestamp_period: props.limits.timestamp_period,
                denorm_preserve_f32: self.denorm_preserve_f32(pd, props.api_version),
                update_after_bind: self.update_after_bind(pd, props.api_version),
            });
        }
        Ok(out)
    }

    /// Whether the device preserves f32 subnormals under SPIR-V
    /// `DenormPreserve` (`VkPhysicalDeviceFloatControlsProperties`, Vulkan
    /// 1.2 core; the instance must ask for 1.2 too, or the device's 1.2
    /// functionality is not available to it).
    fn denorm_preserve_f32(&self, pd: vk::PhysicalDevice, device_api: u32) -> Result<(), String> {
        let v = |v: u32| format!("{}.{}", vk::api_version_major(v), vk::api_version_minor(v));
        if !both_at_least(self.api, device_api, vk::API_VERSION_1_2) {
            return Err(format!(
                "float controls need Vulkan 1.2 (instance {}, device {}): kernels run without DenormPreserve",
                v(self.api),
                v(device_api)
            ));
        }
        let mut fc = vk::PhysicalDeviceFloatControlsProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut fc);
        // SAFETY: the instance and the device are ≥ 1.2 (properties2 and the
        // float-controls properties are core); the chain lives across the call.
        unsafe {
            self.instance
                .get_physical_device_properties2(pd, &mut props2)
        };
        if fc.shader_denorm_preserve_float32 == vk::TRUE {
            Ok(())
        } else {
            Err("the device reports shaderDenormPreserveFloat32 = false".into())
        }
    }

    /// Whether the device can update storage-buffer descriptors after they
    /// are bound (`VkPhysicalDeviceDescriptorIndexingFeatures`, Vulkan 1.2
    /// core, asked for at 1.2 on both sides as for float controls), with
    /// limits that fit this backend's sets (3 storage buffers a set).
    /// `SEAM_VULKAN_UPDATE_AFTER_BIND=0` turns it off (the re-record path).
    fn update_after_bind(&self, pd: vk::PhysicalDevice, device_api: u32) -> Result<(), String> {
        if turned_off(std::env::var_os("SEAM_VULKAN_UPDATE_AFTER_BIND")) {
            return Err("SEAM_VULKAN_UPDATE_AFTER_BIND=0".into());
        }
        if !both_at_least(self.api, device_api, vk::API_VERSION_1_2) {
            return Err("UPDATE_AFTER_BIND descriptors need Vulkan 1.2".into());
        }
        let mut features = vk::PhysicalDeviceDescriptorIndexingFeatures::default();
        let mut features2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut features);
        // SAFETY: the instance and the device are ≥ 1.2 (features2 and the
        // descriptor-indexing features are core); the chain lives across the call.
        unsafe {
            self.instance
                .get_physical_device_features2(pd, &mut features2)
        };
        if features.descriptor_binding_storage_buffer_update_after_bind != vk::TRUE {
            return Err(
                "the device reports descriptorBindingStorageBufferUpdateAfterBind = false".into(),
            );
        }
        let mut limits = vk::PhysicalDeviceDescriptorIndexingProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut limits);
        // SAFETY: as above (properties2 and the descriptor-indexing
        // properties are core at 1.2); the chain lives across the call.
        unsafe {
            self.instance
                .get_physical_device_properties2(pd, &mut props2)
        };
        update_after_bind_limits_fit(&limits)
    }

    /// Driver name and info (Vulkan 1.2 driver properties), where available.
    fn driver_properties(
        &self,
        pd: vk::PhysicalDevice,
        device_api: u32,
    ) -> Option<(String, String)> {
        // Properties2 is core at 1.1 (the instance); the driver properties
        // at 1.2 (the device).
        if !(at_least(self.api, vk::API_VERSION_1_1) && at_least(device_api, vk::API_VERSION_1_2)) {
            return None;
        }
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver);
        // SAFETY: the instance is ≥ 1.1 (properties2 is core) and the device
        // ≥ 1.2 (driver properties are core); the chain lives across the call.
        unsafe {
            self.instance
                .get_physical_device_properties2(pd, &mut props2)
        };
        let s = |r: Result<&CStr, _>| r.map(|c: &CStr| c.to_string_lossy().into_owned()).ok();
        Some((
            s(driver.driver_name_as_c_str())?,
            s(driver.driver_info_as_c_str())?,
        ))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every device made from this instance is destroyed first:
        // each device's `Shared` holds an `Arc` of its instance and destroys
        // the device in its `Drop`, before that field is released (a leaked
        // device keeps its instance alive). The shared instance is never
        // dropped. The messenger was made from this instance and goes first.
        unsafe {
            if let Some((utils, m)) = self.messenger.take() {
                utils.destroy_debug_utils_messenger(m, None);
            }
            self.instance.destroy_instance(None)
        };
        let _ = &self.entry;
    }
}

/// Whether API version `v` reaches `need`.
fn at_least(v: u32, need: u32) -> bool {
    v >= need
}

/// Whether a switch's value turns it off: `0` alone.
fn turned_off(value: Option<std::ffi::OsString>) -> bool {
    value.is_some_and(|v| v == "0")
}

/// Whether the instance's and the device's API versions both reach `need`.
fn both_at_least(instance: u32, device: u32, need: u32) -> bool {
    at_least(instance, need) && at_least(device, need)
}

/// Whether the device's UPDATE_AFTER_BIND limits fit this backend's sets:
/// every binding of a kernel in one set, and descriptors enough in all
/// pools together.
fn update_after_bind_limits_fit(
    limits: &vk::PhysicalDeviceDescriptorIndexingProperties<'_>,
) -> Result<(), String> {
    let per_set = limits
        .max_per_stage_descriptor_update_after_bind_storage_buffers
        .min(limits.max_descriptor_set_update_after_bind_storage_buffers)
        .min(limits.max_per_stage_update_after_bind_resources);
    if per_set < super::MAX_BINDINGS as u32 {
        return Err(format!(
            "UPDATE_AFTER_BIND storage buffers per set: {per_set} (kernels bind up to {})",
            super::MAX_BINDINGS
        ));
    }
    // The parameter block, a uniform buffer in every set (not itself
    // UPDATE_AFTER_BIND, but in UPDATE_AFTER_BIND_POOL layouts).
    let uniforms = limits
        .max_per_stage_descriptor_update_after_bind_uniform_buffers
        .min(limits.max_descriptor_set_update_after_bind_uniform_buffers);
    let resources = limits.max_per_stage_update_after_bind_resources;
    if uniforms < 1 || resources < super::MAX_BINDINGS as u32 + 1 {
        return Err(format!(
            "UPDATE_AFTER_BIND uniform buffers per set: {uniforms}, resources per stage: {resources} (kernels bind up to {} buffers and their parameters)",
            super::MAX_BINDINGS
        ));
    }
    let all = limits.max_update_after_bind_descriptors_in_all_pools;
    if all < MIN_UPDATE_AFTER_BIND_DESCRIPTORS {
        return Err(format!(
            "maxUpdateAfterBindDescriptorsInAllPools is {all} (< {MIN_UPDATE_AFTER_BIND_DESCRIPTORS})"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The validation messenger hears every warning and error, of every
    /// type (general, validation, performance), on the thread that raised
    /// it, and no info message. Skipped, saying so, where the Khronos
    /// layer is not installed (CI installs it).
    #[test]
    fn the_messenger_hears_every_warning_and_error() {
        use vk::DebugUtilsMessageSeverityFlagsEXT as S;
        use vk::DebugUtilsMessageTypeFlagsEXT as T;
        let instance = match Instance::with(Validation::Core) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("no validation layer ({e}): skipped");
                return;
            }
        };
        let (utils, _) = instance.messenger.as_ref().expect("a messenger");
        let data = vk::DebugUtilsMessengerCallbackDataEXT::default()
            .message_id_name(c"seam-test")
            .message(c"a test message");
        let heard = |severity: S, kind: T| {
            // SAFETY: VK_EXT_debug_utils is enabled on this live instance and
            // `data` (two NUL-terminated strings) lives across the call.
            unsafe { utils.submit_debug_utils_message(severity, kind, &data) };
            validation::take()
        };
        for severity in [S::WARNING, S::ERROR] {
            for kind in [T::GENERAL, T::VALIDATION, T::PERFORMANCE] {
                assert_eq!(
                    heard(severity, kind),
                    ["seam-test: a test message"],
                    "{severity:?} {kind:?}"
                );
            }
        }
        assert!(heard(S::INFO, T::VALIDATION).is_empty(), "an info message");
    }

    /// A version check passes at the version it needs, on both sides.
    #[test]
    fn both_versions_must_reach_the_need() {
        let (v11, v12, v13) = (
            vk::API_VERSION_1_1,
            vk::API_VERSION_1_2,
            vk::API_VERSION_1_3,
        );
        assert!(both_at_least(v12, v12, v12));
        assert!(both_at_least(v13, v12, v12));
        assert!(!both_at_least(v11, v13, v12));
        assert!(!both_at_least(v13, v11, v12));
    }

    /// `SEAM_VULKAN_UPDATE_AFTER_BIND=0` turns update-after-bind off; unset
    /// or any other value leaves it to the device.
    #[test]
    fn update_after_bind_is_turned_off_by_0_alone() {
        assert!(turned_off(Some("0".into())));
        assert!(!turned_off(Some("1".into())));
        assert!(!turned_off(Some("".into())));
        assert!(!turned_off(None));
    }

    /// The limits fit at exactly what the sets need, and not one below,
    /// whichever limit is short.
    #[test]
    fn update_after_bind_limits_fit_at_their_bounds() {
        let need = super::super::MAX_BINDINGS as u32;
        // Storage buffers per stage, per set; resources per stage (the
        // buffers and the parameter block); uniform buffers per stage, per
        // set; descriptors in all pools.
        let fits = |l: [u32; 6]| {
            update_after_bind_limits_fit(&vk::PhysicalDeviceDescriptorIndexingProperties {
                max_per_stage_descriptor_update_after_bind_storage_buffers: l[0],
                max_descriptor_set_update_after_bind_storage_buffers: l[1],
                max_per_stage_update_after_bind_resources: l[2],
                max_per_stage_descriptor_update_after_bind_uniform_buffers: l[3],
                max_descriptor_set_update_after_bind_uniform_buffers: l[4],
                max_update_after_bind_descriptors_in_all_pools: l[5],
                ..Default::default()
            })
        };
        let all = MIN_UPDATE_AFTER_BIND_DESCRIPTORS;
        let exact = [need, need, need + 1, 1, 1, all];
        assert_eq!(fits(exact), Ok(()));
        assert_eq!(fits([u32::MAX; 6]), Ok(()));
        for short in 0..6 {
            let mut l = exact;
            l[short] -= 1;
            let e = fits(l).unwrap_err();
            let named = [
                "per set",
                "per set",
                "resources",
                "uniform",
                "uniform",
                "AllPools",
            ];
            assert!(e.contains(named[short]), "limit {short}: {e}");
        }
    }
}
