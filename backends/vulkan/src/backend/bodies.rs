//! A capture's conditional bodies (C14) on Vulkan, emulated as
//! `seam_kernels::conditional` describes: Vulkan has no loop or
//! conditional on the device, but `vkCmdDispatchIndirect` reads its
//! workgroup counts from a buffer when the device reaches it. The launches
//! of an outermost body (and of the bodies in it) are held until it
//! closes; then it is unrolled into the command buffer: a
//! `vkCmdUpdateBuffer` of the control buffer's starting words, each gate
//! and the first dispatch after it behind a barrier whose scopes hold
//! indirect-argument reads on both sides
//! (`sys::CommandBuffer::barrier_indirect`), the other dispatches of a copy
//! barriered only where they touch a buffer as an earlier one did (as
//! every capture's are), all of which the barrier audit checks. A graph with bodies is recorded anew by an
//! update (core's re-record), never patched.

use super::VulkanBackend;
use crate::sys::Pipeline;
use seam::ops::Access;
use seam::{Conditional, DType, ErrorKind, Kernel, Launch, OpKind, RawBuffer};
use seam_kernels::conditional::{
    control_words, counts_word, gate_groups, unroll, Recorder, Structure, Unrolled, GATE, MAX_STEPS,
};

/// A launch inside a body, held until its outermost body closes.
struct Held {
    launch: Launch,
    pipeline: Pipeline,
    groups: (u32, u32, u32),
    /// Its index in the capture.
    index: u32,
}

/// The launches of the capture's open bodies and the structure around them.
#[derive(Default)]
pub(super) struct Bodies {
    recorder: Recorder<RawBuffer>,
    held: Vec<Held>,
    /// Launches captured so far (a launch's index in its graph).
    pub(super) launches: u32,
    /// Why an outermost body could not be recorded (more steps than
    /// `MAX_STEPS`): the capture's end is refused with it, as wgpu's is,
    /// and the body is closed on both sides meanwhile.
    pub(super) failed: Option<ErrorKind>,
}

impl Bodies {
    /// Whether a launch now goes into a body.
    pub(super) fn is_open(&self) -> bool {
        self.recorder.is_open()
    }

    /// Hold `launch` for the body it is in.
    pub(super) fn hold(&mut self, launch: &Launch, pipeline: Pipeline, groups: (u32, u32, u32)) {
        self.recorder.launch();
        self.held.push(Held {
            launch: launch.clone(),
            pipeline,
            groups,
            index: self.launches,
        });
        self.launches += 1;
    }
}

impl VulkanBackend {
    pub(super) fn begin_body(&mut self, c: &Conditional) -> Result<(), ErrorKind> {
        if self.capture.is_none() {
            return Err(ErrorKind::NotCapturing);
        }
        self.buffer(c.cond)?;
        self.bodies
            .recorder
            .open(c.kind, c.cond, (c.byte_offset / 4) as u32)
    }

    pub(super) fn end_body(&mut self) -> Result<(), ErrorKind> {
        self.bodies.recorder.close()?;
        if self.bodies.is_open() {
            return Ok(());
        }
        let structure = self.bodies.recorder.take();
        let held = std::mem::take(&mut self.bodies.held);
        if let Err(e) = self.record_bodies(structure, held) {
            self.bodies.failed.get_or_insert(e);
        }
        Ok(())
    }

    /// Record an outermost body, unrolled, into the capture.
    fn record_bodies(
        &mut self,
        structure: Vec<Structure<RawBuffer>>,
        held: Vec<Held>,
    ) -> Result<(), ErrorKind> {
        let (steps, latches, slots) = unroll(structure, MAX_STEPS)?;
        let words = control_words(latches, &slots, |l| {
            let g = held[l as usize].groups;
            [g.0, g.1, g.2]
        });
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let size =
            (bytes.len() as u64).div_ceil(seam_kernels::BUFFER_ROUND) * seam_kernels::BUFFER_ROUND;
        let control = self
            .gpu
            .create_control_buffer(size, Self::buffer_memory(self.host_visible))?;
        // The gate, made by the user-kernel path like any seam kernel.
        let gate = self.pipeline(OpKind::User(Kernel::new(&GATE)), DType::U32)?;
        // The words are written on the queue at every replay, after the
        // replays before it (which read them as indirect arguments) by the
        // barrier.
        let rec = self.capture.as_mut().ok_or(ErrorKind::NotCapturing)?;
        rec.barrier_indirect()?;
        rec.update_buffer(&control, 0, &bytes)?;
        // Where barriers go: before every step where every dispatch has one
        // (`SEAM_VULKAN_BARRIERS=every`, a node-timed graph); else before
        // each gate (it reads a condition the copy before wrote, and writes
        // counts the copy before read) and before the first dispatch after
        // it (which reads those counts), and between a copy's dispatches
        // only where they touch a buffer as the capture's dispatches do.
        let every = self.every_barrier || self.capture_nodes.is_some();
        let mut after_gate = false;
        for step in steps {
            let VulkanBackend {
                buffers, capture, ..
            } = &mut *self;
            let rec = capture.as_mut().ok_or(ErrorKind::NotCapturing)?;
            let launch = match step {
                Unrolled::Gate { cond, gate: g } => {
                    rec.barrier_indirect()?;
                    after_gate = true;
                    let bindings = [
                        (buffers.get(cond)?, Access::Read),
                        (&control, Access::Write),
                    ];
                    rec.dispatch(&gate, &bindings, &g.block(), gate_groups(&g))?;
                    None
                }
                Unrolled::Dispatch { index, slot } => {
                    let Held {
                        launch,
                        pipeline,
                        groups,
                        index,
                    } = &held[index as usize];
                    let sig = launch.op.signature();
                    let bindings = launch
                        .buffers
                        .iter()
                        .zip(sig)
                        .map(|(v, s)| Ok((buffers.get(v.buffer)?, s.access)))
                        .collect::<Result<Vec<_>, ErrorKind>>()?;
                    let params = launch.immediates();
                    if every || std::mem::take(&mut after_gate) {
                        rec.barrier_indirect()?;
                    } else {
                        rec.barrier_for(&bindings)?;
                    }
                    match slot {
                        Some(s) => rec.dispatch_indirect(
                            pipeline,
                            &bindings,
                            &params,
                            &control,
                            4 * counts_word(latches, s),
                        )?,
                        None => rec.dispatch(pipeline, &bindings, &params, *groups)?,
                    }
                    Some(*index)
                }
            };
            // A node-timed graph's span of each step: a gate's is no
            // launch's (`nodes.rs`).
            self.node_stamp(launch)?;
        }
        Ok(())
    }
}
