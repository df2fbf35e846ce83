//! The tables every backend keeps its native objects in: [`Buffers`] (an
//! allocation and its size, by [`RawBuffer`]) and [`Graphs`] (a captured
//! graph, by [`RawGraph`], plus the current graph), with the standard
//! errors (`UnknownBuffer`, `UnknownGraph`, `NoCurrentGraph`) written once.
//!
//! Both are slot tables, indexed rather than hashed: a launch looks up each
//! of its buffers, and with `std`'s SipHash those lookups cost more than the
//! rest of a stream backend's launch (measured when the CUDA backend moved
//! to slots). An id names its slot and the slot's generation, so an id freed
//! once is never found again: the slot it named is reused under a new
//! generation.

use crate::backend::ReplayTarget;
use crate::error::ErrorKind;
use crate::ids::{RawBuffer, RawGraph};

/// Values in slots, each under an id no other value ever had.
#[derive(Debug)]
pub struct Slots<T> {
    slots: Vec<Slot<T>>,
    /// Slots free for reuse, each with a generation that has not wrapped.
    free: Vec<u32>,
    live: usize,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    held: Option<T>,
}

/// An id: the slot's generation in the high half, its index + 1 in the low
/// (so no id is 0, and a table's first ids are 1, 2, 3, ...).
fn id_of(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | (u64::from(index) + 1)
}

/// The slot an id names and the generation it was made in; `None` for an
/// id no slot could have made.
fn slot_of(id: u64) -> Option<(usize, u32)> {
    let index = (id & u64::from(u32::MAX)).checked_sub(1)?;
    Some((index as usize, (id >> 32) as u32))
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }
}

impl<T> Slots<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hold `value`; its id.
    pub fn insert(&mut self, value: T) -> u64 {
        self.live += 1;
        match self.free.pop() {
            Some(index) => {
                let slot = &mut self.slots[index as usize];
                slot.held = Some(value);
                id_of(index, slot.generation)
            }
            None => {
                let index = u32::try_from(self.slots.len()).expect("fewer than 2^32 slots");
                self.slots.push(Slot {
                    generation: 0,
                    held: Some(value),
                });
                id_of(index, 0)
            }
        }
    }

    /// The value under `id`, if it is live.
    pub fn get(&self, id: u64) -> Option<&T> {
        let (index, generation) = slot_of(id)?;
        match self.slots.get(index) {
            Some(Slot {
                generation: g,
                held: Some(value),
            }) if *g == generation => Some(value),
            _ => None,
        }
    }

    /// The value under `id`, if it is live, to change.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let (index, generation) = slot_of(id)?;
        match self.slots.get_mut(index) {
            Some(Slot {
                generation: g,
                held: Some(value),
            }) if *g == generation => Some(value),
            _ => None,
        }
    }

    /// Stop holding `id`'s value and give it back; the id is never valid
    /// again.
    pub fn remove(&mut self, id: u64) -> Option<T> {
        let (index, generation) = slot_of(id)?;
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.held.take()?;
        self.live -= 1;
        // A slot whose generation would wrap is retired: its ids stay dead.
        if let Some(next) = slot.generation.checked_add(1) {
            slot.generation = next;
            self.free.push(index as u32);
        }
        Some(value)
    }

    /// Live values.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether none is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Every live value with its id, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.held.as_ref().map(|v| (id_of(i as u32, s.generation), v)))
    }

    /// Every live value, taken out of the table, in slot order.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.free.clear();
        self.live = 0;
        self.slots.drain(..).filter_map(|s| s.held)
    }
}

/// A backend's allocations: its native object for each, with its size in
/// bytes (what `live_resources` counts), by [`RawBuffer`].
#[derive(Debug)]
pub struct Buffers<M> {
    slots: Slots<(M, u64)>,
    bytes: u64,
}

impl<M> Default for Buffers<M> {
    fn default() -> Self {
        Buffers {
            slots: Slots::new(),
            bytes: 0,
        }
    }
}

