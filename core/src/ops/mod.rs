//! The op catalogue: every op a backend must implement ([`OpKind`]), each
//! op's signature in the vocabulary of `signature.rs` (bindings, access,
//! roles, tolerance, the [`Params`] block), what one call and one launch
//! carry ([`OpCall`], [`Launch`]), and the typed constructors users call.
//!
//! A launch reaches a backend as a [`Launch`]: the op, the element type of its
//! inputs, its buffers in signature order and one fixed-layout [`Params`]
//! block. The same 32-byte block is what GPU kernels receive as push constants,
//! a uniform buffer or kernel arguments, so every backend lowers every op the
//! same way.
//!
//! Every binding is a [`View`] (`view.rs`): a buffer, an element offset and
//! a length (a bare [`BufferId`](crate::BufferId) is the whole buffer). Besides the nine catalogue
//! ops, a launch may run a user kernel ([`OpKind::User`], `kernel/`).

pub use crate::buffer_list::BufferList;
use crate::dtype::DType;
use crate::kernel::Kernel;
use crate::signature::MAX_BINDINGS;
pub use crate::signature::{Access, Binding, Params, Role, Tolerance};
pub use crate::view::{RawView, View};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Every op: the catalogue's nine, or a registered user kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// `dst[i] = value` (value given as the element's bit pattern).
    Fill,
    /// `dst[i] = src[i]`.
    Copy,
    /// `y[i] = fma(a, x[i], b)`.
    ScaleAdd,
    /// `out[i] = a[i] + b[i]` (wrapping for integers).
    Add,
    /// `out[i] = a[i] * b[i]` (wrapping for integers).
    Mul,
    /// `out[i] = x[i] / (1 + exp(-x[i]))`.
    Silu,
    /// `out[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c]`, accumulated in f32.
    RmsNorm,
    /// Row-wise softmax, max-subtracted.
    Softmax,
    /// `c[m×n] = a[m×k] · b[k×n]`, row-major, f32 accumulation, f32 output.
    Gemm,
    /// A user kernel (`seam::kernel`): its signature, bounds, geometry and
    /// sources come from its definition.
    User(Kernel),
}

impl OpKind {
    /// The catalogue (user kernels are not listed: they are the user's).
    pub const ALL: [OpKind; 9] = [
        OpKind::Fill,
        OpKind::Copy,
        OpKind::ScaleAdd,
        OpKind::Add,
        OpKind::Mul,
        OpKind::Silu,
        OpKind::RmsNorm,
        OpKind::Softmax,
        OpKind::Gemm,
    ];

