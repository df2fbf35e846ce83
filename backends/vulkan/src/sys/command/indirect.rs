//! The commands a graph's conditional bodies add (C14, emulated as
//! `seam_kernels::conditional` describes): a dispatch whose workgroup
//! counts the device reads from a control buffer, the barrier that orders
//! such a read after the writes before it, and the command that writes the
//! control buffer's starting words. Each is audited like any command; a
//! command buffer holding them is recorded anew rather than patched by an
//! update (each is logged as `Recorded::Other`).

use super::record::global_indirect;
use super::*;

/// Where a dispatch's workgroup counts come from.
pub(super) enum Counts<'a> {
    Direct((u32, u32, u32)),
    /// Three `u32`s at this byte offset of this buffer, read by the device
    /// when it reaches the dispatch.
    Indirect(&'a Buffer, u64),
}

impl Counts<'_> {
    /// The Vulkan command it records, for errors.
    pub(super) fn call(&self) -> &'static str {
        match self {
            Counts::Direct(_) => "vkCmdDispatch",
            Counts::Indirect(..) => "vkCmdDispatchIndirect",
        }
    }
}

/// `vkCmdUpdateBuffer`'s most bytes per command.
const UPDATE_MAX: usize = 65_536;

impl Inner {
    /// Whether `buffer` can hold indirect arguments at `offset`: of this
    /// device, made with INDIRECT_BUFFER usage, the offset a multiple of 4
    /// and the three words inside it.
    pub(super) fn check_indirect(&self, buffer: &Buffer, offset: u64) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdDispatchIndirect";
        if !buffer.of(&self.shared) {
            return Err(ErrorKind::driver(CALL, "a buffer of another device"));
        }
        if !buffer.indirect() {
            return Err(ErrorKind::driver(
                CALL,
                "the buffer was not made with INDIRECT_BUFFER usage",
            ));
        }
        if !offset.is_multiple_of(4) || offset.checked_add(12).is_none_or(|end| end > buffer.size())
        {
            return Err(ErrorKind::driver(
                CALL,
                format!(
                    "arguments at byte {offset} of a {}-byte buffer",
                    buffer.size()
                ),
            ));
        }
        Ok(())
    }
}

impl CommandBuffer {
    /// Bind `pipeline`, `bindings` and `params` as [`Self::dispatch`] does,
    /// and dispatch the workgroup counts the device finds at byte `offset`
    /// of `args` (three `u32`s; zeros run nothing) when it reaches the
    /// command. Whatever wrote them must be ordered before it by
    /// [`Self::barrier_indirect`]; the writer must keep each count within
    /// maxComputeWorkGroupCount.
    pub fn dispatch_indirect(
        &mut self,
        pipeline: &Pipeline,
        bindings: &[(&Buffer, seam::ops::Access)],
        params: &[u8; PARAM_BYTES as usize],
        args: &Buffer,
        offset: u64,
    ) -> Result<(), ErrorKind> {
        self.record_dispatch(pipeline, bindings, params, Counts::Indirect(args, offset))
    }

    /// The global barrier with indirect-argument reads in both scopes:
    /// every earlier compute or transfer write is visible to every later
    /// compute, transfer or indirect-argument read, and every earlier
    /// indirect-argument read comes before every later write.
    pub fn barrier_indirect(&mut self) -> Result<(), ErrorKind> {
        let inner = self.recording("vkCmdPipelineBarrier")?;
        inner.barriers += 1;
        inner.unbarriered.clear();
        if inner.reusable {
            inner.log.push(Recorded::Other);
            inner.logged_other = true;
        }
        inner.cmd_pipeline_barrier(&global_indirect());
        Ok(())
    }

