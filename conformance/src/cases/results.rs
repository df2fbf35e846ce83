//! C4 behaviour-neutral capture and C11 cross-device agreement, over the same
//! workloads (`workloads.rs`) for every (op, dtype) of the catalogue.

use crate::workloads::{self, all_pairs, compare};
use crate::{check, check_eq, run_in_mode, Case, Failure, Mode, Rule, Tag, BOTH, ONCE};
use seam::{ops, DType, Device, OpKind, Tolerance};

/// Run one workload on `dev` in `mode`; the output bytes.
fn run_pair(dev: &Device, mode: Mode, op: OpKind, dtype: DType) -> Result<Vec<u8>, Failure> {
    let w = workloads::prepare(dev, op, dtype, 7)?;
    run_in_mode(dev, mode, |d| d.launch(&w.call))
        .map_err(|f| Failure(format!("{op}/{dtype}: {f}")))?;
    let out = dev.read_bytes(w.buffers[w.output])?;
    for id in w.buffers {
        dev.free(id)?;
    }
    Ok(out)
}

/// Every op and dtype gives byte-identical output eager and captured on the
/// same device.
///
/// Mutation: make the CPU backend record launches with `scale_add`'s scalars
/// swapped (a ↔ b) while capturing → red at scale_add/f32.
pub const C4_EAGER_AND_CAPTURED_IDENTICAL: Case = Case {
    name: "c4_eager_and_captured_identical",
    rule: Rule::C4,
    tags: &[Tag::NeedsCapture, Tag::NeedsHalf],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        let pairs = all_pairs();
        d.prepare(&pairs)?;
        for (op, dtype) in pairs {
            let eager = run_pair(d, Mode::Eager, op, dtype)?;
            let captured = run_pair(d, Mode::Captured, op, dtype)?;
            check!(
                eager == captured,
                "{op}/{dtype}: captured output differs from eager ({})",
                compare(dtype, Tolerance::BitExact, &captured, &eager).unwrap_err()
            );
            cx.digest_bytes(&eager);
        }
        Ok(())
    },
};

/// A decode-step stack (L layers of rms_norm → gemm → silu → add) is
/// byte-identical eager and captured, on several layers and replays.
///
/// Mutation: make the CPU backend drop the last recorded launch at end of capture → red.
pub const C4_DECODE_STACK_EAGER_AND_CAPTURED_IDENTICAL: Case = Case {
    name: "c4_decode_stack_eager_and_captured_identical",
    rule: Rule::C4,
    tags: &[Tag::NeedsCapture],
    modes: ONCE,
    body: |cx| {
        let d = &cx.dev;
        d.prepare(&[(OpKind::Gemm, DType::F32), (OpKind::RmsNorm, DType::F32)])?;
        let eager = decode_stack(d, Mode::Eager)?;
        let captured = decode_stack(d, Mode::Captured)?;
        check!(
            eager == captured,
            "decode stack: captured output differs from eager"
        );
        cx.digest_bytes(&eager);
        Ok(())
    },
};

fn decode_stack(d: &Device, mode: Mode) -> Result<Vec<u8>, Failure> {
    let (h, layers) = (64u32, 3);
    let mut rng = workloads::Rng::new(11);
    let mut f = |n: u32, r: f32| (0..n).map(|_| rng.next_f32(r)).collect::<Vec<f32>>();
    let x = d.buffer_from(&f(h, 1.0))?;
    let norm_w = d.buffer_from(&f(h, 1.0))?;
    let weights: Vec<_> = (0..layers)
        .map(|_| d.buffer_from(&f(h * h, 0.125)))
        .collect::<Result<_, _>>()?;
    let t = d.buffer::<f32>(h as usize)?;
    let u = d.buffer::<f32>(h as usize)?;
    let step = |d: &Device| -> seam::Result<()> {
        for w in &weights {
            d.launch(&ops::rms_norm(x.id(), norm_w.id(), t.id(), 1, h, 1e-5))?;
            d.launch(&ops::gemm(t.id(), w.id(), u.id(), 1, h, h))?;
            d.launch(&ops::silu(u.id(), u.id(), h))?;
            d.launch(&ops::add(x.id(), u.id(), x.id(), h))?;
        }
        Ok(())
    };
    match mode {
        Mode::Eager => {
            step(d)?;
            step(d)?;
        }
        Mode::Captured => {
            let s = d.capture()?;
            step(d)?;
            let g = s.end_graph()?;
            g.replay()?;
            g.replay()?;
        }
    }
    Ok(d.read_bytes(x.id())?)
}

