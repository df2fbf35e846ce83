//! The buffers a command buffer's commands use, held while it may run: one
//! entry per buffer once recording ends, sorted by handle (the order a
//! submission takes their host locks in). A reusable (graph) command buffer
//! also counts each buffer's bindings, so a rebind (C13) moves a binding
//! from one buffer to another in O(log n), with no rebuild of the set.

use super::Buffer;
use ash::vk;

#[derive(Default)]
pub(super) struct Held {
    /// While recording: one entry per use. After `seal`: one per buffer,
    /// sorted by handle.
    buffers: Vec<Buffer>,
    /// After `seal(true)`: `uses[i]`, the commands' bindings of
    /// `buffers[i]` (0 only inside `CommandBuffer::update`, until
    /// [`Held::drop_unused`]). Empty otherwise.
    uses: Vec<u32>,
}

/// What the set is sorted by: the buffer's handle.
pub(super) fn key(b: &Buffer) -> u64 {
    vk::Handle::as_raw(b.handle())
}

impl Held {
    pub(super) fn clear(&mut self) {
        self.buffers.clear();
        self.uses.clear();
    }

    /// A use of `b` by a command being recorded.
    pub(super) fn push(&mut self, b: &Buffer) {
        self.buffers.push(b.clone());
    }

    /// Recording ended: sorted by handle and deduplicated in place (nothing
    /// allocated unless `counted`, which counts each buffer's uses).
    pub(super) fn seal(&mut self, counted: bool) {
        self.buffers.sort_unstable_by_key(key);
        self.uses.clear();
        if !counted {
            self.buffers.dedup_by_key(|b| key(b));
            return;
        }
        let mut kept = 0;
        for i in 0..self.buffers.len() {
            if kept > 0 && self.buffers[kept - 1].same(&self.buffers[i]) {
                self.uses[kept - 1] += 1;
            } else {
                self.buffers.swap(kept, i);
                self.uses.push(1);
                kept += 1;
            }
        }
        self.buffers.truncate(kept);
    }

    /// Every buffer, once each, sorted by handle (after `seal`).
    pub(super) fn all(&self) -> &[Buffer] {
        &self.buffers
    }

    /// `uses` bindings move from the buffer `old` (its handle, as
    /// [`key`]: held, counted) to `new`. `old` stays held, perhaps
    /// unused, until [`Held::drop_unused`]. Returns false (changing
    /// nothing) where `old` is not held with that many uses: not a counted
    /// set, or not this command buffer's bindings.
    pub(super) fn rebind(&mut self, old: u64, new: &Buffer, uses: u32) -> bool {
        let Ok(o) = self.buffers.binary_search_by_key(&old, key) else {
            return false;
        };
        if self.uses.get(o).is_none_or(|&u| u < uses) {
            return false;
        }
        self.uses[o] -= uses;
        match self.buffers.binary_search_by_key(&key(new), key) {
            Ok(n) => self.uses[n] += uses,
            Err(n) => {
                self.buffers.insert(n, new.clone());
                self.uses.insert(n, uses);
            }
        }
        true
    }

