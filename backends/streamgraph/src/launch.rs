//! Launches as the drivers receive them: checked here, once, so that a
//! driver's `unsafe` kernel or BLAS call can rely on the type instead of on
//! whoever called `Backend::launch`.

use crate::driver::StreamDriver;
use seam::ops::Role;
use seam::validate::{self, BufferMeta};
use seam::{BufferId, DType, ErrorKind, Launch, OpCall, OpKind, Params, RawBuffer};
use std::ffi::c_void;

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
/// device, borrowed for `'a`, one per binding, each holding every element
/// the op indexes for `params` (checked by `seam::validate::lower` against
/// their byte sizes, C12), from the binding's view: `byte_offsets[k]`
/// bytes into buffer `k`, which the kernel's pointer argument is advanced by.
pub struct KernelLaunch<'a, D: StreamDriver + ?Sized> {
    function: &'a D::Function,
    grid: Dims,
    block: Dims,
    buffers: Vec<&'a D::Memory>,
    byte_offsets: Vec<u64>,
    params: Params,
}

impl<'a, D: StreamDriver> KernelLaunch<'a, D> {
    /// `function` must be the entry point of `(l.op, l.dtype)`; the backend
    /// passes the one its kernel table holds under that key.
    pub(crate) fn new(
        d: &D,
        function: &'a D::Function,
        l: &Launch,
        buffers: Vec<&'a D::Memory>,
    ) -> Result<Self, ErrorKind> {
        check(d, l, &buffers)?;
        let (grid, block) = launch_config(l)?;
        Ok(KernelLaunch {
            function,
            grid,
            block,
            buffers,
            byte_offsets: l.buffers.iter().map(|v| v.byte_offset).collect(),
            params: l.params,
        })
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
    /// the [`Params`] block.
    pub fn args(&self, d: &D) -> KernelArgs {
        KernelArgs {
            addresses: self
                .buffers
                .iter()
                .zip(&self.byte_offsets)
                .map(|(b, off)| d.device_address(b) + off)
                .collect(),
            params: self.params,
        }
    }
}

/// A kernel's argument values, packed once here for every driver.
pub struct KernelArgs {
    addresses: Vec<u64>,
    params: Params,
}

impl KernelArgs {
    /// The buffers' device addresses, in signature order.
    pub fn addresses(&self) -> &[u64] {
        &self.addresses
    }

    /// One pointer per kernel parameter, to its value (a 64-bit device
    /// address, then the 32-byte `repr(C)` Params), as `cuLaunchKernel` and
    /// `hipModuleLaunchKernel` take them. Valid while `self` is borrowed.
    pub fn pointers(&mut self) -> Vec<*mut c_void> {
        let mut ptrs: Vec<*mut c_void> = self
            .addresses
            .iter_mut()
            .map(|a| a as *mut u64 as *mut c_void)
            .collect();
        ptrs.push(&mut self.params as *mut Params as *mut c_void);
        ptrs
    }
}

/// A launch for the vendor library, made only by this crate, with the
/// buffer invariant of [`KernelLaunch`] (one live allocation per binding,
/// each large enough for what the op indexes, C12).
pub struct VendorLaunch<'a, D: StreamDriver + ?Sized> {
    op: OpKind,
    dtype: DType,
    buffers: Vec<&'a D::Memory>,
    byte_offsets: Vec<u64>,
    params: Params,
}

impl<'a, D: StreamDriver> VendorLaunch<'a, D> {
    pub(crate) fn new(d: &D, l: &Launch, buffers: Vec<&'a D::Memory>) -> Result<Self, ErrorKind> {
        check(d, l, &buffers)?;
        Ok(VendorLaunch {
            op: l.op,
            dtype: l.dtype,
            buffers,
            byte_offsets: l.buffers.iter().map(|v| v.byte_offset).collect(),
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

/// Core's own validation (C12), run again over this backend's buffer sizes:
/// a `Backend` can be called directly, not only through core, and the
/// launch types above promise what it checks. The ids given to it are
/// binding positions, so core's aliasing rule (about results, not memory
/// safety) is not checked twice.
fn check<D: StreamDriver>(d: &D, l: &Launch, buffers: &[&D::Memory]) -> Result<(), ErrorKind> {
    let sig = l.op.signature();
    let call = OpCall {
        op: l.op,
        buffers: l
            .buffers
            .iter()
            .enumerate()
            // To the end of the allocation: what memory safety needs.
            .map(|(i, v)| BufferId(i as u64).from_offset(v.offset as usize))
            .collect(),
        params: l.params,
    };
    let meta = |id: BufferId| {
        let unknown = ErrorKind::UnknownBuffer { id: id.0 };
        let i = usize::try_from(id.0).map_err(|_| unknown.clone())?;
        let dtype = match sig.get(i).map(|b| b.role) {
            Some(Role::Fixed(d)) => d,
            _ => l.dtype,
        };
        let bytes = d.memory_bytes(buffers.get(i).ok_or(unknown)?);
        Ok(BufferMeta {
            raw: RawBuffer(id.0),
            dtype,
            len: bytes / dtype.size(),
        })
    };
    let lowered = validate::lower(&call, meta)?;
    if lowered.dtype != l.dtype {
        return Err(ErrorKind::UnsupportedDtype {
            op: l.op,
            dtype: l.dtype,
        });
    }
    Ok(())
}

/// Grid and block for a kernel launch.
fn launch_config(l: &Launch) -> Result<(Dims, Dims), ErrorKind> {
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
