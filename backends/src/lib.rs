//! Every seam backend, one cargo feature each, and device discovery.
//!
//! `discover()` lists every device of every compiled-in backend, and for a
//! backend whose driver or hardware is missing, why: the conformance harness
//! turns that into ignored trials that say what to install.

use seam::{Backend, Device, ErrorKind};

pub use seam_cpu::CpuBackend;

/// Opens a fresh backend for one device.
pub type Opener = Box<dyn Fn() -> Result<Box<dyn Backend>, ErrorKind> + Send + Sync>;

/// A device that was found: its id and a way to open it.
pub struct DeviceSlot {
    /// `<backend>:<index>`.
    pub id: String,
    pub backend: &'static str,
    pub open: Opener,
}

impl DeviceSlot {
    /// Open the device behind the shared semantics. An error names the
    /// backend, the device and the call (`open`), like every other seam error.
    pub fn device(&self) -> seam::Result<Device> {
        (self.open)().map(Device::new).map_err(|kind| seam::Error {
            site: std::sync::Arc::new(seam::Site {
                backend: self.backend.to_string(),
                device: self.id.clone(),
                device_name: "not opened".into(),
            }),
            call: "open",
            kind,
        })
    }
}

/// A compiled-in backend that has no usable device here, and why.
#[derive(Clone, Debug)]
pub struct Missing {
    pub backend: &'static str,
    /// What was found and what to install, e.g. "no Vulkan loader: install mesa-vulkan-drivers".
    pub reason: String,
}

/// What discovery found.
#[derive(Default)]
pub struct Discovery {
    pub devices: Vec<DeviceSlot>,
    pub missing: Vec<Missing>,
}

/// Every backend this build knows, compiled in or not, with the feature that enables it.
pub const BACKENDS: &[(&str, &str)] = &[
    ("cpu", "always on"),
    ("cuda", "cuda"),
    ("hip", "rocm"),
    ("vulkan", "vulkan"),
    ("metal", "metal"),
    ("wgpu", "wgpu"),
];

/// Find every device of every compiled-in backend. Never panics: a backend
/// whose driver is missing is reported in `missing`.
pub fn discover() -> Discovery {
    let mut d = Discovery::default();
    d.devices.push(DeviceSlot {
        id: "cpu:0".into(),
        backend: "cpu",
        open: Box::new(|| Ok(Box::new(CpuBackend::new(0)))),
    });
    #[cfg(feature = "cuda")]
    probe(&mut d, "cuda", seam_cuda::device_count, seam_cuda::open);
    #[cfg(feature = "rocm")]
    probe(&mut d, "hip", seam_hip::device_count, seam_hip::open);
    #[cfg(feature = "vulkan")]
    probe(
        &mut d,
        "vulkan",
        seam_vulkan::device_count,
        seam_vulkan::open,
    );
    #[cfg(feature = "wgpu")]
    probe(&mut d, "wgpu", seam_wgpu::device_count, seam_wgpu::open);
    #[cfg(feature = "metal")]
    probe(&mut d, "metal", seam_metal::device_count, seam_metal::open);
    for &(backend, feature) in BACKENDS.iter().skip(1) {
        if !compiled_in(backend) {
            d.missing.push(Missing {
                backend,
                reason: format!("not compiled in: build with `--features {feature}`"),
            });
        }
    }
    d
}

/// Add a backend's devices, or why it has none. Every backend crate exposes
/// `device_count() -> Result<usize, String>` (the error says what is missing
/// and what to install) and `open(index)`.
#[allow(dead_code)]
fn probe(
    d: &mut Discovery,
    backend: &'static str,
    count: fn() -> Result<usize, String>,
    open: fn(usize) -> Result<Box<dyn Backend>, ErrorKind>,
) {
    match count() {
        Ok(0) => d.missing.push(Missing {
            backend,
            reason: "driver found, no device".into(),
        }),
        Ok(n) => {
            for index in 0..n {
                d.devices.push(DeviceSlot {
                    id: format!("{backend}:{index}"),
                    backend,
                    open: Box::new(move || open(index)),
                });
            }
        }
        Err(reason) => d.missing.push(Missing { backend, reason }),
    }
}

/// Backends compiled into this build.
pub const COMPILED_IN: &[&str] = &[
    "cpu",
    #[cfg(feature = "cuda")]
    "cuda",
    #[cfg(feature = "rocm")]
    "hip",
    #[cfg(feature = "vulkan")]
    "vulkan",
    #[cfg(feature = "metal")]
    "metal",
    #[cfg(feature = "wgpu")]
    "wgpu",
];

/// Whether this build includes the backend.
pub fn compiled_in(backend: &str) -> bool {
    COMPILED_IN.contains(&backend)
}
