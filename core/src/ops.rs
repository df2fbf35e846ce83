//! The op catalogue: every op a backend must implement, its binding/scalar
//! signature, and the typed constructors users call.
//!
//! A launch reaches a backend as a [`Launch`]: the op, the element type of its
//! inputs, its buffers in signature order and one fixed-layout [`Params`]
//! block. The same 32-byte block is what GPU kernels receive as push constants
//! or kernel arguments, so every backend lowers every op the same way.

pub use crate::buffer_list::BufferList;
use crate::dtype::DType;
use crate::BufferId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Every op in the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
}

impl OpKind {
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
        }
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
                b!("c", Write, F32Only),
            ],
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
        }
    }

    /// Whether the op's output may be the same buffer as one of its inputs.
    /// Elementwise ops may run in place; row ops and GEMM read a whole row or
    /// tile before writing, so aliasing would race on a GPU.
    pub const fn allows_aliasing(self) -> bool {
        !matches!(self, OpKind::RmsNorm | OpKind::Softmax | OpKind::Gemm)
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
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a binding is used by an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Which element type a binding must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The launch's element type (the type of the first binding).
    Input,
    /// Always f32 (GEMM's accumulator output).
    F32Only,
}

/// One binding of an op's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    pub name: &'static str,
    pub access: Access,
    pub role: Role,
}

/// Agreement bound against the CPU reference (C11).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tolerance {
    BitExact,
    /// `|x - ref| <= abs + rel * |ref|`, element by element.
    Relative {
        rel: f32,
        abs: f32,
    },
}

/// The scalar block every launch carries; 32 bytes, `#[repr(C)]`, identical
/// to the push-constant / kernel-argument block in `seam-kernels`.
///
/// | op | d0 | d1 | d2 | s0 | s1 | bits |
/// |---|---|---|---|---|---|---|
/// | fill | n | | | | | value bits |
/// | copy, add, mul, silu | n | | | | | |
/// | scale_add | n | | | a | b | |
/// | rms_norm | rows | cols | | eps | | |
/// | softmax | rows | cols | | | | |
/// | gemm | m | n | k | | | |
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    bytemuck::Pod,
    bytemuck::Zeroable,
    Serialize,
    Deserialize,
)]
pub struct Params {
    pub d0: u32,
    pub d1: u32,
    pub d2: u32,
    pub bits: u32,
    pub s0: f32,
    pub s1: f32,
    pub _pad: [u32; 2],
}

impl Params {
    /// Size of the block in bytes (what every kernel's push constants,
    /// immediates or argument hold).
    pub const BYTES: usize = 32;

    /// The block as GPU kernels receive it: eight native-endian 32-bit words
    /// in field order.
    pub fn to_bytes(&self) -> [u8; Params::BYTES] {
        bytemuck::cast(*self)
    }
}

/// A launch as the user states it, over buffer ids. Core validates it and
/// lowers it to a [`Launch`] over the backend's raw buffers.
#[derive(Clone, Debug, PartialEq)]
pub struct OpCall {
    pub op: OpKind,
    /// Buffer ids, in signature order (a list of any length: a wrong arity
    /// is core's to refuse).
    pub buffers: BufferList<BufferId>,
    pub params: Params,
}

/// A validated launch as a backend receives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub op: OpKind,
    /// Element type of the inputs (selects the kernel variant).
    pub dtype: DType,
    /// Raw buffers, in signature order.
    pub buffers: BufferList<crate::RawBuffer>,
    pub params: Params,
}

fn call<const N: usize>(op: OpKind, buffers: [BufferId; N], params: Params) -> OpCall {
    OpCall {
        op,
        buffers: buffers.into(),
        params,
    }
}

/// `dst[..n] = value`, where `value_bits` is the element's bit pattern
/// (`f32::to_bits`, `f16::to_bits as u32`, `i32 as u32`, ...).
pub fn fill(dst: BufferId, n: u32, value_bits: u32) -> OpCall {
    call(
        OpKind::Fill,
        [dst],
        Params {
            d0: n,
            bits: value_bits,
            ..Params::default()
        },
    )
}

