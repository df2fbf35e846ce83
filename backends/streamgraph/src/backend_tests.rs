//! The whole `StreamBackend` against the recording fake driver: memory,
//! launches, module loading and teardown, the paths HIP shares with CUDA,
//! checked without a GPU.

use crate::fake::{Call, FakeBackend, FakeCompiler, FakeDriver};
use crate::StreamBackend;
use seam::testing::{Direct, RawCall};
use seam::{
    Backend, DType, ErrorKind, GraphUser, OpKind, Params, RawBuffer, RawView, ReplayTarget,
    ResourceCounts,
};

pub(crate) type Fake = Direct<FakeBackend>;

/// The stream backend over the fake driver, driven directly (what core
/// guarantees it, checked by `Direct`), and the driver's observer.
pub(crate) fn backend(vendor_gemm: bool) -> (Fake, FakeDriver) {
    let (b, d) = crate::fake::backend(vendor_gemm);
    (Direct::new(b), d)
}

pub(crate) fn add(a: RawBuffer, b: RawBuffer, out: RawBuffer, n: u32) -> RawCall {
    RawCall {
        op: OpKind::Add,
        dtype: DType::F32,
        buffers: [a, b, out].map(|r| RawView::whole(r, 1 << 20)).into(),
        params: Params {
            d0: n,
            ..Params::default()
        },
    }
}

pub(crate) fn gemm(a: RawBuffer, b: RawBuffer, c: RawBuffer) -> RawCall {
    RawCall {
        op: OpKind::Gemm,
        dtype: DType::F32,
        buffers: [a, b, c].map(|r| RawView::whole(r, 1 << 20)).into(),
        params: Params {
            d0: 2,
            d1: 2,
            d2: 2,
            ..Params::default()
        },
    }
}

/// Three f32 buffers of `n` elements.
pub(crate) fn three(b: &mut Fake, n: usize) -> [RawBuffer; 3] {
    [(); 3].map(|()| b.alloc(n * 4).unwrap())
}

pub(crate) fn without_selects(log: Vec<Call>) -> Vec<Call> {
    log.into_iter().filter(|c| *c != Call::Select).collect()
}

pub(crate) fn assert_clean(d: &FakeDriver) {
    assert!(d.violations().is_empty(), "{:?}", d.violations());
}

#[test]
fn alloc_write_read_round_trip_through_the_driver() {
    let (mut b, d) = backend(false);
    let buf = b.alloc(16).unwrap();
    b.write(buf, 4, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let mut out = [0u8; 12];
    b.read(buf, 4, &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0]);
    assert_eq!(
        without_selects(d.log()),
        vec![
            Call::Alloc {
                buffer: 1,
                bytes: 16
            },
            Call::Write {
                buffer: 1,
                offset: 4,
                len: 8
            },
            Call::Read {
                buffer: 1,
                offset: 4,
                len: 12
            },
        ]
    );
    // Every call selects the device first.
    assert_eq!(d.log()[0], Call::Select);
    // A copy past the end, or of a buffer never allocated, is what core
    // never asks for (the trust boundary): refused before the backend.
    d.clear_log();
    let e = b.write(buf, 12, &[0; 8]).unwrap_err();
    assert!(matches!(e, ErrorKind::HostRange { .. }), "{e}");
    assert_eq!(
        b.read(RawBuffer(99), 0, &mut out),
        Err(ErrorKind::UnknownBuffer { id: 99 })
    );
    assert_eq!(without_selects(d.log()), vec![]);
    assert_clean(&d);
}

#[test]
fn free_waits_for_the_stream_then_frees() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    b.launch(&add(x, y, z, 4)).unwrap();
    d.clear_log();
    b.free(z).unwrap();
    assert_eq!(without_selects(d.log()), vec![Call::Sync, Call::Free(3)]);
    assert_eq!(d.live_memory(), 2);
    assert_eq!(b.live_resources().buffers, 2);
    assert_eq!(b.free(z), Err(ErrorKind::UnknownBuffer { id: 3 }));
    assert_clean(&d);
}

#[test]
fn an_eager_launch_packs_the_buffers_in_signature_order() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 8);
    d.clear_log();
    b.launch(&add(z, x, y, 8)).unwrap();
    let log = without_selects(d.log());
    assert_eq!(
        log.last(),
        Some(&Call::LaunchKernel {
            name: "add_f32".into(),
            buffers: vec![3, 1, 2],
        })
    );
    // The first launch of an op loads its module: image, load, one lookup per dtype.
    assert_eq!(log[0], Call::Image(OpKind::Add));
    let lookups = log
        .iter()
        .filter(|c| matches!(c, Call::Function { .. }))
        .count();
    assert_eq!(lookups, OpKind::Add.dtypes().len());
    assert_clean(&d);
}

