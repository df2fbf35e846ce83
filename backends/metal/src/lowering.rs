//! WGSL → MSL with naga, the one copy of the options: `build.rs` includes
//! this file (`#[path]`) to lower the catalogue at build time, and the crate
//! compiles it to lower user kernels at registration (`crate::user`), so the
//! two cannot disagree on the binding layout.
//!
//! Layout of every kernel's Metal buffer argument table:
//!
//! | index | what |
//! |---|---|
//! | `0 .. MAX_BINDINGS` | storage `@binding(k)` at index `k`: a launch's buffers in signature order |
//! | [`PARAMS_INDEX`] | the `var<immediate>` `Params` block (64 bytes, `Launch::immediates`) |
//! | [`SIZES_INDEX`] | naga's `_mslBufferSizes`: the byte size of each runtime-sized-array binding, in declaration order |
//!
//! Params and sizes sit past the largest binding count a user kernel may
//! have (`seam::kernel::MAX_BINDINGS`), so a kernel of 8 bindings fits;
//! Metal allows 31 buffer indices per stage.
//!
//! Workgroup memory: naga passes each `var<workgroup>` an entry point uses
//! as a `threadgroup` argument, `[[threadgroup(i)]]` in declaration order;
//! [`EntryPoint::threadgroup_memory`] is the length the host sets for each.

use naga::back::msl;

/// Most storage bindings a kernel may have (`seam::kernel::MAX_BINDINGS`;
/// a unit test checks the two agree).
pub const MAX_BINDINGS: u8 = 8;
/// Metal buffer index of the `Params` block: one past the bindings.
pub const PARAMS_INDEX: u8 = MAX_BINDINGS;
/// Metal buffer index of naga's buffer-sizes block.
pub const SIZES_INDEX: u8 = MAX_BINDINGS + 1;
/// MSL 2.1: the oldest that has compute in indirect command buffers
/// (macOS 10.14 / iOS 12); naga also emits `max_total_threads_per_threadgroup`
/// from 2.1 on.
pub const MSL_VERSION: (u8, u8) = (2, 1);

/// Whether naga guards every index and buffer access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checks {
    /// The catalogue: audited kernels, and every launch's ranges are
    /// checked by core before it reaches the backend (`Backend::launch`'s
    /// caller guarantees it: the trust boundary), as on the SPIR-V path.
    Unchecked,
    /// A user kernel is not audited as the catalogue is: an index past an
    /// array is clamped (`Restrict`) and a buffer access past the bound
    /// buffer reads zero and skips the write (`ReadZeroSkipWrite`, from the
    /// sizes block), as the Vulkan backend's user kernels and wgpu do.
    Bounds,
}

/// One lowered entry point.
pub struct EntryPoint {
    /// Its name in the WGSL.
    pub wgsl: String,
    /// Name of the `kernel` function in the MSL (naga may rename it).
    pub msl: String,
    /// `@workgroup_size`: threads per threadgroup.
    pub threads: [u32; 3],
    /// Bytes of each `threadgroup` argument, in `[[threadgroup(i)]]` order
    /// (each a multiple of 16, as Metal requires).
    pub threadgroup_memory: Vec<u32>,
}

/// One module's MSL.
pub struct Lowered {
    pub msl: String,
    /// For each member of `_mslBufferSizes`, in order, the binding whose
    /// byte size it carries.
    pub sizes: Vec<u32>,
    pub entry_points: Vec<EntryPoint>,
}

