//! A capture's conditional bodies (C14) on Metal, emulated as
//! `seam_kernels::conditional` describes (as on Vulkan and wgpu): the
//! capture's launches and the structure around them are kept; when it ends
//! with a body, each body is unrolled into steps encoded at every replay,
//! each copy's dispatches as `dispatchThreadgroupsWithIndirectBuffer` over
//! the graph's control buffer, whose counts the gate before the copy
//! writes. The serial compute encoder's hazard tracking orders each gate
//! after what wrote the condition and each indirect read after its gate.
//! A graph with bodies is not an indirect command buffer: an update
//! records it anew (core). Type-checked; never run on an Apple GPU.

use crate::backend::{MetalBackend, Recorded};
use crate::dispatch;
use crate::sys::{self, Buffer};
use seam::{Conditional, DType, ErrorKind, Kernel, OpKind};
use seam_kernels::conditional::{
    control_words, counts_word, gate_groups, unroll, Recorder, Unrolled, GATE, MAX_STEPS,
};
use std::sync::Arc;

/// What a capture has recorded: its launches in order and, where it opened
/// a body, the structure around them.
#[derive(Default)]
pub(crate) struct Capture {
    pub(crate) launches: Vec<Recorded>,
    bodies: Recorder<Arc<Buffer>>,
}

impl Capture {
    pub(crate) fn push(&mut self, rec: Recorded) {
        self.bodies.launch();
        self.launches.push(rec);
    }

    /// Whether it opened a body (then the graph is unrolled).
    pub(crate) fn has_bodies(&self) -> bool {
        self.bodies.has_bodies()
    }
}

/// One step of an unrolled graph.
pub(crate) enum Step {
    /// A gate, or a launch outside every body.
    Direct(Recorded),
    /// A launch inside a body: its threadgroup counts at this control word.
    Indirect(Recorded, u64),
}

impl MetalBackend {
    pub(crate) fn begin_body(&mut self, c: &Conditional) -> Result<(), ErrorKind> {
        let cond = self.buffer(c.cond)?;
        let capture = self.capture.as_mut().ok_or(ErrorKind::NotCapturing)?;
        capture
            .bodies
            .open(c.kind, cond, (c.byte_offset / 4) as u32)
    }

    pub(crate) fn end_body(&mut self) -> Result<(), ErrorKind> {
        let capture = self.capture.as_mut().ok_or(ErrorKind::NotCapturing)?;
        capture.bodies.close()
    }

    /// A capture with bodies as its steps and control buffer.
    pub(crate) fn unrolled(
        &mut self,
        mut capture: Capture,
    ) -> Result<(Vec<Step>, Arc<Buffer>), ErrorKind> {
        let (steps, latches, slots) = unroll(capture.bodies.take(), MAX_STEPS)?;
        let words = control_words(latches, &slots, |l| capture.launches[l as usize].groups);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let size = bytes
            .len()
            .next_multiple_of(seam_kernels::BUFFER_ROUND as usize);
        let control = Arc::new(sys::pool(|| self.device.new_buffer(size))?);
        control.write(0, &bytes)?;
        let gate = self.kernels.get(
            &self.device,
            self.native,
            OpKind::User(Kernel::new(&GATE)),
            DType::U32,
        )?;
        let mut out = Vec::with_capacity(steps.len());
        for step in steps {
            out.push(match step {
                Unrolled::Gate { cond, gate: g } => {
                    let lens = [cond.len(), control.len()];
                    Step::Direct(Recorded {
                        sizes: dispatch::sizes(&gate.sizes, &lens),
                        groups: {
                            let (x, y, z) = gate_groups(&g);
                            [x, y, z]
                        },
                        kernel: gate.clone(),
                        buffers: vec![cond, control.clone()],
                        params: g.block(),
                    })
                }
                Unrolled::Dispatch { index, slot } => {
                    let rec = capture.launches[index as usize].clone();
                    match slot {
                        Some(s) => Step::Indirect(rec, 4 * counts_word(latches, s)),
                        None => Step::Direct(rec),
                    }
                }
            });
        }
        Ok((out, control))
    }
}
