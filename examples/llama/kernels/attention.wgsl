// attention_f32: attend.wgsl's attention over positions 0..d2.
@compute @workgroup_size(64)
fn attention_f32(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) li: vec3<u32>) {
    attend(wg.x, li.x, p.d2);
}
