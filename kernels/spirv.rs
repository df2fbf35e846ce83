//! The catalogue's WGSL → SPIR-V step: parse, validate with every
//! capability, and write SPIR-V 1.0 with all entry points. Workgroup memory
//! is not zero-initialised (no kernel reads before it writes) and loops are
//! not instrumented: both would only cost time. Buffer accesses are not
//! bounds-checked (naga's default policy): the kernels index only inside
//! the launch's views, which every launch reaching a backend has had
//! checked by core (`Backend::launch` is `unsafe`: its caller guarantees
//! it, the trust boundary in `seam::backend`).
//!
//! One copy, included with `#[path]` by seam-kernels' build script (which
//! compiles the catalogue) and by the bench's GEMV probe (which compiles
//! kernel variants exactly as the catalogue is compiled).

/// `source` (prelude included) as a validated naga module and its SPIR-V;
/// the error is naga's rendered message, saying which step failed.
pub fn compile(source: &str) -> Result<(naga::Module, Vec<u32>), String> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| format!("WGSL parse error:\n{}", e.emit_to_string(source)))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| format!("WGSL validation error:\n{}", e.emit_to_string(source)))?;
    let options = naga::back::spv::Options {
        lang_version: (1, 0),
        flags: naga::back::spv::WriterFlags::empty(),
        zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: false,
        ..Default::default()
    };
    let words = naga::back::spv::write_vec(&module, &info, &options, None)
        .map_err(|e| format!("SPIR-V generation failed: {e}"))?;
    Ok((module, words))
}