    /// Write `data` (a whole number of `u32`s) to `dst` from byte
    /// `offset`, on the queue when the command runs
    /// (`vkCmdUpdateBuffer`, split into commands of at most 64 KiB): a
    /// transfer write, ordered like a copy.
    pub fn update_buffer(
        &mut self,
        dst: &Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdUpdateBuffer";
        let inner = self.recording(CALL)?;
        if !dst.of(&inner.shared) {
            return Err(ErrorKind::driver(CALL, "a buffer of another device"));
        }
        let fits = (offset as usize)
            .checked_add(data.len())
            .is_some_and(|end| end as u64 <= dst.size());
        if data.is_empty() || !data.len().is_multiple_of(4) || !offset.is_multiple_of(4) || !fits {
            return Err(ErrorKind::driver(
                CALL,
                format!(
                    "{} bytes at {offset} of a {}-byte buffer (both multiples of 4, inside it)",
                    data.len(),
                    dst.size()
                ),
            ));
        }
        let raw = vk::Handle::as_raw(dst.handle());
        if dst.indirect() {
            inner.audit.indirect_args(raw);
        }
        inner
            .audit
            .command(Command::Copy, &[(raw, true)])
            .map_err(|h| ErrorKind::driver(CALL, h))?;
        for (k, chunk) in data.chunks(UPDATE_MAX).enumerate() {
            let at = offset + (k * UPDATE_MAX) as u64;
            // SAFETY: recording; `dst` is live (held below) and of this
            // device, made with TRANSFER_DST usage; the range is inside it,
            // offset and length multiples of 4, the length at most 65536
            // (checked above).
            unsafe {
                inner
                    .shared
                    .device
                    .cmd_update_buffer(inner.cmd, dst.handle(), at, chunk)
            };
        }
        inner.buffers.push(dst);
        inner.unbarriered.push((raw, true));
        if inner.reusable {
            inner.log.push(Recorded::Other);
            inner.logged_other = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::{HOST_COHERENT, PARAM_BYTES};
    use super::UPDATE_MAX;
    use seam::ops::Access;
    use seam::{DType, OpKind};
    use std::ffi::CString;

    /// An indirect dispatch's arguments must be three words inside a
    /// buffer made to hold them, at a 4-byte offset: another buffer, an
    /// unaligned offset, one past the end (or overflowing) is refused by
    /// name; the last whole three words are taken. So is a write of the
    /// control words: no bytes, part of a word, an unaligned offset or past
    /// the end refused, the last two words taken. An indirect barrier is
    /// counted like any (so the next dispatch's `barrier_for` sees the
    /// command buffer has one). Mutations: `||` → `&&` in `check_indirect`
    /// (an unaligned offset inside the buffer taken), and in
    /// `update_buffer`'s check → red; the barrier not
    /// counted (`+=` → `*=`) → red; the dispatch's name lost from its
    /// other refusals (`Counts::call` → "") → red.
    #[test]
    fn indirect_arguments_are_checked_and_their_barrier_counted() {
        let Some(mut gpu) = super::super::super::test_gpu() else {
            return;
        };
        let host = [ash::vk::MemoryPropertyFlags::HOST_VISIBLE | HOST_COHERENT];
        let plain = gpu.create_buffer(64, &host).unwrap();
        let control = gpu.create_control_buffer(64, &host).unwrap();
        let words = seam_kernels::spirv(OpKind::Fill).unwrap();
        let entry = CString::new(seam_kernels::entry_point(OpKind::Fill, DType::F32)).unwrap();
        let fill = gpu.compute_pipeline(1, words, &entry).unwrap();
        let mut cmd = gpu.command_buffer().unwrap();
        cmd.begin(true).unwrap();
        cmd.barrier_indirect().unwrap();
        assert_eq!(cmd.barriers(), 1);
        let params = [0u8; PARAM_BYTES as usize];
        let out = [(&plain, Access::Write)];
        for (args, offset) in [
            (&plain, 0),
            (&control, 2),
            (&control, 56),
            (&control, u64::MAX - 3),
        ] {
            let e = cmd
                .dispatch_indirect(&fill, &out, &params, args, offset)
                .expect_err("bad indirect arguments taken");
            assert!(e.to_string().contains("vkCmdDispatchIndirect"), "{e}");
        }
        cmd.dispatch_indirect(&fill, &out, &params, &control, 52)
            .unwrap();
        // The dispatch's other refusals name it too (not `vkCmdDispatch`).
        let e = cmd
            .dispatch_indirect(&fill, &[], &params, &control, 0)
            .expect_err("a dispatch without its binding taken");
        assert!(e.to_string().contains("vkCmdDispatchIndirect"), "{e}");
        // The control words' write: whole words inside the buffer only.
        cmd.barrier_indirect().unwrap();
        for (offset, len) in [(0, 0), (0, 3), (2, 4), (60, 8)] {
            let e = cmd
                .update_buffer(&control, offset, &vec![0u8; len])
                .expect_err("a bad update taken");
            assert!(e.to_string().contains("vkCmdUpdateBuffer"), "{e}");
        }
        cmd.update_buffer(&control, 56, &[0u8; 8]).unwrap();
        cmd.end().unwrap();
        let e = cmd
            .dispatch_indirect(&fill, &out, &params, &control, 0)
            .expect_err("a dispatch into an ended command buffer taken");
        assert!(e.to_string().contains("vkCmdDispatchIndirect"), "{e}");
        drop(cmd);

        // More than one command's 64 KiB: every word lands where it
        // belongs, after the replay (mapped memory, read back). Mutations:
        // a chunk's offset computed wrong (`+` → `-`, `*` → `/`) → red.
        let words = UPDATE_MAX / 4 + 40;
        let big = gpu
            .create_control_buffer(4 * words as u64 + 16, &host)
            .unwrap();
        if !big.is_mapped() {
            return eprintln!("no mapped control buffer: the read-back skipped");
        }
        let data: Vec<u8> = (0..words as u32).flat_map(|w| w.to_le_bytes()).collect();
        let mut cmd = gpu.command_buffer().unwrap();
        cmd.begin(false).unwrap();
        cmd.barrier_indirect().unwrap();
        cmd.update_buffer(&big, 16, &data).unwrap();
        cmd.end().unwrap();
        gpu.submit(&cmd).unwrap();
        gpu.wait_for(&cmd).unwrap();
        let mut back = vec![0u8; data.len()];
        big.read(16, &mut back).unwrap();
        assert!(
            back == data,
            "the words written past the first 64 KiB moved"
        );
    }
}