impl<M> Buffers<M> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hold `memory` (`bytes` long); the handle core will name it by.
    pub fn insert(&mut self, memory: M, bytes: u64) -> RawBuffer {
        self.bytes += bytes;
        RawBuffer(self.slots.insert((memory, bytes)))
    }

    /// The allocation `buffer` names, or `UnknownBuffer`.
    pub fn get(&self, buffer: RawBuffer) -> Result<&M, ErrorKind> {
        self.slots
            .get(buffer.0)
            .map(|(m, _)| m)
            .ok_or(ErrorKind::UnknownBuffer { id: buffer.0 })
    }

    /// The allocation `buffer` names, to change, or `UnknownBuffer`.
    pub fn get_mut(&mut self, buffer: RawBuffer) -> Result<&mut M, ErrorKind> {
        self.slots
            .get_mut(buffer.0)
            .map(|(m, _)| m)
            .ok_or(ErrorKind::UnknownBuffer { id: buffer.0 })
    }

    /// Its size in bytes, or `UnknownBuffer`.
    pub fn size(&self, buffer: RawBuffer) -> Result<u64, ErrorKind> {
        self.slots
            .get(buffer.0)
            .map(|(_, b)| *b)
            .ok_or(ErrorKind::UnknownBuffer { id: buffer.0 })
    }

    /// Stop holding `buffer`'s allocation and give it back, or
    /// `UnknownBuffer`; the handle is never valid again.
    pub fn remove(&mut self, buffer: RawBuffer) -> Result<M, ErrorKind> {
        let (memory, bytes) = self
            .slots
            .remove(buffer.0)
            .ok_or(ErrorKind::UnknownBuffer { id: buffer.0 })?;
        self.bytes -= bytes;
        Ok(memory)
    }

    /// Live allocations.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether none is live.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Their bytes together.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Every live allocation with its handle, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (RawBuffer, &M)> + '_ {
        self.slots.iter().map(|(id, (m, _))| (RawBuffer(id), m))
    }

    /// Every live allocation, taken out of the table, in slot order.
    pub fn drain(&mut self) -> impl Iterator<Item = M> + '_ {
        self.bytes = 0;
        self.slots.drain().map(|(m, _)| m)
    }
}

/// A backend's captured graphs: its native object for each handle made by
/// `end_capture_graph`, by [`RawGraph`], and the current graph that
/// `end_capture_into_current` made (never one of the handles: C3).
#[derive(Debug)]
pub struct Graphs<G> {
    handles: Slots<G>,
    current: Option<G>,
}

impl<G> Default for Graphs<G> {
    fn default() -> Self {
        Graphs {
            handles: Slots::new(),
            current: None,
        }
    }
}

impl<G> Graphs<G> {
    /// No graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hold a graph `end_capture_graph` made; its handle.
    pub fn insert(&mut self, graph: G) -> RawGraph {
        RawGraph(self.handles.insert(graph))
    }

    /// Make `graph` the current graph; the one it replaces, if any.
    pub fn set_current(&mut self, graph: G) -> Option<G> {
        self.current.replace(graph)
    }

    /// The current graph taken out, if any.
    pub fn take_current(&mut self) -> Option<G> {
        self.current.take()
    }

    /// The graph a replay or update targets, or `NoCurrentGraph` /
    /// `UnknownGraph`.
    pub fn target(&self, target: ReplayTarget) -> Result<&G, ErrorKind> {
        match target {
            ReplayTarget::Current => self.current.as_ref().ok_or(ErrorKind::NoCurrentGraph),
            ReplayTarget::Graph(g) => self.get(g),
        }
    }

    /// [`Graphs::target`], to change.
    pub fn target_mut(&mut self, target: ReplayTarget) -> Result<&mut G, ErrorKind> {
        match target {
            ReplayTarget::Current => self.current.as_mut().ok_or(ErrorKind::NoCurrentGraph),
            ReplayTarget::Graph(g) => self
                .handles
                .get_mut(g.0)
                .ok_or(ErrorKind::UnknownGraph { id: g.0 }),
        }
    }

    /// The graph `graph` names, or `UnknownGraph`.
    pub fn get(&self, graph: RawGraph) -> Result<&G, ErrorKind> {
        self.handles
            .get(graph.0)
            .ok_or(ErrorKind::UnknownGraph { id: graph.0 })
    }

    /// Stop holding `graph` and give it back, or `UnknownGraph`; the handle
    /// is never valid again.
    pub fn remove(&mut self, graph: RawGraph) -> Result<G, ErrorKind> {
        self.handles
            .remove(graph.0)
            .ok_or(ErrorKind::UnknownGraph { id: graph.0 })
    }

    /// Live graphs, the current one counted.
    pub fn len(&self) -> usize {
        self.handles.len() + usize::from(self.current.is_some())
    }