#[test]
fn a_launch_past_a_buffer_never_reaches_the_driver() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    d.clear_log();
    let e = b.launch(&add(x, y, z, 5)).unwrap_err();
    assert!(matches!(e, ErrorKind::OutOfRange { .. }), "{e}");
    let wrong_arity = RawCall {
        buffers: [x, y].map(|r| RawView::whole(r, 1 << 20)).into(),
        ..add(x, y, z, 4)
    };
    assert!(matches!(
        b.launch(&wrong_arity),
        Err(ErrorKind::ArityMismatch { .. })
    ));
    assert!(
        !d.log()
            .iter()
            .any(|c| matches!(c, Call::LaunchKernel { .. })),
        "{:?}",
        d.log()
    );
    assert_clean(&d);
}

#[test]
fn a_launch_while_capturing_is_recorded_into_the_graph() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    b.begin_capture().unwrap();
    d.clear_log();
    b.launch(&add(x, y, z, 4)).unwrap();
    b.launch(&add(z, y, x, 4)).unwrap();
    b.end_capture_into_current().unwrap();
    let log = without_selects(d.log());
    // Recording loads nothing: begin_capture loaded every module.
    assert!(!log
        .iter()
        .any(|c| matches!(c, Call::Image(_) | Call::LoadModule(_))));
    let exec = log
        .iter()
        .find_map(|c| match c {
            Call::Instantiate { exec, .. } => Some(*exec),
            _ => None,
        })
        .expect("an instantiate");
    assert_eq!(d.kernels_of(exec), ["add_f32", "add_f32"]);
    b.replay(ReplayTarget::Current).unwrap();
    assert_eq!(d.log().last(), Some(&Call::Launch(exec)));
    assert_eq!(
        b.live_resources(),
        ResourceCounts {
            buffers: 3,
            graphs: 1,
            bytes: 48
        }
    );
    assert_clean(&d);
}

#[test]
fn prepare_and_begin_capture_load_each_module_once() {
    let (mut b, d) = backend(false);
    let ops = [(OpKind::Add, DType::F32), (OpKind::Add, DType::I32)];
    b.prepare(&ops).unwrap();
    b.prepare(&ops).unwrap();
    b.begin_capture().unwrap();
    b.abort_capture().unwrap();
    b.begin_capture().unwrap();
    b.abort_capture().unwrap();
    let log = d.log();
    for op in OpKind::ALL {
        let images = log.iter().filter(|c| **c == Call::Image(op)).count();
        assert_eq!(images, 1, "{op}: {log:?}");
    }
    let modules = log
        .iter()
        .filter(|c| matches!(c, Call::LoadModule(_)))
        .count();
    assert_eq!(modules, OpKind::ALL.len());
    assert_clean(&d);
}

#[test]
fn a_vendor_op_inside_a_capture_needs_prepare() {
    let (mut b, d) = backend(true);
    let [x, y, z] = three(&mut b, 4);
    b.begin_capture().unwrap();
    // Creating the vendor handle allocates: refused while capturing (C7).
    assert_eq!(
        b.launch(&gemm(x, y, z)),
        Err(ErrorKind::NotPrepared {
            op: OpKind::Gemm,
            dtype: DType::F32
        })
    );
    b.abort_capture().unwrap();
    // begin_capture loaded no GEMM module: GEMM is the vendor's.
    assert!(!d.log().contains(&Call::Image(OpKind::Gemm)));
    b.prepare(&[(OpKind::Gemm, DType::F32)]).unwrap();
    b.prepare(&[(OpKind::Gemm, DType::F32)]).unwrap();
    b.begin_capture().unwrap();
    b.launch(&gemm(x, y, z)).unwrap();
    b.end_capture_into_current().unwrap();
    let log = d.log();
    assert_eq!(log.iter().filter(|c| **c == Call::VendorPrepare).count(), 1);
    assert!(log.contains(&Call::VendorLaunch(OpKind::Gemm)));
    assert_clean(&d);
}

