//! Backend-level tests of what the conformance suite cannot see from the
//! seam: pipeline caching across replays, wgpu errors becoming seam errors,
//! unaligned 16-bit host access, long eager batches; views at odd offsets
//! and user kernels (`view_trials.rs`, shared with seam-vulkan). Each needs an adapter
//! (lavapipe in CI); where there is none each is an ignored trial saying
//! why. The lib's test target has `harness = false`: these run as
//! libtest-mimic trials from `main` below.

use crate::backend::WgpuBackend;
use libtest_mimic::Completion;
use seam::testing::{Direct, RawCall};
use seam::{
    ops, Backend, DType, Device, ErrorKind, OpKind, Params, RawBuffer, RawView, ReplayTarget,
};

#[path = "../../../device_trials.rs"]
mod device_trials;
#[path = "../../../view_trials.rs"]
mod view_trials;

mod guards;
mod timing;

pub fn main() {
    use crate::{dispatch, kernels, replay, validation};
    device_trials::run(
        "wgpu:0",
        &[
            (
                "replay::replay_steps_set_only_what_changes",
                replay::tests::replay_steps_set_only_what_changes,
            ),
            (
                "replay::pass_order_puts_stamps_where_they_were_placed",
                replay::tests::pass_order_puts_stamps_where_they_were_placed,
            ),
            (
                "replay::replay_pieces_cover_the_graph_in_order_and_grow",
                replay::tests::replay_pieces_cover_the_graph_in_order_and_grow,
            ),
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
                "timing::spans_pair_markers_and_tile_nodes",
                crate::backend::timing::tests::spans_pair_markers_and_tile_nodes,
            ),
            (
                "timing::ticks_become_nanoseconds",
                crate::backend::timing::tests::ticks_become_nanoseconds,
            ),
            (
                "timing::timing_needs_timestamps_inside_passes",
                crate::backend::timing::tests::timing_needs_timestamps_inside_passes,
            ),
            (
                "timing::lost_submission_drops_what_used_its_stamps",
                crate::backend::timing::tests::lost_submission_drops_what_used_its_stamps,
            ),
            (
                "kernels::reflection_takes_group_0_numbered_from_0",
                kernels::tests::reflection_takes_group_0_numbered_from_0,
            ),
            (
                "adapters_without_immediates_or_compute_are_skipped",
                guards::adapters_without_immediates_or_compute_are_skipped,
            ),
            (
                "validation::validated_instances_validate_without_debug_info",
                validation::tests::validated_instances_validate_without_debug_info,
            ),
            (
                "validation::validation_is_off_unless_asked",
                validation::tests::validation_is_off_unless_asked,
            ),
            (
                "validation::collector_sees_a_missing_layer",
                validation::tests::collector_sees_a_missing_layer,
            ),
            (
                "validation::collector_takes_what_wgpu_hal_logs",
                validation::tests::collector_takes_what_wgpu_hal_logs,
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
                "replay_sets_all_the_state_each_dispatch_needs",
                replay_sets_all_the_state_each_dispatch_needs,
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
                "a_body_unrolled_past_the_bound_is_refused",
                a_body_unrolled_past_the_bound_is_refused,
            ),
            (
                "gpu::a_finished_submission_is_seen_by_a_poll",
                crate::gpu::tests::a_finished_submission_is_seen_by_a_poll,
            ),
            (
                "unaligned_half_word_access_keeps_neighbours",
                unaligned_half_word_access_keeps_neighbours,
            ),
            (
                "destroy_while_replay_in_flight_completes",
                destroy_while_replay_in_flight_completes,
            ),
            (
                "limits_below_the_adapters_are_held",
                guards::limits_below_the_adapters_are_held,
            ),
            (
                "bind_groups_are_kept_per_buffer_set",
                guards::bind_groups_are_kept_per_buffer_set,
            ),
            (
                "user_kernel_wgpu_refuses_is_a_compile_error",
                guards::user_kernel_wgpu_refuses_is_a_compile_error,
            ),
            (
                "errors_outside_a_call_fail_the_next_one",
                guards::errors_outside_a_call_fail_the_next_one,
            ),
            (
                "validation_is_on_exactly_when_asked",
                guards::validation_is_on_exactly_when_asked,
            ),
            (
                "teardown_fails_on_a_message_a_call_returned",
                guards::teardown_fails_on_a_message_a_call_returned,
            ),
            (
                "timing::stamps_are_numbered_once_each",
                crate::backend::timing::tests::stamps_are_numbered_once_each,
            ),
            (
                "node_spans_tile_long_replays_across_query_sets",
                timing::node_spans_tile_long_replays_across_query_sets,
            ),
            ("catalogue_ops_on_odd_views_keep_neighbours", |b| {
                view_trials::catalogue_ops_on_odd_views_keep_neighbours(&Device::new(Box::new(
                    b.into_inner(),
                )));
                Completion::Completed
            }),
            ("user_kernel_runs_over_views", |b| {
                view_trials::user_kernel_runs_over_views(&Device::new(Box::new(b.into_inner())));
                Completion::Completed
            }),
            ("kernel_errors_name_the_kernel_and_line", |b| {
                view_trials::kernel_errors_name_the_kernel_and_line(&Device::new(Box::new(
                    b.into_inner(),
                )));
                Completion::Completed
            }),
        ],
    )
}