/// Every op and dtype matches the CPU reference within its stated bound
/// (`OpKind::tolerance`): bit-exact for elementwise and integer ops.
///
/// Mutation: change the CPU reference's silu to `x / (1 + exp(x))` → red
/// on every non-CPU device; on cpu:0 itself C11_KNOWN_VALUES goes red.
///
/// rms_norm's workload uses eps = 0.25 (`workloads.rs`), so a backend that
/// ignores eps is far outside the tolerance (with eps = 1e-5, the value it
/// had before, both mutations below passed). Mutations: make the CPU
/// backend record rms_norm with eps = `f32::MIN_POSITIVE` → red on cpu:0
/// at "::captured: rms_norm/f32 vs CPU reference: element 0:
/// 0.5428239107131958 vs reference 0.4986157715320587 (|diff| 0.0442… >
/// bound 0.0000059…)"; drop `+ p.s0` in `kernels/wgsl/rms_norm.wgsl` → the
/// same red (0.5428240299224854) on vulkan:0 and wgpu:0 (lavapipe).
pub const C11_EVERY_OP_AGREES_WITH_CPU: Case = Case {
    name: "c11_every_op_agrees_with_cpu",
    rule: Rule::C11,
    tags: &[Tag::NeedsHalf],
    modes: BOTH,
    body: |cx| {
        let d = &cx.dev;
        let oracle = (cx.reference)();
        let pairs = all_pairs();
        d.prepare(&pairs)?;
        for (op, dtype) in pairs {
            let got = run_pair(d, cx.mode, op, dtype)?;
            let want = run_pair(&oracle, Mode::Eager, op, dtype)?;
            let out_dtype = if op == OpKind::Gemm {
                DType::F32
            } else {
                dtype
            };
            compare(out_dtype, op.tolerance(dtype), &got, &want)
                .map_err(|m| Failure(format!("{op}/{dtype} vs CPU reference: {m}")))?;
            cx.digest_bytes(&got);
        }
        Ok(())
    },
};

