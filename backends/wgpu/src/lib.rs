//! The wgpu backend: every adapter wgpu finds (Vulkan and Metal here) is a
//! device, kernels are the WGSL sources of `seam-kernels`, and graph capture
//! is **Emulated**. Safe Rust, but for one call in `sys` (catalogue kernels'
//! modules without wgpu's runtime checks, as the Vulkan backend runs them).
//!
//! Decisions, each made once (docs/wgpu.md says what the emulated graph
//! saves and what it does not):
//! - **Devices.** Every adapter of every wgpu backend compiled in, in wgpu's
//!   enumeration order, that has `Features::IMMEDIATES` with at least 64
//!   bytes of `max_immediate_size` (the `Params` block and the views'
//!   offsets are `var<immediate>`)
//!   and compute shaders. An adapter without them is skipped with a reason
//!   ([`adapters`] lists it). `WGPU_BACKEND` narrows the backends, as wgpu does.
//! - **Memory.** One `STORAGE | COPY_SRC | COPY_DST` buffer per allocation,
//!   rounded up to whole 16-byte quads (kernels see `array<u32>`; gemm
//!   reads b as `array<vec4<u32>>`). Writes go
//!   through `Queue::write_buffer`; a write that does not start and end on a
//!   word first reads the two edge words back. Reads copy into a `MAP_READ`
//!   staging buffer (reused, at most 64 MiB a chunk) and map it with a
//!   bounded wait.
//! - **Kernels.** One shader module, bind group layout and pipeline layout
//!   per op, the layout reflected from the WGSL with naga (so it always
//!   matches the kernel's `read` / `read_write` declarations); one compute
//!   pipeline per (op, entry point), made lazily or by `prepare`, cached for
//!   the device's life. The catalogue's modules are made without wgpu's
//!   runtime checks (index clamping, loop counters), as the Vulkan backend
//!   compiles them (`sys`); a user kernel's keeps them. Bind groups are cached per (op, buffers) and evicted
//!   when a buffer is freed. They bind whole buffers: a view's element
//!   offset goes to the kernel in the immediates (`p.o<k>`), so views of
//!   the same buffers share a bind group.
//! - **User kernels** (`seam::kernel`) are compiled when registered
//!   (`prepare`): the WGSL, prelude prepended, checked by naga against the
//!   definition (`seam::wgsl`), then `create_shader_module` inside
//!   error scopes; the bind group layout follows the WGSL's declarations.
//! - **Eager launches** are resolved at launch (pipeline, bind group,
//!   workgroup counts) and batched; the batch is encoded into one compute
//!   pass and submitted at the next write, read, synchronize, replay, or
//!   after 256 launches. wgpu inserts the barriers between dependent
//!   dispatches of a pass.
//! - **Capture is Emulated.** wgpu command buffers are one-shot, so a graph
//!   is the list of fully resolved dispatches recorded at capture time; a
//!   replay re-encodes them (after any pending eager batch) and submits
//!   them in command buffers of 256 dispatches, so the GPU starts on the
//!   first while the host encodes the next. The current exec and each graph
//!   handle are separate lists (C3).
//! - **Lifetimes.** Freeing a buffer or destroying a graph drops our handles
//!   only; wgpu-core keeps every resource a submission uses alive until that
//!   submission has finished, so a replay in flight completes (C8).
//! - **Errors.** Every wgpu call that can fail runs inside validation,
//!   out-of-memory and internal error scopes and becomes
//!   `ErrorKind::Driver` naming the call; an uncaptured-error handler
//!   collects anything else (never the default handler, which panics).
//!   Waits poll the submission (`wgpu::Device::poll` with a zero timeout)
//!   for a spin budget, 50 µs by default or `SEAM_WGPU_SPIN_US` (0: always
//!   block), then block; they are bounded (20 s), then an error naming
//!   `wgpu::Device::poll`.
//! - **Timing.** Where the adapter has timestamp queries inside passes,
//!   the device times itself: markers around each traced replay and eager
//!   launch, and a stamp after each launch of a node-timed graph's traced
//!   replay, all written inside the compute passes (`backend/timing.rs`).
//! - **Validation.** `SEAM_WGPU_VALIDATION=1` turns on the backend's
//!   validation layer and collects what wgpu-hal only logs: a message fails
//!   the call that raised it and the device's teardown (`validation.rs`,
//!   docs/wgpu.md).

mod backend;
mod dispatch;
mod gpu;
mod kernels;
mod replay;

/// The spin budget of every wait (`seam::wait`): the submission polled this
/// long, then blocked on.
pub(crate) static SPIN: seam::wait::SpinSetting = seam::wait::SpinSetting::new("SEAM_WGPU_SPIN_US");

#[allow(unsafe_code)]
mod sys;
#[cfg(test)]
mod tests;
mod validation;

