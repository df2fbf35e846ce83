//! [`BufferList`]: the buffers of a launch, inline for every op (the
//! catalogue's and user kernels', up to `signature::MAX_BINDINGS` bindings),
//! so the eager launch and replay paths allocate nothing
//! (core/tests/no_alloc.rs).

use std::fmt;

/// A launch's buffers, in signature order: a slice to whoever reads it
/// (`Deref<Target = [T]>`), held inline up to [`BufferList::INLINE`]
/// entries, so building, cloning and dropping one allocates nothing for
/// any op (at most eight bindings). Longer lists (only ever a wrong arity,
/// which core refuses) spill to a `Vec`.
pub struct BufferList<T: Copy>(Repr<T>);

#[derive(Clone)]
enum Repr<T: Copy> {
    /// `len` live entries; the rest are never read (built as copies of
    /// the first; [`BufferList::clone_from`] leaves them as they were).
    Inline { len: u8, items: [T; 8] },
    /// Empty (`Vec::new()` does not allocate) or longer than `INLINE`.
    Spilled(Vec<T>),
}

impl<T: Copy> BufferList<T> {
    /// Entries held without a heap allocation.
    pub const INLINE: usize = crate::signature::MAX_BINDINGS;

    /// The empty list (allocates nothing).
    pub const fn new() -> Self {
        BufferList(Repr::Spilled(Vec::new()))
    }

    /// A list holding a copy of `items`.
    pub fn from_slice(items: &[T]) -> Self {
        match items {
            [] => Self::new(),
            [first, ..] if items.len() <= Self::INLINE => {
                let mut inline = [*first; 8];
                inline[..items.len()].copy_from_slice(items);
                BufferList(Repr::Inline {
                    len: items.len() as u8,
                    items: inline,
                })
            }
            _ => BufferList(Repr::Spilled(items.to_vec())),
        }
    }

    /// The entries, in order.
    pub fn as_slice(&self) -> &[T] {
        match &self.0 {
            Repr::Inline { len, items } => &items[..usize::from(*len)],
            Repr::Spilled(v) => v,
        }
    }

    /// The entries, in order, to change in place.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.0 {
            Repr::Inline { len, items } => &mut items[..usize::from(*len)],
            Repr::Spilled(v) => v,
        }
    }
}

impl<T: Copy> Clone for BufferList<T> {
    fn clone(&self) -> Self {
        BufferList(self.0.clone())
    }

    /// Copies only the live entries where both lists are inline: a graph
    /// update stores each rebound launch in its record this way.
    fn clone_from(&mut self, source: &Self) {
        match (&mut self.0, &source.0) {
            (
                Repr::Inline { len, items },
                Repr::Inline {
                    len: from_len,
                    items: from,
                },
            ) => {
                let n = usize::from(*from_len);
                items[..n].copy_from_slice(&from[..n]);
                *len = *from_len;
            }
            (this, from) => *this = from.clone(),
        }
    }
}

impl<T: Copy> Default for BufferList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy> std::ops::Deref for BufferList<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy> std::ops::DerefMut for BufferList<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for BufferList<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl<T: Copy + PartialEq> PartialEq for BufferList<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Eq> Eq for BufferList<T> {}

impl<T: Copy + PartialEq> PartialEq<[T]> for BufferList<T> {
    fn eq(&self, other: &[T]) -> bool {
        self.as_slice() == other
    }
}

impl<T: Copy + PartialEq, const N: usize> PartialEq<[T; N]> for BufferList<T> {
    fn eq(&self, other: &[T; N]) -> bool {
        self.as_slice() == other
    }
}

impl<T: Copy + PartialEq> PartialEq<Vec<T>> for BufferList<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy> From<&[T]> for BufferList<T> {
    fn from(items: &[T]) -> Self {
        Self::from_slice(items)
    }
}

impl<T: Copy, const N: usize> From<[T; N]> for BufferList<T> {
    fn from(items: [T; N]) -> Self {
        Self::from_slice(&items)
    }
}

