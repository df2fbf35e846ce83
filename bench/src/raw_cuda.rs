//! The raw-CUDA anchor in-process: the chain of N dependent
//! `scale_add` kernels through the driver API alone (cudarc's thin `result`
//! layer over `sys`), so the seam-vs-raw ratios come from arms measured
//! interleaved in one process. It does what `bench/anchors/raw_cuda.cu`
//! does for the chain, with what the CUDA backend uses:
//!
//! - the same source (`seam_kernels::source(ScaleAdd, CudaC)`, prelude
//!   included) compiled by NVRTC with the backend's options
//!   (`--gpu-architecture=sm_XY --fmad=false`) into a cubin;
//! - the primary context of device 0 (the one the backend retains), one
//!   non-blocking stream, the backend's launch shape (256 threads, one
//!   block per 256 elements, at most 65 536 blocks);
//! - eager: `cuLaunchKernel` N times, then `cuStreamSynchronize`; replay:
//!   `cuGraphLaunch` of the N launches captured (thread-local mode),
//!   instantiated and uploaded, then `cuStreamSynchronize`.
//!
//! Unlike the backend it does not call `cuCtxSetCurrent` before every call:
//! the context is made current once per case (seam's backend makes the same
//! primary context current, so it stays current between the arms).
//!
//! cudarc (`dynamic-loading`) panics when a library is missing, so
//! [`RawCuda::open`] checks both libraries first. The bench's second
//! `unsafe` module (`#[allow(unsafe_code)]` in `lib.rs`); every block says
//! why it is sound, and every handle is released by [`RawCuda`]'s `Drop`.

use cudarc::driver::{result as cu, sys};
use cudarc::nvrtc::{result as rtc, sys as rtc_sys};
use seam::{ops, OpKind};
use seam_kernels::Language;
use std::ffi::{c_void, CString};

/// Threads per block and the most blocks the backend launches (as in
/// seam-streamgraph's launch shape).
const BLOCK: u32 = 256;
const MAX_BLOCKS: u64 = 1 << 16;

fn drv(call: &'static str) -> impl Fn(cu::DriverError) -> String {
    move |e| format!("{call}: {e:?}")
}

/// The raw driver arm: context, stream, the `scale_add` function, and the
/// chain's buffer and graph.
pub struct RawCuda {
    /// `cuDeviceGetName` of device 0.
    pub name: String,
    /// The NVRTC target, e.g. `sm_90`.
    pub arch: String,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    module: sys::CUmodule,
    func: sys::CUfunction,
    x: sys::CUdeviceptr,
    bytes: usize,
    exec: Option<sys::CUgraphExec>,
    nodes: u32,
    grid: u32,
    params: seam::Params,
    /// Buffers and streams set aside by [`RawCuda::set_aside`] (the probe),
    /// released in `Drop`.
    kept: Vec<(sys::CUdeviceptr, sys::CUstream)>,
}

