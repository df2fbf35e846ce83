//! Ids: what a user holds for a buffer or graph ([`BufferId`], [`GraphId`],
//! each carrying the device that made it) and what a backend hands core
//! for one ([`RawBuffer`], [`RawGraph`]). The bottom of core: they name
//! things and depend on nothing.

/// A backend's handle for an allocation. Opaque to core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RawBuffer(pub u64);

/// A backend's handle for a captured, instantiated graph. Opaque to core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RawGraph(pub u64);

/// A buffer, by id. An id carries the device that made it, so a buffer of
/// another device is refused by name (`ForeignBuffer`, C12) instead of
/// reaching a buffer that happens to share its number, with no table
/// shared by every device. Opaque: only a device makes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId {
    /// The serial of the `Device` that made it.
    pub(crate) device: u64,
    /// Its number on that device.
    pub(crate) n: u64,
}

/// A graph handle, by id; carries its device, like [`BufferId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphId {
    pub(crate) device: u64,
    pub(crate) n: u64,
}

impl BufferId {
    /// Its number on its device, as errors and traces print it.
    pub fn number(self) -> u64 {
        self.n
    }

    /// An id no device holds (every device refuses it as unknown): for
    /// tests of refusals, and for building a call only to read its
    /// parameters.
    pub const fn unknown() -> BufferId {
        BufferId {
            device: 0,
            n: u64::MAX,
        }
    }
}

impl GraphId {
    /// Its number on its device, as errors and traces print it.
    pub fn number(self) -> u64 {
        self.n
    }

    /// An id no device holds (every device refuses it as unknown).
    pub const fn unknown() -> GraphId {
        GraphId {
            device: 0,
            n: u64::MAX,
        }
    }
}
