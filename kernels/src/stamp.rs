//! Node timing by stamp kernels (C10 on CUDA): a one-thread kernel,
//! captured after each launch of a node-timed graph, that writes the
//! device's nanosecond clock (`%globaltimer`) into two `u32` words of a
//! buffer of the backend's own. Launch `i` of such a graph runs from stamp
//! `i` to stamp `i + 1`.
//!
//! Why a kernel and not an event record node: on an H200 (driver
//! 580.159.04, CUDA 13.0), a chain of 1000 dependent one-thread kernels
//! replayed 3.49× slower with an event record node after each kernel and
//! 1.97× with such a stamp kernel after each (`bench/probes/node_timing_probe.cu`,
//! 2026-12-04; docs/tracing.md).

use seam::kernel::{CudaSource, KernelDef};
use seam::ops::{Access, Binding};
use seam::{DType, Params, Tolerance};

/// `u32` words one stamp takes (a 64-bit clock, low word first).
pub const WORDS: u32 = 2;

fn stamp_extents(_: &Params, out: &mut [u64]) {
    out[0] = u64::from(WORDS);
}

fn stamp_grid(_: &Params) -> [u32; 3] {
    [1, 1, 1]
}

/// One thread writes `%globaltimer` (ns) to `out[0]` (low word) and
/// `out[1]` (high word). CUDA C only (PTX's clock register).
#[allow(unsafe_code)] // trusts its CUDA C (`CudaSource::trusted`)
pub static STAMP: KernelDef = KernelDef {
    name: "seam_stamp",
    bindings: &[Binding::fixed("out", Access::Write, DType::U32)],
    reads: &[],
    extents: stamp_extents,
    workgroup_size: [1, 1, 1],
    grid: stamp_grid,
    check: None,
    allows_aliasing: false,
    tolerance: Tolerance::BitExact,
    wgsl: None,
    // SAFETY: one thread writes out[0] and out[1], the two elements its
    // view holds (`stamp_extents`), and reads nothing.
    cuda: Some(unsafe {
        CudaSource::trusted(
            r#"extern "C" __global__ void seam_stamp(unsigned int* out, Params p) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    out[0] = (unsigned int)t;
    out[1] = (unsigned int)(t >> 32);
}
"#,
        )
    }),
    cpu: None,
    samples: &[],
};

/// A stamp read back: the clock from its two words.
pub fn stamp_ns(words: [u32; 2]) -> u64 {
    u64::from(words[0]) | (u64::from(words[1]) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a stamp writes give its clock back. Mutation: the words
    /// swapped, or the high one dropped → red.
    #[test]
    fn a_stamp_reads_back_low_word_first() {
        assert_eq!(stamp_ns([0x9abc_def0, 0x1234_5678]), 0x1234_5678_9abc_def0);
        let mut ext = [0u64; 1];
        (STAMP.extents)(&Params::ZERO, &mut ext);
        assert_eq!(ext, [u64::from(WORDS)]);
        assert_eq!((STAMP.grid)(&Params::ZERO), [1, 1, 1]);
    }
}
