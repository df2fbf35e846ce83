//! Checked mode (`Device::set_checked`): an eager user-kernel launch held
//! to the extents its kernel declares. Before the launch, every buffer it
//! binds is read whole (its guard included); after it, once the device is
//! idle, read again; an element that changed outside the declared range of
//! every written binding over that buffer is a kernel writing where it
//! said it would not, and the launch fails naming it. The buffers are then
//! written back as they were, so nothing else changes.

use super::handles::BufferId;
use super::state::State;
use crate::error::ErrorKind;
use crate::ops::{Access, OpCall, OpKind};
use crate::validate;

/// Elements past its end every buffer allocated in checked mode carries,
/// filled with [`CANARY`]: a kernel that writes past the end of its buffer
/// lands there, where it is seen, and not in another allocation.
pub const GUARD: usize = 64;

/// The byte pattern guards hold.
const CANARY: u8 = 0xA5;

/// Each distinct buffer a checked launch binds, with its bytes before it.
pub(super) struct Before(Vec<(BufferId, Vec<u8>)>);

impl State {
    /// Fill a new buffer's guard with the canary.
    pub(super) fn fill_guard(&mut self, id: BufferId) -> Result<(), ErrorKind> {
        let entry = &self.buffers[&id];
        let size = entry.meta.dtype.size();
        let canary = vec![CANARY; entry.guard * size];
        self.write_allocation(id, entry.meta.len * size, &canary)
    }

    /// In checked mode, for an eager launch of a user kernel: the bytes of
    /// every buffer it binds. `None` when the launch is not checked.
    pub(super) fn checked_snapshot(&mut self, call: &OpCall) -> Result<Option<Before>, ErrorKind> {
        if !self.checked || self.capture.is_some() || !matches!(call.op, OpKind::User(_)) {
            return Ok(None);
        }
        let mut ids: Vec<BufferId> = call.buffers.iter().map(|v| v.buffer).collect();
        ids.sort();
        ids.dedup();
        let mut before = Vec::with_capacity(ids.len());
        for id in ids {
            before.push((id, self.read_allocation(id)?));
        }
        Ok(Some(Before(before)))
    }

    /// After a checked launch: wait, compare, and on a write outside the
    /// declared extents put every buffer back and name the first one.
    pub(super) fn check_writes(&mut self, call: &OpCall, before: Before) -> Result<(), ErrorKind> {
        let OpKind::User(kernel) = call.op else {
            return Ok(());
        };
        self.backend.synchronize()?;
        let need = validate::needed(call.op, &call.params);
        let sig = call.op.signature();
        let mut found = None;
        for (id, old) in &before.0 {
            let new = self.read_allocation(*id)?;
            let entry = &self.buffers[id];
            let (len, size) = (entry.meta.len, entry.meta.dtype.size());
            // Element ranges of this buffer some written binding declares.
            let allowed: Vec<(usize, usize)> = sig
                .iter()
                .zip(call.buffers.iter())
                .zip(need)
                .filter(|((b, v), _)| b.access == Access::Write && v.buffer == *id)
                .map(|((_, v), n)| (v.offset, v.offset + n as usize))
                .collect();
            let changed = old
                .chunks(size)
                .zip(new.chunks(size))
                .enumerate()
                .find(|(e, (a, b))| a != b && !allowed.iter().any(|&(s, t)| (s..t).contains(e)));
            if let Some((element, _)) = changed {
                // The binding to name: the written one over this buffer
                // nearest the element, else the first bound to it.
                let over = sig
                    .iter()
                    .zip(call.buffers.iter())
                    .zip(need)
                    .filter(|((_, v), _)| v.buffer == *id);
                let nearest = over
                    .clone()
                    .filter(|((b, _), _)| b.access == Access::Write)
                    .min_by_key(|((_, v), n)| {
                        let end = v.offset + *n as usize;
                        if element < v.offset {
                            v.offset - element
                        } else {
                            element.saturating_sub(end)
                        }
                    })
                    .or_else(|| over.clone().next());
                if let Some(((b, v), n)) = nearest {
                    found.get_or_insert(ErrorKind::WroteOutsideExtents {
                        kernel: kernel.name(),
                        binding: b.name,
                        element: element as u64,
                        detail: format!(
                            "the binding's view starts at element {} and declares {} written \
                             element(s){}",
                            v.offset,
                            if b.access == Access::Write { n } else { 0 },
                            if element >= len {
                                format!(
                                    "; element {element} is past the buffer's {len} (its guard)"
                                )
                            } else {
                                String::new()
                            }
                        ),
                    });
                }
            }
        }
        match found {
            None => Ok(()),
            Some(e) => {
                for (id, old) in &before.0 {
                    self.write_allocation(*id, 0, old)?;
                }
                Err(e)
            }
        }
    }
}
