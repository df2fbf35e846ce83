//! # seam-bench
//!
//! When does capture pay, and how much of the launch path does the runtime
//! add? The `seam-bench` binary measures the seam arms (every backend found,
//! eager and replay, through the public API only); two anchor programs in
//! `bench/anchors/` measure the raw CUDA driver and PyTorch on the same
//! workloads in the same device command. All three print one CSV schema
//! ([`csv::Row`]); [`report`] turns the CSVs into a Markdown table with ratios
//! to the raw-driver arm, the targets' verdicts, and SVG plots.

pub mod csv;
pub mod measure;
/// One-off probes that locate a miss (`seam-bench probe`).
pub mod probe;
/// The raw-CUDA anchor in-process: `unsafe` FFI, each block with its
/// `SAFETY` reason.
#[cfg(feature = "cuda")]
#[allow(unsafe_code)]
pub mod raw_cuda;
/// The raw-Vulkan anchor: `unsafe` FFI, each block with its `SAFETY` reason.
#[cfg(feature = "vulkan")]
#[allow(unsafe_code)]
pub mod raw_vulkan;
/// The wgpu submission probe (`seam-bench probe wgpu-submit`): safe wgpu.
#[cfg(feature = "wgpu")]
pub mod raw_wgpu;
pub mod report;
pub mod stats;
pub mod timed;
