//! Tests that run without a GPU: discovery on a machine without CUDA, and the
//! kernel sources every launch will ask NVRTC for.

use seam::{DType, OpKind};
use seam_kernels::Language;

/// Whether this machine has a CUDA driver at all (the tests below adapt).
fn driver_present() -> bool {
    crate::sys::driver().is_ok()
}

#[test]
fn without_a_driver_device_count_says_what_to_install_and_open_fails() {
    let without_driver = !driver_present();
    seam_streamgraph::testing::check_missing_device(crate::device_count, crate::open, |why| {
        !why.is_empty()
            && (!without_driver
                || why.starts_with("no CUDA driver") && why.contains("install the NVIDIA driver"))
    });
}

#[test]
fn every_op_has_cuda_c_with_every_entry_point() {
    for op in OpKind::ALL {
        let src = seam_kernels::source(op, Language::CudaC)
            .unwrap_or_else(|| panic!("kernels/cuda/{}.cu is missing", op.name()));
        for &dtype in op.dtypes() {
            let ep = seam_kernels::entry_point(op, dtype);
            assert!(
                src.contains(&format!("void {ep}(")) || src.contains(&format!("SEAM_GEMM({ep},")),
                "{op}/{dtype}: kernels/cuda/{}.cu has no entry point {ep}",
                op.name()
            );
            assert!(
                src.contains("extern \"C\" __global__"),
                "{op}: kernels must be extern \"C\" __global__"
            );
        }
    }
}

#[test]
fn kernel_params_struct_matches_seam_params() {
    // Every source declares the 32-byte block it receives by value, field for
    // field in seam::Params order.
    assert_eq!(std::mem::size_of::<seam::Params>(), 32);
    for op in OpKind::ALL {
        let src = seam_kernels::source(op, Language::CudaC).unwrap_or_default();
        assert!(
            src.contains("unsigned int d0, d1, d2, bits;")
                && src.contains("float s0, s1;")
                && src.contains("unsigned int pad0, pad1;"),
            "{op}: Params struct differs from seam::Params"
        );
    }
}

#[test]
fn sixteen_bit_and_integer_variants_share_kernels() {
    assert_eq!(
        seam_kernels::entry_point(OpKind::Fill, DType::Bf16),
        "fill_16"
    );
    assert_eq!(
        seam_kernels::entry_point(OpKind::Copy, DType::I32),
        "copy_32"
    );
    assert_eq!(
        seam_kernels::entry_point(OpKind::Add, DType::I32),
        "add_u32"
    );
}

#[test]
fn nvidia_kernel_version_is_parsed() {
    let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep 25 2025\nGCC version: gcc 12";
    assert_eq!(
        crate::backend::nvidia_kernel_version(text).as_deref(),
        Some("580.95.05")
    );
    assert_eq!(crate::backend::nvidia_kernel_version("garbage"), None);
}

#[test]
fn device_timing_without_a_driver_says_why_instead_of_panicking() {
    if driver_present() {
        return;
    }
    let reason = crate::sys::events().expect_err("no driver, no timing");
    assert!(reason.contains("no CUDA driver"), "{reason}");
}

/// Launches start early only for code compiled for architecture 9.0 or
/// newer, cubin or PTX alike (where the prelude's wait is compiled in).
/// Mutation: `waits_in_kernel` → `true` / `false`, `>=` → `>` → red.
#[test]
fn early_starts_need_a_target_that_compiles_the_wait() {
    use crate::compile::Target;
    use crate::sys::ImageKind;
    for (arch, waits) in [
        ("sm_90", true),
        ("compute_90", true),
        ("sm_120", true),
        ("sm_89", false),
        ("compute_80", false),
        ("bogus", false),
    ] {
        let t = Target {
            arch: arch.into(),
            kind: ImageKind::Cubin,
        };
        assert_eq!(t.waits_in_kernel(), waits, "{arch}");
    }
}
