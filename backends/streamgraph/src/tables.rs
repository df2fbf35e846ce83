//! The backend's lookup tables on the launch path, indexed rather than
//! hashed: a launch looks up its kernel and each of its buffers, and with
//! `std`'s SipHash those lookups cost more than the rest of the backend's
//! launch together.
//!
//! - [`KernelTable`]: a catalogue op's entry points in a fixed array by
//!   (op, dtype); user kernels (few per device) in a short list;
//! - [`BufferTable`]: allocations in slots, each id naming its slot and the
//!   slot's generation, so an id freed once is never found again (the slot
//!   it named is reused under a new generation).

use seam::{DType, OpKind};

/// Entry points by (op, dtype).
pub(crate) struct KernelTable<F> {
    catalogue: Vec<Option<F>>,
    user: Vec<(OpKind, DType, F)>,
}

/// Where a catalogue op's entry point for `dtype` lives; `None` for a user
/// kernel.
fn catalogue_slot(op: OpKind, dtype: DType) -> Option<usize> {
    let op = match op {
        OpKind::Fill => 0,
        OpKind::Copy => 1,
        OpKind::ScaleAdd => 2,
        OpKind::Add => 3,
        OpKind::Mul => 4,
        OpKind::Silu => 5,
        OpKind::RmsNorm => 6,
        OpKind::Softmax => 7,
        OpKind::Gemm => 8,
        OpKind::User(_) => return None,
    };
    let dtype = match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::Bf16 => 2,
        DType::I32 => 3,
        DType::U32 => 4,
    };
    Some(op * DType::ALL.len() + dtype)
}

impl<F> KernelTable<F> {
    pub(crate) fn new() -> Self {
        let slots = OpKind::ALL.len() * DType::ALL.len();
        KernelTable {
            catalogue: (0..slots).map(|_| None).collect(),
            user: Vec::new(),
        }
    }

    pub(crate) fn get(&self, op: OpKind, dtype: DType) -> Option<&F> {
        match catalogue_slot(op, dtype) {
            Some(i) => self.catalogue[i].as_ref(),
            None => self
                .user
                .iter()
                .find(|(o, d, _)| *o == op && *d == dtype)
                .map(|(_, _, f)| f),
        }
    }

    /// Keep `f` as (op, dtype)'s entry point (replacing one held before).
    pub(crate) fn insert(&mut self, op: OpKind, dtype: DType, f: F) {
        match catalogue_slot(op, dtype) {
            Some(i) => self.catalogue[i] = Some(f),
            None => match self
                .user
                .iter_mut()
                .find(|(o, d, _)| *o == op && *d == dtype)
            {
                Some(held) => held.2 = f,
                None => self.user.push((op, dtype, f)),
            },
        }
    }
}

/// Live allocations and their sizes, by id.
pub(crate) struct BufferTable<M> {
    slots: Vec<Slot<M>>,
    /// Slots free for reuse, each with a generation that has not wrapped.
    free: Vec<u32>,
    live: usize,
    bytes: u64,
}

struct Slot<M> {
    generation: u32,
    held: Option<(M, u64)>,
}

/// An id: the slot's generation in the high half, its index + 1 in the low
/// (so no id is 0, and a backend's first ids are 1, 2, 3, ...).
fn id_of(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | (u64::from(index) + 1)
}

/// The slot an id names and the generation it was made in; `None` for an
/// id no slot could have made.
fn slot_of(id: u64) -> Option<(usize, u32)> {
    let index = (id & u64::from(u32::MAX)).checked_sub(1)?;
    Some((index as usize, (id >> 32) as u32))
}

impl<M> BufferTable<M> {
    pub(crate) fn new() -> Self {
        BufferTable {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            bytes: 0,
        }
    }

    /// Hold `memory` (`bytes` long); its id.
    pub(crate) fn insert(&mut self, memory: M, bytes: u64) -> u64 {
        self.live += 1;
        self.bytes += bytes;
        let held = Some((memory, bytes));
        match self.free.pop() {
            Some(index) => {
                let slot = &mut self.slots[index as usize];
                slot.held = held;
                id_of(index, slot.generation)
            }
            None => {
                let index = u32::try_from(self.slots.len()).expect("fewer than 2^32 slots");
                self.slots.push(Slot {
                    generation: 0,
                    held,
                });
                id_of(index, 0)
            }
        }
    }

    pub(crate) fn get(&self, id: u64) -> Option<&M> {
        let (index, generation) = slot_of(id)?;
        match self.slots.get(index) {
            Some(Slot {
                generation: g,
                held: Some((memory, _)),
            }) if *g == generation => Some(memory),
            _ => None,
        }
    }

    /// Stop holding `id`'s allocation and give it back; its id is never
    /// valid again.
    pub(crate) fn remove(&mut self, id: u64) -> Option<M> {
        let (index, generation) = slot_of(id)?;
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let (memory, bytes) = slot.held.take()?;
        self.live -= 1;
        self.bytes -= bytes;
        // A slot whose generation would wrap is retired: its ids stay dead.
        if let Some(next) = slot.generation.checked_add(1) {
            slot.generation = next;
            self.free.push(index as u32);
        }
        Some(memory)
    }

    /// Live allocations.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Their bytes together.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Every live allocation, taken out of the table, in slot order.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = M> + '_ {
        self.free.clear();
        self.live = 0;
        self.bytes = 0;
        self.slots.drain(..).filter_map(|s| s.held.map(|(m, _)| m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids are 1, 2, 3, ... until a slot is reused; a freed id is never
    /// found again, though its slot holds a newer buffer; counts and bytes
    /// follow. Mutations: the generation left alone on remove (the stale id
    /// finds the new buffer), `get` ignoring the generation → red.
    #[test]
    fn a_freed_id_stays_dead_when_its_slot_is_reused() {
        let mut t = BufferTable::new();
        let [a, b, c] = [10, 20, 30].map(|m| t.insert(m, m as u64));
        assert_eq!([a, b, c], [1, 2, 3]);
        assert_eq!((t.len(), t.bytes()), (3, 60));
        assert_eq!(t.remove(b), Some(20));
        assert_eq!(t.remove(b), None);
        let d = t.insert(40, 40);
        assert_ne!(d, b);
        assert_eq!((t.get(b), t.get(d)), (None, Some(&40)));
        assert_eq!((t.len(), t.bytes()), (3, 80));
        assert_eq!([0, 4, 99, u64::MAX].map(|id| t.get(id)), [None; 4]);
        assert_eq!(t.drain().collect::<Vec<_>>(), [10, 40, 30]);
        assert_eq!((t.len(), t.bytes(), t.get(a)), (0, 0, None));
    }

    /// Every (op, dtype) has its own entry: catalogue slots don't collide,
    /// user kernels are found by kernel and dtype.
    #[test]
    fn kernels_are_found_under_their_own_key() {
        let mut t = KernelTable::new();
        let keys: Vec<(OpKind, DType)> = OpKind::ALL
            .into_iter()
            .flat_map(|op| DType::ALL.map(|d| (op, d)))
            .collect();
        for (i, &(op, d)) in keys.iter().enumerate() {
            assert_eq!(t.get(op, d), None);
            t.insert(op, d, i);
        }
        for (i, &(op, d)) in keys.iter().enumerate() {
            assert_eq!(t.get(op, d), Some(&i), "{op}/{d}");
        }
    }
}
