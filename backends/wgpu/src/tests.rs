//! Backend-level tests of what the conformance suite cannot see from the
//! seam: pipeline caching across replays, wgpu errors becoming seam errors,
//! unaligned 16-bit host access, long eager batches. Each needs an adapter
//! (lavapipe in CI); where there is none each is an ignored trial saying
//! why. The lib's test target has `harness = false`: these run as
//! libtest-mimic trials from `main` below.

use crate::backend::WgpuBackend;
use libtest_mimic::Completion;
use seam::{
    ops, Backend, DType, Device, ErrorKind, Launch, OpKind, Params, RawBuffer, ReplayTarget,
};

#[path = "../../device_trials.rs"]
mod device_trials;

pub fn main() {
    use crate::{dispatch, kernels, validation};
    device_trials::run(
        &[
            (
                "dispatch::grid_covers_every_group_with_little_overshoot",
                dispatch::tests::grid_covers_every_group_with_little_overshoot,
            ),
            (
                "dispatch::grid_refuses_what_does_not_fit",
                dispatch::tests::grid_refuses_what_does_not_fit,
            ),
            (
                "kernels::every_op_reflects_one_binding_per_signature_entry",
                kernels::tests::every_op_reflects_one_binding_per_signature_entry,
            ),
            (
                "validation::collector_keeps_validation_messages_on_their_thread",
                validation::tests::collector_keeps_validation_messages_on_their_thread,
            ),
            (
                "validation::message_kinds_are_read_from_the_callback_format",
                validation::tests::message_kinds_are_read_from_the_callback_format,
            ),
        ],
        open,
        &[
            (
                "replay_creates_no_pipelines_or_bind_groups",
                replay_creates_no_pipelines_or_bind_groups,
            ),
            (
                "wgpu_validation_error_is_a_named_seam_error",
                wgpu_validation_error_is_a_named_seam_error,
            ),
            (
                "validation_message_fails_the_call_that_raised_it",
                validation_message_fails_the_call_that_raised_it,
            ),
            (
                "eager_chain_longer_than_a_batch_runs_in_order",
                eager_chain_longer_than_a_batch_runs_in_order,
            ),
            (
                "unaligned_half_word_access_keeps_neighbours",
                unaligned_half_word_access_keeps_neighbours,
            ),
            (
                "destroy_while_replay_in_flight_completes",
                destroy_while_replay_in_flight_completes,
            ),
        ],
    )
}

fn open() -> Result<WgpuBackend, String> {
    crate::device_count()?;
    let instance = crate::instance()?;
    let adapter = crate::enumerate(&instance)
        .into_iter()
        .find(|a| crate::unusable(a).is_none())
        .ok_or("no usable wgpu adapter")?;
    WgpuBackend::open(0, &adapter).map_err(|e| format!("wgpu:0 was found but does not open: {e}"))
}

fn add(a: RawBuffer, b: RawBuffer, out: RawBuffer, n: u32) -> Launch {
    Launch {
        op: OpKind::Add,
        dtype: DType::U32,
        buffers: [a, b, out].into(),
        params: Params {
            d0: n,
            ..Default::default()
        },
    }
}