    /// Whether there is no graph at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every graph with its target: the current one first, then the
    /// handles in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (ReplayTarget, &G)> + '_ {
        self.current
            .iter()
            .map(|g| (ReplayTarget::Current, g))
            .chain(
                self.handles
                    .iter()
                    .map(|(id, g)| (ReplayTarget::Graph(RawGraph(id)), g)),
            )
    }

    /// Every graph, taken out: the current one first, then the handles in
    /// slot order.
    pub fn drain(&mut self) -> impl Iterator<Item = G> + '_ {
        self.current.take().into_iter().chain(self.handles.drain())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids are 1, 2, 3, ... until a slot is reused; a freed id is never
    /// found again, though its slot holds a newer value; counts and bytes
    /// follow. Mutations: the generation left alone on remove (the stale id
    /// finds the new value), `get` or `get_mut` ignoring the generation,
    /// `is_empty` → `true` → red.
    #[test]
    fn a_freed_id_stays_dead_when_its_slot_is_reused() {
        let mut t = Buffers::new();
        let [a, b, c] = [10, 20, 30].map(|m| t.insert(m, m as u64));
        assert_eq!([a, b, c], [1, 2, 3].map(RawBuffer));
        assert_eq!((t.len(), t.bytes()), (3, 60));
        assert_eq!(t.remove(b), Ok(20));
        assert_eq!(t.remove(b), Err(ErrorKind::UnknownBuffer { id: b.0 }));
        let d = t.insert(40, 40);
        assert_ne!(d, b);
        assert_eq!(t.get(b), Err(ErrorKind::UnknownBuffer { id: b.0 }));
        assert!(t.get_mut(b).is_err(), "a stale id changes nothing");
        assert!(!t.is_empty());
        assert_eq!((t.get(d), t.size(d)), (Ok(&40), Ok(40)));
        *t.get_mut(d).unwrap() = 41;
        assert_eq!((t.len(), t.bytes()), (3, 80));
        for id in [0, 4, 99, u64::MAX] {
            assert!(t.get(RawBuffer(id)).is_err(), "{id}");
        }
        let live: Vec<(RawBuffer, i32)> = t.iter().map(|(b, m)| (b, *m)).collect();
        assert_eq!(live, [(a, 10), (d, 41), (c, 30)]);
        assert_eq!(t.drain().collect::<Vec<_>>(), [10, 41, 30]);
        assert_eq!((t.len(), t.bytes(), t.is_empty()), (0, 0, true));
        assert!(t.get(a).is_err());
    }

    /// The current graph and the handles never alias; each lookup fails
    /// with its standard error; counts include the current graph.
    #[test]
    fn graphs_keep_the_current_one_apart_from_the_handles() {
        let mut g = Graphs::new();
        assert!(g.is_empty());
        assert_eq!(
            g.target(ReplayTarget::Current),
            Err(ErrorKind::NoCurrentGraph)
        );
        let h = g.insert("a");
        assert_eq!(g.set_current("cur"), None);
        assert_eq!(g.set_current("cur2"), Some("cur"));
        assert_eq!(g.len(), 2);
        assert!(!g.is_empty());
        assert_eq!(g.target(ReplayTarget::Current), Ok(&"cur2"));
        assert_eq!(g.target(ReplayTarget::Graph(h)), Ok(&"a"));
        *g.target_mut(ReplayTarget::Graph(h)).unwrap() = "a2";
        assert_eq!(g.get(h), Ok(&"a2"));
        let targets: Vec<ReplayTarget> = g.iter().map(|(t, _)| t).collect();
        assert_eq!(targets, [ReplayTarget::Current, ReplayTarget::Graph(h)]);
        assert_eq!(g.remove(h), Ok("a2"));
        assert_eq!(g.remove(h), Err(ErrorKind::UnknownGraph { id: h.0 }));
        assert_eq!(
            g.target_mut(ReplayTarget::Graph(h)).map(|_| ()),
            Err(ErrorKind::UnknownGraph { id: h.0 })
        );
        let h2 = g.insert("b");
        assert_ne!(h2, h);
        assert_eq!(g.take_current(), Some("cur2"));
        g.set_current("cur2");
        assert_eq!(g.drain().collect::<Vec<_>>(), ["cur2", "b"]);
        assert!(g.is_empty() && g.take_current().is_none());
    }
}
