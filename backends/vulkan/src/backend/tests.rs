//! The backend's own unit checks on whatever Vulkan device is here
//! (lavapipe in CI; skipped, saying so, where there is none): what the
//! public API cannot reach.

use super::VulkanBackend;
use crate::dispatch;
use crate::sys::{Buffer, DispatchUpdate};
use seam::ops::Access;
use seam::testing::{Direct, RawCall};
use seam::{DType, OpKind, Params, RawBuffer, RawView};

fn words(v: u32) -> Vec<u8> {
    [v; 256].iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn read(b: &mut Direct<VulkanBackend>, buf: RawBuffer) -> Vec<u8> {
    let mut out = vec![0u8; 1024];
    b.read(buf, 0, &mut out).unwrap();
    out
}

/// gemm's 16 × 32 workgroups run where the device allows 512 invocations
/// and 32 on y, and are refused, naming the op, the device and the limit,
/// where it allows fewer (no device here does: the limits are given).
/// Mutations (tried): `invocations <= max` → `<` → red at the 512 row;
/// the per-axis check left out → red at the y = 16 row.
#[test]
fn an_op_whose_workgroup_the_device_cannot_run_is_refused() {
    use super::workgroup_fits;
    assert!(workgroup_fits(OpKind::Gemm, "big", 512, [1024, 32, 64]).is_ok());
    assert!(workgroup_fits(OpKind::Add, "small", 128, [128, 128, 64]).is_ok());
    for (max, size, limit) in [
        (256, [1024, 1024, 64], "maxComputeWorkGroupInvocations"),
        (1024, [1024, 16, 64], "maxComputeWorkGroupSize"),
    ] {
        match workgroup_fits(OpKind::Gemm, "small GPU", max, size) {
            Err(seam::ErrorKind::TooLarge { what, detail }) => {
                assert_eq!(what, "workgroup");
                assert!(
                    detail.contains("gemm") && detail.contains("small GPU"),
                    "{detail}"
                );
                assert!(
                    detail.contains(limit) && detail.contains("16×32×1"),
                    "{detail}"
                );
            }
            other => panic!("{max} / {size:?}: {other:?}"),
        }
    }
}

/// The barrier audit still refuses an update that would make two
/// dispatches of one stretch (no barrier between them) alias unordered,
/// and a refused update changes nothing. `VulkanBackend::launch` records a
/// barrier before every dispatch, where no rebind can (the audit is then
/// skipped: `Inner::audit_stretch`), so the stretch is recorded here
/// through the sys layer: dispatch 0 writes p, dispatch 1 writes q, then a
/// barrier and dispatch 2 (doubles q). Mutation (tried): skip the audit
/// of every stretch after a barrier (`start > 0`) → red.
#[test]
fn an_update_making_a_stretch_alias_unordered_is_refused() {
    let mut b = match VulkanBackend::open(0) {
        Ok(b) => Direct::new(b),
        Err(e) => {
            eprintln!("no Vulkan device ({e}): skipped");
            return;
        }
    };
    let add = |a: RawBuffer, dst: RawBuffer| RawCall {
        op: OpKind::Add,
        dtype: DType::U32,
        buffers: [a, a, dst].map(|r| RawView::whole(r, 256)).into(),
        params: Params {
            d0: 256,
            ..Params::default()
        },
    };
    let [one, p, q] = [1, 100, 200].map(|v| {
        let buf = b.alloc(1024).unwrap();
        b.write(buf, 0, &words(v)).unwrap();
        buf
    });
    let pipeline = b.pipeline(OpKind::Add, DType::U32).unwrap();
    let launch = b.lower(&add(one, p)).unwrap();
    let groups = dispatch::groups(&launch, b.gpu.adapter().max_group_count).unwrap();
    let params = launch.immediates();
    let buf = |b: &VulkanBackend, r: RawBuffer| -> Buffer { b.buffers.get(r).unwrap().clone() };
    let (one_b, p_b, q_b) = (buf(&b, one), buf(&b, p), buf(&b, q));
    let sig = OpKind::Add.signature();
    let binds = |src: &Buffer, dst: &Buffer| -> Vec<(Buffer, Access)> {
        [src, src, dst]
            .iter()
            .zip(sig)
            .map(|(&x, s)| (x.clone(), s.access))
            .collect()
    };
    fn refs(v: &[(Buffer, Access)]) -> Vec<(&Buffer, Access)> {
        v.iter().map(|(x, a)| (x, *a)).collect()
    }
    let (to_p, to_q) = (binds(&one_b, &p_b), binds(&one_b, &q_b));
    let (double_p, double_q) = (binds(&p_b, &p_b), binds(&q_b, &q_b));
    let mut cmd = b.gpu.command_buffer().unwrap();
    cmd.begin(true).unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&pipeline, &refs(&to_p), &params, groups)
        .unwrap();
    cmd.dispatch(&pipeline, &refs(&to_q), &params, groups)
        .unwrap();
    cmd.barrier().unwrap();
    cmd.dispatch(&pipeline, &refs(&double_q), &params, groups)
        .unwrap();
    cmd.end().unwrap();
    let change = |index: usize, bindings| DispatchUpdate {
        index,
        pipeline: &pipeline,
        bindings,
        params,
        groups,
    };
    let (p_refs, q_refs, double_p) = (refs(&to_p), refs(&to_q), refs(&double_p));
    // Dispatch 1 → p: write after write with dispatch 0 (unchanged).
    let e = cmd.check_update(&[change(1, &p_refs)]).err().unwrap();
    assert!(e.to_string().contains("write after write"), "{e}");
    // Dispatch 0 → q: with dispatch 1 after it (unchanged) as well.
    let e = cmd.check_update(&[change(0, &q_refs)]).err().unwrap();
    assert!(e.to_string().contains("write after write"), "{e}");
    // Both at once swap them: no alias. Dispatch 2 alone, after its own
    // barrier: taken whatever it binds.
    cmd.check_update(&[change(0, &q_refs), change(1, &p_refs)])
        .unwrap();
    let last = [change(2, &double_p)];
    let checked = cmd.check_update(&last).unwrap();
    // Nothing changed: the recorded bindings run (q = 2, then doubled).
    b.gpu.submit(&cmd).unwrap();
    b.gpu.wait_for(&cmd).unwrap();
    assert_eq!(read(&mut b, p), words(2), "refused updates changed nothing");
    assert_eq!(read(&mut b, q), words(4), "refused updates changed nothing");
    // Dispatch 2 doubles p now.
    cmd.update(checked).unwrap();
    b.gpu.submit(&cmd).unwrap();
    b.gpu.wait_for(&cmd).unwrap();
    assert_eq!(read(&mut b, p), words(4), "dispatch 2 after the update");
    assert_eq!(read(&mut b, q), words(2), "dispatch 1 only");
}

