//! Tools for backend authors and for tests of core itself.
//!
//! [`NullBackend`] runs nothing, hands out distinct handles, counts what is
//! live and logs every call it gets: enough to test what core alone decides
//! (the capture state machine, deferred frees, teardown order, timing
//! markers) without a device.

use crate::backend::ResourceCounts;
use crate::backend::{Backend, CaptureSupport, DeviceInfo, RawBuffer, RawGraph, ReplayTarget};
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::ops::{Launch, OpKind};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// A backend that runs nothing. Memory reads return zeros.
pub struct NullBackend {
    info: DeviceInfo,
    support: CaptureSupport,
    log: Arc<Mutex<Vec<&'static str>>>,
    next: u64,
    buffers: BTreeSet<u64>,
    graphs: BTreeSet<u64>,
    current: bool,
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
            next: 1,
            buffers: BTreeSet::new(),
            graphs: BTreeSet::new(),
            current: false,
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

    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

impl Backend for NullBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn capture_support(&self) -> CaptureSupport {
        self.support.clone()
    }
    fn alloc(&mut self, _: usize) -> Result<RawBuffer, ErrorKind> {
        self.note("alloc");
        let id = self.fresh();
        self.buffers.insert(id);
        Ok(RawBuffer(id))
    }
    fn free(&mut self, buffer: RawBuffer) -> Result<(), ErrorKind> {
        self.note("free");
        self.buffers.remove(&buffer.0);
        Ok(())
    }
    fn write(&mut self, _: RawBuffer, _: usize, _: &[u8]) -> Result<(), ErrorKind> {
        self.note("write");
        Ok(())
    }
    fn read(&mut self, _: RawBuffer, _: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.note("read");
        out.fill(0);
        Ok(())
    }
    fn launch(&mut self, _: &Launch) -> Result<(), ErrorKind> {
        self.note("launch");
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
        Ok(())
    }
    fn end_capture(&mut self) -> Result<(), ErrorKind> {
        self.note("end_capture");
        self.current = true;
        Ok(())
    }
    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {
        self.note("end_capture_graph");
        let id = self.fresh();
        self.graphs.insert(id);
        Ok(RawGraph(id))
    }
    fn replay(&mut self, _: ReplayTarget) -> Result<(), ErrorKind> {
        self.note("replay");
        Ok(())
    }
    fn destroy_graph(&mut self, graph: RawGraph) -> Result<(), ErrorKind> {
        self.note("destroy_graph");
        self.graphs.remove(&graph.0);
        Ok(())
    }
    fn abort_capture(&mut self) -> Result<(), ErrorKind> {
        self.note("abort_capture");
        Ok(())
    }
    fn live_resources(&self) -> ResourceCounts {
        ResourceCounts {
            buffers: self.buffers.len(),
            graphs: self.graphs.len() + usize::from(self.current),
        }
    }
    fn begin_timed(&mut self, _: u64) -> Result<(), ErrorKind> {
        self.note("begin_timed");
        Ok(())
    }
}
