//! Shader modules, layouts and pipelines, all cached for the device's life:
//! one module, bind group layout and pipeline layout per op; one compute
//! pipeline per (op, entry point). A replay only uses what is here (C7).
//! A user kernel (`OpKind::User`) is one op of one entry point (its name),
//! its module made from its WGSL when it is registered (`prepare`).

use crate::gpu::Gpu;
use crate::IMMEDIATE_BYTES;
use seam::{DType, ErrorKind, OpKind};
use seam_kernels::Language;
use std::collections::hash_map::{Entry, HashMap};
use wgpu::naga;

/// The per-op objects every entry point of the op shares.
pub struct OpKernel {
    module: wgpu::ShaderModule,
    pub bind_layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
}

#[derive(Default)]
pub struct Kernels {
    ops: HashMap<OpKind, OpKernel>,
    /// One pipeline per entry point (dtypes that share a variant share it).
    pipelines: HashMap<(OpKind, String), wgpu::ComputePipeline>,
    /// The same pipelines by (op, dtype): the lookup a launch makes, with no allocation.
    by_dtype: HashMap<(OpKind, DType), wgpu::ComputePipeline>,
}

/// The op's storage bindings (group 0, in binding order), read-only or not,
/// as its WGSL declares them: wgpu requires the layout to match exactly.
fn storage_bindings(op: OpKind, source: &str) -> Result<Vec<bool>, ErrorKind> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| ErrorKind::driver("naga::front::wgsl::parse_str", e.emit_to_string(source)))?;
    let mut bindings: Vec<(u32, bool)> = module
        .global_variables
        .iter()
        .filter_map(|(_, g)| match (g.space, &g.binding) {
            (naga::AddressSpace::Storage { access }, Some(b)) if b.group == 0 => {
                Some((b.binding, !access.contains(naga::StorageAccess::STORE)))
            }
            _ => None,
        })
        .collect();
    bindings.sort_unstable();
    let expected = op.signature().len();
    let numbered = bindings
        .iter()
        .enumerate()
        .all(|(i, (b, _))| *b as usize == i);
    if bindings.len() != expected || !numbered {
        return Err(ErrorKind::driver(
            "seam_kernels::source",
            format!(
                "{op}: the WGSL declares storage bindings {:?}, the op's signature needs 0..{expected}",
                bindings.iter().map(|(b, _)| *b).collect::<Vec<_>>()
            ),
        ));
    }
    Ok(bindings
        .into_iter()
        .map(|(_, read_only)| read_only)
        .collect())
}

/// A compute storage binding of a bind group layout (whole buffer).
pub(crate) fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn build_op(gpu: &Gpu, op: OpKind) -> Result<OpKernel, ErrorKind> {
    let (source, read_only) = match op {
        // Parsed, validated and checked against its definition by naga
        // first: a mistake is KernelCompile with naga's message.
        OpKind::User(k) => {
            let m = seam::wgsl::compile(k)?;
            (m.source, m.read_only)
        }
        _ => {
            let source =
                seam_kernels::source(op, Language::Wgsl).ok_or(ErrorKind::OpUnsupported {
                    op,
                    dtype: DType::F32,
                })?;
            let read_only = storage_bindings(op, &source)?;
            (source, read_only)
        }
    };
    let entries: Vec<wgpu::BindGroupLayoutEntry> = read_only
        .iter()
        .enumerate()
        .map(|(i, &read_only)| storage_entry(i as u32, read_only))
        .collect();
    let module = match op {
        OpKind::User(_) => gpu.checked("wgpu::Device::create_shader_module", || {
            gpu.device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(op.name()),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                })
        }),
        // The catalogue's own WGSL, without wgpu's runtime checks (`sys`).
        _ => gpu
            .checked("wgpu::Device::create_shader_module_trusted", || {
                crate::sys::catalogue_module(&gpu.device, op)
            })
            .and_then(|m| {
                m.ok_or(ErrorKind::OpUnsupported {
                    op,
                    dtype: DType::F32,
                })
            }),
    }
    .map_err(|e| compile_error(op, e))?;
    let bind_layout = gpu.checked("wgpu::Device::create_bind_group_layout", || {
        gpu.device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(op.name()),
                entries: &entries,
            })
    })?;
    let pipeline_layout = gpu.checked("wgpu::Device::create_pipeline_layout", || {
        gpu.device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(op.name()),
                bind_group_layouts: &[Some(&bind_layout)],
                immediate_size: IMMEDIATE_BYTES,
            })
    })?;
    Ok(OpKernel {
        module,
        bind_layout,
        pipeline_layout,
    })
}

