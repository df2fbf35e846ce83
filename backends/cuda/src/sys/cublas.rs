//! cuBLAS: one handle per backend, bound to its stream, with its own
//! workspace so that no call made through it allocates (C7).

use super::driver::{DeviceMemory, Stream};
use super::{check_blas, cublas};
use cudarc::cublas::sys as blas;
use cudarc::driver::sys as cu;
use seam::{DType, ErrorKind};
use seam_streamgraph::VendorLaunch;
use std::ffi::{c_int, c_void};
use std::ptr;

struct BlasHandle(blas::cublasHandle_t);

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: destroys the handle created in Blas::new, once (owned).
        let _ = unsafe { blas::cublasDestroy_v2(self.0) };
    }
}

/// A cuBLAS handle bound to one stream, with its own workspace set so that
/// no call made through it allocates (C7: capturable after prepare).
pub struct Blas {
    handle: BlasHandle,
    /// The stream the handle queues on; every call checks it is given that one.
    stream: cu::CUstream,
    /// Declared after the handle: dropped after it.
    _workspace: DeviceMemory,
}

// SAFETY: cuBLAS handles may be used from any thread, one at a time (core
// serialises calls), with the context current; the stream handle is only
// compared, never used, through this field.
unsafe impl Send for Blas {}

impl Blas {
    pub fn new(stream: &Stream, workspace_bytes: usize) -> Result<Self, ErrorKind> {
        cublas().map_err(|reason| ErrorKind::Unavailable { reason })?;
        let workspace = DeviceMemory::alloc(workspace_bytes)?;
        let mut h: blas::cublasHandle_t = ptr::null_mut();
        // SAFETY: the library and its symbols are present (checked above);
        // `h` is a valid out-pointer; the handle binds to the current context.
        check_blas("cublasCreate", unsafe { blas::cublasCreate_v2(&mut h) })?;
        let handle = BlasHandle(h);
        // SAFETY: handle and stream are live; the two stream types are the
        // same driver object under two binding names.
        check_blas("cublasSetStream", unsafe {
            blas::cublasSetStream_v2(handle.0, stream.raw() as blas::cudaStream_t)
        })?;
        // SAFETY: handle is live; the workspace is a live device allocation
        // of the size passed, and outlives the handle (field order).
        check_blas("cublasSetWorkspace", unsafe {
            blas::cublasSetWorkspace_v2(handle.0, workspace.ptr() as *mut c_void, workspace.bytes())
        })?;
        // Plain f32 math: no TF32 (gemm f32's bound is 1e-4 relative).
        // SAFETY: handle is live.
        check_blas("cublasSetMathMode", unsafe {
            blas::cublasSetMathMode(handle.0, blas::cublasMath_t::CUBLAS_DEFAULT_MATH)
        })?;
        Ok(Blas {
            handle,
            stream: stream.raw(),
            _workspace: workspace,
        })
    }

    /// Row-major `c[m×n] = a[m×k] · b[k×n]`, f32 accumulation and output.
    /// cuBLAS is column-major, so it computes `cᵀ = bᵀ · aᵀ`: a row-major
    /// matrix is its transpose in column-major with the same leading dimension.
    pub fn gemm_row_major(
        &self,
        stream: &Stream,
        l: &VendorLaunch<'_, Stream>,
    ) -> Result<(), ErrorKind> {
        if stream.raw() != self.stream {
            return Err(ErrorKind::driver(
                "cublasGemmEx",
                "the handle is bound to another stream",
            ));
        }
        // Inside a conditional body (C14) the work is captured on the
        // body's stream: the handle queues there for this call.
        let at = stream.capturing();
        if at != self.stream {
            self.set_stream(at)?;
            let r = self.gemm_on(l);
            self.set_stream(self.stream)?;
            return r;
        }
        self.gemm_on(l)
    }

    /// Bind the handle to `s`, a live stream of its context.
    fn set_stream(&self, s: cu::CUstream) -> Result<(), ErrorKind> {
        // SAFETY: the handle is live; `s` is the backend's stream or one of
        // its body streams, live while the backend is (the two stream types
        // are the same driver object under two binding names).
        check_blas("cublasSetStream", unsafe {
            blas::cublasSetStream_v2(self.handle.0, s as blas::cudaStream_t)
        })
    }

    /// The GEMM of `l` on the stream the handle is bound to now.
    fn gemm_on(&self, l: &VendorLaunch<'_, Stream>) -> Result<(), ErrorKind> {
        let dtype = match l.dtype() {
            DType::F32 => blas::cudaDataType::CUDA_R_32F,
            DType::F16 => blas::cudaDataType::CUDA_R_16F,
            DType::Bf16 => blas::cudaDataType::CUDA_R_16BF,
            dtype => return Err(ErrorKind::OpUnsupported { op: l.op(), dtype }),
        };
        let &[a, b, c] = l.buffers() else {
            return Err(ErrorKind::ArityMismatch {
                op: l.op(),
                expected: 3,
                found: l.buffers().len(),
            });
        };
        let [a_off, b_off, c_off] = match l.byte_offsets() {
            &[a, b, c] => [a, b, c],
            _ => [0; 3],
        };
        let p = l.params();
        let dim = |v: u32, what: &str| {
            c_int::try_from(v).map_err(|_| {
                ErrorKind::driver(
                    "cublasGemmEx",
                    format!("{what} = {v} exceeds cuBLAS's int range"),
                )
            })
        };
        let (m, n, k) = (dim(p.d0, "m")?, dim(p.d1, "n")?, dim(p.d2, "k")?);
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the handle queues on the backend's stream or one of its
        // body streams (`gemm_row_major`), live. A VendorLaunch (made only
        // by seam-streamgraph after checking the launch against the op,
        // C12) holds live allocations a, b, c of
        // at least m·k, k·n and m·n elements of the dtypes passed (c is f32).
        // alpha and beta are host f32 values read during the call (host
        // pointer mode), which is also what makes the call capturable:
        // nothing is read from the host at replay.
        check_blas("cublasGemmEx", unsafe {
            blas::cublasGemmEx(
                self.handle.0,
                blas::cublasOperation_t::CUBLAS_OP_N,
                blas::cublasOperation_t::CUBLAS_OP_N,
                n,
                m,
                k,
                &alpha as *const f32 as *const c_void,
                (b.ptr() + b_off) as *const c_void,
                dtype,
                n,
                (a.ptr() + a_off) as *const c_void,
                dtype,
                k,
                &beta as *const f32 as *const c_void,
                (c.ptr() + c_off) as *mut c_void,
                blas::cudaDataType::CUDA_R_32F,
                n,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        })
    }
}
