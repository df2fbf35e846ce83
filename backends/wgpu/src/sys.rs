//! The backend's one `unsafe` call: catalogue kernels' shader modules made
//! without wgpu's runtime checks.
//!
//! By default wgpu has naga clamp every workgroup-array index, bound every
//! loop with a counter, and (without `robustBufferAccess2`) clamp every
//! buffer index: instructions in every inner loop of every kernel. The
//! Vulkan backend compiles the same WGSL with none of them (seam-kernels'
//! build), and so does this module for the catalogue's kernels only. A
//! user kernel keeps every check (`kernels::build_op`): its source is not
//! ours to vouch for.

use seam::OpKind;
use seam_kernels::Language;

/// The shader module of catalogue op `op` (never `OpKind::User`), compiled
/// with `ShaderRuntimeChecks::unchecked()`; `None` where the catalogue has
/// no WGSL for it or `op` is a user kernel.
pub fn catalogue_module(device: &wgpu::Device, op: OpKind) -> Option<wgpu::ShaderModule> {
    if matches!(op, OpKind::User(_)) {
        return None;
    }
    let source = seam_kernels::source(op, Language::Wgsl)?;
    let desc = wgpu::ShaderModuleDescriptor {
        label: Some(op.name()),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    };
    // SAFETY: the source is seam-kernels' own WGSL for a catalogue op (user
    // kernels are refused above). Its kernels index a buffer only inside the
    // launch's views, which core validates against the buffers' lengths
    // before any launch reaches the backend (C12; `Backend::launch` is
    // `unsafe` and its caller guarantees it; buffers are whole words,
    // so a 16-bit view's edge word is inside its buffer); index workgroup
    // arrays only with invocation ids below their length; and run every
    // loop a number of times bounded by the launch's params. That is what
    // `create_shader_module_trusted` asks of an unchecked module; the
    // Vulkan backend runs the same SPIR-V without checks too, and the
    // conformance suite's C11/C12 cases and view trials exercise every
    // kernel at its edges.
    Some(unsafe {
        device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
    })
}