#[test]
fn teardown_aborts_waits_and_destroys_execs_before_graphs_then_frees() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    b.set_device_timing(true).unwrap();
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    b.end_capture_into_current().unwrap();
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    b.begin_timed(1).unwrap();
    b.replay(ReplayTarget::Graph(h)).unwrap();
    b.end_timed(1).unwrap();
    b.replay(ReplayTarget::Current).unwrap();
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    d.clear_log();
    drop(b);
    let log = without_selects(d.log());
    let at = |want: &dyn Fn(&Call) -> bool| log.iter().position(want).expect("in the log");
    // The open capture is ended and its graph destroyed first.
    assert!(matches!(log[0], Call::EndCapture(_)), "{log:?}");
    let first_sync = at(&|c| *c == Call::Sync);
    let first_destroy = at(&|c| matches!(c, Call::DestroyExec(_)));
    assert!(first_sync < first_destroy, "{log:?}");
    // Each exec is followed by the graph it came from.
    for (i, c) in log.iter().enumerate() {
        if let Call::DestroyExec(_) = c {
            assert!(matches!(log[i + 1], Call::DestroyGraph(_)), "{log:?}");
        }
    }
    let last_event = log
        .iter()
        .rposition(|c| matches!(c, Call::DestroyEvent(_)))
        .expect("events destroyed");
    let first_free = at(&|c| matches!(c, Call::Free(_)));
    assert!(last_event < first_free);
    assert_eq!(log.last(), Some(&Call::DestroyStream));
    assert_eq!(d.live(), (0, 0, 0));
    assert_eq!(d.live_memory(), 0);
    assert_clean(&d);
}

#[test]
fn a_buffer_a_graph_uses_is_never_freed() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 4);
    let [p, q, r] = three(&mut b, 4);
    b.begin_capture().unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    let in_use = |b: &mut Fake, buf: RawBuffer| match b.free(buf) {
        Err(ErrorKind::BufferInUse { users, .. }) => users,
        other => panic!("{other:?}"),
    };
    assert_eq!(in_use(&mut b, x), [GraphUser::OpenCapture]);
    b.end_capture_into_current().unwrap();
    assert_eq!(in_use(&mut b, y), [GraphUser::Current]);
    b.begin_capture().unwrap();
    b.launch(&add(p, q, x, 4)).unwrap();
    let h = b.end_capture_graph().unwrap();
    assert_eq!(
        in_use(&mut b, x),
        [GraphUser::Current, GraphUser::Handle(h.0)]
    );
    // An aborted capture holds nothing.
    b.begin_capture().unwrap();
    b.launch(&add(r, r, r, 4)).unwrap();
    b.abort_capture().unwrap();
    b.free(r).unwrap();
    // Destroying the handle releases what only it used.
    b.destroy_graph(h).unwrap();
    b.free(p).unwrap();
    // Replacing the current exec releases what only the old one used.
    b.begin_capture().unwrap();
    b.launch(&add(q, q, x, 4)).unwrap();
    b.end_capture_into_current().unwrap();
    b.free(z).unwrap();
    assert!(!d.log().contains(&Call::Free(1)));
    assert_clean(&d);
}

/// Records the wrapped backend's live counts when it is dropped.
struct AtDrop(std::sync::Arc<std::sync::Mutex<Option<ResourceCounts>>>);
impl seam::testing::Hooks for AtDrop {
    fn on_drop(&mut self, inner: &dyn Backend) {
        *self.0.lock().unwrap() = Some(inner.live_resources());
    }
}

/// Dropping a `Device` whose current exec reads a buffer frees that
/// buffer: core's teardown first replaces the current exec with an empty
/// capture, so the stream backend (which refuses to free a buffer an exec
/// reads) is not left holding it. Found on the H200: the model check saw
/// `buffers: 1` on cuda:0 after the device was dropped. Mutation: drop
/// that replacement in `State::drop` → red here.
#[test]
fn dropping_a_device_frees_what_its_current_exec_read() {
    let (b, _log) = crate::fake::backend(false);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let dev = seam::Device::new(Box::new(seam::testing::Forward::new(
        Box::new(b),
        AtDrop(seen.clone()),
    )));
    let x = dev.alloc(DType::F32, 4).unwrap();
    dev.low_level().begin_capture().unwrap();
    dev.launch(&seam::ops::add(x, x, x, 4)).unwrap();
    dev.low_level().end_capture_into_current().unwrap();
    drop(dev);
    let live = seen.lock().unwrap().expect("the wrapper was dropped");
    assert_eq!((live.buffers, live.bytes), (0, 0), "{live:?}");
}

