//! Launches as the drivers receive them: checked here, once, so that a
//! driver's `unsafe` kernel or BLAS call can rely on the type instead of on
//! whoever called `Backend::launch`.

use crate::driver::StreamDriver;
use seam::kernel::MAX_BINDINGS;
use seam::ops::BufferList;
use seam::validate;
use seam::{DType, ErrorKind, Launch, OpKind, Params};
use std::ffi::c_void;
use std::marker::PhantomData;

/// Threads per block for elementwise and row kernels (a power of two, as
/// the row kernels' tree reductions need).
pub const BLOCK: u32 = 256;
/// Grid cap; kernels grid-stride beyond it.
pub const MAX_BLOCKS: u64 = 1 << 16;
/// The gemm.cu kernel's tile edge.
pub const GEMM_TILE: u32 = 16;

/// A grid or block shape (x, y, z).
pub type Dims = (u32, u32, u32);

/// A kernel launch over live buffers, made only by this crate.
///
/// Invariant (what a driver's `unsafe` launch may rely on): `function` is
/// the seam-kernels entry point of (op, dtype), whose parameters are the
/// op's buffers in signature order as device pointers, then [`Params`] by
/// value (kernels/cuda/README.md); `buffers` are live allocations of this
/// device, borrowed for `'a`, one per binding (at most [`MAX_BINDINGS`]),
/// each holding every element the op indexes for `params` (checked by
/// `seam::validate::lower` against their byte sizes, C12), from the
/// binding's view: `byte_offsets[k]` bytes into buffer `k`, which the
/// kernel's pointer argument is advanced by.
///
/// Held inline (`BufferList`s of at most eight entries): building one
/// allocates nothing (tests/no_alloc.rs).
pub struct KernelLaunch<'a, D: StreamDriver + ?Sized> {
    function: &'a D::Function,
    grid: Dims,
    block: Dims,
    buffers: BufferList<&'a D::Memory>,
    byte_offsets: BufferList<u64>,
    params: Params,
    early_start: bool,
}

impl<'a, D: StreamDriver> KernelLaunch<'a, D> {
    /// `function` must be the entry point of `(l.op, l.dtype)`; the backend
    /// passes the one its kernel table holds under that key.
    pub(crate) fn new(
        d: &D,
        function: &'a D::Function,
        l: &Launch,
        buffers: BufferList<&'a D::Memory>,
    ) -> Result<Self, ErrorKind> {
        // What `Backend::launch`'s caller guarantees (the trust boundary);
        // checked again only in debug builds.
        debug_assert_eq!(
            check(d, l, &buffers),
            Ok(()),
            "a launch core did not validate"
        );
        if buffers.len() > MAX_BINDINGS {
            // Not reached: `check` holds the launch to its op's arity, at
            // most MAX_BINDINGS. Refused here too, as `args` packs inline.
            return Err(ErrorKind::ArityMismatch {
                op: l.op,
                expected: l.op.signature().len(),
                found: buffers.len(),
            });
        }
        let (grid, block) = launch_config(l)?;
        Ok(KernelLaunch {
            function,
            grid,
            block,
            buffers,
            byte_offsets: byte_offsets(l),
            params: l.params,
            early_start: matches!(
                l.op,
                OpKind::User(k) if k.def().cuda.is_some_and(|c| c.early())
            ),
        })
    }

    /// Whether the kernel's CUDA source lets a launch start before the one
    /// before it ends (`seam::kernel::CudaSource::starts_early`); a driver
    /// that can launch so may, one that cannot launches it as any other.
    pub fn early_start(&self) -> bool {
        self.early_start
    }

    pub fn function(&self) -> &'a D::Function {
        self.function
    }
    pub fn grid(&self) -> Dims {
        self.grid
    }
    pub fn block(&self) -> Dims {
        self.block
    }
    /// One per binding, in signature order.
    pub fn buffers(&self) -> &[&'a D::Memory] {
        &self.buffers
    }
    /// The scalar block the kernel takes after the buffers.
    pub fn params(&self) -> &Params {
        &self.params
    }
    /// Each binding's view starts this many bytes into its buffer.
    pub fn byte_offsets(&self) -> &[u64] {
        &self.byte_offsets
    }
    /// The kernel's arguments: the views' device addresses (each buffer's
    /// address advanced by its view's byte offset) in signature order, then
    /// the [`Params`] block. Inline: allocates nothing.
    pub fn args(&self, d: &D) -> KernelArgs {
        let mut addresses = [0u64; MAX_BINDINGS];
        // At most MAX_BINDINGS buffers (`check`: the op's arity, which
        // `KernelDef::well_formed` and the catalogue bound), so none is cut.
        for ((a, b), off) in addresses
            .iter_mut()
            .zip(self.buffers.iter())
            .zip(self.byte_offsets.iter())
        {
            *a = d.device_address(b) + off;
        }
        KernelArgs {
            addresses,
            len: self.buffers.len(),
            params: self.params,
        }
    }
}

