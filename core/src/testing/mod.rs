//! Tools for backend authors and for tests of core itself.
//!
//! - [`NullBackend`] runs nothing, hands out distinct handles, counts what is
//!   live and logs every call it gets: enough to test what core alone
//!   decides (the capture state machine, deferred frees, teardown order,
//!   timing markers) without a device.
//! - [`Forward`] wraps a backend and forwards every call through [`Hooks`]:
//!   fault injectors, profilers and loggers without a hand-written copy of
//!   the trait.
//! - [`Direct`] drives a backend without a `Device`, as its own unit tests
//!   do, checking what core would guarantee it before each call.
//! - [`split_filters`] and [`filtered_in`]: libtest's filters for test
//!   binaries of their own (`harness = false`), several of them as libtest
//!   takes them.
//! - [`Rng`] and [`compare`]: the one random generator and the one
//!   tolerance comparer (C11) of seam's tests, suite, examples and
//!   benchmark.

mod compare;
mod direct;
mod filters;
mod required;
mod rng;
pub use compare::{compare, decode, element};
pub use direct::{Direct, RawCall};
pub use filters::{apply_filters, filtered_in, split_filters};
pub use required::{is_required, parse_required, required_devices, REQUIRE_ENV};
pub use rng::Rng;

use crate::backend::ResourceCounts;
use crate::backend::{Backend, CaptureSupport, DeviceInfo, RawBuffer, RawGraph, ReplayTarget};
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::ops::{Launch, OpKind};
use crate::table::{Buffers, Graphs};
use std::sync::{Arc, Mutex};

/// A backend that runs no catalogue op. Memory holds what was written
/// (zeros before), made only when first touched, so a huge allocation that
/// is never touched costs nothing. An eager user kernel with a CPU
/// implementation runs over each binding from its view's first byte to the
/// end of its allocation, and every binding is written back: like a GPU,
/// and unlike the CPU reference, a kernel that strays past its declared
/// extents changes the memory it strays into (what checked mode finds).
pub struct NullBackend {
    info: DeviceInfo,
    support: CaptureSupport,
    log: Arc<Mutex<Vec<&'static str>>>,
    buffers: Buffers<Memory>,
    graphs: Graphs<()>,
    capturing: bool,
    /// Declares native node timing ([`NullBackend::timing_nodes`]).
    nodes: bool,
}

/// One allocation of a [`NullBackend`]: its size, and its bytes once touched.
struct Memory {
    bytes: usize,
    data: Option<Vec<u8>>,
}

impl Memory {
    fn data(&mut self) -> &mut Vec<u8> {
        let bytes = self.bytes;
        self.data.get_or_insert_with(|| vec![0; bytes])
    }
}

impl NullBackend {
    /// Backend `null`, device `null:0`.
    pub fn new(support: CaptureSupport) -> NullBackend {
        NullBackend {
            info: DeviceInfo {
                backend: "null".into(),
                index: 0,
                name: "null".into(),
                driver: "0".into(),
            },
            support,
            log: Arc::default(),
            buffers: Buffers::new(),
            graphs: Graphs::new(),
            capturing: false,
            nodes: false,
        }
    }

    /// The same, declaring native node timing (it times nothing): its log
    /// shows each `set_node_timing` as `set_node_timing:on` / `:off`.
    pub fn timing_nodes(self) -> NullBackend {
        NullBackend {
            nodes: true,
            ..self
        }
    }

    /// The calls made so far, in order, shared with the backend (it stays
    /// readable after the backend moved into a `Device`).
    pub fn log(&self) -> Arc<Mutex<Vec<&'static str>>> {
        self.log.clone()
    }

    fn note(&self, call: &'static str) {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }
}

