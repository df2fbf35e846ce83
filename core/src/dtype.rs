//! Element types a buffer can hold, and the host types that map onto them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element type of a buffer. Every buffer has exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    Bf16,
    I32,
    U32,
}

impl DType {
    pub const ALL: [DType; 5] = [DType::F32, DType::F16, DType::Bf16, DType::I32, DType::U32];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }

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
