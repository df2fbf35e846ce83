//! The queue's timeline through `sys::Gpu`: polls, waits and the bound on
//! pending submissions. Each test submits one long command buffer (an add
//! over 4 Mi words, long enough on any device to still be running while
//! the host submits a hundred short ones) and short ones behind it.

use super::*;

/// A long and a short reusable command buffer, each one `add` after a
/// barrier; `p` (256 words, 100 each) is the short one's destination,
/// and it adds 1 to it.
struct LongShort {
    r: Rig,
    big: RawBuffer,
    long: CommandBuffer,
    short: CommandBuffer,
    p: RawBuffer,
}

impl LongShort {
    fn open() -> Option<LongShort> {
        let mut r = Rig::open()?;
        const N: u32 = 1 << 22;
        let big = r.b.alloc(N as usize * 4).unwrap();
        let big_b = r.b.buffers.get(big).unwrap().clone();
        let long_launch = r.add_of_words(big, N);
        let short_launch = r.add_of(256);
        let [(_, one), (p, pb)] = [1, 100].map(|v| r.filled(v));
        let record = |r: &mut Rig, binds: &[(&Buffer, Access)], launch: (Immediates, _)| {
            let mut cmd = r.b.gpu.command_buffer().unwrap();
            cmd.begin(true).unwrap();
            cmd.barrier().unwrap();
            cmd.dispatch(&r.add, binds, &launch.0, launch.1).unwrap();
            cmd.end().unwrap();
            cmd
        };
        let long = record(&mut r, &add(&big_b, &big_b, &big_b), long_launch);
        let short = record(&mut r, &add(&pb, &one, &pb), short_launch);
        Some(LongShort {
            r,
            big,
            long,
            short,
            p,
        })
    }

    fn close(mut self) {
        self.r.b.gpu.wait_idle().unwrap();
        self.r.b.free(self.big).unwrap();
    }
}

/// A poll collects what completed (a submission stops being pending
/// without a wait), and waiting for a command buffer waits for it and
/// every earlier submission.
#[test]
fn polls_collect_completed_work_and_waits_cover_earlier_submissions() {
    let Some(mut q) = LongShort::open() else {
        return;
    };
    let gpu = &mut q.r.b.gpu;
    gpu.submit(&q.long).unwrap();
    gpu.submit(&q.short).unwrap();
    gpu.wait_for(&q.short).unwrap();
    assert!(!gpu.is_pending(&q.long), "waiting for the later one");
    assert!(!gpu.is_pending(&q.short), "waited for");
    assert_eq!(read(&mut q.r.b, q.p), words(101));
    // No wait: polls alone see the submission complete.
    let gpu = &mut q.r.b.gpu;
    gpu.submit(&q.long).unwrap();
    let start = std::time::Instant::now();
    while gpu.is_pending(&q.long) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "polled for 30 s: never collected"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
        gpu.poll().unwrap();
    }
    q.close();
}

/// At most `MAX_IN_FLIGHT` submissions are pending: behind the long one
/// (still running on lavapipe) the queue fills to the bound, each further
/// submit waits for the oldest, and the queue never grows past what it
/// reserved. Every
/// submission runs. Mutation (tried): `>=` → `>` → red.
#[test]
fn submissions_pending_at_once_are_bounded() {
    use crate::sys::MAX_IN_FLIGHT;
    let Some(mut q) = LongShort::open() else {
        return;
    };
    let gpu = &mut q.r.b.gpu;
    let (_, reserved) = gpu.pending();
    assert!(reserved >= MAX_IN_FLIGHT, "reserved {reserved}");
    gpu.submit(&q.long).unwrap();
    // Completed submissions are collected in order, so while the long one
    // is pending nothing behind it is: with it still running after
    // `MAX_IN_FLIGHT - 1` short ones, the queue is full. A device fast
    // enough to finish it sooner (not lavapipe) leaves the fill unchecked.
    let mut filled = false;
    for i in 1..=100 {
        gpu.submit(&q.short).unwrap();
        let (pending, capacity) = gpu.pending();
        assert!(pending <= MAX_IN_FLIGHT, "{pending} pending");
        assert_eq!(capacity, reserved, "the in-flight queue grew");
        if i == MAX_IN_FLIGHT - 1 && gpu.is_pending(&q.long) {
            assert_eq!(pending, MAX_IN_FLIGHT, "the long one pending");
            filled = true;
        }
    }
    if !filled {
        eprintln!("the long submission finished before the queue filled: fill not checked");
    }
    gpu.wait_for(&q.short).unwrap();
    assert_eq!(read(&mut q.r.b, q.p), words(200));
    q.close();
}
