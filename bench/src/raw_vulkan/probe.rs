//! A probe, not a bench arm: WGSL GEMV and copy variants
//! compiled by naga exactly as `seam-kernels` compiles the catalogue (SPIR-V
//! 1.0, no bounds checks, no loop bounding, no workgroup zeroing, the
//! `DenormPreserve` patch where the device reports it) and timed on the raw
//! device, so one device command can compare kernel shapes on the driver
//! that matters without rebuilding the backends. `seam-bench probe gemv`.
//!
//! A GEMV variant computes c = a · B (1 × H times H × H, f32, B row-major),
//! as `ops::gemm` with m = 1 does; `prod` is the catalogue's own `gemm_f32`
//! with the backend's geometry. Each is checked against a host sum in f64
//! before it is timed (a candidate is a whole `gemm.wgsl`, timed the same
//! way): a command buffer of 32 dispatches (or one per weight, if more)
//! over `--weights` distinct weights (rotated, so no weight is in L2 when
//! it is read; 32 at H = 8192 is the decode stack's 8 GiB), each after the
//! backend's global barrier, submitted and waited for 12 times; the median
//! over 32 is the time of one GEMV. Copy variants copy 256 MiB the same way.

// seam-kernels' WGSL → SPIR-V step, compiled here from its source.
#[path = "../../../kernels/spirv.rs"]
mod catalogue_spirv;

use super::{global_barrier, vkerr, Alloc, Mem, Pipe, RawVulkan, STAGES};
use ash::vk;
use seam::{ops, DType, Launch, OpKind, RawBuffer, RawView};
use std::fmt::Write as _;
use std::time::Instant;

/// Dispatches per timed command buffer, distinct weights among them, runs.
const DISPATCHES: usize = 32;
const RUNS: usize = 12;

/// One kernel shape: its WGSL (without the prelude) or the catalogue's.
pub struct Variant {
    name: String,
    /// `None`: the catalogue's SPIR-V and entry point.
    wgsl: Option<String>,
    /// Floats of c (or of the copy) one workgroup covers.
    per_group: u32,
    /// A whole candidate `gemm.wgsl` (entry `gemm_f32`): its GEMV_COLS,
    /// GEMV_WIDE_COLS and GEMV_WIDE_GROUPS, read from its source.
    candidate: Option<[u32; 3]>,
}

/// A candidate replacement for `kernels/wgsl/gemm.wgsl`, timed as the
/// catalogue's kernel is (entry `gemm_f32`, workgroups by its own
/// constants).
pub fn candidate(name: &str, wgsl: String) -> Result<Variant, String> {
    let constant = |c: &str| -> Result<u32, String> {
        let decl = format!("const {c}: u32 = ");
        let at = wgsl.find(&decl).ok_or(format!("{name}: no `{decl}`"))? + decl.len();
        wgsl[at..]
            .split('u')
            .next()
            .and_then(|v| v.trim().parse().ok())
            .ok_or(format!("{name}: `{c}` is not a u32 literal"))
    };
    let cols = [
        constant("GEMV_COLS")?,
        constant("GEMV_WIDE_COLS")?,
        constant("GEMV_WIDE_GROUPS")?,
    ];
    Ok(Variant {
        name: name.to_string(),
        wgsl: Some(wgsl),
        per_group: 0,
        candidate: Some(cols),
    })
}