/// `dst[..n] = src[..n]`.
pub fn copy(src: BufferId, dst: BufferId, n: u32) -> OpCall {
    call(
        OpKind::Copy,
        [src, dst],
        Params {
            d0: n,
            ..Default::default()
        },
    )
}

/// `y[..n] = fma(a, x, b)`.
pub fn scale_add(x: BufferId, y: BufferId, n: u32, a: f32, b: f32) -> OpCall {
    call(
        OpKind::ScaleAdd,
        [x, y],
        Params {
            d0: n,
            s0: a,
            s1: b,
            ..Default::default()
        },
    )
}

/// `out[..n] = a + b`.
pub fn add(a: BufferId, b: BufferId, out: BufferId, n: u32) -> OpCall {
    call(
        OpKind::Add,
        [a, b, out],
        Params {
            d0: n,
            ..Default::default()
        },
    )
}

/// `out[..n] = a * b`.
pub fn mul(a: BufferId, b: BufferId, out: BufferId, n: u32) -> OpCall {
    call(
        OpKind::Mul,
        [a, b, out],
        Params {
            d0: n,
            ..Default::default()
        },
    )
}

/// `out[..n] = silu(x)`.
pub fn silu(x: BufferId, out: BufferId, n: u32) -> OpCall {
    call(
        OpKind::Silu,
        [x, out],
        Params {
            d0: n,
            ..Default::default()
        },
    )
}

/// Row-wise RMS norm over a `rows × cols` matrix with weight `w[cols]`.
pub fn rms_norm(x: BufferId, w: BufferId, out: BufferId, rows: u32, cols: u32, eps: f32) -> OpCall {
    call(
        OpKind::RmsNorm,
        [x, w, out],
        Params {
            d0: rows,
            d1: cols,
            s0: eps,
            ..Default::default()
        },
    )
}

/// Row-wise softmax over a `rows × cols` matrix.
pub fn softmax(x: BufferId, out: BufferId, rows: u32, cols: u32) -> OpCall {
    call(
        OpKind::Softmax,
        [x, out],
        Params {
            d0: rows,
            d1: cols,
            ..Default::default()
        },
    )
}

/// `c[m×n] = a[m×k] · b[k×n]` (row-major).
pub fn gemm(a: BufferId, b: BufferId, c: BufferId, m: u32, n: u32, k: u32) -> OpCall {
    call(
        OpKind::Gemm,
        [a, b, c],
        Params {
            d0: m,
            d1: n,
            d2: k,
            ..Default::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block kernels receive: eight native-endian words in field order.
    /// Mutation: swap two fields in `Params` → red.
    #[test]
    fn params_bytes_are_the_fields_in_order() {
        let p = Params {
            d0: 1,
            d1: 2,
            d2: 3,
            bits: 4,
            s0: 1.5,
            s1: -2.0,
            _pad: [7, 8],
        };
        let words: Vec<u32> = p
            .to_bytes()
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(
            words,
            [1, 2, 3, 4, 1.5f32.to_bits(), (-2.0f32).to_bits(), 7, 8]
        );
    }

    /// `name()` is the identifier kernels are looked up by
    /// (`kernels/wgsl/<op>.wgsl`, entry points `<op>_<dtype>`), what errors
    /// print, and must equal the serde name the JSON reports carry.
    /// Mutations: `OpKind::name` / `DType::name` → `""` or `"xyzzy"`, either
    /// `Display` → `Ok(Default::default())` → red.
    #[test]
    fn names_match_display_and_serde() {
        fn check<T: fmt::Display + Serialize>(
            all: &[T],
            name: impl Fn(&T) -> &'static str,
            want: &[&str],
        ) {
            let names: Vec<&str> = all.iter().map(&name).collect();
            assert_eq!(names, want);
            for v in all {
                assert_eq!(v.to_string(), name(v));
                assert_eq!(
                    serde_json::to_string(v).unwrap(),
                    format!("\"{}\"", name(v))
                );
            }
        }
        check(
            &OpKind::ALL,
            |o| o.name(),
            &[
                "fill",
                "copy",
                "scale_add",
                "add",
                "mul",
                "silu",
                "rms_norm",
                "softmax",
                "gemm",
            ],
        );
        check(
            &DType::ALL,
            |d| d.name(),
            &["f32", "f16", "bf16", "i32", "u32"],
        );
    }
}