    /// Counted anew from every binding of every command.
    pub(super) fn recount<'a>(&mut self, bindings: impl Iterator<Item = &'a Buffer>) {
        self.clear();
        self.buffers.extend(bindings.cloned());
        self.seal(true);
    }

    /// Release the buffers no binding uses any more (in place, in order).
    pub(super) fn drop_unused(&mut self) {
        if !self.uses.contains(&0) {
            return;
        }
        let mut kept = 0;
        for i in 0..self.buffers.len() {
            if self.uses[i] > 0 {
                self.buffers.swap(kept, i);
                self.uses[kept] = self.uses[i];
                kept += 1;
            }
        }
        self.buffers.truncate(kept);
        self.uses.truncate(kept);
    }

    /// The counts are those of `bindings` (every binding of every command,
    /// each buffer once in `buffers`): a debug check of the incremental
    /// bookkeeping.
    #[cfg(debug_assertions)]
    pub(super) fn counts_match<'a>(&self, bindings: impl Iterator<Item = &'a Buffer>) -> bool {
        let mut want = vec![0u32; self.buffers.len()];
        for b in bindings {
            match self.buffers.binary_search_by_key(&key(b), key) {
                Ok(i) => want[i] += 1,
                Err(_) => return false,
            }
        }
        want == self.uses && self.buffers.windows(2).all(|w| key(&w[0]) < key(&w[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::{key, Held};
    use crate::sys::{Buffer, Gpu};
    use ash::vk;

    /// Four buffers of the first Vulkan device, sorted by handle, or `None`
    /// (saying so) where there is none.
    fn buffers() -> Option<(Gpu, [Buffer; 4])> {
        let gpu = crate::sys::test_gpu()?;
        let mut b: Vec<Buffer> = (0..4)
            .map(|_| gpu.create_buffer(16, &[vk::MemoryPropertyFlags::empty()]))
            .collect::<Result<_, _>>()
            .unwrap();
        b.sort_by_key(key);
        let b: [Buffer; 4] = b.try_into().ok().unwrap();
        Some((gpu, b))
    }

    fn keys(h: &Held) -> Vec<u64> {
        h.all().iter().map(key).collect()
    }

    /// The held set as a graph's update keeps it: sealed (sorted, each
    /// buffer once, its bindings counted), a rebind moving a count from
    /// one buffer to another (refused, changing nothing, where the old
    /// buffer has fewer uses or is not held, or the set is not counted),
    /// the unused ones dropped in order, and a recount equal to a seal.
    /// Each step's counts are also held against `counts_match`, which must
    /// say no to wrong ones.
    #[test]
    fn a_counted_set_follows_rebinds_and_drops_what_no_binding_uses() {
        let Some((_gpu, [a, b, c, d])) = buffers() else {
            return;
        };
        let (ka, kb, kc, kd) = (key(&a), key(&b), key(&c), key(&d));

        // Not counted: each buffer once, sorted, nothing counted, no rebind.
        let mut h = Held::default();
        for x in [&c, &a, &b, &a] {
            h.push(x);
        }
        h.seal(false);
        assert_eq!(keys(&h), [ka, kb, kc]);
        assert!(h.uses.is_empty());
        assert!(!h.rebind(ka, &d, 1), "an uncounted set refuses rebinds");
        assert_eq!(keys(&h), [ka, kb, kc]);

        // Counted: a × 3, b, c.
        let bindings = [&a, &c, &a, &b, &a];
        let mut h = Held::default();
        for x in bindings {
            h.push(x);
        }
        h.seal(true);
        assert_eq!(keys(&h), [ka, kb, kc]);
        assert_eq!(h.uses, [3, 1, 1]);
        #[cfg(debug_assertions)]
        assert!(h.counts_match(bindings.into_iter()));
        #[cfg(debug_assertions)]
        assert!(!h.counts_match([&a, &c, &b].into_iter()), "a's count");
        #[cfg(debug_assertions)]
        assert!(!h.counts_match(bindings.into_iter().chain([&d])), "d");

        // Two of a's bindings move to d (not held yet), then one of c's to
        // a (held): counts move, nothing else changes.
        assert!(h.rebind(ka, &d, 2));
        assert_eq!(
            (keys(&h), h.uses.clone()),
            (vec![ka, kb, kc, kd], vec![1, 1, 1, 2])
        );
        assert!(h.rebind(kc, &a, 1));
        assert_eq!(
            (keys(&h), h.uses.clone()),
            (vec![ka, kb, kc, kd], vec![2, 1, 0, 2])
        );
        #[cfg(debug_assertions)]
        assert!(h.counts_match([&a, &a, &b, &d, &d].into_iter()));
        // More uses than a buffer has, or a buffer not held: refused.
        assert!(!h.rebind(kb, &a, 2), "b has one binding");
        assert!(!h.rebind(kc, &a, 1), "c has none left");
        assert!(!h.rebind(0, &a, 1), "no buffer has the null handle");
        assert_eq!(h.uses, [2, 1, 0, 2], "a refused rebind changes nothing");
        // Exactly all of d's bindings: taken.
        assert!(h.rebind(kd, &b, 2));
        assert_eq!(h.uses, [2, 3, 0, 0]);

        // The unused ones go, in order, with their counts.
        h.drop_unused();
        assert_eq!((keys(&h), h.uses.clone()), (vec![ka, kb], vec![2, 3]));
        let now = [&a, &b, &a, &b, &b];
        #[cfg(debug_assertions)]
        assert!(h.counts_match(now.into_iter()));
        // Nothing unused: nothing changes.
        h.drop_unused();
        assert_eq!((keys(&h), h.uses.clone()), (vec![ka, kb], vec![2, 3]));

        // A recount forgets what was there.
        h.recount([&d, &c, &d].into_iter());
        assert_eq!((keys(&h), h.uses.clone()), (vec![kc, kd], vec![1, 2]));
        h.clear();
        assert!(h.all().is_empty() && h.uses.is_empty());
    }
}