    /// The op's name (`add`, or a user kernel's name).
    pub const fn name(self) -> &'static str {
        match self {
            OpKind::Fill => "fill",
            OpKind::Copy => "copy",
            OpKind::ScaleAdd => "scale_add",
            OpKind::Add => "add",
            OpKind::Mul => "mul",
            OpKind::Silu => "silu",
            OpKind::RmsNorm => "rms_norm",
            OpKind::Softmax => "softmax",
            OpKind::Gemm => "gemm",
            OpKind::User(k) => k.name(),
        }
    }

    /// The user kernel this op runs, if it is one.
    pub const fn user(self) -> Option<Kernel> {
        match self {
            OpKind::User(k) => Some(k),
            _ => None,
        }
    }

    /// The catalogue op called `name`.
    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|op| op.name() == name)
    }

    /// The op's bindings, in the order a [`Launch`] carries them.
    pub fn signature(self) -> &'static [Binding] {
        use Access::*;
        use Role::*;
        macro_rules! b {
            ($name:literal, $access:ident, $role:ident) => {
                Binding {
                    name: $name,
                    access: $access,
                    role: $role,
                    zeroed: false,
                }
            };
        }
        match self {
            OpKind::Fill => &[b!("dst", Write, Input)],
            OpKind::Copy => &[b!("src", Read, Input), b!("dst", Write, Input)],
            OpKind::ScaleAdd => &[b!("x", Read, Input), b!("y", Write, Input)],
            OpKind::Add | OpKind::Mul => &[
                b!("a", Read, Input),
                b!("b", Read, Input),
                b!("out", Write, Input),
            ],
            OpKind::Silu => &[b!("x", Read, Input), b!("out", Write, Input)],
            OpKind::RmsNorm => &[
                b!("x", Read, Input),
                b!("w", Read, Input),
                b!("out", Write, Input),
            ],
            OpKind::Softmax => &[b!("x", Read, Input), b!("out", Write, Input)],
            OpKind::Gemm => &[
                b!("a", Read, Input),
                b!("b", Read, Input),
                Binding {
                    name: "c",
                    access: Write,
                    role: Fixed(DType::F32),
                    zeroed: false,
                },
            ],
            OpKind::User(k) => k.def().bindings,
        }
    }

    /// Element types this op accepts for its inputs.
    pub fn dtypes(self) -> &'static [DType] {
        use DType::*;
        match self {
            OpKind::Fill | OpKind::Copy => &[F32, F16, Bf16, I32, U32],
            OpKind::Add | OpKind::Mul => &[F32, I32, U32],
            OpKind::ScaleAdd | OpKind::Silu | OpKind::Softmax => &[F32],
            OpKind::RmsNorm => &[F32, F16],
            OpKind::Gemm => &[F32, F16, Bf16],
            // A user kernel has one: the fixed type of its first binding.
            OpKind::User(k) => match k.def().bindings.first() {
                Some(Binding {
                    role: Role::Fixed(d),
                    ..
                }) => std::slice::from_ref(d),
                _ => &[],
            },
        }
    }

    /// Whether the op's output may be the same buffer as one of its inputs.
    /// Elementwise ops may run in place; row ops and GEMM read a whole row or
    /// tile before writing, so aliasing would race on a GPU.
    pub const fn allows_aliasing(self) -> bool {
        match self {
            OpKind::User(k) => k.def().allows_aliasing,
            _ => !matches!(self, OpKind::RmsNorm | OpKind::Softmax | OpKind::Gemm),
        }
    }

    /// How closely a backend must agree with the CPU reference (C11).
    pub fn tolerance(self, dtype: DType) -> Tolerance {
        match (self, dtype) {
            (OpKind::Fill | OpKind::Copy | OpKind::Add | OpKind::Mul | OpKind::ScaleAdd, _) => {
                Tolerance::BitExact
            }
            (OpKind::Silu, _) => Tolerance::Relative {
                rel: 1e-6,
                abs: 1e-7,
            },
            (OpKind::Softmax, _) | (OpKind::RmsNorm, DType::F32) => Tolerance::Relative {
                rel: 1e-5,
                abs: 1e-6,
            },
            // f16 output: one f16 ulp (2^-10 relative) after f32 accumulation.
            (OpKind::RmsNorm, _) => Tolerance::Relative {
                rel: 1e-3,
                abs: 1e-3,
            },
            (OpKind::Gemm, DType::F32) => Tolerance::Relative {
                rel: 1e-4,
                abs: 1e-4,
            },
            (OpKind::Gemm, _) => Tolerance::Relative {
                rel: 1e-3,
                abs: 1e-3,
            },
            (OpKind::User(k), _) => k.def().tolerance,
        }
    }
}