/// Lower `module` to MSL: every entry point, or only the compute entry
/// point `only`. Every binding must be storage at `@group(0)
/// @binding(k)`, `k < MAX_BINDINGS`; anything else is an error, never
/// silently invalid MSL. The error is naga's (or the layout's) message.
pub fn lower(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    only: Option<&str>,
    checks: Checks,
) -> Result<Lowered, String> {
    let mut resources = msl::BindingMap::default();
    let mut sizes = Vec::new();
    for (_, var) in module.global_variables.iter() {
        let Some(binding) = var.binding else { continue };
        let name = var.name.as_deref().unwrap_or("(unnamed)");
        if binding.group != 0 {
            return Err(format!(
                "`{name}`: @group({}): kernels use bind group 0 only",
                binding.group
            ));
        }
        let slot = u8::try_from(binding.binding)
            .ok()
            .filter(|&s| s < MAX_BINDINGS)
            .ok_or_else(|| {
                format!(
                    "`{name}`: @binding({}) is past the {MAX_BINDINGS} buffer indices before \
                     the Params block (index {PARAMS_INDEX})",
                    binding.binding
                )
            })?;
        if module.types[var.ty]
            .inner
            .needs_host_buffer_byte_size(&module.types)
        {
            sizes.push(binding.binding);
        }
        let mutable = matches!(
            var.space,
            naga::AddressSpace::Storage { access } if access.contains(naga::StorageAccess::STORE)
        );
        resources.insert(
            binding,
            msl::BindTarget {
                buffer: Some(slot),
                mutable,
                ..Default::default()
            },
        );
    }
    let mut per_entry_point_map = msl::EntryPointResourceMap::default();
    for ep in &module.entry_points {
        per_entry_point_map.insert(
            ep.name.clone(),
            msl::EntryPointResources {
                resources: resources.clone(),
                immediates_buffer: Some(PARAMS_INDEX),
                sizes_buffer: Some(SIZES_INDEX),
            },
        );
    }
    let bounds_check_policies = match checks {
        Checks::Unchecked => Default::default(),
        Checks::Bounds => naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Restrict,
            buffer: naga::proc::BoundsCheckPolicy::ReadZeroSkipWrite,
            ..Default::default()
        },
    };
    // As the SPIR-V path: no zero-initialised workgroup memory (no kernel
    // reads before it writes), no loop instrumentation.
    let options = msl::Options {
        lang_version: MSL_VERSION,
        per_entry_point_map,
        fake_missing_bindings: false,
        zero_initialize_workgroup_memory: false,
        force_loop_bounding: false,
        bounds_check_policies,
        ..Default::default()
    };
    let pipeline = msl::PipelineOptions {
        entry_point: only.map(|name| (naga::ShaderStage::Compute, name.to_string())),
        ..Default::default()
    };
    let (source, translation) =
        msl::write_string(module, info, &options, &pipeline).map_err(|e| e.to_string())?;
    let written: Vec<usize> = match only {
        None => (0..module.entry_points.len()).collect(),
        Some(name) => module
            .entry_points
            .iter()
            .position(|ep| ep.name == name)
            .into_iter()
            .collect(),
    };
    if written.len() != translation.entry_point_names.len() {
        return Err(format!(
            "naga wrote {} entry points, {} expected",
            translation.entry_point_names.len(),
            written.len()
        ));
    }
    let entry_points = written
        .into_iter()
        .zip(translation.entry_point_names)
        .map(|(index, name)| {
            let ep = &module.entry_points[index];
            Ok(EntryPoint {
                wgsl: ep.name.clone(),
                msl: name.map_err(|e| format!("entry point {}: {e}", ep.name))?,
                threads: ep.workgroup_size,
                threadgroup_memory: threadgroup_memory(module, info, index),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Lowered {
        msl: source,
        sizes,
        entry_points,
    })
}

/// Bytes of each `var<workgroup>` entry point `index` uses, in declaration
/// order (naga's `[[threadgroup(i)]]` order), rounded up to 16.
fn threadgroup_memory(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    index: usize,
) -> Vec<u32> {
    let used = info.get_entry_point(index);
    module
        .global_variables
        .iter()
        .filter(|(h, v)| v.space == naga::AddressSpace::WorkGroup && !used[*h].is_empty())
        .map(|(_, v)| {
            module.types[v.ty]
                .inner
                .size(module.to_ctx())
                .next_multiple_of(16)
        })
        .collect()
}