/// The lib's test target has `harness = false` (Cargo.toml): its tests are
/// libtest-mimic trials, ignored with a reason where there is no adapter.
#[cfg(test)]
fn main() {
    tests::main()
}

pub use backend::WgpuBackend;

use seam::{Backend, ErrorKind};

/// What to install when wgpu finds nothing.
pub const INSTALL_HINT: &str =
    "no wgpu adapter: install mesa-vulkan-drivers for the CPU device (lavapipe)";

/// Bytes of immediate data (push constants) every kernel needs:
/// `seam::Launch::immediates` (`Params`, then each binding's view offset).
pub const IMMEDIATE_BYTES: u32 = seam::ops::IMMEDIATE_BYTES as u32;

/// One adapter wgpu found, and why it is skipped if it is.
#[derive(Clone, Debug)]
pub struct AdapterSlot {
    pub info: wgpu::AdapterInfo,
    /// `None` if the adapter is a seam device; otherwise why not.
    pub skipped: Option<String>,
}

/// The one wgpu instance of this process, created on first use and kept:
/// creating one per device open made the NVIDIA Vulkan ICD refuse new
/// instances after ~27 cycles in one process (seen on the H200, driver 580).
/// Flags from the environment (`WGPU_VALIDATION`, `WGPU_DEBUG`, …); with
/// `SEAM_WGPU_VALIDATION=1` validation is on and its messages collected
/// (`validation.rs`), or the instance is refused with the reason.
fn instance() -> Result<wgpu::Instance, String> {
    static SHARED: std::sync::OnceLock<Result<wgpu::Instance, String>> = std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| {
            let desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
            if validation::requested() {
                validation::instance(desc)
            } else {
                Ok(wgpu::Instance::new(desc))
            }
        })
        .clone()
}

fn enumerate(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
}

/// Why `adapter` cannot run seam's kernels, if it cannot.
fn unusable(adapter: &wgpu::Adapter) -> Option<String> {
    unusable_with(
        adapter.features(),
        adapter.limits().max_immediate_size,
        adapter.get_downlevel_capabilities().flags,
    )
}

/// Why an adapter with `features`, `max_immediate_size` and downlevel
/// `flags` cannot run seam's kernels, if it cannot.
fn unusable_with(
    features: wgpu::Features,
    max_immediate_size: u32,
    flags: wgpu::DownlevelFlags,
) -> Option<String> {
    if !features.contains(wgpu::Features::IMMEDIATES) {
        return Some(
            "lacks wgpu::Features::IMMEDIATES (push constants for the Params block)".into(),
        );
    }
    if max_immediate_size < IMMEDIATE_BYTES {
        return Some(format!(
            "max_immediate_size is {max_immediate_size} bytes, the immediate block (Params and view offsets) needs {IMMEDIATE_BYTES}"
        ));
    }
    if !flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
        return Some("no compute shaders".into());
    }
    None
}

/// Every adapter wgpu enumerates, usable or not (with the reason).
pub fn adapters() -> Vec<AdapterSlot> {
    let Ok(instance) = instance() else {
        return Vec::new();
    };
    enumerate(&instance)
        .iter()
        .map(|a| AdapterSlot {
            info: a.get_info(),
            skipped: unusable(a),
        })
        .collect()
}

/// How many wgpu adapters can run seam, or why there are none (with what to install).
pub fn device_count() -> Result<usize, String> {
    instance()?;
    let all = adapters();
    if all.is_empty() {
        return Err(INSTALL_HINT.into());
    }
    let usable = all.iter().filter(|a| a.skipped.is_none()).count();
    if usable == 0 {
        let reasons: Vec<String> = all
            .iter()
            .filter_map(|a| {
                let why = a.skipped.as_ref()?;
                Some(format!("{} ({:?}): {why}", a.info.name, a.info.backend))
            })
            .collect();
        return Err(format!(
            "no usable wgpu adapter: {}; {INSTALL_HINT}",
            reasons.join("; ")
        ));
    }
    Ok(usable)
}

/// Open `wgpu:<index>` (index among the usable adapters).
pub fn open(index: usize) -> Result<Box<dyn Backend>, ErrorKind> {
    let instance = instance().map_err(|reason| ErrorKind::Unavailable { reason })?;
    let adapter = enumerate(&instance)
        .into_iter()
        .filter(|a| unusable(a).is_none())
        .nth(index)
        .ok_or_else(|| ErrorKind::Unavailable {
            reason: format!("wgpu:{index}: no such adapter ({INSTALL_HINT})"),
        })?;
    Ok(Box::new(WgpuBackend::open(index, &adapter)?))
}

/// The wgpu backend's description of itself (`seam::registration`).
pub const REGISTRATION: seam::Registration =
    seam::Registration::new("wgpu", Some("wgpu"), device_count, open)
        .with_capture(&[seam::CaptureKind::Emulated]);