/// A kernel's argument values, packed once here for every driver, inline
/// (at most [`MAX_BINDINGS`] addresses, then the params block).
pub struct KernelArgs {
    /// The first `len` are the buffers' addresses; the rest are zero, unused.
    addresses: [u64; MAX_BINDINGS],
    len: usize,
    params: Params,
}

impl KernelArgs {
    /// The buffers' device addresses, in signature order.
    pub fn addresses(&self) -> &[u64] {
        &self.addresses[..self.len]
    }

    /// One pointer per kernel parameter, to its value (a 64-bit device
    /// address, then the 32-byte `repr(C)` Params), as `cuLaunchKernel` and
    /// `hipModuleLaunchKernel` take them: `addresses().len() + 1` pointers,
    /// inline. They point into `self`, which stays borrowed (mutably) for as
    /// long as the returned [`ArgPointers`] lives.
    pub fn pointers(&mut self) -> ArgPointers<'_> {
        let mut ptrs = [std::ptr::null_mut(); MAX_BINDINGS + 1];
        let len = self.len;
        for (p, a) in ptrs.iter_mut().zip(self.addresses[..len].iter_mut()) {
            *p = a as *mut u64 as *mut c_void;
        }
        ptrs[len] = &mut self.params as *mut Params as *mut c_void;
        ArgPointers {
            ptrs,
            len: len + 1,
            _args: PhantomData,
        }
    }
}

/// The pointer array a driver's launch reads ([`KernelArgs::pointers`]):
/// `len()` pointers, one per kernel parameter, each to its value in the
/// [`KernelArgs`] it borrows; the slots after them are null and never part
/// of the array the driver is given (a kernel reads exactly as many as it
/// has parameters, which is `len()`).
pub struct ArgPointers<'a> {
    ptrs: [*mut c_void; MAX_BINDINGS + 1],
    len: usize,
    _args: PhantomData<&'a mut KernelArgs>,
}

impl ArgPointers<'_> {
    /// Pointers to the kernel's parameter values (buffers, then params).
    pub fn as_slice(&self) -> &[*mut c_void] {
        &self.ptrs[..self.len]
    }
    /// How many parameters (one pointer each).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Never: every kernel takes its params block.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The array as `cuLaunchKernel`'s `kernelParams` and
    /// `hipModuleLaunchKernel`'s take it: `len()` valid pointers, each to a
    /// value in the borrowed [`KernelArgs`], valid while `self` lives.
    pub fn as_mut_ptr(&mut self) -> *mut *mut c_void {
        self.ptrs.as_mut_ptr()
    }
}

/// A launch for the vendor library, made only by this crate, with the
/// buffer invariant of [`KernelLaunch`] (one live allocation per binding,
/// each large enough for what the op indexes, C12). Inline, as it is.
pub struct VendorLaunch<'a, D: StreamDriver + ?Sized> {
    op: OpKind,
    dtype: DType,
    buffers: BufferList<&'a D::Memory>,
    byte_offsets: BufferList<u64>,
    params: Params,
}

impl<'a, D: StreamDriver> VendorLaunch<'a, D> {
    pub(crate) fn new(
        d: &D,
        l: &Launch,
        buffers: BufferList<&'a D::Memory>,
    ) -> Result<Self, ErrorKind> {
        // What `Backend::launch`'s caller guarantees (the trust boundary);
        // checked again only in debug builds.
        debug_assert_eq!(
            check(d, l, &buffers),
            Ok(()),
            "a launch core did not validate"
        );
        Ok(VendorLaunch {
            op: l.op,
            dtype: l.dtype,
            buffers,
            byte_offsets: byte_offsets(l),
            params: l.params,
        })
    }