/// Serialized as its name (`"add"`, `"rope"`). Only catalogue names
/// deserialize: a user kernel is a definition in the program that
/// registered it, not data.
impl Serialize for OpKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for OpKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<OpKind, D::Error> {
        let name = String::deserialize(d)?;
        OpKind::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{name}` is no catalogue op (user kernels do not deserialize)"
            ))
        })
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A launch as the user states it, over views of buffers. Core validates it
/// and lowers it to a [`Launch`] over the backend's raw buffers.
#[derive(Clone, Debug, PartialEq)]
pub struct OpCall {
    /// The op.
    pub op: OpKind,
    /// Views, in signature order (a list of any length: a wrong arity is
    /// core's to refuse).
    pub buffers: BufferList<View>,
    /// Its parameters.
    pub params: Params,
}

impl OpCall {
    /// A call of any op (a catalogue op or a user kernel) over these views.
    pub fn new(op: OpKind, views: &[View], params: Params) -> OpCall {
        OpCall {
            op,
            buffers: BufferList::from_slice(views),
            params,
        }
    }
}

/// A validated launch as a backend receives it: made by core's validation
/// of an [`OpCall`] (C12), so a backend may trust every field (see
/// [`Backend`](crate::Backend)'s trust boundary). Its fields are public to
/// read; outside core it can only be built by the `unsafe`
/// [`Launch::new_unchecked`]:
///
/// ```compile_fail
/// use seam::{DType, Launch, OpKind, Params};
/// let forged = Launch {
///     op: OpKind::Fill,
///     dtype: DType::F32,
///     buffers: Default::default(),
///     params: Params::dims(1 << 30, 0, 0),
/// };
/// ```
#[derive(Debug, PartialEq)]
#[non_exhaustive]
pub struct Launch {
    /// The op.
    pub op: OpKind,
    /// Element type of the inputs (selects the kernel variant).
    pub dtype: DType,
    /// Raw buffers and the views' offsets, in signature order.
    pub buffers: BufferList<RawView>,
    /// Its parameters.
    pub params: Params,
}

impl Clone for Launch {
    fn clone(&self) -> Self {
        Launch {
            op: self.op,
            dtype: self.dtype,
            buffers: self.buffers.clone(),
            params: self.params,
        }
    }

    /// Field by field, the buffers' live entries only
    /// ([`BufferList`]'s `clone_from`).
    fn clone_from(&mut self, source: &Self) {
        self.op = source.op;
        self.dtype = source.dtype;
        self.buffers.clone_from(&source.buffers);
        self.params = source.params;
    }
}

impl Launch {
    /// A launch built by hand, for a backend's own tests and tools that
    /// drive a backend without a [`Device`](crate::Device).
    ///
    /// # Safety
    /// Before it reaches a backend, the launch must be one core's
    /// validation would have made against that backend's live buffers:
    /// every view within its buffer and holding what the op needs, element
    /// types the op accepts, writes overlapping nothing they must not (the
    /// [`Backend`](crate::Backend) trait's guarantees). Backends index
    /// device memory with it without checking.
    #[allow(unsafe_code)] // the one way to build a launch outside core
    pub unsafe fn new_unchecked(
        op: OpKind,
        dtype: DType,
        buffers: BufferList<RawView>,
        params: Params,
    ) -> Launch {
        Launch {
            op,
            dtype,
            buffers,
            params,
        }
    }

    /// The view offsets as kernels receive them after `Params`: `p.o0` …
    /// `p.o7` in WGSL (zero past the last binding).
    pub fn offsets(&self) -> [u32; MAX_BINDINGS] {
        let mut out = [0; MAX_BINDINGS];
        for (o, v) in out.iter_mut().zip(self.buffers.iter()) {
            *o = v.offset;
        }
        out
    }