/// Buffers the host maps are in host-visible, coherent memory (device-local
/// first); buffers behind staging prefer device-local memory and take any
/// other. lavapipe has one memory type with every property, so only these
/// lists say which a discrete device's buffers would get.
#[test]
fn buffer_memory_preferences() {
    use ash::vk::MemoryPropertyFlags as M;
    let coherent = M::HOST_VISIBLE | M::HOST_COHERENT;
    assert_eq!(
        VulkanBackend::HOST_MEMORY,
        [M::DEVICE_LOCAL | coherent, coherent]
    );
    assert_eq!(VulkanBackend::DEVICE_MEMORY, [M::DEVICE_LOCAL, M::empty()]);
    assert_eq!(
        VulkanBackend::buffer_memory(true),
        VulkanBackend::HOST_MEMORY
    );
    assert_eq!(
        VulkanBackend::buffer_memory(false),
        VulkanBackend::DEVICE_MEMORY
    );
}

/// `SEAM_VULKAN_STAGING=1` asks for staging; unset or any other value
/// does not.
#[test]
fn staging_is_asked_by_one_alone() {
    use super::staging_asked;
    assert!(staging_asked(Some("1".into())));
    assert!(!staging_asked(Some("0".into())));
    assert!(!staging_asked(Some("".into())));
    assert!(!staging_asked(None));
}