/// f32 subnormals, as each device declares (`Device::subnormals`), on every
/// elementwise op (add, mul, scale_add, copy, fill), eager and captured,
/// with subnormal inputs, subnormal results of normal inputs and normal
/// results of subnormal inputs. The exact result is computed on the host;
/// the CPU reference must give it too. A `Preserved` device must give it
/// bit for bit; a `MayFlush` device must give, element by element, either
/// it or the result with subnormal inputs and results flushed to zero of
/// the same sign (the second oracle, computed here); anything else fails.
/// So a driver that flushes under a `Preserved` declaration is red, not
/// silently tolerated.
///
/// Mutations: the CPU reference's add flushes subnormal results → red on
/// cpu:0 (and on every device: the reference disagrees with the host); the
/// flush oracle keeps a subnormal result → red on a MayFlush device that
/// flushes (wgpu:0 on the H200); the Vulkan backend skipping the
/// DenormPreserve patch while declaring Preserved → red on the H200's
/// vulkan:0 (lavapipe preserves regardless). docs/contract.md has the red
/// messages.
pub const C11_SUBNORMALS_AS_DECLARED: Case = Case {
    name: "c11_subnormals_as_declared",
    rule: Rule::C11,
    tags: &[],
    modes: BOTH,
    body: |cx| {
        let declared = cx.dev.subnormals().clone();
        let f = f32::from_bits;
        let a: Vec<f32> = vec![
            f(1),           // 1e-45, the smallest subnormal
            f(0x007f_ffff), // the largest subnormal
            f(0x8000_0005), // -7e-45
            f(0x0040_0000), // MIN_POSITIVE / 2
            1.0,
            -2.0e-39,
            f32::MIN_POSITIVE,
            3.0,
            f(0x8000_0002), // -3e-45
            -1.0e-38,
        ];
        // add: subnormal sums, a normal sum of subnormals, exact zeros, a
        // subnormal sum of a normal and a subnormal, negative subnormal sums
        // (flushed: -0, so a flush that loses the sign is caught).
        let b: Vec<f32> = vec![
            f(2),
            f(1),
            f(3),
            f(0x8040_0000),
            1.0e-40,
            2.0e-39,
            f32::MIN_POSITIVE * -0.5,
            0.5,
            f(0x8000_0001),
            1.0e-39,
        ];
        // mul: subnormal × normal, a normal product of a subnormal, a
        // subnormal product of normals.
        let m: Vec<f32> = vec![
            2.0, 0.5, -1.0, 3.0, 1.0e-40, 1.0e-30, 0.25, 1.0e-39, 0.5, 0.5,
        ];
        let n = a.len() as u32;
        let flush = |v: f32| {
            if v.is_subnormal() {
                f32::copysign(0.0, v)
            } else {
                v
            }
        };
        // (what, the launch over (a, b, m, out), exact, flushed).
        type Call = Box<dyn Fn([seam::BufferId; 4]) -> seam::OpCall>;
        let mut checks: Vec<(String, Call, Vec<f32>, Vec<f32>)> = Vec::new();
        for (name, op) in [
            ("add", (|x, y| x + y) as fn(f32, f32) -> f32),
            ("mul", |x, y| x * y),
        ] {
            let other = if name == "add" { &b } else { &m };
            let exact = a.iter().zip(other).map(|(p, q)| op(*p, *q)).collect();
            let flushed = a
                .iter()
                .zip(other)
                .map(|(p, q)| flush(op(flush(*p), flush(*q))))
                .collect();
            let call: Call = if name == "add" {
                Box::new(move |[a, b, _, o]| ops::add(a, b, o, n))
            } else {
                Box::new(move |[a, _, m, o]| ops::mul(a, m, o, n))
            };
            checks.push((format!("{name} of subnormals"), call, exact, flushed));
        }
        for (sa, sb) in [(0.5f32, f(1)), (2.5e-40f32, 3.0e-39f32)] {
            let exact = a.iter().map(|x| sa.mul_add(*x, sb)).collect();
            let flushed = a
                .iter()
                .map(|x| flush(flush(sa).mul_add(flush(*x), flush(sb))))
                .collect();
            checks.push((
                format!("scale_add({sa:e}, x, {sb:e}) of subnormals"),
                Box::new(move |[a, _, _, o]| ops::scale_add(a, o, n, sa, sb)),
                exact,
                flushed,
            ));
        }
        checks.push((
            "copy of subnormals".into(),
            Box::new(move |[a, _, _, o]| ops::copy(a, o, n)),
            a.clone(),
            a.iter().map(|v| flush(*v)).collect(),
        ));
        let fill = f(0x8000_0001);
        checks.push((
            "fill with -1e-45".into(),
            Box::new(move |[_, _, _, o]| ops::fill(o, n, fill.to_bits())),
            vec![fill; a.len()],
            vec![-0.0; a.len()],
        ));

        let show = |v: f32| format!("{v:e} ({:#010x})", v.to_bits());
        let on = |d: &Device| -> seam::Result<_> {
            Ok([
                d.buffer_from(&a)?,
                d.buffer_from(&b)?,
                d.buffer_from(&m)?,
                d.buffer::<f32>(a.len())?,
            ])
        };
        let oracle = (cx.reference)();
        let (dev, reference) = (on(&cx.dev)?, on(&oracle)?);
        let ids = |bufs: &[seam::Buffer<f32>; 4]| bufs.each_ref().map(|b| b.id());
        let hex = |v: &[f32]| {
            let words: Vec<String> = v.iter().map(|x| format!("{:#010x}", x.to_bits())).collect();
            format!("[{}]", words.join(", "))
        };
        for (what, call, exact, flushed) in &checks {
            cx.run(|d| d.launch(&call(ids(&dev))))?;
            let got = dev[3].read()?;
            let allowed = |i: usize| {
                got[i].to_bits() == exact[i].to_bits()
                    || matches!(declared, seam::Subnormals::MayFlush(_))
                        && got[i].to_bits() == flushed[i].to_bits()
            };
            let wrong: Vec<usize> = (0..got.len()).filter(|&i| !allowed(i)).collect();
            if let Some(&i) = wrong.first() {
                let flushed = match &declared {
                    seam::Subnormals::Preserved => String::new(),
                    seam::Subnormals::MayFlush(_) => format!(" or, flushed, {}", show(flushed[i])),
                };
                return Err(Failure(format!(
                    "{what}: element {i} is {}, want {}{flushed} ({} of {} differ; the device \
                     declares subnormals {declared:?})",
                    show(got[i]),
                    show(exact[i]),
                    wrong.len(),
                    got.len(),
                )));
            }
            // The reference must give the exact bits too: it is what every
            // other op is compared against (c11_every_op_agrees_with_cpu).
            oracle.launch(&call(ids(&reference)))?;
            let got = reference[3].read()?;
            check!(
                got.iter()
                    .zip(exact)
                    .all(|(g, e)| g.to_bits() == e.to_bits()),
                "{what}: the CPU reference gives {}, the host {}",
                hex(&got),
                hex(exact)
            );
        }
        Ok(())
    },
};

