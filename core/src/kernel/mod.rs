//! User kernels: an engine's own op (RoPE, a fused norm, a quantized GEMV)
//! launched through the seam with the catalogue's guarantees.
//!
//! A kernel is a [`KernelDef`], usually a `static`, registered once per
//! device with [`Device::register_kernel`](crate::Device::register_kernel)
//! and launched as [`OpKind::User`](crate::OpKind::User) through [`Device::launch`](crate::Device::launch):
//! the same validation (C12, views included), capture, replay, `prepare`
//! (C7), trace (C10) and graph update (C13) as a catalogue op.
//!
//! # Sources
//!
//! - **WGSL** (vulkan, wgpu, metal through naga): a module declaring entry
//!   point `name`, `@workgroup_size` equal to [`KernelDef::workgroup_size`],
//!   and binding `k` of the signature as `@group(0) @binding(k)` storage. The
//!   backend prepends the prelude (`seam_kernels::WGSL_PARAMS`), which
//!   declares `var<immediate> p: Params`: the launch's [`Params`] fields
//!   (`p.d0` … `p.s1`) and `p.o0` … `p.o7`, the element offset of each
//!   binding's view. A kernel indexes binding `k` as `b_k[p.o<k> + i]`
//!   (16-bit types packed two to a `u32` word, as the catalogue's are).
//! - **CUDA C** (cuda through NVRTC, hip through hipRTC): `extern "C"
//!   __global__ void <name>(T0* b0, …, Params p)` with one pointer per
//!   binding, already advanced to the view's first element, and the
//!   `Params` struct of the prelude (`seam_kernels::CUDA_PARAMS`).
//!   `blockDim` is the workgroup size and `gridDim` the [`KernelDef::grid`].
//! - **Rust** ([`KernelDef::cpu`]): what the CPU backend runs, and so the
//!   C11 oracle every other device is compared with.
//!
//! A backend without the source it needs refuses registration with
//! [`ErrorKind::KernelSourceMissing`](crate::ErrorKind::KernelSourceMissing);
//! a source that does not compile gives
//! [`ErrorKind::KernelCompile`](crate::ErrorKind::KernelCompile) with the
//! compiler's log. Compiled modules are cached per device.

use crate::dtype::DType;
pub use crate::signature::MAX_BINDINGS;
use crate::signature::{Access, Binding, Params, Role, Tolerance};
use std::fmt;
use std::hash::{Hash, Hasher};

#[cfg(test)]
mod tests;

/// The prelude every WGSL kernel is compiled with (the catalogue's and
/// user kernels'): the immediate block as `var<immediate> p: Params`, the
/// WGSL view of [`Params`] then `o0` … `o7` (each binding's view offset,
/// [`Launch::immediates`](crate::Launch::immediates)), and helpers such as
/// `exp_accurate`.
pub const WGSL_PRELUDE: &str = include_str!("params.wgsl");

/// Most invocations per workgroup a kernel may declare: the portable floor
/// (wgpu's default `max_compute_invocations_per_workgroup`), so a kernel
/// registered on one backend launches on all.
pub const MAX_WORKGROUP_INVOCATIONS: u32 = 256;

/// Largest workgroup count a kernel's grid may ask for on any axis: the
/// Vulkan minimum for `maxComputeWorkGroupCount` and wgpu's default.
pub const MAX_GRID_EDGE: u32 = 65_535;

/// A field of the [`Params`] block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// `Params::d0`.
    D0,
    /// `Params::d1`.
    D1,
    /// `Params::d2`.
    D2,
    /// `Params::bits`.
    Bits,
    /// `Params::s0`.
    S0,
    /// `Params::s1`.
    S1,
}

impl Field {
    /// Every field, in the block's order.
    pub const ALL: [Field; 6] = [
        Field::D0,
        Field::D1,
        Field::D2,
        Field::Bits,
        Field::S0,
        Field::S1,
    ];

