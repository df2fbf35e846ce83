//! Backend-specific checks on whatever Vulkan device is here (lavapipe in
//! CI): edge shapes of every op (1 element, 300,000 elements, 70,000 rows)
//! eager and captured against the CPU reference, scale_add's exact fusion,
//! timestamp-query pool reuse, and views at odd offsets and user kernels
//! (`view_trials.rs`, shared with seam-wgpu), and which path each graph
//! update takes (`lavapipe/update.rs`). The contract itself (C1–C14) is the
//! conformance suite's, never copied here. Where there is no Vulkan device
//! each test is an ignored trial that says why (`harness = false`).

use libtest_mimic::Completion;
use seam::testing::Rng;
use seam::{ops, DType, Device, OpCall, OpKind};

#[path = "../../device_trials.rs"]
mod device_trials;
#[path = "../../view_trials.rs"]
mod view_trials;
mod lavapipe {
    pub mod update;
}
use lavapipe::update::{
    a_graph_switching_back_swaps_kept_command_buffers, a_node_timed_graph_is_only_patched_in_place,
    a_rebind_records_nothing_where_update_after_bind, rebinds_rewrite_descriptor_sets_in_place,
};

fn main() {
    device_trials::run(
        "vulkan:0",
        &[],
        vulkan,
        &[
            (
                "every_op_matches_the_cpu_eager_and_captured",
                every_op_matches_the_cpu_eager_and_captured,
            ),
            ("scale_add_is_fused_exactly", scale_add_is_fused_exactly),
            ("replays_get_device_spans", replays_get_device_spans),
            (
                "rebinds_rewrite_descriptor_sets_in_place",
                rebinds_rewrite_descriptor_sets_in_place,
            ),
            ("catalogue_ops_on_odd_views_keep_neighbours", |d| {
                view_trials::catalogue_ops_on_odd_views_keep_neighbours(&d);
                Completion::Completed
            }),
            ("user_kernel_runs_over_views", |d| {
                view_trials::user_kernel_runs_over_views(&d);
                Completion::Completed
            }),
            ("kernel_errors_name_the_kernel_and_line", |d| {
                view_trials::kernel_errors_name_the_kernel_and_line(&d);
                Completion::Completed
            }),
            (
                "a_rebind_records_nothing_where_update_after_bind",
                a_rebind_records_nothing_where_update_after_bind,
            ),
            (
                "a_graph_switching_back_swaps_kept_command_buffers",
                a_graph_switching_back_swaps_kept_command_buffers,
            ),
            (
                "a_node_timed_graph_is_only_patched_in_place",
                a_node_timed_graph_is_only_patched_in_place,
            ),
            (
                "staged_writes_reads_and_launches_round_trip",
                staged_writes_reads_and_launches_round_trip,
            ),
            ("lavapipe_names_its_driver", lavapipe_names_its_driver),
        ],
    )
}

fn vulkan() -> Result<Device, String> {
    seam_vulkan::device_count()?;
    let backend =
        seam_vulkan::open(0).map_err(|e| format!("vulkan:0 was found but does not open: {e}"))?;
    Ok(Device::new(backend))
}

/// Run one workload; returns the output bytes.
fn run(dev: &Device, op: OpKind, dtype: DType, dims: (u32, u32, u32), captured: bool) -> Vec<u8> {
    let index = OpKind::ALL
        .iter()
        .position(|o| *o == op)
        .expect("a catalogue op");
    let mut rng = Rng::new(index as u64);
    let (n, rows, cols) = dims;
    let (m, gn, k) = dims;
    let sig = op.signature();
    let lens: Vec<u32> = match op {
        OpKind::RmsNorm => vec![rows * cols, cols, rows * cols],
        OpKind::Softmax => vec![rows * cols; 2],
        OpKind::Gemm => vec![m * k, k * gn, m * gn],
        _ => vec![n; sig.len()],
    };
    let mut ids = Vec::new();
    for (b, &len) in sig.iter().zip(&lens) {
        let bd = if b.role == seam::ops::Role::Fixed(DType::F32) {
            DType::F32
        } else {
            dtype
        };
        let id = dev.alloc(bd, len as usize).unwrap();
        let data = if b.access == seam::ops::Access::Read {
            rng.bytes(bd, len as usize, 2.0)
        } else {
            vec![0x5A; len as usize * bd.size()]
        };
        dev.write_bytes(id, 0, &data).unwrap();
        ids.push(id);
    }
    let b = &ids;
    let call: OpCall = match op {
        OpKind::Fill => ops::fill(
            b[0],
            n,
            rng.next_u32() & if dtype.size() == 2 { 0xFFFF } else { !0 },
        ),
        OpKind::Copy => ops::copy(b[0], b[1], n),
        OpKind::ScaleAdd => ops::scale_add(b[0], b[1], n, 1.75, -0.3),
        OpKind::Add => ops::add(b[0], b[1], b[2], n),
        OpKind::Mul => ops::mul(b[0], b[1], b[2], n),
        OpKind::Silu => ops::silu(b[0], b[1], n),
        OpKind::RmsNorm => ops::rms_norm(b[0], b[1], b[2], rows, cols, 1e-5),
        OpKind::Softmax => ops::softmax(b[0], b[1], rows, cols),
        OpKind::Gemm => ops::gemm(b[0], b[1], b[2], m, gn, k),
        OpKind::User(_) => unreachable!("run() is given catalogue ops"),
    };
    if captured {
        let cap = dev.capture().unwrap();
        dev.launch(&call).unwrap();
        let g = cap.end_graph().unwrap();
        g.replay().unwrap();
    } else {
        dev.launch(&call).unwrap();
    }
    let out = sig
        .iter()
        .position(|b| b.access == seam::ops::Access::Write)
        .unwrap();
    let bytes = dev.read_bytes(ids[out]).unwrap();
    for id in ids {
        dev.free(id).unwrap();
    }
    bytes
}

