//! Shared-storage buffers and host access to them.

use super::*;

pub(super) struct BufferInner {
    pub(super) raw: Retained<ProtocolObject<dyn MTLBuffer>>,
    pub(super) len: usize,
    /// Command buffers that use it and have not been seen completed.
    pub(super) users: AtomicUsize,
    /// Serialises host access to the contents.
    pub(super) host: Mutex<()>,
}

// SAFETY: MTLBuffer objects may be used from any thread (Metal resources are
// thread-safe to reference); the contents are touched only by
// `Buffer::write`/`read`, under the `host` lock and only while no command
// buffer that uses the buffer may run (`users == 0`).
unsafe impl Send for BufferInner {}
// SAFETY: as above.
unsafe impl Sync for BufferInner {}

/// A shared-storage `MTLBuffer`. Clones share it.
#[derive(Clone)]
pub struct Buffer(pub(super) Arc<BufferInner>);

impl Buffer {
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// The contents, for the host: refused while a command buffer that uses
    /// the buffer has not been seen completed (wait for it first).
    fn host(&self, what: &'static str, offset: usize, count: usize) -> Result<MutexGuard<'_, ()>> {
        if offset.checked_add(count).is_none_or(|end| end > self.0.len) {
            return Err(ErrorKind::HostRange {
                what,
                offset,
                count,
                len: self.0.len,
            });
        }
        let guard = self.0.host.lock().unwrap_or_else(|p| p.into_inner());
        let users = self.0.users.load(Ordering::Acquire);
        if users > 0 {
            return Err(ErrorKind::driver(
                "MTLBuffer.contents",
                format!("{what}: {users} command buffer(s) using the buffer have not completed"),
            ));
        }
        Ok(guard)
    }

    /// Copy `data` into the buffer at byte `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let _host = self.host("write", offset, data.len())?;
        let base = self.0.raw.contents().cast::<u8>();
        // SAFETY: shared storage: `contents` maps all `len` bytes for the CPU;
        // offset + data.len() <= len was checked; no command buffer using
        // the buffer may run and no other host access runs (both checked
        // under the lock); `data` cannot overlap Metal's memory.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), base.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copy from byte `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let _host = self.host("read", offset, out.len())?;
        let base = self.0.raw.contents().cast::<u8>();
        // SAFETY: as in `write`, reading instead; `out` is a distinct Rust
        // borrow.
        unsafe {
            std::ptr::copy_nonoverlapping(base.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    pub(super) fn resource(&self) -> &ProtocolObject<dyn MTLResource> {
        ProtocolObject::from_ref(&*self.0.raw)
    }
}