    /// The field's name in `Params` and in the kernel preludes.
    pub const fn name(self) -> &'static str {
        match self {
            Field::D0 => "d0",
            Field::D1 => "d1",
            Field::D2 => "d2",
            Field::Bits => "bits",
            Field::S0 => "s0",
            Field::S1 => "s1",
        }
    }

    /// Whether the field is zero in `p` (as bits: `-0.0` is not zero).
    pub fn is_zero(self, p: &Params) -> bool {
        match self {
            Field::D0 => p.d0 == 0,
            Field::D1 => p.d1 == 0,
            Field::D2 => p.d2 == 0,
            Field::Bits => p.bits == 0,
            Field::S0 => p.s0.to_bits() == 0,
            Field::S1 => p.s1.to_bits() == 0,
        }
    }
}

/// A parameter a kernel's [`KernelDef::check`] refuses.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamError {
    /// The parameter, as the kernel's users know it (e.g. `"cols"`).
    pub name: &'static str,
    /// Why it is refused.
    pub reason: String,
}

/// The CPU implementation of a kernel: `bindings[k]` holds the bytes of
/// binding `k`'s view (its full range, little-endian elements, 16-bit types
/// two bytes each). Bindings the signature marks `Write` are copied back to
/// the device's buffers afterwards; the function must not change the
/// vectors' lengths.
pub type CpuKernel = fn(p: &Params, bindings: &mut [Vec<u8>]);

/// Further rules on a kernel's params ([`KernelDef::check`]).
pub type ParamCheck = fn(p: &Params) -> Result<(), ParamError>;

/// One user kernel. Every field is plain data or a function pointer, so a
/// definition is a `static`:
///
/// ```
/// use seam::kernel::{CudaSource, Field, KernelDef};
/// use seam::ops::{Access, Binding, Role};
/// use seam::{DType, Params, Tolerance};
///
/// fn extents(p: &Params, out: &mut [u64]) {
///     out.fill(p.d0 as u64);
/// }
/// fn grid(p: &Params) -> [u32; 3] {
///     [p.d0.div_ceil(64), 1, 1]
/// }
/// fn double(p: &Params, b: &mut [Vec<u8>]) {
///     let x: Vec<f32> = bytemuck::pod_collect_to_vec(&b[0]);
///     let y: Vec<f32> = x.iter().take(p.d0 as usize).map(|v| v * 2.0).collect();
///     b[1][..y.len() * 4].copy_from_slice(bytemuck::cast_slice(&y));
/// }
/// pub static DOUBLE: KernelDef = KernelDef {
///     name: "double_f32",
///     bindings: &[
///         Binding::fixed("x", Access::Read, DType::F32),
///         Binding::fixed("y", Access::Write, DType::F32),
///     ],
///     reads: &[Field::D0],
///     extents,
///     workgroup_size: [64, 1, 1],
///     grid,
///     check: None,
///     allows_aliasing: true,
///     tolerance: Tolerance::BitExact,
///     wgsl: Some("@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
///                 @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
///                 @compute @workgroup_size(64)\n\
///                 fn double_f32(@builtin(global_invocation_id) g: vec3<u32>) {\n\
///                     if (g.x < p.d0) { y[p.o1 + g.x] = x[p.o0 + g.x] * 2.0; }\n\
///                 }\n"),
///     // SAFETY: indexes `x` and `y` only below `p.d0`, their declared extent.
///     cuda: Some(unsafe {
///         CudaSource::trusted("extern \"C\" __global__ void double_f32(const float* x, float* y, Params p) {\n\
///                     unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n\
///                     if (i < p.d0) y[i] = x[i] * 2.0f;\n\
///                 }\n")
///     }),
///     cpu: Some(double),
///     samples: &[Params::dims(1000, 0, 0)],
/// };
/// ```
pub struct KernelDef {
    /// Its name: the entry point of both sources, and what errors, traces
    /// and reports print. An identifier (`[A-Za-z_][A-Za-z0-9_]*`).
    pub name: &'static str,
    /// Its bindings, in launch order, each with a fixed element type
    /// ([`Binding::fixed`]). At most [`MAX_BINDINGS`], at least one written.
    pub bindings: &'static [Binding],
    /// The `Params` fields it reads. A launch with any other field non-zero
    /// is refused (C12): a value the kernel ignores is a caller's mistake.
    pub reads: &'static [Field],
    /// Elements each binding needs for a launch with these params, written
    /// to `out[k]` (`out.len()` is the number of bindings). Core checks each
    /// view holds that many (C12) and that writes overlap nothing they must
    /// not.
    pub extents: fn(p: &Params, out: &mut [u64]),
    /// Invocations per workgroup on each axis (WGSL `@workgroup_size`,
    /// CUDA `blockDim`); at most [`MAX_WORKGROUP_INVOCATIONS`] in all.
    pub workgroup_size: [u32; 3],
    /// Workgroups on each axis for a launch with these params (WGSL
    /// dispatch size, CUDA `gridDim`); each in `1..=`[`MAX_GRID_EDGE`].
    pub grid: fn(p: &Params) -> [u32; 3],
    /// Further rules on the params (e.g. "cols must be even"), checked at
    /// every launch and update.
    pub check: Option<ParamCheck>,
    /// Whether a written binding may be the very same view as a read one
    /// (in place). Partly overlapping views are refused either way.
    pub allows_aliasing: bool,
    /// How closely a device must agree with [`KernelDef::cpu`] (C11).
    pub tolerance: Tolerance,
    /// WGSL source (without the prelude), for vulkan, wgpu and metal.
    pub wgsl: Option<&'static str>,
    /// CUDA C source (without the prelude), for cuda and hip: trusted
    /// code, hence the `unsafe` [`CudaSource::trusted`].
    pub cuda: Option<CudaSource>,
    /// The CPU implementation and C11 oracle.
    pub cpu: Option<CpuKernel>,
    /// Params of launches the conformance suite runs the kernel with
    /// (its C1, C2, C4, C11 and C12 cases over user kernels); buffers are
    /// sized from [`KernelDef::extents`].
    pub samples: &'static [Params],
}

