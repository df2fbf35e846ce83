//! Recording through `sys::CommandBuffer`: the checks of a dispatch and a
//! copy, a fresh barrier audit per recording, and descriptor pools.

use super::*;

/// A copy is refused, saying why and recording nothing, when a buffer is
/// of another device, the range is empty or past either buffer's end, or
/// source and destination overlap in one buffer; ranges that only touch,
/// in one buffer or across two, are copied.
#[test]
fn copies_are_checked_and_copy_exactly_their_range() {
    let Some(mut r) = Rig::open() else { return };
    let (p, pb) = r.filled(7);
    let (q, qb) = r.filled(0);
    // A second device opened on the same GPU.
    let mut elsewhere = Rig::open().unwrap();
    let (_, foreign) = elsewhere.filled(0);
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    cmd.begin(false).unwrap();
    cmd.barrier().unwrap();
    for (what, src, so, dst, dof, size, says) in [
        ("foreign source", &foreign, 0, &qb, 0, 4, "another device"),
        (
            "foreign destination",
            &pb,
            0,
            &foreign,
            0,
            4,
            "another device",
        ),
        ("empty", &pb, 0, &qb, 0, 0, "0 bytes"),
        ("past the source", &pb, 1020, &qb, 0, 8, "bytes from 1020"),
        ("past the destination", &pb, 0, &qb, 1020, 8, "to 1020"),
        ("overlap ahead", &pb, 0, &pb, 4, 8, "overlap"),
        ("overlap behind", &pb, 4, &pb, 0, 8, "overlap"),
    ] {
        let e = cmd.copy(src, so, dst, dof, size).expect_err(what);
        assert!(e.to_string().contains(says), "{what}: {e}");
    }
    // Touching ranges: p[0..512) → p[512..1024), then p[512..1024) →
    // q[512..1024) (same offsets, two buffers) after a barrier, then
    // p[4..8) → p[0..4) (the source right after the destination).
    let mut bytes = words(7);
    bytes[..4].copy_from_slice(&9u32.to_le_bytes());
    r.b.write(p, 0, &bytes[..512]).unwrap();
    cmd.copy(&pb, 0, &pb, 512, 512).unwrap();
    cmd.barrier().unwrap();
    cmd.copy(&pb, 512, &qb, 512, 512).unwrap();
    cmd.barrier().unwrap();
    cmd.copy(&pb, 4, &pb, 0, 4).unwrap();
    cmd.end().unwrap();
    run(&mut r.b, &cmd);
    let got_p = read(&mut r.b, p);
    let got_q = read(&mut r.b, q);
    assert_eq!(&got_p[..4], &7u32.to_le_bytes(), "p[4..8) → p[0..4)");
    assert_eq!(&got_p[512..516], &9u32.to_le_bytes(), "p[0..4) → p[512..)");
    assert_eq!(&got_q[512..516], &9u32.to_le_bytes(), "p[512..) → q[512..)");
    assert_eq!(&got_q[..512], &[0u8; 512][..], "q before 512 untouched");
}

/// Each dispatch's descriptor set comes from the command buffer's pools of
/// 16, 32, 64, … sets: the next pool is made when one holds its capacity,
/// whatever the driver would still hand out (lavapipe's pools never run
/// out), and a command buffer begun again reuses the pools it made.
#[test]
fn descriptor_pools_fill_to_capacity_and_are_reused() {
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let [(_, one), (p, pb)] = [1, 100].map(|v| r.filled(v));
    let to_p = add(&one, &one, &pb);
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    for round in 0..2 {
        cmd.begin(true).unwrap();
        let mut pools = Vec::new();
        for _ in 0..49 {
            cmd.barrier().unwrap();
            cmd.dispatch(&r.add, &to_p, &params, groups).unwrap();
            pools.push(cmd.descriptor_pools());
        }
        cmd.end().unwrap();
        let at = |k: usize| pools[k - 1];
        let want = if round == 0 { [1, 1, 2, 2, 3] } else { [3; 5] };
        assert_eq!(
            [at(1), at(16), at(17), at(48), at(49)],
            want,
            "round {round}: pools after dispatches 1, 16, 17, 48, 49"
        );
        run(&mut r.b, &cmd);
        assert_eq!(read(&mut r.b, p), words(2), "round {round}");
    }
}

/// A dispatch is refused, recording nothing, where its pipeline or a
/// buffer is of another device or its workgroups pass
/// maxComputeWorkGroupCount on any axis (exactly the limit is recorded);
/// and a command buffer begun again is audited afresh: its first dispatch
/// before any barrier is refused, as in a new one.
#[test]
fn dispatches_are_checked_and_each_recording_audited_afresh() {
    let Some(mut r) = Rig::open() else { return };
    let (params, groups) = r.add_of(256);
    let [(_, one), (_, pb), (_, qb)] = [1, 100, 200].map(|v| r.filled(v));
    let (to_p, to_q) = (add(&one, &one, &pb), add(&one, &one, &qb));
    // A second device opened on the same GPU.
    let mut elsewhere = Rig::open().unwrap();
    let (_, foreign) = elsewhere.filled(0);
    let to_foreign = add(&one, &one, &foreign);
    let mut cmd = r.b.gpu.command_buffer().unwrap();
    cmd.begin(true).unwrap();
    cmd.barrier().unwrap();
    let e = cmd
        .dispatch(&r.add, &to_foreign, &params, groups)
        .unwrap_err();
    assert!(
        e.to_string().contains("another device"),
        "a foreign buffer: {e}"
    );
    let e = cmd
        .dispatch(&elsewhere.add, &to_p, &params, groups)
        .unwrap_err();
    assert!(
        e.to_string().contains("another device"),
        "a foreign pipeline: {e}"
    );
    let max = r.b.gpu.adapter().max_group_count;
    for axis in 0..3 {
        let mut g = [1u32; 3];
        g[axis] = max[axis] + 1;
        let e = cmd
            .dispatch(&r.add, &to_p, &params, (g[0], g[1], g[2]))
            .unwrap_err();
        assert!(
            e.to_string().contains("maxComputeWorkGroupCount"),
            "axis {axis}: {e}"
        );
    }
    assert_eq!(cmd.dispatches(), 0, "refused dispatches are not recorded");
    cmd.dispatch(&r.add, &to_p, &params, (max[0], max[1], max[2]))
        .expect("exactly maxComputeWorkGroupCount");
    cmd.end().unwrap();
    // Begun again: no barrier yet, so a dispatch is refused (one that
    // touches nothing the last recording's did since its barrier), as the
    // first command.
    cmd.begin(true).unwrap();
    let e = cmd.dispatch(&r.add, &to_q, &params, groups).unwrap_err();
    let e = e.to_string();
    assert!(
        e.contains("dispatch #1") && e.contains("before any barrier"),
        "{e}"
    );
    cmd.barrier().unwrap();
    cmd.dispatch(&r.add, &to_p, &params, groups).unwrap();
    cmd.end().unwrap();
    drop(cmd);
}
