//! README's "Using it" block, compiled in a function returning
//! `seam::Result<()>` and run on the CPU reference. A test compares the
//! README's text with the body below, so the README cannot drift from code
//! that compiles (it once needed `Box<dyn Error>`: opening a device returned
//! a bare `ErrorKind`). The README's support table is checked against
//! what each device found here reports.

use seam::kernel::{CudaSource, Field, KernelDef};
use seam::ops::{Access, Binding};
use seam::{ops, DType, Device, Params, Tolerance};

#[allow(unsafe_code)] // the README's kernel trusts its CUDA C, as a user's crate would
fn using_it() -> seam::Result<()> {
    // README: begin
    let dev: Device = seam_backends::discover().devices[0].device()?;
    let a = dev.buffer_from(&[17.0f32])?;
    let dst = dev.buffer_from(&[0.0f32])?;

    let scope = dev.capture()?; // aborts on drop unless ended
    dev.launch(&ops::add(a.id(), dst.id(), dst.id(), 1))?;
    let graph = scope.end_graph()?; // destroyed on drop

    graph.replay()?; // dst = 17
    graph.replay()?; // dst = 34: a replay re-executes, it never replays a snapshot (C1)
    a.write(&[1.0])?;
    graph.replay()?; // dst = 35: host writes between replays are seen (C2)
    assert_eq!(dst.read()?, vec![35.0]);

    // Your own kernel: WGSL (vulkan, wgpu, metal; binding k's view starts at
    // element p.o<k>), CUDA C (cuda, hip; pointers start at the view) and
    // Rust (the CPU backend, and the oracle the suite compares devices with).
    static DOUBLE: KernelDef = KernelDef {
        name: "double_f32",
        bindings: &[
            Binding::fixed("x", Access::Read, DType::F32),
            Binding::fixed("y", Access::Write, DType::F32),
        ],
        reads: &[Field::D0],
        extents: |p, out| out.fill(p.d0 as u64),
        workgroup_size: [64, 1, 1],
        grid: |p| [p.d0.div_ceil(64), 1, 1],
        check: None,
        allows_aliasing: true,
        tolerance: Tolerance::BitExact,
        wgsl: Some(
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn double_f32(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.d0) { y[p.o1 + g.x] = 2.0 * x[p.o0 + g.x]; }
}",
        ),
        // SAFETY: indexes `x` and `y` only below `p.d0`, their declared extent.
        cuda: Some(unsafe {
            CudaSource::trusted(
                r#"extern "C" __global__ void double_f32(const float* x, float* y, Params p) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.d0) y[i] = 2.0f * x[i];
}"#,
            )
        }),
        cpu: Some(|p, b| {
            for i in (0..p.d0 as usize).map(|i| 4 * i) {
                let x = f32::from_le_bytes([b[0][i], b[0][i + 1], b[0][i + 2], b[0][i + 3]]);
                b[1][i..i + 4].copy_from_slice(&(2.0 * x).to_le_bytes());
            }
        }),
        samples: &[Params::dims(100, 0, 0)],
    };
    dev.register_kernel(&DOUBLE)?; // WGSL checked on every device, compiled once here
    let kv = dev.buffer_from(&[0.0f32; 8])?; // a KV cache: 4 slots of 2
    let k = dev.buffer_from(&[1.5f32, -2.0])?;
    // Write slot 2 through a view: elements 4..6 of the cache, nothing else.
    let step = ops::user(
        &DOUBLE,
        &[k.id().into(), kv.id().view(4, 2)],
        Params::dims(2, 0, 0),
    );
    dev.launch(&step)?;
    assert_eq!(kv.read()?, vec![0.0, 0.0, 0.0, 0.0, 3.0, -4.0, 0.0, 0.0]);
    // README: end
    Ok(())
}

#[test]
fn readme_block_runs() {
    using_it().unwrap();
}