impl KernelDef {
    /// Whether the definition is one every backend can take: what
    /// `Device::register_kernel` checks before it asks the backend to
    /// compile it. The reason says what is wrong.
    pub fn well_formed(&self) -> Result<(), String> {
        let ident = |s: &str| {
            let mut c = s.chars();
            c.next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        };
        if !ident(self.name) {
            return Err(format!("name `{}` is not an identifier", self.name));
        }
        let n = self.bindings.len();
        if n == 0 || n > MAX_BINDINGS {
            return Err(format!("{n} bindings; a kernel has 1 to {MAX_BINDINGS}"));
        }
        for (i, b) in self.bindings.iter().enumerate() {
            if !ident(b.name) {
                return Err(format!("binding {i}: `{}` is not an identifier", b.name));
            }
            if !matches!(b.role, Role::Fixed(_)) {
                return Err(format!(
                    "binding `{}`: a user kernel's bindings have fixed element types (Binding::fixed)",
                    b.name
                ));
            }
            if self.bindings[..i].iter().any(|o| o.name == b.name) {
                return Err(format!("binding `{}` is named twice", b.name));
            }
        }
        if let Some(b) = self
            .bindings
            .iter()
            .find(|b| b.zeroed && b.access != Access::Write)
        {
            return Err(format!(
                "binding `{}`: a workspace is written (Binding::workspace)",
                b.name
            ));
        }
        if !self
            .bindings
            .iter()
            .any(|b| b.access == Access::Write && !b.zeroed)
        {
            return Err("no binding is written: the kernel has no output".into());
        }
        for (i, f) in self.reads.iter().enumerate() {
            if self.reads[..i].contains(f) {
                return Err(format!("reads lists `{}` twice", f.name()));
            }
        }
        let [x, y, z] = self.workgroup_size;
        let invocations = x as u64 * y as u64 * z as u64;
        if invocations == 0 || invocations > MAX_WORKGROUP_INVOCATIONS as u64 {
            return Err(format!(
                "workgroup size {x}×{y}×{z}: 1 to {MAX_WORKGROUP_INVOCATIONS} invocations, none zero"
            ));
        }
        if self.wgsl.is_none() && self.cuda.is_none() && self.cpu.is_none() {
            return Err("no source at all (wgsl, cuda or cpu)".into());
        }
        Ok(())
    }

