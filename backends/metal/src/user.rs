//! User kernels on Metal: the kernel's WGSL (prelude prepended) parsed,
//! validated and checked against its definition by
//! [`seam::wgsl::compile`], then lowered to MSL by naga at
//! registration with the lowering build.rs applies to the catalogue
//! ([`crate::lowering`]: bindings at their own buffer indices, `Params` at
//! [`crate::msl::PARAMS_INDEX`], the buffer-sizes block at
//! [`crate::msl::SIZES_INDEX`], threadgroup memory reflected), plus bounds
//! checks on every access ([`Checks::Bounds`]), as Vulkan's user kernels.
//! The backend then compiles the MSL with `newLibraryWithSource` and caches
//! the pipeline per device (`kernels.rs`). Plain Rust, so it is unit-tested
//! off Apple.
#![cfg_attr(not(target_vendor = "apple"), allow(dead_code))]

use crate::lowering::{self, Checks, EntryPoint};
use seam::{ErrorKind, Kernel};
use std::fmt::Write as _;

/// What [`ErrorKind::KernelCompile`] names when naga's MSL writer fails.
pub const WRITER: &str = "naga msl-out";
/// What [`ErrorKind::KernelCompile`] names when Metal refuses the MSL.
pub const METAL: &str = "Metal";

/// A user kernel lowered to MSL.
pub struct UserMsl {
    /// The complete MSL source, only the kernel's entry point in it.
    pub source: String,
    pub entry_point: EntryPoint,
    /// For each member of `_mslBufferSizes`, the binding whose byte size it
    /// carries.
    pub sizes: Vec<u32>,
}

/// The MSL of `kernel`, or why it has none: `KernelSourceMissing` (no
/// WGSL), or `KernelCompile` from the WGSL checks or from naga's writer.
pub fn msl(kernel: Kernel) -> Result<UserMsl, ErrorKind> {
    let m = seam::wgsl::compile(kernel)?;
    lower(kernel.name(), &m.module, &m.info)
}

/// Lower the validated module of kernel `name` (its entry point only).
pub fn lower(
    name: &'static str,
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
) -> Result<UserMsl, ErrorKind> {
    let refuse = |log: String| ErrorKind::KernelCompile {
        kernel: name,
        compiler: WRITER.into(),
        log,
    };
    let mut l = lowering::lower(module, info, Some(name), Checks::Bounds).map_err(refuse)?;
    let entry_point = match (l.entry_points.pop(), l.entry_points.is_empty()) {
        (Some(ep), true) => ep,
        _ => {
            return Err(refuse(format!(
                "no single entry point `{name}` was written"
            )))
        }
    };
    Ok(UserMsl {
        source: l.msl,
        entry_point,
        sizes: l.sizes,
    })
}

/// Metal's refusal of a user kernel's MSL (or of its pipeline), as the
/// kernel's compile error: the log is Metal's message, then the MSL it
/// refused, with line numbers (the MSL is naga's, not the user's source).
pub fn metal_refused(name: &'static str, message: &str, source: &str) -> ErrorKind {
    let mut log = format!("{message}\n\nthe MSL naga generated:\n");
    for (i, line) in source.lines().enumerate() {
        let _ = writeln!(log, "{:>4} | {line}", i + 1);
    }
    ErrorKind::KernelCompile {
        kernel: name,
        compiler: METAL.into(),
        log,
    }
}

#[cfg(test)]
#[path = "user_tests.rs"]
mod tests;