/// The README's ```rust block under "## Using it" is this file's block,
/// line for line (leading whitespace and comment spacing aside).
#[test]
fn readme_block_is_this_code() {
    let norm = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = include_str!("../../README.md");
    let section = readme
        .split("## Using it")
        .nth(1)
        .expect("README has a \"## Using it\" section");
    let block = section
        .split("```rust")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has a ```rust block");
    let this = include_str!("readme_using_it.rs");
    let body = this
        .split("// README: begin")
        .nth(1)
        .and_then(|b| b.split("// README: end").next())
        .expect("markers");
    let lines = |t: &str| -> Vec<String> {
        t.lines()
            .map(norm)
            .filter(|l| !l.is_empty() && !l.starts_with("use "))
            .collect()
    };
    assert_eq!(
        lines(block),
        lines(body),
        "README's block differs from this test"
    );
}

/// README's registration block (under "Certify your backend") is
/// `seam::Registration`'s documented example, which runs as a doctest.
#[test]
fn readme_registration_is_the_documented_example() {
    let readme = include_str!("../../README.md");
    let block = readme
        .split("## Certify your backend")
        .nth(1)
        .and_then(|s| s.split("```rust").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("the section starts with a ```rust block");
    let doc = include_str!("../../core/src/registration.rs");
    let example = doc
        .split("/// One backend's description of itself.")
        .nth(1)
        .and_then(|s| s.split("/// ```").nth(1))
        .expect("Registration's documented example");
    let norm = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let lines = |t: &str, doc: bool| -> Vec<String> {
        t.lines()
            .map(|l| {
                let l = l.trim_start();
                norm(if doc {
                    l.strip_prefix("///").unwrap_or(l)
                } else {
                    l
                })
            })
            .filter(|l| !l.is_empty())
            .collect()
    };
    assert_eq!(
        lines(block, false),
        lines(example, true),
        "README's registration differs"
    );
}

/// The README's "Capture support" table says, per backend, which way it
/// captures, updates a graph (C13) and runs conditional bodies (C14): each
/// such cell leads (before its first `:`) with the `Native` / `Emulated` /
/// `Unsupported` the backend may report. Every row is checked for that
/// form, and every device found here must report one its row names.
#[test]
fn readme_support_table_is_what_each_device_here_reports() {
    const KINDS: [&str; 3] = ["Native", "Emulated", "Unsupported"];
    let readme = include_str!("../../README.md");
    let section = readme
        .split("## Capture support")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has a \"## Capture support\" section");
    let rows: Vec<Vec<&str>> = section
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    let header = &rows[0];
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column `{name}` in {header:?}"))
    };
    let columns = [
        column("capture"),
        column("graph update (C13)"),
        column("conditional bodies (C14)"),
    ];
    // What a cell says a backend may report: the kinds named before its ':'.
    let named = |cell: &str| -> Vec<&'static str> {
        let lead = cell.split(':').next().unwrap_or(cell);
        KINDS
            .into_iter()
            .filter(|k| lead.split(|c: char| !c.is_alphabetic()).any(|w| w == *k))
            .collect()
    };
    for row in &rows[1..] {
        assert_eq!(row.len(), header.len(), "README row {row:?}");
        for &c in &columns {
            assert!(
                !named(row[c]).is_empty(),
                "README: {}'s `{}` names none of {KINDS:?}: {}",
                row[0],
                header[c],
                row[c]
            );
        }
    }
    let kind = |debug: String| debug.split('(').next().unwrap_or_default().to_string();
    let found = seam_backends::discover();
    assert!(!found.devices.is_empty(), "the CPU reference at least");
    for slot in &found.devices {
        let dev = slot.device().expect(&slot.id);
        let row = rows[1..]
            .iter()
            .find(|r| r[0] == slot.backend)
            .unwrap_or_else(|| panic!("README's table has no row for {}", slot.backend));
        let reported = [
            kind(format!("{:?}", dev.capture_support())),
            kind(format!("{:?}", dev.update_support())),
            kind(format!("{:?}", dev.conditional_support())),
        ];
        for (&c, reported) in columns.iter().zip(&reported) {
            assert!(
                named(row[c]).contains(&reported.as_str()),
                "{}: reports {reported} for `{}`; README says: {}",
                slot.id,
                header[c],
                row[c]
            );
        }
    }
}
