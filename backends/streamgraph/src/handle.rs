//! The owning driver handle, declared once for every backend's `sys` layer.

/// Declares an owning handle: a newtype over a raw driver handle that is
/// `Send` and destroys the handle exactly once, on drop. The expansion is
/// `unsafe` code, so it belongs in a backend's `sys` module.
///
/// ```ignore
/// seam_streamgraph::owned_handle! {
///     /// A captured graph.
///     pub struct Graph(cu::CUgraph) => cu::cuGraphDestroy;
/// }
/// ```
#[macro_export]
macro_rules! owned_handle {
    ($(#[$attr:meta])* $vis:vis struct $name:ident($raw:ty) => $destroy:path;) => {
        $(#[$attr])*
        $vis struct $name($raw);

        // SAFETY: a driver handle is an opaque identifier the driver accepts
        // from any thread (with the device current there, which the backend
        // ensures before every call); the value is its only owner, and the
        // backend serialises calls (core holds it behind a lock).
        unsafe impl Send for $name {}

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: the driver made this handle for this value alone
                // and it is never copied out, so this is its one destroy; a
                // failure is only reported by the driver, never acted on.
                let _ = unsafe { $destroy(self.0) };
            }
        }
    };
}