    /// Element type of binding 0 (what a [`Launch`](crate::Launch) of the
    /// kernel carries as its `dtype`).
    pub fn dtype(&self) -> Option<DType> {
        match self.bindings.first()?.role {
            Role::Fixed(d) => Some(d),
            _ => None,
        }
    }
}

/// A kernel's CUDA C source. CUDA C runs on the device as written, with
/// no bounds checks and no validation seam could apply (WGSL is checked at
/// registration; CUDA C cannot be), so using it is an explicit step of
/// trust: the `unsafe` [`CudaSource::trusted`], usually in the kernel's
/// `static` definition:
///
/// ```
/// use seam::kernel::CudaSource;
/// // SAFETY: indexes `y` and `x` only below `p.d0`, the extent the
/// // kernel's definition declares for both.
/// static DOUBLE_CU: CudaSource = unsafe {
///     CudaSource::trusted(
///         "extern \"C\" __global__ void double_f32(const float* x, float* y, Params p) {\n\
///              unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n\
///              if (i < p.d0) y[i] = x[i] * 2.0f;\n\
///          }\n",
///     )
/// };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaSource {
    source: &'static str,
    early: bool,
}

impl CudaSource {
    /// Trust `source` as a kernel's CUDA C.
    ///
    /// # Safety
    /// Launched with any params its definition accepts ([`KernelDef::check`],
    /// [`KernelDef::reads`]) over views that hold [`KernelDef::extents`]
    /// elements, the kernel reads and writes each binding only inside those
    /// extents (from the pointer it is given, already advanced to the
    /// view), writes only the bindings the definition marks `Write`, and
    /// terminates. seam cannot check CUDA C; a kernel that breaks this
    /// corrupts device memory outside its buffers.
    #[allow(unsafe_code)] // the marker of trust the type exists for
    pub const unsafe fn trusted(source: &'static str) -> CudaSource {
        CudaSource {
            source,
            early: false,
        }
    }

    /// The same source, whose launches the CUDA backend may start before
    /// the launch before them has ended (programmatic dependent launch, on
    /// devices of compute capability 9.0 and newer): a launch's blocks are
    /// then scheduled, and may prefetch, while the one before drains. The
    /// other backends launch it as any kernel.
    ///
    /// # Safety
    /// Besides what [`CudaSource::trusted`] asks: on every path, the kernel
    /// calls `seam_prior_wait()` (the CUDA prelude's) before it reads or
    /// writes any memory an earlier launch may write or read, except
    /// through `seam_prefetch_l2` (a prefetch into L2, where writes land).
    /// A kernel that touches such memory first races with the launch
    /// before it.
    #[allow(unsafe_code)] // a further promise about the trusted source
    pub const unsafe fn starts_early(self) -> CudaSource {
        CudaSource {
            source: self.source,
            early: true,
        }
    }

    /// The source text.
    pub const fn source(self) -> &'static str {
        self.source
    }

    /// Whether its launches may start early ([`CudaSource::starts_early`]).
    pub const fn early(self) -> bool {
        self.early
    }
}

/// A registered kernel's identity: its `static` definition. Two handles are
/// the same kernel when they point at the same definition.
#[derive(Clone, Copy)]
pub struct Kernel(&'static KernelDef);

impl Kernel {
    /// The kernel `def` defines.
    pub const fn new(def: &'static KernelDef) -> Kernel {
        Kernel(def)
    }

    /// Its definition.
    pub const fn def(self) -> &'static KernelDef {
        self.0
    }

    /// Its name ([`KernelDef::name`]).
    pub const fn name(self) -> &'static str {
        self.0.name
    }
}

impl From<&'static KernelDef> for Kernel {
    fn from(def: &'static KernelDef) -> Kernel {
        Kernel(def)
    }
}

impl PartialEq for Kernel {
    fn eq(&self, other: &Kernel) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Kernel {}

impl Hash for Kernel {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state)
    }
}

impl PartialOrd for Kernel {
    fn partial_cmp(&self, other: &Kernel) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Kernel {
    fn cmp(&self, other: &Kernel) -> std::cmp::Ordering {
        (self.0.name, self.0 as *const KernelDef as usize)
            .cmp(&(other.0.name, other.0 as *const KernelDef as usize))
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kernel({})", self.0.name)
    }
}
