//! A probe, not a bench arm: what wgpu itself costs to submit and wait for
//! one dispatch, without seam. `seam-bench probe wgpu-submit`.
//!
//! A wgpu replay is encoded anew every time (wgpu has no reusable command
//! buffer for compute), so a replay of one launch costs at least wgpu's
//! own encoder, pass, `finish` and `Queue::submit`, then its wait. Here a
//! one-element dispatch (`x = 0.999 x + 0.001`, one bind group, the
//! pipeline and bind group made once) is encoded, submitted and waited
//! for, `REPLAYS` times per round over `ROUNDS` rounds, the two waits
//! interleaved round by round: polling with a zero timeout (seam's wgpu
//! backend polls for 50 µs before it blocks) and blocking at once in
//! `Device::poll`. One line per wait: the medians over the rounds of the
//! host time to encode and submit and of encode-to-done, in µs, with the
//! rounds' range.

use std::time::{Duration, Instant};

const REPLAYS: usize = 200;
const ROUNDS: usize = 9;

const SHADER: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&x) {
        x[id.x] = x[id.x] * 0.999 + 0.001;
    }
}
";

/// The median of `v` (sorted in place) and its range.
fn median(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// `seam-bench probe wgpu-submit`.
pub fn run(out: &mut dyn FnMut(String)) -> Result<(), String> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|e| format!("wgpu::Instance::request_adapter: {e}"))?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("probe"),
        ..Default::default()
    }))
    .map_err(|e| format!("wgpu::Adapter::request_device: {e}"))?;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("scale_add"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("scale_add"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let x = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("x"),
        size: 4,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&x, 0, &1.0f32.to_le_bytes());
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: x.as_entire_binding(),
        }],
    });
    let submit = || {
        let mut encoder = device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        queue.submit([encoder.finish()])
    };
    let wait = |index: wgpu::SubmissionIndex, spin: bool| -> Result<(), String> {
        let timeout = if spin {
            Duration::ZERO
        } else {
            Duration::from_secs(20)
        };
        loop {
            let poll = wgpu::PollType::Wait {
                submission_index: Some(index.clone()),
                timeout: Some(timeout),
            };
            match device.poll(poll) {
                Ok(_) => return Ok(()),
                Err(wgpu::PollError::Timeout) if spin => continue,
                Err(e) => return Err(format!("wgpu::Device::poll: {e}")),
            }
        }
    };
    out(format!(
        "wgpu-submit,{},{ROUNDS} rounds of {REPLAYS} one-dispatch submissions",
        adapter.get_info().name
    ));
    // [spin, block] × (submit, done) medians per round
    let mut per: [[Vec<f64>; 2]; 2] = Default::default();
    for _ in 0..ROUNDS {
        for (k, spin) in [true, false].into_iter().enumerate() {
            for _ in 0..10 {
                wait(submit(), spin)?;
            }
            let (mut s, mut e) = (Vec::new(), Vec::new());
            for _ in 0..REPLAYS {
                let t = Instant::now();
                let index = submit();
                s.push(t.elapsed().as_secs_f64() * 1e6);
                wait(index, spin)?;
                e.push(t.elapsed().as_secs_f64() * 1e6);
            }
            per[k][0].push(median(&mut s).0);
            per[k][1].push(median(&mut e).0);
        }
    }
    for (k, name) in ["polling", "blocking"].into_iter().enumerate() {
        let (s, s0, s1) = median(&mut per[k][0]);
        let (e, e0, e1) = median(&mut per[k][1]);
        out(format!(
            "wgpu-submit,{name},encode + submit {s:.2} us ({s0:.2}-{s1:.2}),encode to done {e:.2} us ({e0:.2}-{e1:.2})"
        ));
    }
    Ok(())
}
