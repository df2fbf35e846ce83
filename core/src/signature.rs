//! The launch vocabulary every op and user kernel is stated in: how a
//! binding is used ([`Access`]) and typed ([`Role`]), one binding of a
//! signature ([`Binding`]), the agreement bound against the CPU reference
//! ([`Tolerance`]) and the scalar block every launch carries ([`Params`]).
//! Below the op catalogue (`ops.rs`) and user kernels (`kernel/`), which
//! are both written in it.

use crate::dtype::DType;
use serde::{Deserialize, Serialize};

/// Most bindings one kernel may have (the prelude carries one view offset
/// per binding: `p.o0` … `p.o7`).
pub const MAX_BINDINGS: usize = 8;

/// How a binding is used by an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The op only reads the binding.
    Read,
    /// The op writes the binding (and may read it).
    Write,
}

/// Which element type a binding must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The launch's element type (the type of the first binding).
    Input,
    /// Always this type (GEMM's f32 accumulator output; every binding of a
    /// user kernel).
    Fixed(DType),
}

/// One binding of an op's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// Its name, as errors and kernels name it.
    pub name: &'static str,
    /// Whether the op reads or writes it.
    pub access: Access,
    /// Its element type: the launch's, or fixed.
    pub role: Role,
    /// A workspace ([`Binding::workspace`]): the caller hands the kernel a
    /// view of zeros and gets zeros back.
    pub zeroed: bool,
}

impl Binding {
    /// A binding of one element type, as user kernels declare them.
    pub const fn fixed(name: &'static str, access: Access, dtype: DType) -> Binding {
        Binding {
            name,
            access,
            role: Role::Fixed(dtype),
            zeroed: false,
        }
    }

    /// A kernel's workspace: written (and read) by the launch, which needs
    /// every element zero when it starts and leaves every element zero when
    /// it ends, so one zeroed buffer serves launch after launch (a split
    /// reduction's partial sums and arrival counters, as cuBLAS and CUTLASS
    /// keep them). The caller zeroes it once; the suite (C11) hands the
    /// kernel zeros and requires zeros back, bit for bit.
    pub const fn workspace(name: &'static str, dtype: DType) -> Binding {
        Binding {
            name,
            access: Access::Write,
            role: Role::Fixed(dtype),
            zeroed: true,
        }
    }
}

/// Agreement bound against the CPU reference (C11).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tolerance {
    /// Bit for bit.
    BitExact,
    /// `|x - ref| <= abs + rel * |ref|`, element by element.
    Relative {
        /// Relative bound: `|got - want| <= abs + rel * |want|`.
        rel: f32,
        /// Absolute part of the bound.
        abs: f32,
    },
}

/// The scalar block every launch carries; 32 bytes, `#[repr(C)]`, identical
/// to the immediate / kernel-argument block in `seam-kernels`.
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
    /// First dimension (the op's `n`, `rows`, or `m`).
    pub d0: u32,
    /// Second dimension (`cols`, or `n`).
    pub d1: u32,
    /// Third dimension (GEMM's `k`).
    pub d2: u32,
    /// A bit pattern (`fill`'s value).
    pub bits: u32,
    /// First scalar (`scale_add`'s `a`, `rms_norm`'s `eps`).
    pub s0: f32,
    /// Second scalar (`scale_add`'s `b`).
    pub s1: f32,
    /// Padding to 32 bytes: zero.
    pub _pad: [u32; 2],
}

impl Params {
    /// All fields zero.
    pub const ZERO: Params = Params {
        d0: 0,
        d1: 0,
        d2: 0,
        bits: 0,
        s0: 0.0,
        s1: 0.0,
        _pad: [0, 0],
    };

    /// A block with these dims and every other field zero (`const`, for a
    /// user kernel's `samples`).
    pub const fn dims(d0: u32, d1: u32, d2: u32) -> Params {
        Params {
            d0,
            d1,
            d2,
            ..Params::ZERO
        }
    }

    /// This block with scalars `s0`, `s1`.
    pub const fn with_scalars(self, s0: f32, s1: f32) -> Params {
        Params { s0, s1, ..self }
    }

    /// Size of the block in bytes (what every kernel's push constants,
    /// immediates, uniform block or argument hold).
    pub const BYTES: usize = 32;

    /// The block as GPU kernels receive it: eight native-endian 32-bit words
    /// in field order.
    pub fn to_bytes(&self) -> [u8; Params::BYTES] {
        bytemuck::cast(*self)
    }
}
