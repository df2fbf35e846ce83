//! Small slices built on the stack: what a launch or a recording call needs
//! per dispatch (a catalogue op has at most three bindings, a user kernel
//! at most `seam::kernel::MAX_BINDINGS`, each set one more: the parameter
//! block), without a heap allocation.

/// Call `f` with the slice `[item(0), …, item(n - 1)]`: on the stack for up
/// to [`INLINE`] items, in a `Vec` beyond.
pub(crate) fn with_slice<T: Copy, R>(
    n: usize,
    item: impl Fn(usize) -> T,
    f: impl FnOnce(&[T]) -> R,
) -> R {
    if n == 0 {
        return f(&[]);
    }
    if n > INLINE {
        let items: Vec<T> = (0..n).map(item).collect();
        return f(&items);
    }
    let mut items = [item(0); INLINE];
    for (i, slot) in items.iter_mut().enumerate().take(n).skip(1) {
        *slot = item(i);
    }
    f(&items[..n])
}

/// Items [`with_slice`] keeps on the stack: a dispatch's descriptor writes
/// (every binding and the parameter block).
pub(crate) const INLINE: usize = seam::kernel::MAX_BINDINGS + 1;

#[cfg(test)]
mod tests {
    use super::*;

    /// The slice is the items, whatever `n`, on either side of `INLINE`.
    /// Mutations: `take(n)` → `take(n - 1)`, `[..n]` → `[..]` → red.
    #[test]
    fn with_slice_is_the_items() {
        for n in 0..=INLINE + 3 {
            let want: Vec<usize> = (0..n).map(|i| 10 * i + 1).collect();
            assert_eq!(with_slice(n, |i| 10 * i + 1, |s| s.to_vec()), want);
        }
    }

    /// Up to `INLINE` items nothing is allocated (the slice is on the
    /// stack); beyond, the items go to the heap (which the counter sees).
    /// Mutation: `n > INLINE` → `n >= INLINE` → red at `INLINE` items.
    #[test]
    fn with_slice_allocates_only_beyond_inline() {
        use crate::counting::allocations;
        let len = |n: usize| allocations(|| assert_eq!(with_slice(n, |i| i, |s| s.len()), n));
        for n in 0..=INLINE {
            assert_eq!(len(n), 0, "{n} items");
        }
        assert!(len(INLINE + 1) > 0, "{} items", INLINE + 1);
    }

    /// A dispatch's descriptor writes (a user kernel's most bindings and
    /// the parameter block) stay on the stack. Mutation: `MAX_BINDINGS + 1`
    /// → `MAX_BINDINGS - 1` in `INLINE` → red.
    #[test]
    fn a_dispatch_of_the_most_bindings_writes_its_descriptors_on_the_stack() {
        use crate::counting::allocations;
        let n = seam::kernel::MAX_BINDINGS + 1;
        assert_eq!(
            allocations(|| assert_eq!(with_slice(n, |i| i, |s| s.len()), n)),
            0
        );
    }
}
