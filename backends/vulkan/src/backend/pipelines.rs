//! Compute pipelines, made on first use: a catalogue op's from the SPIR-V
//! naga made at build time, a user kernel's (and the conditional bodies'
//! gate) from its WGSL at registration; refused by name where the device's
//! workgroup limits are below the op's.

use super::VulkanBackend;
use crate::sys::Pipeline;
use seam::{DType, ErrorKind, OpKind};
use std::ffi::CString;

impl VulkanBackend {
    /// Whether the device runs workgroups of `op`'s size ([`workgroup_fits`]).
    fn fits_workgroup(&self, op: OpKind) -> Result<(), ErrorKind> {
        let adapter = self.gpu.adapter();
        workgroup_fits(
            op,
            &adapter.name,
            adapter.max_workgroup_invocations,
            adapter.max_workgroup_size,
        )
    }

    /// The pipeline of an (op, dtype) pair, created on first use. A user
    /// kernel's is made from its WGSL (`user.rs`) when it is registered
    /// (`prepare`), keyed by its `OpKind::User`.
    pub(super) fn pipeline(&mut self, op: OpKind, dtype: DType) -> Result<Pipeline, ErrorKind> {
        let key = match op {
            OpKind::User(k) => (op, k.name()),
            _ => (op, seam_kernels::variant(op, dtype)),
        };
        if let Some(p) = self.pipelines.get(&key) {
            return Ok(p.clone());
        }
        self.fits_workgroup(op)?;
        if let OpKind::User(k) = op {
            let words = crate::user::spirv(k)?;
            let entry = CString::new(k.name())
                .map_err(|e| ErrorKind::driver("vkCreateComputePipelines", e))?;
            let p = self
                .gpu
                .compute_pipeline(k.def().bindings.len(), &words, &entry)?;
            self.pipelines.insert(key, p.clone());
            return Ok(p);
        }
        let words = seam_kernels::spirv(op).ok_or(ErrorKind::OpUnsupported { op, dtype })?;
        let entry = CString::new(seam_kernels::entry_point(op, dtype))
            .map_err(|e| ErrorKind::driver("vkCreateComputePipelines", e))?;
        let p = self
            .gpu
            .compute_pipeline(op.signature().len(), words, &entry)?;
        self.pipelines.insert(key, p.clone());
        Ok(p)
    }
}

/// Whether `device`, whose limits are `max_invocations`
/// (`maxComputeWorkGroupInvocations`) and `max_size`
/// (`maxComputeWorkGroupSize`), runs workgroups of `op`'s size: gemm's 512
/// invocations are above Vulkan's guaranteed 128. `TooLarge` naming the op,
/// the device and the limit where not.
pub(super) fn workgroup_fits(
    op: OpKind,
    device: &str,
    max_invocations: u32,
    max_size: [u32; 3],
) -> Result<(), ErrorKind> {
    let size = seam_kernels::geometry::workgroup_size(op);
    let invocations: u64 = size.iter().map(|&d| u64::from(d)).product();
    let fits = invocations <= u64::from(max_invocations)
        && size.iter().zip(max_size).all(|(&d, m)| d <= m);
    if fits {
        return Ok(());
    }
    Err(ErrorKind::TooLarge {
        what: "workgroup",
        detail: format!(
            "{op}'s kernels run workgroups of {}×{}×{} invocations; {device} allows {max_invocations} \
             (maxComputeWorkGroupInvocations), at most {max_size:?} on each axis \
             (maxComputeWorkGroupSize)",
            size[0], size[1], size[2],
        ),
    })
}