impl<T: Copy> From<Vec<T>> for BufferList<T> {
    fn from(items: Vec<T>) -> Self {
        if items.len() > Self::INLINE {
            BufferList(Repr::Spilled(items))
        } else {
            Self::from_slice(&items)
        }
    }
}

impl<T: Copy> From<BufferList<T>> for Vec<T> {
    fn from(list: BufferList<T>) -> Vec<T> {
        match list.0 {
            Repr::Spilled(v) => v,
            Repr::Inline { .. } => list.as_slice().to_vec(),
        }
    }
}

impl<T: Copy> FromIterator<T> for BufferList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut inline: Option<[T; 8]> = None;
        let mut len = 0;
        let mut iter = iter.into_iter();
        for item in iter.by_ref() {
            let items = inline.get_or_insert([item; 8]);
            items[len] = item;
            len += 1;
            if len == Self::INLINE {
                break;
            }
        }
        let Some(items) = inline else {
            return Self::new();
        };
        match iter.next() {
            None => BufferList(Repr::Inline {
                len: len as u8,
                items,
            }),
            Some(more) => {
                let mut v = items.to_vec();
                v.push(more);
                v.extend(iter);
                BufferList(Repr::Spilled(v))
            }
        }
    }
}

impl<'a, T: Copy> IntoIterator for &'a BufferList<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `BufferList` is the slice it was built from, whatever the length
    /// and however it was built; equality ignores the unused inline slots.
    /// Mutations: `as_slice` returning all eight inline slots, `from_iter`
    /// dropping the item that overflows the inline part, `from_slice`
    /// spilling at `INLINE` instead of above it, any comparison with a
    /// slice, array or `Vec` answering `true` or `false`, `From<&[T]>` or
    /// the borrowed iterator giving an empty list → red.
    #[test]
    fn buffer_lists_are_their_slices() {
        for len in 0..=10u64 {
            let items: Vec<u64> = (10..10 + len).collect();
            let lists = [
                BufferList::from_slice(&items),
                BufferList::from(items.clone()),
                items.iter().copied().collect(),
                BufferList::from(&items[..]),
            ];
            let mut other = items.clone();
            other.push(0);
            for list in &lists {
                assert_eq!(list.as_slice(), &items[..], "len {len}");
                assert_eq!(list.len(), items.len());
                assert_eq!(*list, items);
                assert!(*list == items[..] && !(*list == other[..]));
                assert_ne!(*list, other);
                assert_eq!(Vec::from(list.clone()), items);
                assert_eq!(list.into_iter().copied().collect::<Vec<_>>(), items);
                assert_eq!(format!("{list:?}"), format!("{items:?}"));
                let inline = matches!(list.0, Repr::Inline { .. });
                assert_eq!(inline, (1..=8).contains(&len), "len {len}");
            }
        }
        // Same entries, different padding: equal.
        let mut x = BufferList::from([7u64, 8, 9]);
        let y = BufferList::from_slice(&[7u64, 8, 9]);
        if let Repr::Inline { items, .. } = &mut x.0 {
            items[3] = 99;
        }
        assert_eq!(x, y);
        assert_ne!(x, BufferList::from([7u64, 8]));
        assert!(x == [7, 8, 9] && x != [7, 8, 10]);
        x[1] = 0;
        assert_eq!(x, [7, 0, 9]);
    }

    /// `clone_from` leaves a list equal to its source, from and to every
    /// length (inline to inline copying only the live entries, spilled on
    /// either side), and `clone` too. Mutations: the live entries or the
    /// length left uncopied, or the spilled case dropped → red.
    #[test]
    fn clone_from_gives_the_source_at_every_length() {
        for from_len in 0..=10u64 {
            let source: BufferList<u64> = (100..100 + from_len).collect();
            assert_eq!(source.clone(), source);
            for to_len in 0..=10u64 {
                let mut target: BufferList<u64> = (0..to_len).collect();
                target.clone_from(&source);
                assert_eq!(target, source, "from {from_len} into {to_len}");
                assert_eq!(target.len(), source.len());
            }
        }
    }
}