/// Hand-computed results, so the reference itself is checked against
/// something other than itself.
///
/// Mutation: make the CPU reference's softmax skip the division by the row
/// sum → red at "softmax". Also red (cargo-mutants, docs/results/mutants.md):
/// the reference's row offsets `r * cols` → `r / cols`, `mean_sq + eps` →
/// `mean_sq - eps`, and `exp(v - max)` → `exp(v + max)`. Red on the NVIDIA
/// Vulkan driver (H200): `kernels/wgsl/scale_add.wgsl` computing infinity
/// times a finite value in float again (the driver flushes the subnormal
/// factor: `scale_add(2.5e-40, x, 3e-39)` gives NaN for x = inf).
pub const C11_KNOWN_VALUES: Case = Case {
    name: "c11_known_values",
    rule: Rule::C11,
    tags: &[],
    modes: BOTH,
    body: |cx| {
        let d = &cx.dev;
        let a = d.buffer_from(&[1.5f32, -2.0, 1e30, 3.0])?;
        let b = d.buffer_from(&[2.25f32, 0.5, 1e30, -3.0])?;
        let o = d.buffer::<f32>(4)?;
        cx.run(|d| d.launch(&ops::add(a.id(), b.id(), o.id(), 4)))?;
        check_eq!(o.read()?, vec![3.75f32, -1.5, 2e30, 0.0], "add");
        cx.run(|d| d.launch(&ops::mul(a.id(), b.id(), o.id(), 4)))?;
        check_eq!(o.read()?, vec![3.375f32, -1.0, f32::INFINITY, -9.0], "mul");

        // scale_add with subnormal scalars and operands: one rounding, no
        // flush to zero (a driver that flushed the subnormal `a` gives NaN
        // for 0 · inf).
        let xs = [f32::INFINITY, 1.0e30, -3.0e-39, 2.0, f32::MIN_POSITIVE];
        let sx = d.buffer_from(&xs)?;
        let sy = d.buffer::<f32>(xs.len())?;
        for (sa, sb) in [(2.5e-40f32, 3.0e-39f32), (1.0e-30, 1.0e-38)] {
            cx.run(|d| d.launch(&ops::scale_add(sx.id(), sy.id(), xs.len() as u32, sa, sb)))?;
            let want: Vec<u32> = xs.iter().map(|v| sa.mul_add(*v, sb).to_bits()).collect();
            let got: Vec<u32> = sy.read()?.iter().map(|v| v.to_bits()).collect();
            check_eq!(got, want, "scale_add({sa:e}, x, {sb:e}) as bits");
        }

        let ia = d.buffer_from(&[i32::MAX, -5, 7])?;
        let ib = d.buffer_from(&[1i32, -6, -7])?;
        let io = d.buffer::<i32>(3)?;
        cx.run(|d| d.launch(&ops::add(ia.id(), ib.id(), io.id(), 3)))?;
        check_eq!(io.read()?, vec![i32::MIN, -11, 0], "i32 add wraps");

        let h = d.buffer::<seam::f16>(3)?;
        cx.run(|d| {
            d.launch(&ops::fill(
                h.id(),
                3,
                seam::f16::from_f32(-0.5).to_bits() as u32,
            ))
        })?;
        check_eq!(
            h.read()?,
            vec![seam::f16::from_f32(-0.5); 3],
            "f16 fill, odd length"
        );

        // Row ops over several rows, against closed forms evaluated in f64
        // (not against the CPU backend, which is the reference under test
        // on cpu:0): every row must use its own values, eps is added, and
        // softmax subtracts the row max (row 3 overflows exp() without it).
        let close = |got: &[f32], want: &[f64], what: &str| {
            let ok = got.len() == want.len()
                && got
                    .iter()
                    .zip(want)
                    .all(|(g, w)| (*g as f64 - w).abs() < 2e-6);
            check!(ok, "{what}: got {got:?}, want {want:?}");
            Ok(())
        };
        let rows: [[f32; 2]; 2] = [[3.0, 4.0], [1.0, -1.0]];
        let (wts, eps) = ([1.0f32, 2.0], 0.5f32);
        let x = d.buffer_from(rows.as_flattened())?;
        let w = d.buffer_from(&wts)?;
        let y = d.buffer::<f32>(4)?;
        cx.run(|d| d.launch(&ops::rms_norm(x.id(), w.id(), y.id(), 2, 2, eps)))?;
        let want: Vec<f64> = rows
            .iter()
            .flat_map(|r| {
                let ms = r.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / 2.0;
                let inv = 1.0 / (ms + eps as f64).sqrt();
                r.iter()
                    .zip(wts)
                    .map(move |(v, w)| *v as f64 * inv * w as f64)
            })
            .collect();
        close(&y.read()?, &want, "rms_norm, 2 rows, eps 0.5")?;

        let rows: [[f32; 4]; 3] = [[5.0; 4], [0.0, 1.0, -2.0, 0.5], [88.0, 89.0, 88.0, 88.0]];
        let s = d.buffer_from(rows.as_flattened())?;
        let so = d.buffer::<f32>(12)?;
        cx.run(|d| d.launch(&ops::softmax(s.id(), so.id(), 3, 4)))?;
        let want: Vec<f64> = rows
            .iter()
            .flat_map(|r| {
                let e: Vec<f64> = r.iter().map(|v| (*v as f64).exp()).collect();
                let sum: f64 = e.iter().sum();
                e.into_iter().map(move |v| v / sum)
            })
            .collect();
        close(&so.read()?, &want, "softmax, 3 rows")?;

        let ga = d.buffer_from(&[1.0f32, 2.0, 3.0, 4.0])?;
        let gb = d.buffer_from(&[5.0f32, 6.0, 7.0, 8.0])?;
        let gc = d.buffer::<f32>(4)?;
        d.prepare(&[(OpKind::Gemm, DType::F32)])?;
        cx.run(|d| d.launch(&ops::gemm(ga.id(), gb.id(), gc.id(), 2, 2, 2)))?;
        check_eq!(
            gc.read()?,
            vec![19.0f32, 22.0, 43.0, 50.0],
            "2x2 gemm, row-major"
        );

        let sx = d.buffer_from(&[0.0f32, 1.0])?;
        let sy = d.buffer::<f32>(2)?;
        cx.run(|d| d.launch(&ops::silu(sx.id(), sy.id(), 2)))?;
        let got = sy.read()?;
        check!(
            got[0] == 0.0 && (got[1] - 0.731_058_6).abs() < 1e-6,
            "silu([0,1]) = {got:?}"
        );
        Ok(())
    },
};
