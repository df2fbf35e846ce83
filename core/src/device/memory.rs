//! `Device`'s memory calls: allocate, free, write and read buffers. Each
//! is refused inside a capture where the contract says so (C5), and every
//! host access waits for the work queued before it (C2).

use super::state::BufEntry;
use super::{checked, BufferId, Device};
use crate::dtype::{DType, Element};
use crate::error::{Error, ErrorKind, Result};
use crate::validate::{self, BufferMeta};

impl Device {
    /// Allocate `len` elements of `dtype`. Refused inside a capture (C5).
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<BufferId> {
        self.with("alloc", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::AllocInCapture);
            }
            if len == 0 {
                return Err(ErrorKind::ZeroSize { what: "allocation" });
            }
            if len as u64 > validate::MAX_ELEMENTS {
                return Err(ErrorKind::TooLarge {
                    what: "allocation",
                    detail: format!("{len} elements exceeds {}", validate::MAX_ELEMENTS),
                });
            }
            let guard = if st.checked { checked::GUARD } else { 0 };
            let raw = st.backend.alloc((len + guard) * dtype.size())?;
            let id = st.new_buffer_id();
            st.buffers.insert(
                id,
                BufEntry {
                    meta: BufferMeta { raw, dtype, len },
                    released: false,
                    guard,
                },
            );
            if guard > 0 {
                st.fill_guard(id)?;
            }
            Ok(id)
        })
    }

    /// Free a buffer now, or say why not: refused inside a capture (C5) and
    /// while a graph, the current graph or the open capture reads it (it
    /// would be a use-after-free on replay). For "free it once legal", what
    /// an owned [`Buffer`](super::Buffer) does on drop, see [`LowLevel::release_buffer`](crate::LowLevel::release_buffer).
    pub fn free(&self, id: BufferId) -> Result<()> {
        self.with("free", |st| {
            if st.capture.is_some() {
                return Err(ErrorKind::FreeInCapture);
            }
            st.meta(id)?;
            let users = st.users_of(id);
            if !users.is_empty() {
                return Err(ErrorKind::BufferInUse { id: id.n, users });
            }
            st.free_buffer(id)
        })
    }

    /// Give the buffer up: the id is unusable from now on, and the memory
    /// is freed as soon as that is legal (no open capture, no graph reading
    /// it). Never fails, never leaks; what owned handles call on drop. An id
    /// this device does not hold is ignored. For a free that reports why it
    /// cannot happen now, see [`Device::free`].
    pub(crate) fn release_buffer(&self, id: BufferId) {
        let mut st = self.state();
        if let Some(b) = st.buffers.get_mut(&id) {
            b.released = true;
        }
        st.sweep();
    }

    /// Element type and length of a live buffer.
    pub fn buffer_meta(&self, id: BufferId) -> Result<(DType, usize)> {
        self.with("buffer_meta", |st| st.meta(id).map(|m| (m.dtype, m.len)))
    }

    /// Write `data` at element `offset`. Ordered after queued work.
    pub fn write<T: Element>(&self, id: BufferId, offset: usize, data: &[T]) -> Result<()> {
        self.write_bytes_typed(
            "write",
            id,
            T::DTYPE,
            offset,
            data.len(),
            bytemuck::cast_slice(data),
        )
    }

    /// Write raw bytes of the buffer's own element type at element `offset`
    /// (for callers that do not know the type statically).
    pub fn write_bytes(&self, id: BufferId, offset: usize, bytes: &[u8]) -> Result<()> {
        let dtype = self.buffer_meta(id).map(|(d, _)| d).map_err(|e| Error {
            call: "write_bytes",
            ..e
        })?;
        // Whole elements only; the count is what the message and the write
        // both use, so a wrong count shows in the message.
        let count = bytes.len() / dtype.size();
        if !bytes.len().is_multiple_of(dtype.size()) {
            return Err(self.err(
                "write_bytes",
                ErrorKind::SizeMismatch {
                    what: "write_bytes (bytes not a whole number of elements)",
                    expected: count * dtype.size(),
                    found: bytes.len(),
                },
            ));
        }
        self.write_bytes_typed("write_bytes", id, dtype, offset, count, bytes)
    }

    fn write_bytes_typed(
        &self,
        call: &'static str,
        id: BufferId,
        dtype: DType,
        offset: usize,
        count: usize,
        bytes: &[u8],
    ) -> Result<()> {
        self.with(call, |st| {
            let meta = st.host_access_check(id, dtype, count, call)?;
            st.write_raw(meta, offset, bytes, call)
        })
    }

    /// Read the whole buffer as `T` (its element type). Waits for queued work.
    /// The three reads differ only in what they return: `read` the whole
    /// buffer typed, [`Device::read_range`] a typed sub-range, and
    /// [`Device::read_bytes`] the whole buffer untyped.
    pub fn read<T: Element>(&self, id: BufferId) -> Result<Vec<T>> {
        let (_, len) = self
            .buffer_meta(id)
            .map_err(|e| Error { call: "read", ..e })?;
        self.read_range(id, 0, len)
    }

    /// Read `count` elements from element `offset`. Waits for queued work.
    pub fn read_range<T: Element>(
        &self,
        id: BufferId,
        offset: usize,
        count: usize,
    ) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); count];
        self.with("read", |st| {
            let meta = st.host_access_check(id, T::DTYPE, count, "read")?;
            st.read_raw(meta, offset, bytemuck::cast_slice_mut(&mut out), "read")
        })?;
        Ok(out)
    }

    /// Read the whole buffer as raw bytes, whatever its element type (for
    /// digests and cross-device comparison). Waits for queued work.
    pub fn read_bytes(&self, id: BufferId) -> Result<Vec<u8>> {
        self.with("read_bytes", |st| {
            let meta = st.meta(id)?;
            st.host_access_check(id, meta.dtype, meta.len, "read_bytes")?;
            let mut out = vec![0u8; meta.len * meta.dtype.size()];
            st.read_raw(meta, 0, &mut out, "read_bytes")?;
            Ok(out)
        })
    }
}
