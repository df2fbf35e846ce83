//! The device's compiled kernels: one MSL library per catalogue op (naga's
//! build-time output, [`crate::msl`]) or per user kernel (lowered at
//! registration, [`crate::user`]), compiled with `newLibraryWithSource` on
//! first use, and one pipeline per entry point, cached for the device's
//! life. Pipelines are made ICB-capable when capture is Native, so one
//! pipeline serves eager and captured launches.

use crate::msl;
use crate::sys::{self, Device, Pipeline};
use crate::user;
use seam::{DType, ErrorKind, OpKind};
use std::collections::hash_map::{Entry, HashMap};
use std::sync::Arc;

/// One compiled entry point: everything a dispatch of it needs besides
/// the launch's own buffers and params.
pub struct Compiled {
    pub pipeline: Pipeline,
    /// For each member of `_mslBufferSizes`, the binding it describes.
    pub sizes: Vec<u32>,
    /// Length of each `threadgroup` argument.
    pub threadgroup_memory: Vec<u32>,
    /// Threads per threadgroup.
    pub threads: [u32; 3],
}

/// What a compiled entry point is cached under.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// A catalogue entry point, by its MSL name.
    Catalogue(&'static str),
    /// A user kernel (its one entry point).
    User(seam::Kernel),
}

/// The cache.
#[derive(Default)]
pub struct Kernels {
    /// One per catalogue op or user kernel.
    libraries: HashMap<OpKind, sys::Library>,
    compiled: HashMap<Key, Arc<Compiled>>,
}

impl Kernels {
    /// The compiled entry point an (op, dtype) launch runs, compiling it on
    /// first use. `native`: the pipeline must be usable from an ICB.
    pub fn get(
        &mut self,
        device: &Device,
        native: bool,
        op: OpKind,
        dtype: DType,
    ) -> Result<Arc<Compiled>, ErrorKind> {
        if let OpKind::User(k) = op {
            return self.user(device, native, k);
        }
        let (lib, ep) = msl::kernel(op, dtype).ok_or(ErrorKind::OpUnsupported { op, dtype })?;
        if let Some(c) = self.compiled.get(&Key::Catalogue(ep.msl)) {
            return Ok(c.clone());
        }
        let library = match self.libraries.entry(op) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(device.new_library(lib.source)?),
        };
        let pipeline = device.new_pipeline(library, ep.msl, ep.threads_per_group(), native)?;
        let compiled = Arc::new(Compiled {
            pipeline,
            sizes: lib.sizes.to_vec(),
            threadgroup_memory: ep.threadgroup_memory.to_vec(),
            threads: ep.threads,
        });
        self.compiled
            .insert(Key::Catalogue(ep.msl), compiled.clone());
        Ok(compiled)
    }

    /// A user kernel: its WGSL checked and lowered to MSL (`user::msl`),
    /// compiled by Metal, its pipeline made; any refusal is the kernel's
    /// `KernelCompile` (naga's or Metal's log) or `KernelSourceMissing`.
    /// Threads per threadgroup are the definition's `workgroup_size` (which
    /// `seam::wgsl` checked the WGSL declares).
    fn user(
        &mut self,
        device: &Device,
        native: bool,
        kernel: seam::Kernel,
    ) -> Result<Arc<Compiled>, ErrorKind> {
        if let Some(c) = self.compiled.get(&Key::User(kernel)) {
            return Ok(c.clone());
        }
        let name = kernel.name();
        let m = user::msl(kernel)?;
        let ep = &m.entry_point;
        let tg = &ep.threadgroup_memory;
        let tg_bytes: usize = tg.iter().map(|&b| b as usize).sum();
        let max = device.max_threadgroup_memory();
        if tg.len() > sys::MAX_THREADGROUP_ARGS || tg_bytes > max {
            return Err(user::metal_refused(
                name,
                &format!(
                    "{} var<workgroup> of {tg_bytes} bytes in all: this backend sets at most {} \
                     threadgroup arguments, the device allows {max} bytes",
                    tg.len(),
                    sys::MAX_THREADGROUP_ARGS
                ),
                &m.source,
            ));
        }
        let library = device
            .compile_library(&m.source)
            .map_err(|message| user::metal_refused(name, &message, &m.source))?;
        let threads = kernel.def().workgroup_size;
        let per_group = threads.iter().map(|&t| t as u64).product();
        let pipeline = device
            .new_pipeline(&library, &ep.msl, per_group, native)
            .map_err(|e| user::metal_refused(name, &e.to_string(), &m.source))?;
        self.libraries.insert(OpKind::User(kernel), library);
        let compiled = Arc::new(Compiled {
            pipeline,
            sizes: m.sizes,
            threadgroup_memory: m.entry_point.threadgroup_memory,
            threads,
        });
        self.compiled.insert(Key::User(kernel), compiled.clone());
        Ok(compiled)
    }
}