fn open() -> Result<Direct<WgpuBackend>, String> {
    crate::device_count()?;
    let instance = crate::instance()?;
    let adapter = crate::enumerate(&instance)
        .into_iter()
        .find(|a| crate::unusable(a).is_none())
        .ok_or("no usable wgpu adapter")?;
    WgpuBackend::open(0, &adapter)
        .map(Direct::new)
        .map_err(|e| format!("wgpu:0 was found but does not open: {e}"))
}

fn add(a: RawBuffer, b: RawBuffer, out: RawBuffer, n: u32) -> RawCall {
    RawCall {
        op: OpKind::Add,
        dtype: DType::U32,
        buffers: [a, b, out].map(|r| RawView::whole(r, 1 << 20)).into(),
        params: Params {
            d0: n,
            ..Default::default()
        },
    }
}

fn words(b: &mut Direct<WgpuBackend>, buf: RawBuffer, n: usize) -> Vec<u32> {
    let mut out = vec![0u8; n * 4];
    b.read(buf, 0, &mut out).expect("read");
    out.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn upload(b: &mut Direct<WgpuBackend>, data: &[u32]) -> RawBuffer {
    let buf = b.alloc(data.len() * 4).expect("alloc");
    let bytes: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
    b.write(buf, 0, &bytes).expect("write");
    buf
}

fn replay_creates_no_pipelines_or_bind_groups(mut b: Direct<WgpuBackend>) -> Completion {
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

/// A replay sets only the state that changes between its dispatches
/// (`backend::Sets`): a graph with runs of one pipeline over one bind group
/// with the same immediates, then new immediates, a new bind group, a new
/// pipeline and back, replayed after an eager launch of another pipeline
/// with other immediates (left bound when the graph's first dispatch comes),
/// computes what the same launches compute on the host. Mutations: a step
/// skipping immediates or the bind group that changed, the first step
/// setting less than everything → red.
fn replay_sets_all_the_state_each_dispatch_needs(mut b: Direct<WgpuBackend>) -> Completion {
    const N: usize = 64;
    let h = N as u32 / 2;
    let one = upload(&mut b, &[1; N]);
    let x = upload(&mut b, &[0; N]);
    let y = upload(&mut b, &[0; N]);
    let fill = |dst, n, v| RawCall {
        op: OpKind::Fill,
        dtype: DType::U32,
        buffers: [dst].map(|r| RawView::whole(r, 1 << 20)).into(),
        params: Params {
            d0: n,
            bits: v,
            ..Default::default()
        },
    };
    let graph = [
        add(one, x, x, N as u32),
        add(one, x, x, N as u32),
        add(one, x, x, N as u32),
        add(one, x, x, h),
        add(one, y, y, h),
        fill(y, N as u32, 7),
        add(one, x, x, N as u32),
    ];
    // The host's model of these launches: `add(one, d, d, n)` adds 1 to
    // d[..n], `fill(d, n, v)` sets d[..n] to v; d is the last binding.
    let model = |l: &RawCall, xs: &mut [u32], ys: &mut [u32]| {
        let n = l.params.d0 as usize;
        let d = if l.buffers.last().map(|v| v.buffer) == Some(x) {
            xs
        } else {
            ys
        };
        match l.op {
            OpKind::Fill => d[..n].fill(l.params.bits),
            _ => d[..n].iter_mut().for_each(|v| *v += 1),
        }
    };
    b.begin_capture().expect("begin");
    for l in &graph {
        b.launch(l).expect("record");
    }
    let g = b.end_capture_graph().expect("end");
    let (mut xs, mut ys) = (vec![0u32; N], vec![0u32; N]);
    for round in 0..3 {
        // Another pipeline with other immediates (d0 = N / 4) queued just
        // before the replay, encoded into the same pass.
        let eager = fill(x, N as u32 / 4, 100 + round);
        b.launch(&eager).expect("eager");
        model(&eager, &mut xs, &mut ys);
        b.replay(ReplayTarget::Graph(g)).expect("replay");
        for l in &graph {
            model(l, &mut xs, &mut ys);
        }
        assert_eq!(words(&mut b, x, N), xs, "x after replay {round}");
        assert_eq!(words(&mut b, y, N), ys, "y after replay {round}");
    }
    b.destroy_graph(g).expect("destroy");
    Completion::Completed
}

fn wgpu_validation_error_is_a_named_seam_error(b: Direct<WgpuBackend>) -> Completion {
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
fn validation_message_fails_the_call_that_raised_it(mut b: Direct<WgpuBackend>) -> Completion {
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

fn eager_chain_longer_than_a_batch_runs_in_order(mut b: Direct<WgpuBackend>) -> Completion {
    let one = upload(&mut b, &[1; 64]);
    let dst = upload(&mut b, &[0; 64]);
    for _ in 0..600 {
        b.launch(&add(one, dst, dst, 64)).expect("launch");
    }
    assert_eq!(words(&mut b, dst, 64), vec![600; 64]);
    Completion::Completed
}

/// A WHILE whose copies (its bound times those of the bodies around it)
/// exceed what wgpu unrolls is refused by name when it opens, and the
/// capture goes on; a body within the bound still runs.
/// Mutation: the bound compared without the enclosing body's copies
/// (`Nesting::open`) → red (the nested WHILE is accepted).
fn a_body_unrolled_past_the_bound_is_refused(b: Direct<WgpuBackend>) -> Completion {
    use seam_kernels::conditional::MAX_COPIES;
    let d = Device::new(Box::new(b.into_inner()));
    let flag = d.buffer_from(&[1u32]).expect("upload");
    let x = d.buffer_from(&[1.0f32]).expect("upload");
    let scope = d.capture().expect("capture");
    let e = scope
        .run_while(flag.id(), u32::MAX, || Ok(()))
        .expect_err("u32::MAX iterations");
    assert!(matches!(e.kind, ErrorKind::TooLarge { .. }), "{e}");
    let outer = (MAX_COPIES / 2) as u32;
    scope
        .run_while(flag.id(), outer, || {
            let e = scope
                .run_while(flag.id(), 4, || Ok(()))
                .expect_err("4 copies in each of MAX_COPIES / 2");
            assert!(matches!(e.kind, ErrorKind::TooLarge { .. }), "{e}");
            Ok(())
        })
        .expect("the outer body");
    // The capture is still usable (dropped here: an outer body of
    // MAX_COPIES / 2 gates is not worth replaying); so is the next.
    d.launch(&ops::scale_add(x.id(), x.id(), 1, 2.0, 0.0))
        .expect("a launch after the refusals");
    drop(scope);
    let scope = d.capture().expect("capture");
    scope
        .run_if(flag.id(), || {
            d.launch(&ops::scale_add(x.id(), x.id(), 1, 2.0, 0.0))
        })
        .expect("an IF");
    let g = scope.end_graph().expect("end");
    g.replay().expect("replay");
    assert_eq!(x.read().expect("read"), vec![2.0]);
    Completion::Completed
}

fn unaligned_half_word_access_keeps_neighbours(b: Direct<WgpuBackend>) -> Completion {
    let d = Device::new(Box::new(b.into_inner()));
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

fn destroy_while_replay_in_flight_completes(mut b: Direct<WgpuBackend>) -> Completion {
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