#[allow(unsafe_code)] // the trait's `unsafe fn`s (the trust boundary, seam::Backend)
impl Backend for NullBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn capture_support(&self) -> CaptureSupport {
        self.support.clone()
    }
    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.note("alloc");
        Ok(self.buffers.insert(Memory { bytes, data: None }, 0))
    }
    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        self.note("free");
        self.buffers.remove(buffer).map(drop)
    }
    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        self.note("write");
        // Core gave a live buffer and a range within it (the trait's guarantees).
        self.buffers.get_mut(buffer)?.data()[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }
    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        self.note("read");
        out.copy_from_slice(&self.buffers.get_mut(buffer)?.data()[offset..offset + out.len()]);
        Ok(())
    }
    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        self.note("launch");
        let OpKind::User(k) = launch.op else {
            return Ok(());
        };
        let Some(cpu) = k.def().cpu.filter(|_| !self.capturing) else {
            return Ok(());
        };
        let mut bindings = Vec::with_capacity(launch.buffers.len());
        for v in launch.buffers.iter() {
            let data = self.buffers.get_mut(v.buffer)?.data();
            bindings.push(data[v.byte_offset as usize..].to_vec());
        }
        cpu(&launch.params, &mut bindings);
        for (v, b) in launch.buffers.iter().zip(bindings) {
            let data = self.buffers.get_mut(v.buffer)?.data();
            data[v.byte_offset as usize..].copy_from_slice(&b);
        }
        Ok(())
    }
    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.note("synchronize");
        Ok(())
    }
    fn prepare(&mut self, _: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        self.note("prepare");
        Ok(())
    }
    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.note("begin_capture");
        self.capturing = true;
        Ok(())
    }
    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        self.note("end_capture_into_current");
        self.capturing = false;
        self.graphs.set_current(());
        Ok(())
    }
    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.note("end_capture_graph");
        self.capturing = false;
        Ok(self.graphs.insert(()))
    }
    unsafe fn replay(&mut self, _: ReplayTarget) -> Result<(), ErrorKind> {
        self.note("replay");
        Ok(())
    }
    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.note("destroy_graph");
        self.graphs.remove(graph)
    }
    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.note("abort_capture");
        self.capturing = false;
        Ok(())
    }
    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.len(),
            // A recorder holds no device memory.
            bytes: 0,
        }
    }
    fn begin_timed(&mut self, _: u64) -> Result<(), ErrorKind> {
        self.note("begin_timed");
        Ok(())
    }
    fn node_timing(&self) -> crate::backend::NodeTiming {
        match self.nodes {
            true => crate::backend::NodeTiming::Native,
            false => {
                crate::backend::NodeTiming::Unavailable("the null backend times nothing".into())
            }
        }
    }
    fn set_node_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.note(if on {
            "set_node_timing:on"
        } else {
            "set_node_timing:off"
        });
        Ok(())
    }
}

/// What a [`Forward`] wrapper does around the calls it forwards.
///
/// `before` runs ahead of every call that can change or wait on the device
/// (all but the queries `info`, `capture_support`, `update_support`,
/// `conditional_support`, `subnormals`, `device_timing` and
/// `live_resources`); an error it returns is the call's
/// result and the wrapped backend never sees the call. `after` runs once
/// the wrapped backend returned, with when the call started.
pub trait Hooks: Send {
    /// Before `call` reaches the wrapped backend; an error is the call's
    /// result.
    fn before(&mut self, _call: &'static str) -> Result<(), ErrorKind> {
        Ok(())
    }
    /// After the wrapped backend answered `call`, which began at `started`.
    fn after(&mut self, _call: &'static str, _started: std::time::Instant) {}
    /// When the wrapper is dropped, after core's teardown, before the
    /// wrapped backend is.
    fn on_drop(&mut self, _inner: &dyn Backend) {}
}

/// A backend that forwards every call to another one, through [`Hooks`]:
/// a fault injector, a profiler or a logger is its hooks, not a hand copy of
/// every trait method (which silently drops the ones it forgets, such as
/// device timing).
pub struct Forward<H: Hooks> {
    /// The backend every call goes to.
    pub inner: Box<dyn Backend>,
    /// What runs around each call.
    pub hooks: H,
}

impl<H: Hooks> Forward<H> {
    /// Wrap `inner` with `hooks`.
    pub fn new(inner: Box<dyn Backend>, hooks: H) -> Forward<H> {
        Forward { inner, hooks }
    }

    fn call<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&mut dyn Backend) -> Result<T, ErrorKind>,
    ) -> Result<T, ErrorKind> {
        self.hooks.before(name)?;
        let started = std::time::Instant::now();
        let r = f(&mut *self.inner);
        self.hooks.after(name, started);
        r
    }
}