/// A GEMV variant: `lanes` invocations across columns, each loading a
/// `width`-float vector (1, 2 or 4), `slices` invocations down k, `unroll`
/// loads in flight per invocation, then a shared-memory tree over slices.
fn gemv(width: u32, lanes: u32, slices: u32, unroll: u32) -> Variant {
    let vt = match width {
        1 => "f32".to_string(),
        w => format!("vec{w}<f32>"),
    };
    let threads = lanes * slices;
    let mut loads = String::new();
    let mut sums = String::new();
    for u in 0..unroll {
        let _ = writeln!(loads, "            let b{u} = b[bc + (kk + {u}u * S) * n];");
        let _ = writeln!(sums, "            acc += a[ar + kk + {u}u * S] * b{u};");
    }
    let wgsl = format!(
        "@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<{vt}>;
@group(0) @binding(2) var<storage, read_write> c: array<{vt}>;
const Q: u32 = {lanes}u;
const S: u32 = {slices}u;
const U: u32 = {unroll}u;
var<workgroup> partial: array<{vt}, {threads}>;
@compute @workgroup_size({threads})
fn probe(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {{
    let n = p.d1 / {width}u;
    let k = p.d2;
    let t = wid.x + wid.y * nwg.x;
    let q = t * Q + li % Q;
    let s = li / Q;
    var acc = {vt}(0.0);
    if (q < n) {{
        let ar = p.o0;
        let bc = p.o1 / {width}u + q;
        var kk = s;
        for (; kk + (U - 1u) * S < k; kk += U * S) {{
{loads}{sums}        }}
        for (; kk < k; kk += S) {{
            acc += a[ar + kk] * b[bc + kk * n];
        }}
    }}
    partial[li] = acc;
    workgroupBarrier();
    for (var h = S / 2u; h > 0u; h >>= 1u) {{
        if (s < h) {{
            partial[li] += partial[li + h * Q];
        }}
        workgroupBarrier();
    }}
    if (s == 0u && q < n) {{
        c[p.o2 / {width}u + q] = partial[li];
    }}
}}
"
    );
    Variant {
        name: format!(
            "v{width} {}x{slices} u{unroll} ({threads} thr)",
            lanes * width
        ),
        wgsl: Some(wgsl),
        per_group: lanes * width,
        candidate: None,
    }
}

/// A copy variant: each invocation copies `per` vectors of `width` words,
/// `per` workgroup-strides apart.
fn copy(width: u32, per: u32) -> Variant {
    let vt = match width {
        1 => "u32".to_string(),
        w => format!("vec{w}<u32>"),
    };
    let wgsl = format!(
        "@group(0) @binding(0) var<storage, read> src: array<{vt}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{vt}>;
@compute @workgroup_size(256)
fn probe(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {{
    let n = p.d0 / {width}u;
    let base = (wid.x + wid.y * nwg.x) * {per}u * 256u + li;
    for (var j = 0u; j < {per}u; j++) {{
        let i = base + j * 256u;
        if (i < n) {{
            dst[i] = src[i];
        }}
    }}
}}
"
    );
    Variant {
        name: format!("copy v{width} x{per}"),
        wgsl: Some(wgsl),
        per_group: 256 * width * per,
        candidate: None,
    }
}

/// SPIR-V for `wgsl` (prelude prepended), by the catalogue's own step.
fn spirv(wgsl: &str) -> Result<Vec<u32>, String> {
    let source = format!("{}\n{wgsl}", seam_kernels::WGSL_PARAMS);
    catalogue_spirv::compile(&source).map(|(_, words)| words)
}

impl RawVulkan {
    /// Record `runs` dispatches of `pipe`, dispatch i over `sets[i % len]`,
    /// each after the global barrier, into the chain command buffer.
    fn record(
        &mut self,
        pipe: &Pipe,
        sets: &[vk::DescriptorSet],
        groups: [u32; 2],
        params: &[u8; ops::IMMEDIATE_BYTES],
        runs: usize,
    ) -> Result<(), String> {
        self.wait()?;
        let d = &self.device;
        let cmd = self.chain;
        let (stages, barrier) = (STAGES, [global_barrier()]);
        // SAFETY: `cmd` is not pending (waited above); pipeline, layout and
        // sets are live and compatible, every binding written; the push
        // range matches the layout's; the group counts are within the
        // device's limits (checked by the caller).
        unsafe {
            d.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                .map_err(vkerr("vkResetCommandBuffer"))?;
            d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
                .map_err(vkerr("vkBeginCommandBuffer"))?;
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipe.pipeline);
            for i in 0..runs {
                d.cmd_pipeline_barrier(
                    cmd,
                    stages,
                    stages,
                    vk::DependencyFlags::empty(),
                    &barrier,
                    &[],
                    &[],
                );
                d.cmd_bind_descriptor_sets(
                    cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    pipe.layout,
                    0,
                    &[sets[i % sets.len()]],
                    &[],
                );
                d.cmd_push_constants(cmd, pipe.layout, vk::ShaderStageFlags::COMPUTE, 0, params);
                d.cmd_dispatch(cmd, groups[0], groups[1], 1);
            }
            d.end_command_buffer(cmd)
                .map_err(vkerr("vkEndCommandBuffer"))?;
        }
        Ok(())
    }

    /// Median µs of one run of the recorded command buffer (submit and
    /// wait), over `runs` (at least 1) after two untimed ones.
    pub(super) fn time_recorded(&mut self, runs: usize) -> Result<f64, String> {
        for _ in 0..2 {
            self.submit()?;
            self.wait()?;
        }
        let runs = runs.max(1);
        let mut t = Vec::with_capacity(runs);
        for _ in 0..runs {
            let s = Instant::now();
            self.submit()?;
            self.wait()?;
            t.push(s.elapsed().as_secs_f64() * 1e6);
        }
        t.sort_by(f64::total_cmp);
        Ok(t[runs / 2])
    }

    /// Descriptor sets over `lists` of buffers (whole ranges), from `pool`.
    fn sets(
        &self,
        pool: vk::DescriptorPool,
        layout: vk::DescriptorSetLayout,
        lists: &[Vec<Mem>],
    ) -> Result<Vec<vk::DescriptorSet>, String> {
        let layouts = vec![layout; lists.len()];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: a live pool sized for these sets.
        let sets = unsafe { self.device.allocate_descriptor_sets(&info) }
            .map_err(vkerr("vkAllocateDescriptorSets"))?;
        for (set, list) in sets.iter().zip(lists) {
            let infos: Vec<[vk::DescriptorBufferInfo; 1]> = list
                .iter()
                .map(|m| {
                    [vk::DescriptorBufferInfo::default()
                        .buffer(m.buffer)
                        .offset(0)
                        .range(vk::WHOLE_SIZE)]
                })
                .collect();
            let writes: Vec<_> = infos
                .iter()
                .enumerate()
                .map(|(i, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(*set)
                        .dst_binding(i as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info)
                })
                .collect();
            // SAFETY: live set and buffers; no submission uses the set yet.
            unsafe { self.device.update_descriptor_sets(&writes, &[]) };
        }
        Ok(sets)
    }
}

/// The GEMV and copy variants this probe measures.
fn variants() -> (Vec<Variant>, Vec<Variant>) {
    let prod = |per_group| Variant {
        name: "prod (catalogue)".into(),
        wgsl: None,
        per_group,
        candidate: None,
    };
    let gemvs = vec![
        prod(seam_kernels::geometry::GEMV_COLS),
        gemv(1, 16, 16, 8),
        gemv(2, 8, 64, 8),
        gemv(4, 4, 64, 4),
        gemv(4, 4, 64, 8),
        gemv(4, 4, 128, 4),
        gemv(4, 8, 32, 4),
        gemv(4, 8, 32, 8),
        gemv(4, 8, 64, 4),
    ];
    let copies = vec![prod(64), copy(1, 4), copy(4, 1), copy(4, 2)];
    (gemvs, copies)
}

/// `seam-bench probe gemv`: every variant (and each candidate `gemm.wgsl`)
/// at each H over `n_weights` distinct weights, then the copies; one line
/// per measurement.
pub fn run(
    hiddens: &[u32],
    n_weights: usize,
    alloc: Alloc,
    candidates: Vec<Variant>,
    out: &mut dyn FnMut(String),
) -> Result<(), String> {
    let mut raw = RawVulkan::open()?;
    out(format!(
        "# probe gemv on {} (denorm preserve {}), {n_weights} weights, {alloc:?} allocations",
        raw.name, raw.denorm_preserve
    ));
    let hmax = hiddens.iter().copied().max().unwrap_or(0) as usize;
    let (mut gemvs, copies) = variants();
    gemvs.extend(candidates);
    let prefer = raw.prefer();
    let big = (hmax * hmax * 4) as u64;
    let (weights, pool_memory) = raw.weights(n_weights.max(2), big, alloc)?;
    let a = raw.buffer((hmax * 4) as u64, prefer)?;
    let c = raw.buffer((hmax * 4) as u64, prefer)?;
    let sets_needed = (gemvs.len() * hiddens.len() * weights.len() + copies.len() * 2) as u32;
    let sizes = [vk::DescriptorPoolSize::default()
        .ty(vk::DescriptorType::STORAGE_BUFFER)
        .descriptor_count(sets_needed * 3)];
    let info = vk::DescriptorPoolCreateInfo::default()
        .max_sets(sets_needed)
        .pool_sizes(&sizes);
    // SAFETY: valid create info living across the call.
    let pool = unsafe { raw.device.create_descriptor_pool(&info, None) }
        .map_err(vkerr("vkCreateDescriptorPool"))?;
    let result = measure(
        &mut raw, pool, hiddens, &gemvs, &copies, &weights, a, c, out,
    );
    let _ = raw.wait();
    // SAFETY: the queue is idle (waited); the sets die with the pool.
    unsafe { raw.device.destroy_descriptor_pool(pool, None) };
    for m in weights.into_iter().chain([a, c]) {
        raw.destroy(m);
    }
    if let Some(m) = pool_memory {
        // SAFETY: the queue is idle and every buffer bound to it is destroyed.
        unsafe { raw.device.free_memory(m, None) };
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn measure(
    raw: &mut RawVulkan,
    pool: vk::DescriptorPool,
    hiddens: &[u32],
    gemvs: &[Variant],
    copies: &[Variant],
    weights: &[Mem],
    a: Mem,
    c: Mem,
    out: &mut dyn FnMut(String),
) -> Result<(), String> {
    let max = [raw.max_group_count[0], raw.max_group_count[1]];
    for &h in hiddens {
        let hu = h as usize;
        let x = crate::measure::randoms(hu, 7, -1.0, 1.0);
        let w = crate::measure::randoms(hu * hu, 11, -1.0, 1.0);
        // The host's answer and each column's Σ|a||b| (the error scale).
        let mut want = vec![0f64; hu];
        let mut scale = vec![0f64; hu];
        for (k, &xk) in x.iter().enumerate() {
            let row = &w[k * hu..(k + 1) * hu];
            for j in 0..hu {
                want[j] += f64::from(xk) * f64::from(row[j]);
                scale[j] += f64::from(xk.abs()) * f64::from(row[j].abs());
            }
        }
        raw.upload(a, &x)?;
        for &m in weights {
            raw.upload(m, &w)?;
        }
        drop(w);
        let call = ops::gemm(
            seam::BufferId::unknown(),
            seam::BufferId::unknown(),
            seam::BufferId::unknown(),
            1,
            h,
            h,
        );
        let mut params = [0u8; ops::IMMEDIATE_BYTES];
        params[..seam::Params::BYTES].copy_from_slice(&call.params.to_bytes());
        for v in gemvs {
            let (words, entry, groups) = match &v.wgsl {
                None => {
                    // SAFETY: never given to a backend: read for its geometry only.
                    let launch = unsafe {
                        Launch::new_unchecked(
                            OpKind::Gemm,
                            DType::F32,
                            [
                                RawView::whole(RawBuffer(0), u64::from(h)),
                                RawView::whole(RawBuffer(1), u64::from(h) * u64::from(h)),
                                RawView::whole(RawBuffer(2), u64::from(h)),
                            ]
                            .into(),
                            call.params,
                        )
                    };
                    let g = seam_kernels::geometry::dispatch(&launch, max)
                        .map_err(|e| e.to_string())?;
                    let words = seam_kernels::spirv(OpKind::Gemm)
                        .ok_or("no gemm SPIR-V")?
                        .to_vec();
                    (
                        words,
                        seam_kernels::entry_point(OpKind::Gemm, DType::F32),
                        [g[0], g[1]],
                    )
                }
                Some(src) => match v.candidate {
                    None => {
                        let groups = h.div_ceil(v.per_group);
                        (
                            spirv(src).map_err(|e| format!("{}: {e}", v.name))?,
                            "probe".into(),
                            [groups, 1],
                        )
                    }
                    Some([cols, wide, wide_groups]) => {
                        let cols = if h.div_ceil(wide) >= wide_groups {
                            wide
                        } else {
                            cols
                        };
                        let (gx, gy) =
                            seam_kernels::geometry::grid(u64::from(h.div_ceil(cols)), max)
                                .map_err(|e| e.to_string())?;
                        let words = spirv(src).map_err(|e| format!("{}: {e}", v.name))?;
                        (words, "gemm_f32".into(), [gx, gy])
                    }
                },
            };
            let pipe = match raw.pipe(&words, &entry, 3) {
                Ok(p) => p,
                Err(e) => {
                    out(format!("gemv,{h},{},error,{e}", v.name));
                    continue;
                }
            };
            let lists: Vec<Vec<Mem>> = weights.iter().map(|&m| vec![a, m, c]).collect();
            let sets = raw.sets(pool, pipe.set_layout, &lists)?;
            // One dispatch over weight 0, checked, then the timed buffer.
            raw.record(&pipe, &sets[..1], groups, &params, 1)?;
            raw.submit()?;
            raw.wait()?;
            let got = raw.download(c, hu)?;
            let err = got
                .iter()
                .zip(want.iter().zip(&scale))
                .map(|(&g, (&w, &s))| (f64::from(g) - w).abs() / s.max(1e-30))
                .fold(0f64, f64::max);
            let runs = DISPATCHES.max(sets.len());
            raw.record(&pipe, &sets, groups, &params, runs)?;
            let t = raw.time_recorded(RUNS)? / runs as f64;
            let gbps = (u64::from(h) * u64::from(h) * 4) as f64 / t / 1e3;
            out(format!(
                "gemv,{h},{},{t:.2} us,{gbps:.0} GB/s,rel err {err:.1e}{}",
                v.name,
                if err > 1e-5 { " WRONG" } else { "" }
            ));
            raw.drop_pipe(&pipe);
        }
    }
    // Copies of 256 MiB (or the largest weight) from weight 0 to weight 1.
    let words = (weights[0].size / 4).min(64 << 20) as u32;
    let src: Vec<f32> = crate::measure::randoms(words as usize, 13, -1.0, 1.0);
    raw.upload(weights[0], &src)?;
    let call = ops::copy(seam::BufferId::unknown(), seam::BufferId::unknown(), words);
    let mut params = [0u8; ops::IMMEDIATE_BYTES];
    params[..seam::Params::BYTES].copy_from_slice(&call.params.to_bytes());
    for v in copies {
        let (spv, entry, groups) = match &v.wgsl {
            None => {
                // SAFETY: never given to a backend: read for its geometry only.
                let launch = unsafe {
                    Launch::new_unchecked(
                        OpKind::Copy,
                        DType::F32,
                        [RawView::whole(RawBuffer(0), u64::from(words)); 2].into(),
                        call.params,
                    )
                };
                let g =
                    seam_kernels::geometry::dispatch(&launch, max).map_err(|e| e.to_string())?;
                let spv = seam_kernels::spirv(OpKind::Copy)
                    .ok_or("no copy SPIR-V")?
                    .to_vec();
                (
                    spv,
                    seam_kernels::entry_point(OpKind::Copy, DType::F32),
                    [g[0], g[1]],
                )
            }
            Some(s) => {
                let groups = u64::from(words).div_ceil(u64::from(v.per_group));
                let (gx, gy) =
                    seam_kernels::geometry::grid(groups, max).map_err(|e| e.to_string())?;
                (
                    spirv(s).map_err(|e| format!("{}: {e}", v.name))?,
                    "probe".into(),
                    [gx, gy],
                )
            }
        };
        let pipe = match raw.pipe(&spv, &entry, 2) {
            Ok(p) => p,
            Err(e) => {
                out(format!("copy,{},error,{e}", v.name));
                continue;
            }
        };
        let sets = raw.sets(pool, pipe.set_layout, &[vec![weights[0], weights[1]]])?;
        raw.record(&pipe, &sets, groups, &params, 1)?;
        raw.submit()?;
        raw.wait()?;
        let got = raw.download(weights[1], words as usize)?;
        let ok = got
            .iter()
            .zip(&src)
            .all(|(g, s)| g.to_bits() == s.to_bits());
        raw.record(&pipe, &sets, groups, &params, 8)?;
        let t = raw.time_recorded(RUNS)? / 8.0;
        let gbps = 2.0 * f64::from(words) * 4.0 / t / 1e3;
        out(format!(
            "copy,{words},{},{t:.2} us,{gbps:.0} GB/s{}",
            v.name,
            if ok { "" } else { " WRONG" }
        ));
        raw.drop_pipe(&pipe);
    }
    Ok(())
}
