//! A profiling wrapper: a [`Backend`] that forwards every call to the real
//! backend and adds up the wall time spent inside `launch` and `replay`. Put
//! behind a [`seam::Device`], it splits a seam call into core's share (lock,
//! validation, lowering, bookkeeping) and the backend's share (which includes
//! the driver call), without touching core.

use seam::{
    Backend, CaptureSupport, DType, DeviceInfo, DeviceSpan, ErrorKind, Launch, OpKind, RawBuffer,
    RawGraph, ReplayTarget, ResourceCounts,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Nanoseconds spent inside the wrapped backend, by call.
#[derive(Debug, Default)]
pub struct Clock {
    pub launch_ns: AtomicU64,
    pub launches: AtomicU64,
    pub replay_ns: AtomicU64,
    pub replays: AtomicU64,
}

impl Clock {
    pub fn reset(&self) {
        for a in [
            &self.launch_ns,
            &self.launches,
            &self.replay_ns,
            &self.replays,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }
}

pub struct Timed {
    inner: Box<dyn Backend>,
    clock: Arc<Clock>,
}

impl Timed {
    pub fn new(inner: Box<dyn Backend>) -> (Timed, Arc<Clock>) {
        let clock = Arc::new(Clock::default());
        (
            Timed {
                inner,
                clock: clock.clone(),
            },
            clock,
        )
    }
}

impl Backend for Timed {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }
    fn capture_support(&self) -> CaptureSupport {
        self.inner.capture_support()
    }
    fn supports_capture(&self) -> bool {
        self.inner.supports_capture()
    }
    fn alloc(&mut self, bytes: usize) -> Result<RawBuffer, ErrorKind> {
        self.inner.alloc(bytes)
    }
    fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        self.inner.free(buffer)
    }
    fn write(&mut self, buffer: RawBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        self.inner.write(buffer, offset, data)
    }
    fn read(&mut self, buffer: RawBuffer, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.inner.read(buffer, offset, out)
    }
    fn launch(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        let t = Instant::now();
        let r = self.inner.launch(launch);
        let ns = t.elapsed().as_nanos() as u64;
        self.clock.launch_ns.fetch_add(ns, Ordering::Relaxed);
        self.clock.launches.fetch_add(1, Ordering::Relaxed);
        r
    }
    fn synchronize(&mut self) -> Result<(), ErrorKind> {
        self.inner.synchronize()
    }
    fn prepare(&mut self, ops: &[(OpKind, DType)]) -> Result<(), ErrorKind> {
        self.inner.prepare(ops)
    }
    fn begin_capture(&mut self) -> Result<(), ErrorKind> {
        self.inner.begin_capture()
    }
    fn end_capture(&mut self) -> Result<(), ErrorKind> {
        self.inner.end_capture()
    }
    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.inner.end_capture_graph()
    }
    fn replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        let t = Instant::now();
        let r = self.inner.replay(target);
        let ns = t.elapsed().as_nanos() as u64;
        self.clock.replay_ns.fetch_add(ns, Ordering::Relaxed);
        self.clock.replays.fetch_add(1, Ordering::Relaxed);
        r
    }
    fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.inner.destroy_graph(graph)
    }
    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.inner.abort_capture()
    }
    fn live_resources(&self) -> ResourceCounts {
        self.inner.live_resources()
    }
    fn device_timing(&self) -> Result<(), String> {
        self.inner.device_timing()
    }
    fn set_device_timing(&mut self, on: bool) -> Result<(), ErrorKind> {
        self.inner.set_device_timing(on)
    }
    fn begin_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.inner.begin_timed(tag)
    }
    fn end_timed(&mut self, tag: u64) -> Result<(), ErrorKind> {
        self.inner.end_timed(tag)
    }
    fn take_device_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        self.inner.take_device_spans()
    }
}
