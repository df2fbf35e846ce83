//! A capture's conditional bodies (C14) on wgpu: recorded around the
//! dispatches, then unrolled into gated indirect dispatches when the
//! capture ends (`crate::conditional` says how and why).

use super::WgpuBackend;
use crate::conditional::{unroll, Structure, Unrolled, GATE_WGSL};
use crate::replay::{Dispatch, Graph};
use seam::{Conditional, ErrorKind};
use std::sync::Arc;

/// What `conditional_support` reports.
pub(super) const HOW: &str = "each body unrolled (an IF once, a WHILE max_iterations times); \
     a one-invocation gate before each copy writes the workgroup counts of its indirect \
     dispatches on the device: the recorded counts while the condition holds, zeros after";

/// The most copies one body is unrolled into (its WHILE's bound times
/// those of the bodies around it): a larger bound is refused when the
/// body opens (`TooLarge`), the capture still usable.
pub(crate) const MAX_COPIES: u64 = 1 << 16;
/// The most steps (dispatches and gates) an unrolled graph holds: a larger
/// one is refused when the capture ends.
pub(crate) const MAX_STEPS: usize = 1 << 22;

/// What a capture has recorded: its dispatches in launch order and, where
/// it opened a body, the structure around them.
#[derive(Default)]
pub(crate) struct Recording {
    dispatches: Vec<Dispatch>,
    structure: Vec<Structure<wgpu::Buffer>>,
    /// For each body open, innermost last: the copies it is unrolled into.
    open: Vec<u64>,
    /// A body was opened: the graph is unrolled.
    bodies: bool,
}

impl Recording {
    pub(super) fn dispatch(&mut self, d: Dispatch) {
        self.structure
            .push(Structure::Dispatch(self.dispatches.len() as u32));
        self.dispatches.push(d);
    }
}

/// The gate's pipeline and bind group layout, made on first use.
pub(crate) struct Gate {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

impl WgpuBackend {
    pub(super) fn begin_body(&mut self, c: &Conditional) -> Result<(), ErrorKind> {
        let cond = self.buf(c.cond)?.buffer.clone();
        let rec = self.recording.as_mut().ok_or(ErrorKind::NotCapturing)?;
        let iterations = match c.kind {
            seam::ConditionalKind::If => 1,
            seam::ConditionalKind::While { max_iterations } => u64::from(max_iterations),
        };
        let copies = rec.open.last().copied().unwrap_or(1) * iterations;
        if copies > MAX_COPIES {
            return Err(ErrorKind::TooLarge {
                what: "conditional body",
                detail: format!(
                    "unrolled into {copies} copies (its bound times those around it); \
                     wgpu emulates bodies by unrolling them, at most {MAX_COPIES} copies"
                ),
            });
        }
        rec.structure
            .push(Structure::Begin(c.kind, cond, (c.byte_offset / 4) as u32));
        rec.open.push(copies);
        rec.bodies = true;
        Ok(())
    }

    pub(super) fn end_body(&mut self) -> Result<(), ErrorKind> {
        let rec = self.recording.as_mut().ok_or(ErrorKind::NotCapturing)?;
        rec.open.pop().ok_or(ErrorKind::NoOpenConditional)?;
        rec.structure.push(Structure::End);
        Ok(())
    }

    /// The graph a capture made: its dispatches as recorded or, with
    /// bodies, unrolled with their gates over a control buffer of its own.
    pub(super) fn graph(&mut self, rec: Recording) -> Result<Graph, ErrorKind> {
        let node_timed = self.recording_nodes;
        if !rec.bodies {
            return Ok(Graph::new(rec.dispatches, node_timed));
        }
        let (steps, latches, slots) = unroll(rec.structure)?;
        if steps.len() > MAX_STEPS {
            return Err(ErrorKind::TooLarge {
                what: "graph with conditional bodies",
                detail: format!(
                    "{} dispatches and gates unrolled; wgpu replays at most {MAX_STEPS}",
                    steps.len()
                ),
            });
        }
        // Latches, then per slot its recorded counts and the counts to use.
        let mut words = vec![0u32; latches as usize + 6 * slots.len()];
        for (s, &launch) in slots.iter().enumerate() {
            let g = rec.dispatches[launch as usize].groups;
            let at = latches as usize + 6 * s;
            words[at..at + 3].copy_from_slice(&[g.0, g.1, g.2]);
        }
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
        let (pipeline, layout) = {
            let g = self.gate()?;
            (g.pipeline.clone(), g.layout.clone())
        };
        let mut out = Vec::with_capacity(steps.len());
        let mut launch_of = Vec::with_capacity(steps.len());
        let mut groups: Vec<(wgpu::Buffer, wgpu::BindGroup)> = Vec::new();
        for step in steps {
            match step {
                Unrolled::Dispatch { index, slot } => {
                    let mut d = rec.dispatches[index as usize].clone();
                    if let Some(s) = slot {
                        let word = u64::from(latches) + 6 * u64::from(s) + 3;
                        d.indirect = Some((control.clone(), 4 * word));
                    }
                    out.push(d);
                    launch_of.push(Some(index));
                }
                Unrolled::Gate { cond, params } => {
                    // One bind group per condition buffer: every gate of a
                    // graph binds it with the same control buffer.
                    if let Some((_, g)) = groups.iter().find(|(b, _)| *b == cond) {
                        out.push(Dispatch {
                            pipeline: pipeline.clone(),
                            bind_group: g.clone(),
                            immediates: params.immediates(),
                            groups: (1, 1, 1),
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
                        immediates: params.immediates(),
                        groups: (1, 1, 1),
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

    /// The gate's objects, made the first time a graph has a body.
    fn gate(&mut self) -> Result<&Gate, ErrorKind> {
        if self.gate.is_none() {
            let gpu = &self.gpu;
            let storage = crate::kernels::storage_entry;
            let layout = gpu.checked("wgpu::Device::create_bind_group_layout", || {
                gpu.device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("seam gate"),
                        entries: &[storage(0, true), storage(1, false)],
                    })
            })?;
            let module = gpu.checked("wgpu::Device::create_shader_module", || {
                gpu.device
                    .create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some("seam gate"),
                        source: wgpu::ShaderSource::Wgsl(GATE_WGSL.into()),
                    })
            })?;
            let pipeline_layout = gpu.checked("wgpu::Device::create_pipeline_layout", || {
                gpu.device
                    .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: Some("seam gate"),
                        bind_group_layouts: &[Some(&layout)],
                        immediate_size: crate::IMMEDIATE_BYTES,
                    })
            })?;
            let pipeline = gpu.checked("wgpu::Device::create_compute_pipeline", || {
                gpu.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some("seam gate"),
                        layout: Some(&pipeline_layout),
                        module: &module,
                        entry_point: Some("gate"),
                        compilation_options: Default::default(),
                        cache: None,
                    })
            })?;
            self.gate = Some(Gate { pipeline, layout });
        }
        Ok(self.gate.as_ref().expect("made above"))
    }
}