    pub fn op(&self) -> OpKind {
        self.op
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Each binding's view starts this many bytes into its buffer (what the
    /// vendor call's pointers must be advanced by).
    pub fn byte_offsets(&self) -> &[u64] {
        &self.byte_offsets
    }
    /// One per binding, in signature order.
    pub fn buffers(&self) -> &[&'a D::Memory] {
        &self.buffers
    }
    pub fn params(&self) -> &Params {
        &self.params
    }
}

fn byte_offsets(l: &Launch) -> BufferList<u64> {
    l.buffers.iter().map(|v| v.byte_offset).collect()
}

/// Core's own validation (C12) over this backend's buffer sizes
/// (`validate::check_launch`: every check of `validate::lower` but core's
/// aliasing rule, with each view running to the end of its allocation):
/// what `Backend::launch`'s caller guarantees, asserted in debug builds.
pub(crate) fn check<D: StreamDriver>(
    d: &D,
    l: &Launch,
    buffers: &[&D::Memory],
) -> Result<(), ErrorKind> {
    validate::check_launch(l, |i| buffers.get(i).map_or(0, |m| d.memory_bytes(m)))
}

/// Grid and block for a kernel launch.
pub(crate) fn launch_config(l: &Launch) -> Result<(Dims, Dims), ErrorKind> {
    let p = &l.params;
    let blocks = |items: u64| items.div_ceil(BLOCK as u64).clamp(1, MAX_BLOCKS) as u32;
    Ok(match l.op {
        // A user kernel's grid and block are its own (core checked the grid
        // against the portable edge and the block against the portable size).
        OpKind::User(k) => {
            let def = k.def();
            let [gx, gy, gz] = (def.grid)(p);
            let [bx, by, bz] = def.workgroup_size;
            ((gx, gy, gz), (bx, by, bz))
        }
        OpKind::RmsNorm | OpKind::Softmax => (
            (u64::from(p.d0).clamp(1, MAX_BLOCKS) as u32, 1, 1),
            (BLOCK, 1, 1),
        ),
        OpKind::Gemm => {
            let gx = p.d1.div_ceil(GEMM_TILE);
            let gy = p.d0.div_ceil(GEMM_TILE);
            if gy > 65_535 {
                return Err(ErrorKind::TooLarge {
                    what: "gemm m on the kernel path",
                    detail: format!("m = {} needs {gy} row tiles, the grid allows 65535", p.d0),
                });
            }
            ((gx.max(1), gy.max(1), 1), (GEMM_TILE, GEMM_TILE, 1))
        }
        _ => ((blocks(u64::from(p.d0)), 1, 1), (BLOCK, 1, 1)),
    })
}

/// `len` bytes at `offset` lie inside an allocation of `bytes`: the check
/// every driver's copy makes before touching device memory.
pub fn check_range(
    call: &'static str,
    offset: usize,
    len: usize,
    bytes: usize,
) -> Result<(), ErrorKind> {
    match offset.checked_add(len) {
        Some(end) if end <= bytes => Ok(()),
        _ => Err(ErrorKind::driver(
            call,
            format!("{len} bytes at offset {offset} exceed the allocation's {bytes}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the sys layers' `SAFETY` comments rely on: `pointers()` gives
    /// one pointer per parameter, the k-th to address k, the last to the
    /// params block, and nothing is read past them (null slots).
    /// Mutations: the params pointer left out, or put at the end of the
    /// inline array instead of after the addresses → red.
    #[test]
    fn pointers_point_at_each_argument_in_order() {
        for len in 0..=MAX_BINDINGS {
            let mut args = KernelArgs {
                addresses: [7; MAX_BINDINGS],
                len,
                params: Params::default(),
            };
            let base = args.addresses.as_ptr() as usize;
            let params = &args.params as *const Params as usize;
            let ptrs = args.pointers();
            let got: Vec<usize> = ptrs.as_slice().iter().map(|p| *p as usize).collect();
            let nulls = ptrs.ptrs[ptrs.len()..].iter().all(|p| p.is_null());
            let mut want: Vec<usize> = (0..len).map(|k| base + 8 * k).collect();
            want.push(params);
            assert_eq!(got, want, "{len} buffers");
            assert!(nulls, "{len} buffers: a slot past the parameters is set");
            assert!(!ptrs.is_empty());
        }
    }
}
