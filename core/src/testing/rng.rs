//! The one random generator of seam's tests, suite, examples and
//! benchmark: xorshift, seeded, the same values on every machine. (xtask's
//! mutant sampler keeps its own generator: a recorded campaign names a
//! seed, and the seed must keep meaning the same sample.)

use crate::DType;

/// A small xorshift generator: the same inputs on every machine.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value, zero included).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }

    /// Uniform in [0, 1), on a 2^-24 grid (every value an exact f32).
    pub fn next_unit(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 / (1u32 << 24) as f32
    }

    /// Uniform in [-range, range), on a 2^-12 grid so f16/bf16 hold it well.
    pub fn next_f32(&mut self, range: f32) -> f32 {
        let unit = self.next_unit();
        (((unit * 2.0 - 1.0) * range) * 4096.0).round() / 4096.0
    }

    /// Host bytes of `n` random elements of `dtype`: floats in [-range,
    /// range) ([`Rng::next_f32`]), integers of any 32 bits.
    pub fn bytes(&mut self, dtype: DType, n: usize, range: f32) -> Vec<u8> {
        let mut out = Vec::with_capacity(n * dtype.size());
        for _ in 0..n {
            match dtype {
                DType::F32 => out.extend_from_slice(&self.next_f32(range).to_le_bytes()),
                DType::F16 => {
                    out.extend_from_slice(&half::f16::from_f32(self.next_f32(range)).to_le_bytes())
                }
                DType::Bf16 => {
                    out.extend_from_slice(&half::bf16::from_f32(self.next_f32(range)).to_le_bytes())
                }
                DType::I32 | DType::U32 => out.extend_from_slice(&self.next_u32().to_le_bytes()),
            }
        }
        out
    }
}
