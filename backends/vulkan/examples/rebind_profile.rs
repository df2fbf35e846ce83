//! A profile of C13 on Vulkan: the benchmark's chain of N = 1000
//! dependent in-place `scale_add` dispatches over one f32 element, captured,
//! then `REBINDS` (default 200) rebinds of its buffer x ↔ y, each followed
//! by a replay and a synchronize (no replay is pending at the update, as in
//! the benchmark). Meant for `valgrind --tool=callgrind
//! --toggle-collect='*Device::rebind*'`: only the rebinds are counted.
//!
//! `cargo run --release -p seam-vulkan --example rebind_profile [N] [REBINDS]`

use seam::{ops, Change, Device, GraphRef};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(1000, |a| a.parse().expect("N"));
    let rebinds: usize = args.next().map_or(200, |a| a.parse().expect("REBINDS"));
    let backend = seam_vulkan::VulkanBackend::open(0).expect("vulkan:0");
    let in_place = backend.rebind_in_place();
    let dev = Device::new(Box::new(backend));
    let x = dev.buffer_from(&[1.0f32]).unwrap();
    let y = dev.buffer_from(&[1.0f32]).unwrap();
    let cap = dev.capture().unwrap();
    for _ in 0..n {
        dev.launch(&ops::scale_add(x.id(), x.id(), 1, 0.999, 0.001))
            .unwrap();
    }
    let g = cap.end_graph().unwrap();
    let target = GraphRef::Handle(g.id());
    g.replay().unwrap();
    dev.synchronize().unwrap();
    let mut cur = (x.id(), y.id());
    let t = std::time::Instant::now();
    let mut in_rebind = std::time::Duration::ZERO;
    for _ in 0..rebinds {
        let r = std::time::Instant::now();
        dev.update(target, &Change::rebinds(&[cur])).unwrap();
        in_rebind += r.elapsed();
        cur = (cur.1, cur.0);
        g.replay().unwrap();
        dev.synchronize().unwrap();
    }
    let total = t.elapsed();
    println!(
        "{n} dispatches, {rebinds} rebinds (in place: {in_place:?}): rebind {:.1} µs each, \
         rebind + replay + synchronize {:.1} µs",
        in_rebind.as_secs_f64() * 1e6 / rebinds as f64,
        total.as_secs_f64() * 1e6 / rebinds as f64
    );
}
