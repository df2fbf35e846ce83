//! The raw recording commands behind `CommandBuffer`'s calls: the global
//! barrier, a dispatch (pipeline, descriptor set: its buffers and its
//! parameter block) and the
//! end of recording. Each is a `vkCmd*` on a command buffer in the
//! recording state. The two barriers' scopes are defined once, here, and
//! every barrier recorded is told to the barrier audit (`audit.rs`) with
//! the scope it was recorded with.

use super::*;
use crate::sys::audit::Scope;

/// The global barrier's scopes: every earlier compute or transfer write
/// made visible to every later compute or transfer access.
pub(super) fn global() -> Scope {
    let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
    Scope {
        src_stages: stages,
        dst_stages: stages,
        src_access: vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE,
        dst_access: vk::AccessFlags::SHADER_READ
            | vk::AccessFlags::SHADER_WRITE
            | vk::AccessFlags::TRANSFER_READ
            | vk::AccessFlags::TRANSFER_WRITE,
    }
}

/// [`global`] with indirect-argument reads in both scopes: what orders a
/// conditional body's gate before the indirect dispatches that read the
/// counts it wrote, and the next gate's write after those reads
/// (`indirect.rs`).
pub(super) fn global_indirect() -> Scope {
    let g = global();
    Scope {
        src_stages: g.src_stages | vk::PipelineStageFlags::DRAW_INDIRECT,
        dst_stages: g.dst_stages | vk::PipelineStageFlags::DRAW_INDIRECT,
        dst_access: g.dst_access | vk::AccessFlags::INDIRECT_COMMAND_READ,
        ..g
    }
}

/// The scopes of the barrier that ends a command buffer: every compute or
/// transfer write made visible to the host's reads.
pub(super) fn host() -> Scope {
    Scope {
        src_stages: vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
        dst_stages: vk::PipelineStageFlags::HOST,
        src_access: vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE,
        dst_access: vk::AccessFlags::HOST_READ,
    }
}

impl Inner {
    /// Record a pipeline barrier of `scope` with one global memory barrier,
    /// and tell the audit.
    pub(super) fn cmd_pipeline_barrier(&mut self, scope: &Scope) {
        debug_assert_eq!(self.state, State::Recording);
        if self.state != State::Recording {
            return;
        }
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(scope.src_access)
            .dst_access_mask(scope.dst_access)];
        self.audit.barrier(scope);
        // SAFETY: the command buffer is recording (checked), outside a
        // render pass.
        unsafe {
            self.shared.device.cmd_pipeline_barrier(
                self.cmd,
                scope.src_stages,
                scope.dst_stages,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
    }

    /// Record the global compute/transfer barrier (`CommandBuffer::barrier`).
    pub(super) fn cmd_barrier(&mut self) {
        self.cmd_pipeline_barrier(&global());
    }

    /// Record `d`: bind its pipeline and set (its parameters are in the
    /// block the set points at), dispatch its `groups` or, with `args`, the
    /// counts the device reads there (buffer, byte offset).
    pub(super) fn cmd_dispatch(&self, d: &Dispatch, args: Option<(vk::Buffer, u64)>) {
        debug_assert_eq!(self.state, State::Recording);
        if self.state != State::Recording {
            return;
        }
        let layout = &d.pipeline.0.layout;
        let dev = &self.shared.device;
        // SAFETY: the command buffer is recording (checked); pipeline,
        // layout and set are live (`d` and this command buffer hold them)
        // and compatible: the set was allocated with the pipeline's own set
        // layout, every binding written (`Dispatch`'s invariant); the group
        // counts are within limits; `args`, where given, is a live buffer
        // of INDIRECT_BUFFER usage with three words at the offset
        // (`Inner::check_indirect`), held by this command buffer.
        unsafe {
            dev.cmd_bind_pipeline(
                self.cmd,
                vk::PipelineBindPoint::COMPUTE,
                d.pipeline.0.pipeline,
            );
            dev.cmd_bind_descriptor_sets(
                self.cmd,
                vk::PipelineBindPoint::COMPUTE,
                layout.layout,
                0,
                &[d.set],
                &[],
            );
            match args {
                None => dev.cmd_dispatch(self.cmd, d.groups.0, d.groups.1, d.groups.2),
                Some((buffer, offset)) => dev.cmd_dispatch_indirect(self.cmd, buffer, offset),
            }
        }
    }

    /// Record the barrier that makes every write visible to the host, and
    /// end recording; refused where the audit finds a write the host would
    /// not see.
    pub(super) fn cmd_end(&mut self) -> Result<(), ErrorKind> {
        if self.state != State::Recording {
            return Err(ErrorKind::driver(
                "vkEndCommandBuffer",
                "the command buffer is not recording",
            ));
        }
        self.cmd_pipeline_barrier(&host());
        self.audit
            .end()
            .map_err(|h| ErrorKind::driver("vkEndCommandBuffer", h))?;
        let d = &self.shared.device;
        // SAFETY: the command buffer is recording (checked).
        unsafe { d.end_command_buffer(self.cmd) }.map_err(drv("vkEndCommandBuffer"))?;
        self.state = State::Executable;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{global, host};
    use crate::sys::audit::{Audit, Command};

    /// The barriers as recorded pass the audit's rules: after `global()`
    /// every access of either command follows every earlier write or read
    /// of one buffer, and `host()` shows every write to the host.
    #[test]
    fn the_recorded_barriers_order_every_dependent_pair() {
        let commands = [Command::Dispatch, Command::Copy];
        for earlier in commands {
            for later in commands {
                for (ew, lw) in [(true, false), (true, true), (false, true)] {
                    let mut a = Audit::default();
                    a.barrier(&global());
                    a.command(earlier, &[(1, ew)]).unwrap();
                    a.barrier(&global());
                    a.command(later, &[(1, lw)])
                        .unwrap_or_else(|h| panic!("{earlier:?} then {later:?}: {h}"));
                    a.barrier(&host());
                    a.end().unwrap();
                }
            }
        }
    }

    /// `global_indirect()` orders a gate's write before the indirect read
    /// of its counts and the next gate's write after that read; `global()`
    /// alone does neither (so a body's steps need the former).
    #[test]
    fn the_indirect_barrier_orders_gates_and_indirect_reads() {
        use super::global_indirect;
        const CTL: u64 = 7;
        for (scope, orders) in [(global_indirect(), true), (global(), false)] {
            let mut a = Audit::default();
            a.barrier(&global_indirect());
            a.indirect_args(CTL);
            a.command(Command::Dispatch, &[(CTL, true)]).unwrap();
            a.barrier(&scope);
            assert_eq!(
                a.command(Command::Indirect, &[(CTL, false)]).is_ok(),
                orders
            );
            let mut a = Audit::default();
            a.barrier(&global_indirect());
            a.command(Command::Indirect, &[(CTL, false)]).unwrap();
            a.barrier(&scope);
            assert_eq!(a.command(Command::Dispatch, &[(CTL, true)]).is_ok(), orders);
        }
    }
}