/// A user kernel's module or pipeline wgpu refused (after naga accepted
/// it): KernelCompile with wgpu's message. A catalogue op's stays a driver
/// error: its WGSL is validated at build time.
fn compile_error(op: OpKind, e: ErrorKind) -> ErrorKind {
    match op {
        OpKind::User(k) => ErrorKind::KernelCompile {
            kernel: k.name(),
            compiler: "wgpu".into(),
            log: e.to_string(),
        },
        _ => e,
    }
}

impl Kernels {
    #[cfg(test)]
    pub fn pipeline_count(&self) -> usize {
        self.pipelines.len()
    }

    /// The op's shared objects, made on first use.
    pub fn op(&mut self, gpu: &Gpu, op: OpKind) -> Result<&OpKernel, ErrorKind> {
        Ok(match self.ops.entry(op) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(build_op(gpu, op)?),
        })
    }

    /// The compute pipeline of (op, dtype)'s entry point, made on first use.
    pub fn pipeline(
        &mut self,
        gpu: &Gpu,
        op: OpKind,
        dtype: DType,
    ) -> Result<wgpu::ComputePipeline, ErrorKind> {
        if let Some(p) = self.by_dtype.get(&(op, dtype)) {
            return Ok(p.clone());
        }
        let entry = seam_kernels::entry_point(op, dtype);
        if let Some(p) = self.pipelines.get(&(op, entry.clone())) {
            let p = p.clone();
            self.by_dtype.insert((op, dtype), p.clone());
            return Ok(p);
        }
        let kernel = self.op(gpu, op)?;
        let pipeline = gpu
            .checked("wgpu::Device::create_compute_pipeline", || {
                gpu.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(&entry),
                        layout: Some(&kernel.pipeline_layout),
                        module: &kernel.module,
                        entry_point: Some(&entry),
                        compilation_options: Default::default(),
                        cache: None,
                    })
            })
            .map_err(|e| compile_error(op, e))?;
        self.pipelines.insert((op, entry), pipeline.clone());
        self.by_dtype.insert((op, dtype), pipeline.clone());
        Ok(pipeline)
    }
}

// Host-only checks, run as trials by `crate::tests::main` (harness = false).
#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn every_op_reflects_one_binding_per_signature_entry() {
        for op in OpKind::ALL {
            let src = seam_kernels::source(op, Language::Wgsl).expect("wgsl source");
            let b = storage_bindings(op, &src).expect("reflection");
            assert_eq!(b.len(), op.signature().len(), "{op}");
            // The output is always written.
            let out = op
                .signature()
                .iter()
                .position(|s| s.access == seam::ops::Access::Write)
                .expect("an output");
            assert!(!b[out], "{op}: output bound read-only");
        }
    }

    /// Only group 0's storage bindings count, and they must be numbered
    /// 0..n with n the signature's length: a gap or a wrong count is
    /// refused. Mutations: the group guard → `true`, `||` → `&&` → red.
    pub fn reflection_takes_group_0_numbered_from_0() {
        let decl = |group: u32, binding: u32, access: &str| {
            format!("@group({group}) @binding({binding}) var<storage, {access}> b{group}_{binding}: array<u32>;\n")
        };
        let body = "@compute @workgroup_size(1)\nfn main() {}\n";
        let add = OpKind::Add; // a, b → out
        let src = [
            decl(0, 0, "read"),
            decl(0, 1, "read"),
            decl(0, 2, "read_write"),
            decl(1, 0, "read"),
        ]
        .concat()
            + body;
        assert_eq!(
            storage_bindings(add, &src).expect("group 1 is not the op's"),
            [true, true, false]
        );
        let gap = [
            decl(0, 0, "read"),
            decl(0, 2, "read"),
            decl(0, 3, "read_write"),
        ]
        .concat()
            + body;
        assert!(
            storage_bindings(add, &gap).is_err(),
            "bindings 0, 2, 3 taken"
        );
        let short = [decl(0, 0, "read"), decl(0, 1, "read_write")].concat() + body;
        assert!(
            storage_bindings(add, &short).is_err(),
            "two bindings taken for three"
        );
    }
}
