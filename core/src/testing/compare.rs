//! Comparing a device's result with a reference under a [`Tolerance`]
//! (C11): the one comparer of seam's tests, suite, examples and tools.
//! A failure says how many elements differ and lists the first few, each
//! with its value and bits and the reference's.

use crate::dtype::DType;
use crate::signature::Tolerance;

/// Decode bytes of `dtype` into f64 for tolerance comparison.
pub fn decode(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        DType::Bf16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        DType::I32 => bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        DType::U32 => bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
    }
}

/// One element of `dtype` as a person reads it: its value and its bits
/// (`1.5 (0x3fc00000)`, `-3 (0xfffffffd)`).
pub fn element(dtype: DType, bytes: &[u8]) -> String {
    match dtype {
        DType::F32 => {
            let b = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            format!("{:e} ({b:#010x})", f32::from_bits(b))
        }
        DType::F16 => {
            let b = u16::from_le_bytes([bytes[0], bytes[1]]);
            format!("{} ({b:#06x})", half::f16::from_bits(b))
        }
        DType::Bf16 => {
            let b = u16::from_le_bytes([bytes[0], bytes[1]]);
            format!("{} ({b:#06x})", half::bf16::from_bits(b))
        }
        DType::I32 => {
            let b = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            format!("{} ({b:#010x})", b as i32)
        }
        DType::U32 => {
            let b = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            format!("{b} ({b:#010x})")
        }
    }
}

/// How many mismatches a failure lists before it only counts them.
const LISTED: usize = 3;

/// Compare `got` with the reference `want` under `tol`. A failure says how
/// many elements differ and lists the first few, each with its index, its
/// value and bits, and the reference's.
pub fn compare(dtype: DType, tol: Tolerance, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("length {} != reference {}", got.len(), want.len()));
    }
    let size = dtype.size();
    let total = got.len() / size;
    let report = |bad: Vec<(usize, String)>| -> Result<(), String> {
        if bad.is_empty() {
            return Ok(());
        }
        let first: Vec<String> = bad.iter().take(LISTED).map(|(_, m)| m.clone()).collect();
        Err(format!(
            "{} of {total} elements differ; {}",
            bad.len(),
            first.join("; ")
        ))
    };
    match tol {
        Tolerance::BitExact => {
            let bad = got
                .chunks_exact(size)
                .zip(want.chunks_exact(size))
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .map(|(e, (a, b))| {
                    (
                        e,
                        format!(
                            "bit-exact mismatch at element {e}: {} != reference {}",
                            element(dtype, a),
                            element(dtype, b)
                        ),
                    )
                })
                .collect();
            report(bad)
        }
        Tolerance::Relative { rel, abs } => {
            let (g, w) = (decode(dtype, got), decode(dtype, want));
            let bad = g
                .iter()
                .zip(&w)
                .enumerate()
                .filter_map(|(i, (a, b))| {
                    let bound = abs as f64 + rel as f64 * b.abs();
                    // Written so that a NaN on either side fails the comparison.
                    let within = (a - b).abs() <= bound;
                    let at = |x: &[u8]| element(dtype, &x[i * size..(i + 1) * size]);
                    (!within).then(|| {
                        (
                            i,
                            format!(
                                "element {i}: {} vs reference {} (|diff| {:e} > bound {bound:e})",
                                at(got),
                                at(want),
                                (a - b).abs()
                            ),
                        )
                    })
                })
                .collect();
            report(bad)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Bit-exact: one differing bit pattern fails, naming the element; a
    /// -0.0 against 0.0 is a difference. Relative: the bound is `abs + rel
    /// · |want|`, inclusive; NaN on either side fails; lengths must agree.
    #[test]
    fn compare_holds_each_element_to_the_bound() {
        let exact = Tolerance::BitExact;
        assert_eq!(
            compare(DType::F32, exact, &f32s(&[1.0, 2.0]), &f32s(&[1.0, 2.0])),
            Ok(())
        );
        let e = compare(DType::F32, exact, &f32s(&[1.0, -0.0]), &f32s(&[1.0, 0.0])).unwrap_err();
        assert!(
            e.starts_with("1 of 2 elements differ; bit-exact mismatch at element 1"),
            "{e}"
        );
        let rel = Tolerance::Relative { rel: 0.5, abs: 1.0 };
        // |3 - 1| = 2 = 1 + 0.5 · 2: on the bound, accepted.
        assert_eq!(
            compare(DType::F32, rel, &f32s(&[1.0]), &f32s(&[2.0])),
            Ok(())
        );
        assert_eq!(
            compare(DType::F32, rel, &f32s(&[4.0]), &f32s(&[2.0])),
            Ok(())
        );
        let e = compare(DType::F32, rel, &f32s(&[4.01, 0.0]), &f32s(&[2.0, 0.0])).unwrap_err();
        assert!(e.starts_with("1 of 2 elements differ; element 0: "), "{e}");
        // A mismatch past element 0 prints that element's own values.
        let e = compare(DType::F32, rel, &f32s(&[2.0, 9.0]), &f32s(&[2.0, 2.0])).unwrap_err();
        assert!(
            e.contains("element 1: 9e0 (0x41100000) vs reference 2e0 (0x40000000)"),
            "{e}"
        );
        for (g, w) in [(f32::NAN, 1.0), (1.0, f32::NAN)] {
            assert!(compare(DType::F32, rel, &f32s(&[g]), &f32s(&[w])).is_err());
        }
        assert_eq!(
            compare(DType::F32, rel, &f32s(&[1.0]), &f32s(&[1.0, 2.0])),
            Err("length 4 != reference 8".into())
        );
        // Past LISTED mismatches the message only counts them.
        let e = compare(DType::U32, exact, &[1u8; 20], &[0u8; 20]).unwrap_err();
        assert!(e.starts_with("5 of 5 elements differ;"), "{e}");
        assert_eq!(e.matches("bit-exact mismatch").count(), LISTED, "{e}");
    }

    /// Every element type decodes to its value, and prints with its bits.
    #[test]
    fn elements_decode_and_print_with_their_bits() {
        assert_eq!(decode(DType::F32, &1.5f32.to_le_bytes()), [1.5]);
        assert_eq!(
            decode(DType::F16, &half::f16::from_f32(-2.0).to_le_bytes()),
            [-2.0]
        );
        assert_eq!(
            decode(DType::Bf16, &half::bf16::from_f32(0.5).to_le_bytes()),
            [0.5]
        );
        assert_eq!(decode(DType::I32, &(-3i32).to_le_bytes()), [-3.0]);
        assert_eq!(decode(DType::U32, &7u32.to_le_bytes()), [7.0]);
        assert_eq!(
            element(DType::F32, &1.5f32.to_le_bytes()),
            "1.5e0 (0x3fc00000)"
        );
        assert_eq!(
            element(DType::I32, &(-3i32).to_le_bytes()),
            "-3 (0xfffffffd)"
        );
        assert_eq!(element(DType::U32, &7u32.to_le_bytes()), "7 (0x00000007)");
        assert_eq!(
            element(DType::F16, &half::f16::from_f32(-2.0).to_le_bytes()),
            "-2 (0xc000)"
        );
        assert_eq!(
            element(DType::Bf16, &half::bf16::from_f32(0.5).to_le_bytes()),
            "0.5 (0x3f00)"
        );
    }
}
