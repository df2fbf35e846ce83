//! The names a user holds: which graph a replay targets ([`GraphRef`]) and
//! the owned handles that release what they name on drop ([`Buffer`],
//! [`Graph`], [`CaptureScope`]).

use super::Device;
use crate::dtype::Element;
use crate::error::Result;
pub use crate::ids::{BufferId, GraphId};
use std::marker::PhantomData;

/// Which graph a replay targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphRef {
    /// The device's *current* graph: the one the last
    /// [`CaptureScope::end_into_current`] made (it replaces the previous
    /// one). The backend sees it as `ReplayTarget::Current`.
    Current,
    /// A handle made by [`CaptureScope::end_graph`].
    Handle(GraphId),
}

/// A typed buffer owned by the caller; freed on drop (deferred while a
/// capture is open or a graph still reads it, see [`LowLevel::release_buffer`](crate::LowLevel::release_buffer)).
pub struct Buffer<T: Element> {
    pub(super) dev: Device,
    pub(super) id: BufferId,
    pub(super) len: usize,
    pub(super) _t: PhantomData<T>,
}

impl<T: Element> Buffer<T> {
    /// The buffer's id, for building launches ([`View`](crate::View)s convert
    /// from it).
    pub fn id(&self) -> BufferId {
        self.id
    }
    /// Length in elements (never zero: a zero-length allocation is refused).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false: a zero-length allocation is refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Write the whole buffer from element 0 (`data` may be shorter).
    pub fn write(&self, data: &[T]) -> Result<()> {
        self.dev.write(self.id, 0, data)
    }
    /// Read the whole buffer.
    pub fn read(&self) -> Result<Vec<T>> {
        self.dev.read(self.id)
    }
}

impl<T: Element> Drop for Buffer<T> {
    fn drop(&mut self) {
        self.dev.release_buffer(self.id);
    }
}

/// A graph handle owned by the caller; destroyed on drop (deferred while a
/// capture is open, see [`LowLevel::release_graph`](crate::LowLevel::release_graph)). Replays re-execute the
/// captured launches over the buffers' current contents (C1); changing
/// them without a new capture is [`Device::update`].
///
/// ```
/// # fn main() -> seam::Result<()> {
/// use seam::{ops, Change, Device};
/// # let backend = Box::new(seam::testing::NullBackend::new(seam::CaptureSupport::Native));
/// let dev = Device::new(backend);
/// let (a, b) = (dev.buffer_from(&[1u32; 4])?, dev.buffer_from(&[2u32; 4])?);
/// let scope = dev.capture()?;
/// dev.launch(&ops::add(a.id(), a.id(), a.id(), 4))?;
/// let graph = scope.end_graph()?;
/// graph.replay()?;
/// graph.replay()?;
/// assert_eq!(graph.replay_count()?, 2);
/// dev.update(&graph, &[Change::Rebind { old: a.id(), new: b.id() }])?;
/// graph.replay()?; // doubles b now
/// # Ok(())
/// # }
/// ```
pub struct Graph {
    pub(super) dev: Device,
    pub(super) id: GraphId,
}

impl Graph {
    /// The graph's id.
    pub fn id(&self) -> GraphId {
        self.id
    }
    /// Queue one re-execution of the graph over the buffers' current contents
    /// (C1). Returns once queued, not once run: read a buffer, or
    /// [`Device::synchronize`], to wait for it.
    pub fn replay(&self) -> Result<()> {
        self.dev.replay(GraphRef::Handle(self.id))
    }
    /// How many replays of this graph core has queued (C10).
    pub fn replay_count(&self) -> Result<u64> {
        self.dev.replay_count(GraphRef::Handle(self.id))
    }
    /// The device the graph belongs to (where [`Device::update`] changes it).
    pub fn device(&self) -> &Device {
        &self.dev
    }
}

impl From<&&Graph> for GraphRef {
    fn from(g: &&Graph) -> GraphRef {
        GraphRef::Handle(g.id)
    }
}

impl From<&Graph> for GraphRef {
    fn from(g: &Graph) -> GraphRef {
        GraphRef::Handle(g.id)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        self.dev.release_graph(self.id);
    }
}

/// An open capture. Ending it consumes the scope; dropping it (early return,
/// `?`, panic) aborts the capture so the device is never left capturing.
///
/// ```
/// # fn main() -> seam::Result<()> {
/// use seam::{ops, Device, GraphRef};
/// # let backend = Box::new(seam::testing::NullBackend::new(seam::CaptureSupport::Native));
/// let dev = Device::new(backend);
/// let x = dev.buffer_from(&[1.0f32; 8])?;
/// {
///     let scope = dev.capture()?;
///     dev.launch(&ops::fill(x.id(), 8, 0))?;
///     // dropped without ending: aborted, nothing recorded survives
/// }
/// let scope = dev.capture()?;
/// dev.launch(&ops::fill(x.id(), 8, 0))?;
/// scope.end_into_current()?; // the device's current graph
/// dev.replay(GraphRef::Current)?;
/// # Ok(())
/// # }
/// ```
///
/// A capture belongs to the thread that began it (a CUDA stream capture
/// does too), so the scope is neither `Send` nor `Sync` (decision D10): it
/// cannot be ended or dropped on a thread whose abort the device would
/// refuse, which would leave the device capturing and every later launch on
/// the owning thread recorded instead of run.
///
/// ```compile_fail
/// fn needs_send<T: Send>(_: T) {}
/// fn scope_is_not_send(s: seam::CaptureScope<'_>) {
///     needs_send(s);
/// }
/// ```
pub struct CaptureScope<'d> {
    pub(super) dev: &'d Device,
    pub(super) open: bool,
    /// `!Send + !Sync`: see the type's documentation.
    pub(super) _owning_thread: PhantomData<*const ()>,
}

impl CaptureScope<'_> {
    /// End into a new owned graph handle.
    pub fn end_graph(mut self) -> Result<Graph> {
        let id = self.dev.end_capture_graph()?;
        self.open = false;
        Ok(Graph {
            dev: self.dev.clone(),
            id,
        })
    }

    /// End into the device's current graph ([`GraphRef::Current`]).
    pub fn end_into_current(mut self) -> Result<()> {
        self.dev.end_capture_into_current()?;
        self.open = false;
        Ok(())
    }
}

impl Drop for CaptureScope<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.dev.abort_capture();
        }
    }
}
