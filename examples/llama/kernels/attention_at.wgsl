// attention_at_f32: attend.wgsl's attention over positions 0..=pos, pos
// read on the device from the decode state (binding 5: token, pos, …; see
// on_device.rs), at most d2 (the cache's positions).
@group(0) @binding(5) var<storage, read> state: array<u32>;

@compute @workgroup_size(64)
fn attention_at_f32(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) li: vec3<u32>) {
    attend(wg.x, li.x, min(state[p.o5 + 1u] + 1u, p.d2));
}