impl<H: Hooks> Drop for Forward<H> {
    fn drop(&mut self) {
        self.hooks.on_drop(&*self.inner);
    }
}

#[allow(unsafe_code)] // the trait's `unsafe fn`s (the trust boundary, seam::Backend)
impl<H: Hooks> Backend for Forward<H> {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }
    fn capture_support(&self) -> CaptureSupport {
        self.inner.capture_support()
    }
    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.call("alloc", |b| b.alloc(bytes))
    }
    // The wrapper's handles are the inner backend's and hooks never change
    // an argument: what core guarantees this backend holds for the inner one.
    unsafe fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        // SAFETY: forwarded unchanged; our caller's guarantees are the inner's.
        self.call("free", |b| unsafe { b.free(buffer) })
    }
    unsafe fn write(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        // SAFETY: forwarded unchanged; our caller's guarantees are the inner's.
        self.call("write", |b| unsafe { b.write(buffer, offset, data) })
    }
    unsafe fn read(
        &mut self,
        buffer: RawBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), ErrorKind> {
        // SAFETY: forwarded unchanged; our caller's guarantees are the inner's.
        self.call("read", |b| unsafe { b.read(buffer, offset, out) })
    }
    unsafe fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        // SAFETY: forwarded unchanged; our caller's guarantees are the inner's.
        self.call("launch", |b| unsafe { b.launch(launch) })
    }
    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.call("synchronize", |b| b.synchronize())
    }
    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        self.call("prepare", |b| b.prepare(ops))
    }
    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.call("begin_capture", |b| b.begin_capture())
    }
    fn end_capture_into_current(&mut self) -> Result<(), ErrorKind> {
        self.call("end_capture_into_current", |b| b.end_capture_into_current())
    }
    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.call("end_capture_graph", |b| b.end_capture_graph())
    }
    unsafe fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        // SAFETY: forwarded unchanged; our caller's guarantees are the inner's.
        self.call("replay", |b| unsafe { b.replay(target) })
    }
    unsafe fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        // SAFETY: forwarded unchanged; our caller's guarantees are the inner's.
        self.call("destroy_graph", |b| unsafe { b.destroy_graph(graph) })
    }
    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.call("abort_capture", |b| b.abort_capture())
    }
    fn live_resources(&self) -> ResourceCounts {
        self.inner.live_resources()
    }
    fn update_support(&self) -> crate::backend::UpdateSupport {
        self.inner.update_support()
    }
    fn subnormals(&self) -> crate::backend::Subnormals {
        self.inner.subnormals()
    }
    fn conditional_support(&self) -> crate::backend::ConditionalSupport {
        self.inner.conditional_support()
    }
    unsafe fn begin_conditional(
        &mut self,
        c: &crate::backend::Conditional,
    ) -> Result<(), ErrorKind> {
        // SAFETY: forwarded unchanged; our caller's guarantees are the inner's.
        self.call("begin_conditional", |b| unsafe { b.begin_conditional(c) })
    }
    fn end_conditional(&mut self) -> Result<(), ErrorKind> {
        self.call("end_conditional", |b| b.end_conditional())
    }
    unsafe fn update_launches(
        &mut self,
        target: ReplayTarget,
        now: &mut Vec<Launch>,
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        // SAFETY: forwarded unchanged; our caller's guarantees are the inner's.
        self.call("update_launches", |b| unsafe {
            b.update_launches(target, now, changes)
        })
    }
    fn device_timing(&self) -> Result<(), String> {
        self.inner.device_timing()
    }
    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.call("set_device_timing", |b| b.set_device_timing(on))
    }
    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.call("begin_timed", |b| b.begin_timed(tag))
    }
    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.call("end_timed", |b| b.end_timed(tag))
    }
    fn take_device_spans(&mut self) -> Result<Vec<crate::backend::DeviceSpan>, ErrorKind> {
        self.call("take_device_spans", |b| b.take_device_spans())
    }
    fn node_timing(&self) -> crate::backend::NodeTiming {
        self.inner.node_timing()
    }
    fn set_node_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.call("set_node_timing", |b| b.set_node_timing(on))
    }
}
