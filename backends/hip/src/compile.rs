//! hipRTC compilation of the seam-kernels CUDA C sources (the CUDA backend's
//! own files): once per process per (gfx architecture, op), at first use,
//! and each code object loaded once per device.

use crate::options;
use crate::sys;
use seam::{ErrorKind, OpKind};
use seam_kernels::Language;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

type ImageCache = Mutex<HashMap<(String, OpKind), Arc<Vec<u8>>>>;

static IMAGES: OnceLock<ImageCache> = OnceLock::new();

/// Compile `op`'s CUDA C for `arch` with the build options (user options
/// from `SEAM_HIP_OPTIONS`), uncached. Needs no GPU.
pub fn compile(arch: &str, op: OpKind) -> Result<Vec<u8>, ErrorKind> {
    let source = seam_kernels::source(op, Language::CudaC)
        .ok_or_else(|| seam_kernels::missing_source(op, Language::CudaC))?;
    let opts = options::build_options(arch, &options::user_options());
    let image = sys::hiprtc_compile(&source, &format!("{}.cu", op.name()), &opts)
        .map_err(|e| seam_streamgraph::rtc::user_compile_error(op, "hipRTC", e))?;
    Ok(image)
}

/// The code object of `op` for `arch`, compiled on first use.
pub fn image(arch: &str, op: OpKind) -> Result<Arc<Vec<u8>>, ErrorKind> {
    let cache = IMAGES.get_or_init(Default::default);
    // One compile per key even when several devices open at once; a
    // poisoned lock still holds valid images.
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    let key = (arch.to_string(), op);
    if let Some(img) = map.get(&key) {
        return Ok(img.clone());
    }
    let img = Arc::new(compile(arch, op)?);
    map.insert(key, img.clone());
    Ok(img)
}