/// Under validation, a device that saw a message fails its teardown, so a
/// message whose error a caller swallowed still fails (the suite's devices
/// live to the end of their process, so no trial drops one); without
/// validation, and with no message, teardown is quiet.
#[test]
fn teardown_fails_on_a_message_only_under_validation() {
    use crate::sys::Validation;
    let open = |v: Validation, raised: &[&str]| {
        VulkanBackend::open(0).map(|mut b| {
            b.validation = v;
            b.raised = raised.iter().map(|s| s.to_string()).collect();
            b
        })
    };
    let dropped = |b: VulkanBackend| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(b)))
            .map_err(|p| p.downcast_ref::<String>().cloned().unwrap_or_default())
    };
    let b = match open(Validation::Sync, &["VUID-x: a swallowed message"]) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("no Vulkan device ({e}): skipped");
            return;
        }
    };
    let e = dropped(b).expect_err("a device that saw a message tore down quietly");
    assert!(
        e.contains("drop: validation: VUID-x: a swallowed message"),
        "{e}"
    );
    for (v, raised) in [
        (Validation::Off, &["VUID-x: not validating"][..]),
        (Validation::Sync, &[][..]),
    ] {
        let b = open(v, raised).unwrap();
        assert!(dropped(b).is_ok(), "{v:?} {raised:?}: teardown panicked");
    }
}

/// An allocation of exactly `maxStorageBufferRange` bytes fits (a kernel
/// can bind all of it); one byte more is refused as too large, before the
/// driver sees it. Skipped where the range is too large to allocate here.
#[test]
fn the_storage_range_is_the_largest_allocation() {
    let b = match VulkanBackend::open(0) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("no Vulkan device ({e}): skipped");
            return;
        }
    };
    let max = b.gpu.adapter().max_storage_buffer_range;
    if max > 1 << 30 || max % seam_kernels::BUFFER_ROUND != 0 {
        eprintln!("maxStorageBufferRange {max}: skipped");
        return;
    }
    let mut b = Direct::new(b);
    let buf = b
        .alloc(max as usize)
        .expect("an allocation of exactly maxStorageBufferRange");
    b.free(buf).unwrap();
    let e = b.alloc(max as usize + 1).expect_err("one byte more");
    assert!(
        matches!(e, seam::ErrorKind::TooLarge { .. }),
        "one byte more: {e}"
    );
}

/// The staging buffer is made once, at least 1 MiB, and reused while it is
/// large enough: a small transfer and one of exactly its size use the
/// first; only a larger one makes another, as large as it.
#[test]
fn the_staging_buffer_is_reused_while_large_enough() {
    let mut b = match VulkanBackend::open_staging(0) {
        Ok(b) => Direct::new(b),
        Err(e) => {
            eprintln!("no Vulkan device ({e}): skipped");
            return;
        }
    };
    const MIB: usize = 1 << 20;
    let buf = b.alloc(3 * MIB).unwrap();
    assert_eq!(b.staging_buffer(), (None, 0));
    b.write(buf, 0, &[1u8; 4096]).unwrap();
    assert_eq!(b.staging_buffer(), (Some(MIB as u64), 1), "a 4 KiB write");
    b.write(buf, 0, &vec![2u8; MIB]).unwrap();
    let mut out = vec![0u8; MIB];
    b.read(buf, 0, &mut out).unwrap();
    assert_eq!(b.staging_buffer(), (Some(MIB as u64), 1), "1 MiB each way");
    b.write(buf, 0, &vec![3u8; 2 * MIB]).unwrap();
    assert_eq!(
        b.staging_buffer(),
        (Some(2 * MIB as u64), 2),
        "a 2 MiB write"
    );
    b.free(buf).unwrap();
}
