//! The raw recording commands behind `CommandBuffer`'s calls: the global
//! barrier, a dispatch (pipeline, descriptor set, push constants) and the
//! end of recording. Each is a `vkCmd*` on a command buffer in the
//! recording state.

use super::*;

impl Inner {
    /// Record the global compute/transfer barrier (`CommandBuffer::barrier`).
    pub(super) fn cmd_barrier(&self) {
        debug_assert_eq!(self.state, State::Recording);
        let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(
                vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE
                    | vk::AccessFlags::TRANSFER_READ
                    | vk::AccessFlags::TRANSFER_WRITE,
            )];
        if self.state != State::Recording {
            return;
        }
        // SAFETY: the command buffer is recording (checked), outside a
        // render pass.
        unsafe {
            self.shared.device.cmd_pipeline_barrier(
                self.cmd,
                stages,
                stages,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
    }

    /// Record `d`: bind its pipeline and set, push its parameters, dispatch.
    pub(super) fn cmd_dispatch(&self, d: &Dispatch) {
        debug_assert_eq!(self.state, State::Recording);
        if self.state != State::Recording {
            return;
        }
        let layout = &d.pipeline.0.layout;
        let dev = &self.shared.device;
        // SAFETY: the command buffer is recording (checked); pipeline,
        // layout and set are live (`d` and this command buffer hold them)
        // and compatible: the set was allocated with the pipeline's own set
        // layout, every binding written (`Dispatch`'s invariant); the push
        // range matches the layout's; the group counts are within limits.
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
            dev.cmd_push_constants(
                self.cmd,
                layout.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &d.params,
            );
            dev.cmd_dispatch(self.cmd, d.groups.0, d.groups.1, d.groups.2);
        }
    }

    /// Record the barrier that makes every write visible to the host, and
    /// end recording.
    pub(super) fn cmd_end(&mut self) -> Result<(), ErrorKind> {
        if self.state != State::Recording {
            return Err(ErrorKind::driver(
                "vkEndCommandBuffer",
                "the command buffer is not recording",
            ));
        }
        let d = &self.shared.device;
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)];
        // SAFETY: the command buffer is recording (checked), outside a
        // render pass.
        unsafe {
            d.cmd_pipeline_barrier(
                self.cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
        // SAFETY: the command buffer is recording (checked).
        unsafe { d.end_command_buffer(self.cmd) }.map_err(drv("vkEndCommandBuffer"))?;
        self.state = State::Executable;
        Ok(())
    }
}
