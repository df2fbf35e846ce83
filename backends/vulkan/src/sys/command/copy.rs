//! The copy between buffers (the staging path's transfers), checked and
//! audited as a transfer.

use super::*;

impl CommandBuffer {
    /// Copy `size` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
    pub fn copy(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Buffer,
        dst_offset: u64,
        size: u64,
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdCopyBuffer";
        let inner = self.recording(CALL)?;
        if !src.of(&inner.shared) || !dst.of(&inner.shared) {
            return Err(ErrorKind::driver(CALL, "a buffer of another device"));
        }
        let fits = |off: u64, len: u64| off.checked_add(size).is_some_and(|end| end <= len);
        if size == 0 || !fits(src_offset, src.size()) || !fits(dst_offset, dst.size()) {
            return Err(ErrorKind::driver(
                CALL,
                format!(
                    "{size} bytes from {src_offset} of {} to {dst_offset} of {} bytes",
                    src.size(),
                    dst.size()
                ),
            ));
        }
        if src.same(dst) && src_offset < dst_offset + size && dst_offset < src_offset + size {
            return Err(ErrorKind::driver(CALL, "source and destination overlap"));
        }
        inner
            .audit
            .command(
                Command::Copy,
                &[
                    (vk::Handle::as_raw(src.handle()), false),
                    (vk::Handle::as_raw(dst.handle()), true),
                ],
            )
            .map_err(|h| ErrorKind::driver(CALL, h))?;
        let region = [vk::BufferCopy {
            src_offset,
            dst_offset,
            size,
        }];
        // SAFETY: recording; both buffers are live (held below), made with
        // TRANSFER_SRC and TRANSFER_DST usage; the ranges are inside them and
        // do not overlap (checked).
        unsafe {
            inner
                .shared
                .device
                .cmd_copy_buffer(inner.cmd, src.handle(), dst.handle(), &region)
        };
        inner.buffers.push(src);
        inner.buffers.push(dst);
        inner.unbarriered.extend([
            (vk::Handle::as_raw(src.handle()), false),
            (vk::Handle::as_raw(dst.handle()), true),
        ]);
        if inner.reusable {
            inner.log.push(Recorded::Other);
            inner.logged_other = true;
        }
        Ok(())
    }
}
