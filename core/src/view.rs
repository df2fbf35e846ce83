//! Views: what every binding of a launch is. A [`View`] is a buffer, an
//! element offset and a length, as the user states it; a [`RawView`] is
//! the same after core checked it (C12), as a backend receives it.

use crate::BufferId;

/// One binding of a launch: `len` elements of `buffer` from element
/// `offset` (`len: None`: to the buffer's end). A [`BufferId`] converts to
/// the whole buffer. Core checks the range lies in the buffer and holds
/// what the op needs (C12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct View {
    /// The buffer.
    pub buffer: BufferId,
    /// The view's first element.
    pub offset: usize,
    /// Its length in elements (`None`: to the buffer's end).
    pub len: Option<usize>,
}

impl From<BufferId> for View {
    fn from(buffer: BufferId) -> View {
        View {
            buffer,
            offset: 0,
            len: None,
        }
    }
}

impl BufferId {
    /// `len` elements of this buffer from element `offset`.
    pub fn view(self, offset: usize, len: usize) -> View {
        View {
            buffer: self,
            offset,
            len: Some(len),
        }
    }

    /// This buffer from element `offset` to its end.
    pub fn from_offset(self, offset: usize) -> View {
        View {
            buffer: self,
            offset,
            len: None,
        }
    }
}

/// One validated binding as a backend receives it: its raw buffer, and the
/// view's first element (`offset`, in the binding's elements; also as
/// `byte_offset`) and length (`len` elements, each at least what the op
/// needs). GPU kernels see the offset (CUDA: the pointer is advanced by
/// `byte_offset`; WGSL: `p.o<k>`), so any offset works on every backend.
///
/// Made by core's validation; outside core only [`RawView::whole`] builds
/// one, and a [`Launch`](crate::Launch) carrying it still needs core (or
/// the `unsafe` [`Launch::new_unchecked`](crate::Launch::new_unchecked)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RawView {
    /// The backend's handle of the buffer.
    pub buffer: crate::RawBuffer,
    /// The view's first element.
    pub offset: u32,
    /// The same, in bytes.
    pub byte_offset: u64,
    /// The view's length in elements.
    pub len: u64,
}

impl RawView {
    /// `len` elements of `buffer` from element `offset`, elements of
    /// `elem_size` bytes (for a backend's own tests and tools; a launch
    /// carrying it is still made only by core, or by the `unsafe`
    /// [`Launch::new_unchecked`](crate::Launch::new_unchecked)).
    pub fn at(buffer: crate::RawBuffer, offset: u32, elem_size: usize, len: u64) -> RawView {
        RawView {
            buffer,
            offset,
            byte_offset: u64::from(offset) * elem_size as u64,
            len,
        }
    }

    /// The whole of `buffer` from element 0 (`len` elements).
    pub fn whole(buffer: crate::RawBuffer, len: u64) -> RawView {
        RawView {
            buffer,
            offset: 0,
            byte_offset: 0,
            len,
        }
    }
}
