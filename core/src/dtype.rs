//! Element types a buffer can hold, and the host types that map onto them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element type of a buffer. Every buffer has exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float (`half::f16`).
    F16,
    /// bfloat16 (`half::bf16`).
    Bf16,
    /// 32-bit signed integer.
    I32,
    /// 32-bit unsigned integer.
    U32,
}

impl DType {
    /// Every element type.
    pub const ALL: [DType; 5] = [DType::F32, DType::F16, DType::Bf16, DType::I32, DType::U32];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }

    /// Its name (`f32`, `f16`, `bf16`, `i32`, `u32`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::I32 => "i32",
            DType::U32 => "u32",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A host type that can be stored in a device buffer.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The element type a buffer of `Self` has.
    const DTYPE: DType;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
}
impl Element for half::bf16 {
    const DTYPE: DType = DType::Bf16;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for u32 {
    const DTYPE: DType = DType::U32;
}
