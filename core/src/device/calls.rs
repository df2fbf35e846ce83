//! The one place core calls the backend's `unsafe` methods (the trust
//! boundary, `backend.rs`). Each call here is made with what the guarantee
//! it relies on needs in hand: a buffer checked live and in range, a launch
//! made by validation, a graph found in the tables. Everything else in
//! core reaches the backend through these.
#![allow(unsafe_code)]

use super::handles::{BufferId, GraphRef};
use super::state::State;
use crate::backend::RawGraph;
use crate::error::ErrorKind;
use crate::ops::Launch;
use crate::validate::BufferMeta;

impl State {
    /// Write `bytes` (whole elements of the buffer's type) at element
    /// `offset` of a buffer `host_access_check` accepted as `meta`, for
    /// the call `what`; a range past the buffer's end is `HostRange`.
    pub(super) fn write_raw(
        &mut self,
        meta: BufferMeta,
        offset: usize,
        bytes: &[u8],
        what: &'static str,
    ) -> Result<(), ErrorKind> {
        let start = byte_range(meta, offset, bytes.len(), what)?;
        // SAFETY: `meta` is of a live buffer (it came from the tables under
        // the same lock) and `byte_range` found the range within it.
        unsafe { self.backend.write(meta.raw, start, bytes) }
    }

    /// Fill `out` (whole elements) from element `offset` of a buffer
    /// `host_access_check` accepted as `meta`, for the call `what`.
    pub(super) fn read_raw(
        &mut self,
        meta: BufferMeta,
        offset: usize,
        out: &mut [u8],
        what: &'static str,
    ) -> Result<(), ErrorKind> {
        let start = byte_range(meta, offset, out.len(), what)?;
        // SAFETY: as in `write_raw`: a live buffer, a range within it.
        unsafe { self.backend.read(meta.raw, start, out) }
    }

    /// The whole allocation of a live buffer, its guard included (checked
    /// mode). Waits for queued work, as every read does.
    pub(super) fn read_allocation(&mut self, id: BufferId) -> Result<Vec<u8>, ErrorKind> {
        let entry = self
            .buffers
            .get(&id)
            .ok_or_else(|| self.missing_buffer(id))?;
        let bytes = (entry.meta.len + entry.guard) * entry.meta.dtype.size();
        let raw = entry.meta.raw;
        let mut out = vec![0u8; bytes];
        // SAFETY: the buffer is live (in the tables) and was allocated with
        // `len + guard` elements (`Device::alloc`).
        unsafe { self.backend.read(raw, 0, &mut out) }?;
        Ok(out)
    }

    /// Write `data` at byte `offset` of a live buffer's allocation, its
    /// guard included (checked mode: the canary, or bytes put back).
    pub(super) fn write_allocation(
        &mut self,
        id: BufferId,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ErrorKind> {
        let entry = self
            .buffers
            .get(&id)
            .ok_or_else(|| self.missing_buffer(id))?;
        let bytes = (entry.meta.len + entry.guard) * entry.meta.dtype.size();
        let raw = entry.meta.raw;
        if offset.checked_add(data.len()).is_none_or(|end| end > bytes) {
            return Err(ErrorKind::HostRange {
                what: "checked-mode write",
                offset,
                count: data.len(),
                len: bytes,
            });
        }
        // SAFETY: the buffer is live and the range lies within its
        // allocation of `len + guard` elements (checked above).
        unsafe { self.backend.write(raw, offset, data) }
    }

    /// Queue (or record) a launch core holds: one `validate::lower` made
    /// from live buffers, or a graph's record of one (a graph keeps every
    /// buffer it uses alive, `users_of`).
    pub(super) fn launch_raw(&mut self, launch: &Launch) -> Result<(), ErrorKind> {
        // SAFETY: a `Launch` is made only by validation (its constructor
        // outside core is `unsafe`), and its buffers are live: see above.
        unsafe { self.backend.launch(launch) }
    }

    /// Open a conditional body whose condition `conditional::lower_condition`
    /// checked (or a graph's record of one: the graph keeps it alive).
    pub(super) fn begin_conditional_raw(
        &mut self,
        c: &crate::backend::Conditional,
    ) -> Result<(), ErrorKind> {
        // SAFETY: the condition's buffer is live and the word lies in it
        // (`lower_condition`; a graph holds its conditions in `uses`).
        unsafe { self.backend.begin_conditional(c) }
    }

    /// Replay a graph the tables hold.
    pub(super) fn replay_raw(&mut self, target: GraphRef) -> Result<(), ErrorKind> {
        let raw = self.replay_target(target)?;
        // SAFETY: `replay_target` found the graph (or current graph) live;
        // its buffers cannot be freed while it lives (`users_of`).
        unsafe { self.backend.replay(raw) }
    }

    /// Patch launches of a graph the tables hold; `changes` are lowered by
    /// validation, indices in range, op and dtype as recorded.
    pub(super) fn update_raw(
        &mut self,
        target: GraphRef,
        changes: &[(usize, Launch)],
    ) -> Result<(), ErrorKind> {
        let raw = self.replay_target(target)?;
        let count = self.entry(target)?.record.len();
        if let Some((at, _)) = changes.iter().find(|(at, _)| *at >= count) {
            return Err(ErrorKind::NoSuchLaunch {
                index: *at,
                launches: count,
            });
        }
        // Lent to the backend for the call (the backend is a field of
        // `self`), put back before anything can return. Core's caller
        // (`apply`) writes the changes into it afterwards, which is right
        // whether the backend left it as it was or with them applied.
        let mut now = std::mem::take(&mut self.entry_mut(target)?.record.launches);
        // SAFETY: the target is live, every index is in range (above), each
        // launch was lowered from live buffers with the recorded op and
        // dtype (`update::lower_changes`), and `now` is the graph's record:
        // an update that failed had the graph recorded again (`apply`), or
        // left it broken, and a broken graph is never patched in place.
        let r = unsafe { self.backend.update_launches(raw, &mut now, changes) };
        self.entry_mut(target)?.record.launches = now;
        r
    }

    /// Free a buffer no graph uses (`users_of` empty, checked by callers).
    pub(super) fn free_raw(&mut self, meta: BufferMeta) -> Result<(), ErrorKind> {
        // SAFETY: `meta` is of a live buffer, and no graph or current graph
        // uses it.
        unsafe { self.backend.free(meta.raw) }
    }

    /// Destroy a graph the tables (or the orphans) hold.
    pub(super) fn destroy_raw(&mut self, raw: RawGraph) -> Result<(), ErrorKind> {
        // SAFETY: `raw` is a graph handle this backend made that core has
        // not destroyed: one in the tables, or an orphan whose destroy the
        // backend refused.
        unsafe { self.backend.destroy_graph(raw) }
    }
}

/// The first byte of `len` bytes at element `offset` of a buffer, once
/// they lie within it; else `HostRange` in elements, for the call `what`.
fn byte_range(
    meta: BufferMeta,
    offset: usize,
    len: usize,
    what: &'static str,
) -> Result<usize, ErrorKind> {
    let size = meta.dtype.size();
    let count = len / size;
    match offset.checked_add(count) {
        Some(end) if end <= meta.len => Ok(offset * size),
        _ => Err(ErrorKind::HostRange {
            what,
            offset,
            count,
            len: meta.len,
        }),
    }
}
