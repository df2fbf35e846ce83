//! A capture's conditional bodies (C14) on wgpu: recorded around the
//! dispatches, then unrolled into gated indirect dispatches when the
//! capture ends (`seam_kernels::conditional` says how and why).

use super::WgpuBackend;
use crate::replay::{Dispatch, Graph};
use seam::{Conditional, DType, ErrorKind, Kernel, OpKind};
use seam_kernels::conditional::{
    control_words, counts_word, gate_groups, unroll, Recorder, Unrolled, GATE, MAX_STEPS,
};
use std::sync::Arc;

/// What a capture has recorded: its dispatches in launch order and, where
/// it opened a body, the structure around them.
#[derive(Default)]
pub(crate) struct Recording {
    dispatches: Vec<Dispatch>,
    bodies: Recorder<wgpu::Buffer>,
}

impl Recording {
    pub(super) fn dispatch(&mut self, d: Dispatch) {
        self.bodies.launch();
        self.dispatches.push(d);
    }
}

impl WgpuBackend {
    pub(super) fn begin_body(&mut self, c: &Conditional) -> Result<(), ErrorKind> {
        let cond = self.buf(c.cond)?.buffer.clone();
        let rec = self.recording.as_mut().ok_or(ErrorKind::NotCapturing)?;
        rec.bodies.open(c.kind, cond, (c.byte_offset / 4) as u32)
    }

    pub(super) fn end_body(&mut self) -> Result<(), ErrorKind> {
        let rec = self.recording.as_mut().ok_or(ErrorKind::NotCapturing)?;
        rec.bodies.close()
    }

    /// The graph a capture made: its dispatches as recorded or, with
    /// bodies, unrolled with their gates over a control buffer of its own.
    pub(super) fn graph(&mut self, mut rec: Recording) -> Result<Graph, ErrorKind> {
        let node_timed = self.recording_nodes;
        if !rec.bodies.has_bodies() {
            return Ok(Graph::new(rec.dispatches, node_timed));
        }
        let (steps, latches, slots) = unroll(rec.bodies.take(), MAX_STEPS)?;
        let words = control_words(latches, &slots, |launch| {
            let g = rec.dispatches[launch as usize].groups;
            [g.0, g.1, g.2]
        });
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let control = self.gpu.checked("wgpu::Device::create_buffer", || {
            self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("seam conditional control"),
                size: bytes.len() as u64,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::INDIRECT
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        self.gpu.checked("wgpu::Queue::write_buffer", || {
            self.gpu.queue.write_buffer(&control, 0, &bytes)
        })?;
        // The gate, made by the user-kernel path like any seam kernel.
        let gate = OpKind::User(Kernel::new(&GATE));
        let pipeline = self.kernels.pipeline(&self.gpu, gate, DType::U32)?;
        let layout = self.kernels.op(&self.gpu, gate)?.bind_layout.clone();
        let mut out = Vec::with_capacity(steps.len());
        let mut launch_of = Vec::with_capacity(steps.len());
        let mut groups: Vec<(wgpu::Buffer, wgpu::BindGroup)> = Vec::new();
        for step in steps {
            match step {
                Unrolled::Dispatch { index, slot } => {
                    let mut d = rec.dispatches[index as usize].clone();
                    if let Some(s) = slot {
                        let word = counts_word(latches, s);
                        d.indirect = Some((control.clone(), 4 * word));
                    }
                    out.push(d);
                    launch_of.push(Some(index));
                }
                Unrolled::Gate { cond, gate } => {
                    // One bind group per condition buffer: every gate of a
                    // graph binds it with the same control buffer.
                    if let Some((_, g)) = groups.iter().find(|(b, _)| *b == cond) {
                        out.push(Dispatch {
                            pipeline: pipeline.clone(),
                            bind_group: g.clone(),
                            immediates: gate.block(),
                            groups: gate_groups(&gate),
                            indirect: None,
                        });
                        launch_of.push(None);
                        continue;
                    }
                    let bind_group = self.gpu.checked("wgpu::Device::create_bind_group", || {
                        self.gpu
                            .device
                            .create_bind_group(&wgpu::BindGroupDescriptor {
                                label: Some("seam gate"),
                                layout: &layout,
                                entries: &[
                                    wgpu::BindGroupEntry {
                                        binding: 0,
                                        resource: cond.as_entire_binding(),
                                    },
                                    wgpu::BindGroupEntry {
                                        binding: 1,
                                        resource: control.as_entire_binding(),
                                    },
                                ],
                            })
                    })?;
                    groups.push((cond, bind_group.clone()));
                    out.push(Dispatch {
                        pipeline: pipeline.clone(),
                        bind_group,
                        immediates: gate.block(),
                        groups: gate_groups(&gate),
                        indirect: None,
                    });
                    launch_of.push(None);
                }
            }
        }
        let mut graph = Graph::new(out, node_timed);
        graph.launch_of = Some(Arc::from(launch_of));
        Ok(graph)
    }
}
