//! Host memory the CPU reference cannot have is an error that names the
//! call, not an abort of the process; the backend stays usable. Mutation:
//! `vec![0xA5; bytes]` in `CpuBackend::alloc` (as it was) → the test
//! process aborts ("memory allocation of … bytes failed").

use seam::Backend;

#[test]
fn an_allocation_the_host_cannot_give_is_an_error() {
    let mut b = seam_cpu::CpuBackend::new(0);
    // More than any address space: refused before a byte is touched.
    let e = b.alloc(1 << 62).expect_err("4 EiB of host memory");
    let text = e.to_string();
    assert!(
        text.contains("alloc") && text.contains("host memory"),
        "the error names the call and what was missing: {text}"
    );
    b.alloc(64).expect("a small buffer after the refusal");
}
