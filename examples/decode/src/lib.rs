//! # seam-example-decode
//!
//! One decode step of a toy attention block, the way an inference engine
//! runs it through seam: two kernels of its own kind ([`seam_kernels::user::ROPE`]
//! and [`seam_kernels::user::ADD_RMS_NORM`]) registered as user kernels next to the
//! catalogue's GEMM, copy, scale_add, softmax and silu; a KV cache written
//! one slot per step through a view; the whole step captured **once**, then
//! moved to each next position by one graph update per step
//! (`update_launches`: RoPE's position, the attention sizes and the KV
//! write's view) and replayed.
//!
//! [`check::check_device`] runs it on a device and compares every step's
//! output, the residual and the whole KV cache with the same steps run
//! eagerly on the CPU reference device; `cargo run -p seam-example-decode
//! --release` does that on every device found.

pub mod check;
pub mod step;

pub use check::{check_device, Outcome, STEP_TOLERANCE};
pub use step::{Config, DecodeStep, Weights};