    /// The immediate block WGSL kernels receive (`var<immediate> p`): the
    /// 32-byte `Params` then the eight view offsets, 64 bytes.
    pub fn immediates(&self) -> [u8; IMMEDIATE_BYTES] {
        let mut out = [0u8; IMMEDIATE_BYTES];
        out[..Params::BYTES].copy_from_slice(&self.params.to_bytes());
        for (chunk, o) in out[Params::BYTES..].chunks_exact_mut(4).zip(self.offsets()) {
            chunk.copy_from_slice(&o.to_ne_bytes());
        }
        out
    }
}

/// Bytes of the WGSL kernels' immediate block (push constants, or the
/// Vulkan backend's per-dispatch uniform block):
/// [`Params::BYTES`] plus one `u32` view offset per possible binding.
pub const IMMEDIATE_BYTES: usize = Params::BYTES + 4 * MAX_BINDINGS;

fn call<const N: usize>(op: OpKind, buffers: [View; N], params: Params) -> OpCall {
    OpCall {
        op,
        buffers: buffers.into(),
        params,
    }
}

/// `dst[..n] = value`, where `value_bits` is the element's bit pattern
/// (`f32::to_bits`, `f16::to_bits as u32`, `i32 as u32`, ...).
pub fn fill(dst: impl Into<View>, n: u32, value_bits: u32) -> OpCall {
    call(
        OpKind::Fill,
        [dst.into()],
        Params {
            d0: n,
            bits: value_bits,
            ..Params::default()
        },
    )
}

/// `dst[..n] = src[..n]`.
pub fn copy(src: impl Into<View>, dst: impl Into<View>, n: u32) -> OpCall {
    call(
        OpKind::Copy,
        [src.into(), dst.into()],
        Params {
            d0: n,
            ..Default::default()
        },
    )
}

/// `y[..n] = fma(a, x, b)`.
pub fn scale_add(x: impl Into<View>, y: impl Into<View>, n: u32, a: f32, b: f32) -> OpCall {
    call(
        OpKind::ScaleAdd,
        [x.into(), y.into()],
        Params {
            d0: n,
            s0: a,
            s1: b,
            ..Default::default()
        },
    )
}

/// `out[..n] = a + b`.
pub fn add(a: impl Into<View>, b: impl Into<View>, out: impl Into<View>, n: u32) -> OpCall {
    call(
        OpKind::Add,
        [a.into(), b.into(), out.into()],
        Params {
            d0: n,
            ..Default::default()
        },
    )
}

/// `out[..n] = a * b`.
pub fn mul(a: impl Into<View>, b: impl Into<View>, out: impl Into<View>, n: u32) -> OpCall {
    call(
        OpKind::Mul,
        [a.into(), b.into(), out.into()],
        Params {
            d0: n,
            ..Default::default()
        },
    )
}

/// `out[..n] = silu(x)`.
pub fn silu(x: impl Into<View>, out: impl Into<View>, n: u32) -> OpCall {
    call(
        OpKind::Silu,
        [x.into(), out.into()],
        Params {
            d0: n,
            ..Default::default()
        },
    )
}

/// Row-wise RMS norm over a `rows × cols` matrix with weight `w[cols]`.
pub fn rms_norm(
    x: impl Into<View>,
    w: impl Into<View>,
    out: impl Into<View>,
    rows: u32,
    cols: u32,
    eps: f32,
) -> OpCall {
    call(
        OpKind::RmsNorm,
        [x.into(), w.into(), out.into()],
        Params {
            d0: rows,
            d1: cols,
            s0: eps,
            ..Default::default()
        },
    )
}

/// Row-wise softmax over a `rows × cols` matrix.
pub fn softmax(x: impl Into<View>, out: impl Into<View>, rows: u32, cols: u32) -> OpCall {
    call(
        OpKind::Softmax,
        [x.into(), out.into()],
        Params {
            d0: rows,
            d1: cols,
            ..Default::default()
        },
    )
}

/// `c[m×n] = a[m×k] · b[k×n]` (row-major).
pub fn gemm(
    a: impl Into<View>,
    b: impl Into<View>,
    c: impl Into<View>,
    m: u32,
    n: u32,
    k: u32,
) -> OpCall {
    call(
        OpKind::Gemm,
        [a.into(), b.into(), c.into()],
        Params {
            d0: m,
            d1: n,
            d2: k,
            ..Default::default()
        },
    )
}

/// A launch of user kernel `def` (registered with
/// `Device::register_kernel`) over `views`, in its signature's order.
pub fn user(def: &'static crate::kernel::KernelDef, views: &[View], params: Params) -> OpCall {
    OpCall::new(OpKind::User(Kernel::new(def)), views, params)
}

#[cfg(test)]
mod tests;