fn compare(op: OpKind, dtype: DType, got: &[u8], want: &[u8]) -> Result<(), String> {
    let out = if op == OpKind::Gemm {
        DType::F32
    } else {
        dtype
    };
    seam::testing::compare(out, op.tolerance(dtype), got, want)
}

fn every_op_matches_the_cpu_eager_and_captured(dev: Device) -> Completion {
    let cpu = Device::new(Box::new(seam_cpu::CpuBackend::new(0)));
    let mut failures = Vec::new();
    for op in OpKind::ALL {
        for &dtype in op.dtypes() {
            let shapes: &[(u32, u32, u32)] = match op {
                OpKind::RmsNorm | OpKind::Softmax => &[(5, 5, 257), (3, 3, 1), (70_000, 70_000, 3)],
                OpKind::Gemm => &[(17, 33, 65), (1, 1, 1), (64, 48, 16)],
                _ => &[(1001, 0, 0), (1, 0, 0), (300_000, 0, 0)],
            };
            for &dims in shapes {
                let want = run(&cpu, op, dtype, dims, false);
                for captured in [false, true] {
                    let got = run(&dev, op, dtype, dims, captured);
                    if let Err(e) = compare(op, dtype, &got, &want) {
                        failures.push(format!("{op}/{dtype} {dims:?} captured={captured}: {e}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let live = dev.live();
    assert_eq!(live.backend.buffers, 0);
    Completion::Completed
}

/// scale_add is fused on every driver (lavapipe's own fma is not): random
/// bit patterns, subnormals, cancellations and overflow against mul_add.
/// This caught the NVIDIA driver flushing a subnormal factor in the float
/// arithmetic of the kernel's infinity path (fma(2.5e-40, inf, 3e-39) gave
/// NaN); that path now decides on the bits. Mutation: compute infinity
/// times a finite value in float again → red on NVIDIA (lavapipe keeps
/// subnormals either way).
fn scale_add_is_fused_exactly(dev: Device) -> Completion {
    let mut rng = Rng::new(12345);
    let mut xs: Vec<f32> = (0..20_000)
        .map(|i| match i % 4 {
            0 => f32::from_bits(rng.next_u32() << 16 | rng.next_u32() & 0xFFFF),
            1 => {
                f32::from_bits((rng.next_u32() & 0x807F_FFFF) | ((rng.next_u32() % 40 + 100) << 23))
            }
            2 => f32::from_bits(rng.next_u32() & 0x807F_FFFF), // subnormal
            _ => rng.next_f32(2.0),
        })
        .filter(|v| !v.is_nan())
        .collect();
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN_POSITIVE,
        1.0,
        -1.0,
    ]);
    let pairs = [
        (1.75f32, -0.3f32),
        (3.0, 0.0),
        (-1.0, 1.0),
        (1.0e-30, 1.0e-38),
        (f32::MAX, -f32::MAX),
        (0.1, -0.1),
        (1.0 + f32::EPSILON, -1.0),
        (0.0, -0.0),
        (-0.0, -0.0),
        (2.5e-40, 3.0e-39),
        (1.0e30, 1.0e38),
    ];
    let n = xs.len() as u32;
    let x = dev.buffer_from(&xs).unwrap();
    let y = dev.buffer::<f32>(xs.len()).unwrap();
    for (a, b) in pairs {
        dev.launch(&ops::scale_add(x.id(), y.id(), n, a, b))
            .unwrap();
        let got = y.read().unwrap();
        for (v, g) in xs.iter().zip(&got) {
            let want = a.mul_add(*v, b);
            assert!(
                want.to_bits() == g.to_bits() || (want.is_nan() && g.is_nan()),
                "fma({a:e}, {v:e}, {b:e}) = {want:e} ({:#x}), got {g:e} ({:#x})",
                want.to_bits(),
                g.to_bits()
            );
        }
    }
    Completion::Completed
}

/// Device timing with timestamp queries: every traced replay and eager launch
/// gets one span, spans follow queue order without overlapping (both markers
/// are BOTTOM_OF_PIPE), query pools grow past one pool (512 spans) and are
/// recycled across takes while tracing stays on, and again after it is
/// switched off and on.
fn replays_get_device_spans(dev: Device) -> Completion {
    let one = dev.buffer_from(&[1u32; 64]).unwrap();
    let dst = dev.buffer_from(&[0u32; 64]).unwrap();
    let cap = dev.capture().unwrap();
    dev.launch(&ops::add(one.id(), dst.id(), dst.id(), 64))
        .unwrap();
    let g = cap.end_graph().unwrap();
    let mut total = 0u32;
    // (replays, eager launches every k replays, tracing stays on for the take)
    for (round, (n, keep_on)) in [(700usize, true), (300, true), (40, false), (5, false)]
        .into_iter()
        .enumerate()
    {
        dev.set_tracing(true);
        for i in 0..n {
            g.replay().unwrap();
            if i % 97 == 0 {
                dev.launch(&ops::add(one.id(), dst.id(), dst.id(), 64))
                    .unwrap();
                total += 1;
            }
        }
        total += n as u32;
        if !keep_on {
            dev.set_tracing(false);
        }
        let log = dev.take_trace_log("timing").unwrap();
        if let Some(why) = &log.device_timing_unavailable {
            assert!(log.device_spans.is_empty());
            return Completion::ignored_with(format!("this Vulkan device is not timed: {why}"));
        }
        let timed: Vec<u64> = log
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    seam::EventKind::Replay { .. }
                        | seam::EventKind::Launch {
                            captured: false,
                            ..
                        }
                )
            })
            .map(|e| e.seq)
            .collect();
        let tags: Vec<u64> = log.device_spans.iter().map(|s| s.tag).collect();
        assert_eq!(
            tags, timed,
            "round {round}: one span per traced replay/launch, in order"
        );
        for w in log.device_spans.windows(2) {
            assert!(w[0].end_ns >= w[0].start_ns, "round {round}: {w:?}");
            assert!(
                w[1].start_ns >= w[0].end_ns,
                "round {round}: spans overlap or leave queue order: {w:?}"
            );
        }
        assert_eq!(dst.read().unwrap(), vec![total; 64]);
    }
    dev.set_tracing(false);
    assert!(dev.take_trace_log("off").unwrap().device_spans.is_empty());
    Completion::Completed
}

/// On a device opened with every buffer behind a staging buffer (as on a
/// discrete GPU; lavapipe's memory is host-visible, so the suite's default
/// pass never stages): writes at odd offsets and reads come back as
/// written, and a launch between them sees and leaves what it should.
/// Mutation: the command buffer's copy recording nothing
/// (`CommandBuffer::copy` → `Ok(())`) → red.
fn staged_writes_reads_and_launches_round_trip(_: Device) -> Completion {
    let backend = seam_vulkan::VulkanBackend::open_staging(0).expect("vulkan:0 staged");
    assert!(
        backend.stages(),
        "open_staging opened a device that maps its buffers"
    );
    // lavapipe's memory is host-visible and coherent: a device opened
    // plainly there maps its buffers, unless SEAM_VULKAN_STAGING=1 asks.
    let plain = seam_vulkan::VulkanBackend::open(0).expect("vulkan:0");
    if seam::Backend::info(&plain).name.contains("llvmpipe") {
        let asked = std::env::var("SEAM_VULKAN_STAGING").is_ok_and(|v| v == "1");
        assert_eq!(
            plain.stages(),
            asked,
            "lavapipe stages (SEAM_VULKAN_STAGING=1: {asked})"
        );
    }
    drop(plain);
    let dev = Device::new(Box::new(backend));
    let n = 3 * 1024 + 7;
    let x: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
    let a = dev.buffer_from(&x).unwrap();
    assert_eq!(a.read().unwrap(), x, "a staged write read back");
    dev.write(a.id(), 1001, &[7u32, 8, 9]).unwrap();
    let b = dev.buffer_from(&vec![0u32; n]).unwrap();
    dev.launch(&ops::copy(a.id(), b.id(), n as u32)).unwrap();
    let mut want = x;
    want[1001..1004].copy_from_slice(&[7, 8, 9]);
    assert_eq!(b.read().unwrap(), want, "a copy of a staged write");
    assert_eq!(
        dev.read_range::<u32>(b.id(), 1000, 5).unwrap(),
        want[1000..1005],
        "a staged read at an offset"
    );
    Completion::Completed
}

/// The device names its driver from the driver properties (Vulkan 1.2),
/// which lavapipe reports: `llvmpipe Mesa <version> (LLVM <version>)`, then
/// the API version. Elsewhere the driver's name is not known here.
fn lavapipe_names_its_driver(dev: Device) -> Completion {
    let info = dev.info();
    if !info.name.contains("llvmpipe") {
        return Completion::ignored_with(format!("{} is not lavapipe", info.name));
    }
    assert!(
        info.driver.starts_with("llvmpipe Mesa ") && info.driver.contains("(LLVM "),
        "{}",
        info.driver
    );
    Completion::Completed
}