/// A launch reaches the driver with each view's address advanced by its
/// byte offset and with the op's grid and block: the arguments a real
/// `cuLaunchKernel` gets. Mutations: an offset dropped or subtracted, the
/// grid or block left at zero → red.
#[test]
fn a_launch_packs_each_views_offset_and_its_grid_and_block() {
    let (mut b, d) = backend(false);
    let [x, y, z] = three(&mut b, 1024);
    let call = RawCall {
        buffers: [
            RawView::at(x, 2, 4, 600),
            RawView::at(y, 5, 4, 600),
            RawView::at(z, 0, 4, 600),
        ]
        .into(),
        ..add(x, y, z, 600)
    };
    let lowered = b.lower(&call).unwrap();
    b.begin_capture().unwrap();
    b.launch(&call).unwrap();
    b.end_capture_into_current().unwrap();
    let node = d.nodes_of(d.last_exec()).pop().expect("one node");
    assert_eq!(node.buffers, [x, y, z].map(|r| r.0 as u32));
    assert_eq!(node.offsets, [8, 20, 0]);
    let (grid, block) = crate::launch::launch_config(&lowered).unwrap();
    assert_eq!(node.shape, Some((grid, block)));
    assert_eq!(block, (crate::launch::BLOCK, 1, 1));
    assert_eq!(grid, (600u32.div_ceil(crate::launch::BLOCK), 1, 1));
    drop(b);
    assert_clean(&d);
}

/// A driver error of work already queued is the error of the next call
/// that waits for it: `synchronize` says what the stream said.
#[test]
fn synchronize_reports_the_streams_error() {
    let (mut b, d) = backend(false);
    b.synchronize().unwrap();
    d.fail_next("synchronize");
    assert!(b.synchronize().is_err(), "the stream's error is the call's");
    b.synchronize().unwrap();
}

/// Device timing through the backend: available where the driver has
/// events, and each bracketed piece of work comes back as one span with
/// its tag, in the driver's event times. Mutations: `device_timing`
/// claiming support, `end_timed` recording nothing, `take_device_spans`
/// returning nothing → red.
#[test]
fn timed_work_comes_back_as_one_span_per_tag() {
    let (mut b, d) = backend(false);
    assert_eq!(b.device_timing(), Ok(()));
    let [x, y, z] = three(&mut b, 4);
    b.set_device_timing(true).unwrap();
    b.begin_timed(7).unwrap();
    b.launch(&add(x, y, z, 4)).unwrap();
    b.end_timed(7).unwrap();
    let spans = b.take_device_spans().unwrap();
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].tag, 7);
    assert!(spans[0].end_ns > spans[0].start_ns, "{spans:?}");
    assert!(b.take_device_spans().unwrap().is_empty(), "taken once");
    d.set_events_available(false);
    assert!(b.device_timing().is_err(), "no events, no device timing");
}

/// With no vendor library ([`crate::NoBlas`], HIP's: no hipBLAS) and a
/// compiler that keeps the trait's defaults: nothing routes to a vendor,
/// nothing to prepare, a vendor call refused by op and dtype, kernels
/// loaded per backend, so GEMM runs its kernel. Mutations of each → red.
#[test]
fn a_backend_without_a_vendor_library_runs_every_op_as_a_kernel() {
    use crate::{Compiler as _, NoBlas, StreamDriver as _, VendorBlas};
    let d = FakeDriver::new();
    let observer = d.observer();
    let plain = FakeCompiler::new(&d);
    assert!(!VendorBlas::<FakeDriver>::routes(&NoBlas, OpKind::Gemm));
    assert!(VendorBlas::<FakeDriver>::ready(&NoBlas));
    assert!(plain.shared_kernels().is_none());
    let info = seam::DeviceInfo {
        backend: "fake".into(),
        index: 0,
        name: "plain".into(),
        driver: "none".into(),
    };
    let mut b = Direct::new(StreamBackend::new(info, d, plain, NoBlas));
    let [x, y, z] = [(); 3].map(|()| b.alloc(16).unwrap());
    let call = gemm(x, y, z);
    b.launch(&call).unwrap();
    b.synchronize().unwrap();
    let log = observer.log();
    assert!(!log.contains(&Call::VendorPrepare), "{log:?}");
    assert!(
        log.iter()
            .any(|c| matches!(c, Call::LaunchKernel { name, .. } if name.starts_with("gemm"))),
        "{log:?}"
    );
    // Asked anyway, the default refuses a vendor call by op and dtype.
    let lowered = b.lower(&call).unwrap();
    let other = FakeDriver::new();
    let mem: Vec<_> = (0..3).map(|_| other.alloc(1 << 22).unwrap()).collect();
    let vendor = crate::VendorLaunch::new(&other, &lowered, mem.iter().collect()).unwrap();
    assert_eq!(NoBlas.prepare(&other), Ok(()));
    assert_eq!(
        NoBlas.launch(&other, &vendor),
        Err(ErrorKind::OpUnsupported {
            op: OpKind::Gemm,
            dtype: DType::F32
        })
    );
    drop(vendor);
    mem.into_iter().for_each(|m| other.free(m));
}