impl RawCuda {
    /// Device 0 through the driver API, or why not.
    pub fn open() -> Result<RawCuda, String> {
        // SAFETY: opening the libraries runs their initialisers, which is
        // what using them does; nothing else is called.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver (libcuda could not be loaded)".into());
        }
        // SAFETY: as above.
        if !unsafe { rtc_sys::is_culib_present() } {
            return Err("no NVRTC (libnvrtc could not be loaded)".into());
        }
        cu::init().map_err(drv("cuInit"))?;
        let dev = cu::device::get(0).map_err(drv("cuDeviceGet"))?;
        let name = cu::device::get_name(dev).map_err(drv("cuDeviceGetName"))?;
        let attr = |a| {
            // SAFETY: `dev` is a valid device ordinal's handle.
            unsafe { cu::device::get_attribute(dev, a) }.map_err(drv("cuDeviceGetAttribute"))
        };
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let arch = format!("sm_{}", major * 10 + minor);
        // SAFETY: `dev` is valid; the retain is released in `Drop`.
        let ctx =
            unsafe { cu::primary_ctx::retain(dev) }.map_err(drv("cuDevicePrimaryCtxRetain"))?;
        let mut raw = RawCuda {
            name,
            arch,
            dev,
            ctx,
            stream: std::ptr::null_mut(),
            module: std::ptr::null_mut(),
            func: std::ptr::null_mut(),
            x: 0,
            bytes: 0,
            exec: None,
            nodes: 0,
            grid: 1,
            params: seam::Params::default(),
            kept: Vec::new(),
        };
        raw.current()?;
        raw.stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(drv("cuStreamCreate"))?;
        let image = compile(&raw.arch)?;
        // SAFETY: `image` is a complete cubin NVRTC produced for this
        // device's architecture; the context is current.
        raw.module = unsafe { cu::module::load_data(image.as_ptr().cast()) }
            .map_err(drv("cuModuleLoadData"))?;
        let entry = CString::new(seam_kernels::entry_point(
            OpKind::ScaleAdd,
            seam::DType::F32,
        ))
        .map_err(|e| e.to_string())?;
        // SAFETY: a live module and a NUL-terminated name.
        raw.func = unsafe { cu::module::get_function(raw.module, entry) }
            .map_err(drv("cuModuleGetFunction"))?;
        Ok(raw)
    }

    fn current(&self) -> Result<(), String> {
        // SAFETY: the primary context is retained for the life of `self`.
        unsafe { cu::ctx::set_current(self.ctx) }.map_err(drv("cuCtxSetCurrent"))
    }

    /// Allocate the chain's buffer, write `x0` and capture the chain of `n`
    /// in-place `scale_add` launches into an uploaded graph.
    pub fn chain(&mut self, x0: &[f32], n: u32, a: f32, b: f32) -> Result<(), String> {
        self.current()?;
        self.wait()?;
        if let Some(e) = self.exec.take() {
            // SAFETY: nothing is pending on the stream (waited above).
            unsafe { cu::graph::exec_destroy(e) }.map_err(drv("cuGraphExecDestroy"))?;
        }
        let bytes = (x0.len() * 4).max(4);
        if bytes != self.bytes {
            if self.x != 0 {
                // SAFETY: no pending work uses the buffer (waited above).
                unsafe { cu::free_sync(self.x) }.map_err(drv("cuMemFree"))?;
                self.x = 0;
            }
            // SAFETY: the context is current.
            self.x = unsafe { cu::malloc_sync(bytes) }.map_err(drv("cuMemAlloc"))?;
            self.bytes = bytes;
        }
        self.write(x0)?;
        let call = ops::scale_add(
            seam::BufferId::unknown(),
            seam::BufferId::unknown(),
            x0.len() as u32,
            a,
            b,
        );
        self.params = call.params;
        self.grid = u64::from(self.params.d0)
            .div_ceil(u64::from(BLOCK))
            .clamp(1, MAX_BLOCKS) as u32;
        self.nodes = n;
        // SAFETY: a live stream of the current context.
        unsafe {
            cu::stream::begin_capture(
                self.stream,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        }
        .map_err(drv("cuStreamBeginCapture"))?;
        let launched = self.eager();
        // SAFETY: the stream is capturing (begun above); ending it also on
        // a failed launch leaves it usable.
        let graph = unsafe { cu::stream::end_capture(self.stream) };
        launched?;
        let graph = graph.map_err(drv("cuStreamEndCapture"))?;
        // SAFETY: `graph` was just captured; it is destroyed once the exec exists.
        let exec = unsafe { cu::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
        // SAFETY: an exec does not need its graph.
        unsafe { cu::graph::destroy(graph) }.map_err(drv("cuGraphDestroy"))?;
        let exec = exec.map_err(drv("cuGraphInstantiateWithFlags"))?;
        self.exec = Some(exec);
        // SAFETY: a live exec and stream.
        unsafe { cu::graph::upload(exec, self.stream) }.map_err(drv("cuGraphUpload"))?;
        self.wait()
    }

    /// Queue the chain's `n` launches (`cuLaunchKernel` each).
    pub fn eager(&mut self) -> Result<(), String> {
        let mut x = self.x;
        let mut y = self.x;
        let mut p = self.params;
        for _ in 0..self.nodes {
            let mut args: [*mut c_void; 3] = [
                (&mut x as *mut sys::CUdeviceptr).cast(),
                (&mut y as *mut sys::CUdeviceptr).cast(),
                (&mut p as *mut seam::Params).cast(),
            ];
            // SAFETY: `func` is `scale_add_f32` of a loaded module, whose
            // parameters are (float*, float*, Params) by value: `args` points
            // at two device pointers into a live allocation of `params.d0`
            // floats and at the 32-byte block, all outliving the call (the
            // driver copies arguments at launch).
            unsafe {
                cu::launch_kernel(
                    self.func,
                    (self.grid, 1, 1),
                    (BLOCK, 1, 1),
                    0,
                    self.stream,
                    &mut args,
                )
            }
            .map_err(drv("cuLaunchKernel"))?;
        }
        Ok(())
    }

    /// Queue one replay of the captured chain (`cuGraphLaunch`).
    pub fn replay(&mut self) -> Result<(), String> {
        let exec = self.exec.ok_or("no graph captured")?;
        // SAFETY: a live, uploaded exec and a live stream.
        unsafe { cu::graph::launch(exec, self.stream) }.map_err(drv("cuGraphLaunch"))
    }

    /// The chain buffer's device address.
    pub fn address(&self) -> u64 {
        self.x
    }

    /// For the probe: keep the chain's buffer (and, with `stream`, the
    /// stream) allocated but unused, so the next [`RawCuda::chain`] runs on a
    /// fresh allocation at another address (and a new stream).
    pub fn set_aside(&mut self, stream: bool) -> Result<(), String> {
        self.current()?;
        self.wait()?;
        let old_stream = if stream {
            let s = self.stream;
            self.stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
                .map_err(drv("cuStreamCreate"))?;
            s
        } else {
            std::ptr::null_mut()
        };
        self.kept.push((self.x, old_stream));
        self.x = 0;
        self.bytes = 0;
        Ok(())
    }

    /// Wait for the stream (`cuStreamSynchronize`).
    pub fn wait(&mut self) -> Result<(), String> {
        // SAFETY: a live stream.
        unsafe { cu::stream::synchronize(self.stream) }.map_err(drv("cuStreamSynchronize"))
    }

    /// Write `data` at the start of the chain's buffer.
    pub fn write(&mut self, data: &[f32]) -> Result<(), String> {
        if data.len() * 4 > self.bytes {
            return Err("write past the buffer".into());
        }
        self.wait()?;
        // SAFETY: the buffer holds at least `data`'s bytes (checked); the
        // copy is synchronous.
        unsafe { cu::memcpy_htod_sync(self.x, data) }.map_err(drv("cuMemcpyHtoD"))
    }

    /// The first `k` floats of the chain's buffer.
    pub fn read(&mut self, k: usize) -> Result<Vec<f32>, String> {
        if k * 4 > self.bytes {
            return Err("read past the buffer".into());
        }
        self.wait()?;
        let mut out = vec![0f32; k];
        // SAFETY: as in `write`.
        unsafe { cu::memcpy_dtoh_sync(&mut out, self.x) }.map_err(drv("cuMemcpyDtoH"))?;
        Ok(out)
    }
}

impl Drop for RawCuda {
    fn drop(&mut self) {
        if self.current().is_err() || self.wait().is_err() {
            return; // work may still run: leak rather than free what it uses
        }
        // SAFETY: the stream is idle, so nothing uses the exec, the buffer
        // or the module; each is released once, the context retain last.
        unsafe {
            if let Some(e) = self.exec.take() {
                let _ = cu::graph::exec_destroy(e);
            }
            if self.x != 0 {
                let _ = cu::free_sync(self.x);
            }
            for (x, s) in self.kept.drain(..) {
                if x != 0 {
                    let _ = cu::free_sync(x);
                }
                if !s.is_null() {
                    let _ = cu::stream::destroy(s);
                }
            }
            if !self.module.is_null() {
                let _ = cu::module::unload(self.module);
            }
            if !self.stream.is_null() {
                let _ = cu::stream::destroy(self.stream);
            }
            let _ = cu::primary_ctx::release(self.dev);
        }
    }
}

/// `scale_add`'s CUDA C compiled by NVRTC into a cubin for `arch`, with the
/// backend's options.
fn compile(arch: &str) -> Result<Vec<u8>, String> {
    let src = seam_kernels::source(OpKind::ScaleAdd, Language::CudaC)
        .ok_or("no CUDA C source for scale_add")?;
    let src = CString::new(src).map_err(|e| e.to_string())?;
    let name =
        CString::new(format!("{}.cu", OpKind::ScaleAdd.name())).map_err(|e| e.to_string())?;
    let prog =
        rtc::create_program(&src, Some(&name)).map_err(|e| format!("nvrtcCreateProgram: {e:?}"))?;
    let opts = [format!("--gpu-architecture={arch}"), "--fmad=false".into()];
    // SAFETY: `prog` was just created and is destroyed below.
    let compiled = unsafe { rtc::compile_program(prog, &opts) };
    let result = compiled
        .map_err(|e| {
            // SAFETY: `prog` is live.
            let log = unsafe { rtc::get_program_log(prog) }
                .map(|l| l.iter().map(|&c| c as u8 as char).collect::<String>())
                .unwrap_or_default();
            format!("nvrtcCompileProgram: {e:?}: {log}")
        })
        .and_then(|()| {
            let mut size = 0usize;
            // SAFETY: `prog` compiled; `size` is a valid out pointer.
            unsafe { rtc_sys::nvrtcGetCUBINSize(prog, &mut size) }
                .result()
                .map_err(|e| format!("nvrtcGetCUBINSize: {e:?}"))?;
            let mut cubin = vec![0u8; size];
            // SAFETY: `cubin` holds the `size` bytes NVRTC reported.
            unsafe { rtc_sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| format!("nvrtcGetCUBIN: {e:?}"))?;
            Ok(cubin)
        });
    // SAFETY: `prog` is live and not used after this.
    let _ = unsafe { rtc::destroy_program(prog) };
    result
}
