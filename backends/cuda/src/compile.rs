//! NVRTC compilation of the seam-kernels CUDA C sources: once per process per
//! (architecture, op), never per launch, and each image loaded once per
//! device into its primary context, which stays retained for the life of the
//! process (like the CUDA runtime's), so backends opened later reuse both.

use crate::sys::{self, Context, ImageKind};
use seam::{DType, ErrorKind, OpKind};
use seam_kernels::Language;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// What NVRTC is asked to produce for one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `sm_90` (a cubin) or `compute_90` (PTX the driver JITs).
    pub arch: String,
    pub kind: ImageKind,
}

impl Target {
    /// The best target for a device of compute capability `cc`: a cubin for
    /// its own `sm_XY` when this NVRTC supports it, else PTX for the newest
    /// older architecture NVRTC knows (the driver JITs PTX forward).
    pub fn for_device(cc: (i32, i32)) -> Result<Target, ErrorKind> {
        let want = cc.0 * 10 + cc.1;
        let archs = sys::nvrtc_supported_archs()?;
        if archs.contains(&want) {
            return Ok(Target {
                arch: format!("sm_{want}"),
                kind: ImageKind::Cubin,
            });
        }
        match archs.iter().copied().filter(|&a| a <= want).max() {
            Some(a) => Ok(Target {
                arch: format!("compute_{a}"),
                kind: ImageKind::Ptx,
            }),
            None => Err(ErrorKind::Unavailable {
                reason: format!(
                    "NVRTC cannot target compute capability {}.{} (it supports {archs:?}); \
                     use a CUDA toolkit that still supports this GPU",
                    cc.0, cc.1
                ),
            }),
        }
    }

    /// Whether code compiled for this target holds the prelude's
    /// `seam_prior_wait` (`griddepcontrol.wait`, compiled in from
    /// architecture 9.0): only then may a launch start before the one
    /// before it ends.
    pub fn waits_in_kernel(&self) -> bool {
        self.arch
            .rsplit('_')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n >= 90)
    }

    /// The target for `source`: PTX for this architecture where the source
    /// calls `cudaGraphSetConditional`, a device function NVRTC leaves
    /// undefined in its cubin and the driver resolves when it loads PTX
    /// (the setter of a conditional node's handle, C14); else `self`.
    pub fn for_source(&self, source: &str) -> Target {
        if self.kind == ImageKind::Cubin && source.contains("cudaGraphSetConditional") {
            Target {
                arch: self.arch.replacen("sm_", "compute_", 1),
                kind: ImageKind::Ptx,
            }
        } else {
            self.clone()
        }
    }

    /// What kernels compiled with [`Target::options`] promise for f32
    /// subnormals (C11).
    pub fn subnormals(&self) -> seam::Subnormals {
        subnormals_under(&self.options())
    }

    /// NVRTC options. `--fmad=false`: no contraction anywhere, like the CPU
    /// reference (the kernels also spell their roundings with _rn intrinsics).
    /// No `--ftz=true` and no `--use_fast_math`: NVRTC's default `--ftz=false`
    /// keeps f32 subnormals ([`subnormals_under`]).
    fn options(&self) -> Vec<String> {
        vec![
            format!("--gpu-architecture={}", self.arch),
            "--fmad=false".into(),
        ]
    }
}

/// NVRTC flushes f32 subnormals to zero only under `--ftz=true` or
/// `--use_fast_math` (which implies it); its default is `--ftz=false`.
pub fn subnormals_under(opts: &[String]) -> seam::Subnormals {
    match opts.iter().find(|o| {
        matches!(
            o.as_str(),
            "--ftz=true" | "-ftz=true" | "--use_fast_math" | "-use_fast_math"
        )
    }) {
        Some(o) => seam::Subnormals::MayFlush(format!("NVRTC option {o} flushes f32 subnormals")),
        None => seam::Subnormals::Preserved,
    }
}

type ImageCache = Mutex<HashMap<(String, OpKind), Arc<Vec<u8>>>>;

static IMAGES: OnceLock<ImageCache> = OnceLock::new();

/// The compiled image of `op`'s CUDA C for `target`, compiling it on first use.
/// `dtype` only names the launch in the error if the op has no CUDA C source.
pub fn image(target: &Target, op: OpKind, dtype: DType) -> Result<Arc<Vec<u8>>, ErrorKind> {
    let cache = IMAGES.get_or_init(Default::default);
    // Compiling under the lock keeps it to one compile per key even when
    // several devices open at once; a poisoned lock still holds valid images.
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    let key = (target.arch.clone(), op);
    if let Some(img) = map.get(&key) {
        return Ok(img.clone());
    }
    let source = seam_kernels::source(op, Language::CudaC).ok_or_else(|| match op {
        OpKind::User(_) => seam_kernels::missing_source(op, Language::CudaC),
        _ => ErrorKind::OpUnsupported { op, dtype },
    })?;
    let name = format!("{}.cu", op.name());
    let target = target.for_source(&source);
    let img = Arc::new(
        sys::nvrtc_compile(&source, &name, &target.options(), target.kind)
            .map_err(|e| seam_streamgraph::rtc::user_compile_error(op, "NVRTC", e))?,
    );
    map.insert(key, img.clone());
    Ok(img)
}

type ContextCache = Mutex<HashMap<usize, Arc<Context>>>;

static CONTEXTS: OnceLock<ContextCache> = OnceLock::new();

/// Device `ordinal`'s primary context, retained once and kept for the life of
/// the process: the modules above live in it, and reopening a device (the
/// conformance suite opens one per trial) does not re-create it.
pub fn context(ordinal: usize) -> Result<Arc<Context>, ErrorKind> {
    let cache = CONTEXTS.get_or_init(Default::default);
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = map.get(&ordinal) {
        return Ok(c.clone());
    }
    let c = Arc::new(Context::retain_primary(ordinal)?);
    map.insert(ordinal, c.clone());
    Ok(c)
}

#[cfg(test)]
mod subnormal_tests {
    use super::*;

    /// Mutation: compile the handle's setter to a cubin, or every kernel
    /// to PTX → red.
    #[test]
    fn only_the_condition_setter_is_compiled_to_ptx() {
        let t = Target {
            arch: "sm_90".into(),
            kind: sys::ImageKind::Cubin,
        };
        let set = seam_kernels::source(
            OpKind::User(seam::Kernel::new(&seam_kernels::conditional::SET_CONDITION)),
            Language::CudaC,
        )
        .expect("the setter has CUDA C");
        let ptx = t.for_source(&set);
        assert_eq!(
            (ptx.arch.as_str(), ptx.kind),
            ("compute_90", sys::ImageKind::Ptx)
        );
        assert_eq!(t.for_source("extern \"C\" __global__ void k() {}"), t);
    }

    /// Mutation: add `--use_fast_math` to `Target::options` → red.
    #[test]
    fn the_nvrtc_options_keep_subnormals() {
        let t = Target {
            arch: "sm_90".into(),
            kind: sys::ImageKind::Cubin,
        };
        assert_eq!(
            t.subnormals(),
            seam::Subnormals::Preserved,
            "{:?}",
            t.options()
        );
        for o in ["--ftz=true", "--use_fast_math"] {
            let opts = vec!["--fmad=false".to_string(), o.to_string()];
            assert!(
                matches!(subnormals_under(&opts), seam::Subnormals::MayFlush(r) if r.contains(o))
            );
        }
    }
}