fn words(b: &mut WgpuBackend, buf: RawBuffer, n: usize) -> Vec<u32> {
    let mut out = vec![0u8; n * 4];
    b.read(buf, 0, &mut out).expect("read");
    out.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn upload(b: &mut WgpuBackend, data: &[u32]) -> RawBuffer {
    let buf = b.alloc(data.len() * 4).expect("alloc");
    let bytes: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
    b.write(buf, 0, &bytes).expect("write");
    buf
}

fn replay_creates_no_pipelines_or_bind_groups(mut b: WgpuBackend) -> Completion {
    let one = upload(&mut b, &[1; 100]);
    let dst = upload(&mut b, &[0; 100]);
    b.prepare(&[(OpKind::Add, DType::U32)]).expect("prepare");
    b.begin_capture().expect("begin");
    b.launch(&add(one, dst, dst, 100)).expect("record");
    let g = b.end_capture_graph().expect("end");
    let made = (b.kernels.pipeline_count(), b.bind_group_count());
    for _ in 0..5 {
        b.replay(ReplayTarget::Graph(g)).expect("replay");
    }
    assert_eq!((b.kernels.pipeline_count(), b.bind_group_count()), made);
    assert_eq!(words(&mut b, dst, 100), vec![5; 100]);
    b.destroy_graph(g).expect("destroy");
    Completion::Completed
}

fn wgpu_validation_error_is_a_named_seam_error(b: WgpuBackend) -> Completion {
    // MAP_READ may only be combined with COPY_DST: a validation error, which
    // wgpu's default handler would turn into a panic.
    let r = b.gpu.checked("wgpu::Device::create_buffer", || {
        b.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    });
    match r {
        Err(ErrorKind::Driver { driver_call, .. }) => {
            assert_eq!(driver_call, "wgpu::Device::create_buffer")
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("invalid buffer accepted"),
    }
    // The device stays usable.
    b.gpu.take_uncaptured("after").expect("nothing uncaptured");
    Completion::Completed
}

/// A message the layer raised on this thread (recorded as wgpu-hal's
/// messenger logs it) fails the next call, named, and the one after it runs.
/// Mutation: `Gpu::checked` skips `validated` → red.
fn validation_message_fails_the_call_that_raised_it(mut b: WgpuBackend) -> Completion {
    let was = b.gpu.validating;
    b.gpu.validating = true;
    let _ = crate::validation::take();
    crate::validation::tests::raise("VUID-vkCmdDispatch-None-02697");
    let r = b.alloc(16);
    match r {
        Err(ErrorKind::Driver {
            driver_call,
            message,
        }) => {
            assert_eq!(driver_call, "wgpu::Device::create_buffer");
            assert!(
                message
                    .starts_with("validation: Validation Error: [ VUID-vkCmdDispatch-None-02697 ]"),
                "{message}"
            );
        }
        other => panic!("the raised message was not an error: {other:?}"),
    }
    // Raised inside a wait: the wait names it.
    crate::validation::tests::raise("VUID-vkQueueSubmit-pCommandBuffers-00071");
    let e = b.synchronize().unwrap_err().to_string();
    assert!(
        e.contains("driver call wgpu::Device::poll failed: validation: Validation Error: [ VUID-vkQueueSubmit-pCommandBuffers-00071 ]"),
        "{e}"
    );
    // The next call runs.
    let ok = b.alloc(16).expect("the next call runs");
    b.free(ok).expect("free");
    // The device would fail its teardown on these two: forget them.
    b.gpu.forget_raised();
    b.gpu.validating = was;
    Completion::Completed
}

fn eager_chain_longer_than_a_batch_runs_in_order(mut b: WgpuBackend) -> Completion {
    let one = upload(&mut b, &[1; 64]);
    let dst = upload(&mut b, &[0; 64]);
    for _ in 0..600 {
        b.launch(&add(one, dst, dst, 64)).expect("launch");
    }
    assert_eq!(words(&mut b, dst, 64), vec![600; 64]);
    Completion::Completed
}

fn unaligned_half_word_access_keeps_neighbours(b: WgpuBackend) -> Completion {
    let d = Device::new(Box::new(b));
    let h = |v: f32| seam::f16::from_f32(v);
    let buf = d
        .buffer_from(&[h(1.0), h(2.0), h(3.0), h(4.0), h(5.0)])
        .expect("upload");
    // One element at an odd offset, then two straddling a word boundary.
    d.write(buf.id(), 1, &[h(-2.0)]).expect("write 1");
    d.write(buf.id(), 2, &[h(-3.0)]).expect("write 2");
    d.write(buf.id(), 3, &[h(-4.0), h(-5.0)]).expect("write 3");
    assert_eq!(
        buf.read().expect("read"),
        vec![h(1.0), h(-2.0), h(-3.0), h(-4.0), h(-5.0)]
    );
    let tail: Vec<seam::f16> = d.read_range(buf.id(), 3, 2).expect("read range");
    assert_eq!(tail, vec![h(-4.0), h(-5.0)]);
    // An odd-length fill leaves the padding half alone and the op runs.
    d.launch(&ops::fill(buf.id(), 3, h(7.0).to_bits() as u32))
        .expect("fill");
    assert_eq!(
        buf.read().expect("read"),
        vec![h(7.0), h(7.0), h(7.0), h(-4.0), h(-5.0)]
    );
    Completion::Completed
}

fn destroy_while_replay_in_flight_completes(mut b: WgpuBackend) -> Completion {
    let n = 1 << 16;
    let one = upload(&mut b, &vec![1; n]);
    let dst = upload(&mut b, &vec![0; n]);
    b.begin_capture().expect("begin");
    for _ in 0..32 {
        b.launch(&add(one, dst, dst, n as u32)).expect("record");
    }
    let g = b.end_capture_graph().expect("end");
    b.replay(ReplayTarget::Graph(g)).expect("replay");
    b.destroy_graph(g).expect("destroy in flight");
    // The buffers go too: a submission in flight keeps wgpu's copies alive.
    b.free(one).expect("free");
    assert_eq!(words(&mut b, dst, n), vec![32; n]);
    assert_eq!(b.live_resources().graphs, 0);
    Completion::Completed
}
