//! User kernels lowered to MSL, off Apple: the layout every kernel's
//! arguments take, threadgroup memory, renamed entry points, and errors.

use super::*;
use crate::msl::{PARAMS_INDEX, SIZES_INDEX};
use seam::kernel::{Field, KernelDef, MAX_BINDINGS};
use seam::ops::{Access, Binding};
use seam::{DType, Params, Tolerance};

fn extents(p: &Params, out: &mut [u64]) {
    out.fill(p.d0 as u64);
}
fn grid(p: &Params) -> [u32; 3] {
    [p.d0.div_ceil(64).max(1), 1, 1]
}

macro_rules! def {
    ($id:ident, $name:literal, $bindings:expr, $wg:expr, $src:expr) => {
        static $id: KernelDef = KernelDef {
            name: $name,
            bindings: $bindings,
            reads: &[Field::D0, Field::D1, Field::D2, Field::S0],
            extents,
            workgroup_size: $wg,
            grid,
            check: None,
            allows_aliasing: true,
            tolerance: Tolerance::BitExact,
            wgsl: $src,
            cuda: None,
            cpu: None,
            samples: &[],
        };
    };
}

const R: Access = Access::Read;
const W: Access = Access::Write;
const F: DType = DType::F32;

def!(
    EIGHT,
    "sum7",
    &[
        Binding::fixed("a", R, F),
        Binding::fixed("b", R, F),
        Binding::fixed("c", R, F),
        Binding::fixed("d", R, F),
        Binding::fixed("e", R, F),
        Binding::fixed("f", R, F),
        Binding::fixed("g", R, F),
        Binding::fixed("y", W, F),
    ],
    [64, 1, 1],
    Some(
        "@group(0) @binding(0) var<storage, read> a: array<f32>;\n\
         @group(0) @binding(1) var<storage, read> b: array<f32>;\n\
         @group(0) @binding(2) var<storage, read> c: array<f32>;\n\
         @group(0) @binding(3) var<storage, read> d: array<f32>;\n\
         @group(0) @binding(4) var<storage, read> e: array<f32>;\n\
         @group(0) @binding(5) var<storage, read> f: array<f32>;\n\
         @group(0) @binding(6) var<storage, read> g: array<f32>;\n\
         @group(0) @binding(7) var<storage, read_write> y: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn sum7(@builtin(global_invocation_id) i: vec3<u32>) {\n\
             if (i.x < p.d0) {\n\
                 y[p.o7 + i.x] = a[p.o0 + i.x] + b[p.o1 + i.x] + c[p.o2 + i.x] + d[p.o3 + i.x]\n\
                     + e[p.o4 + i.x] + f[p.o5 + i.x] + g[p.o6 + i.x];\n\
             }\n\
         }\n"
    )
);

// `main` is reserved in MSL: naga renames the function.
def!(
    MAIN,
    "main",
    &[Binding::fixed("y", W, F)],
    [64, 1, 1],
    Some(
        "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn main(@builtin(global_invocation_id) i: vec3<u32>) { y[p.o0 + i.x] = 1.0; }\n"
    )
);

// A fixed-size binding: refused by the shared checks (its length would not
// be the view's).
def!(
    FIXED,
    "fixed4",
    &[Binding::fixed("y", W, F)],
    [4, 1, 1],
    Some(
        "@group(0) @binding(0) var<storage, read_write> y: array<f32, 4>;\n\
         @compute @workgroup_size(4)\n\
         fn fixed4(@builtin(local_invocation_index) i: u32) { y[i] = f32(i); }\n"
    )
);

def!(
    SYNTAX,
    "broken",
    &[Binding::fixed("y", W, F)],
    [64, 1, 1],
    Some(
        "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn broken(@builtin(global_invocation_id) i: vec3<u32>) {\n\
             y[i.x] = 2.0 +;\n\
         }\n"
    )
);
def!(NONE, "none", &[Binding::fixed("y", W, F)], [64, 1, 1], None);

/// The argument list of the MSL `kernel` function `name`.
fn arguments<'a>(source: &'a str, name: &str) -> &'a str {
    let start = source
        .find(&format!("kernel void {name}("))
        .unwrap_or_else(|| panic!("no `kernel void {name}(` in\n{source}"));
    let args = &source[start..];
    &args[..args.find(") {").expect("end of the argument list")]
}

/// Binding k is buffer k for every k up to MAX_BINDINGS, Params and the
/// sizes block past them: a kernel of 8 bindings fits.
#[test]
fn eight_bindings_take_buffers_0_to_7_then_params_and_sizes() {
    assert_eq!(EIGHT.bindings.len(), MAX_BINDINGS);
    let m = msl(Kernel::new(&EIGHT)).unwrap();
    // naga renames an identifier ending in a digit (`sum7_`).
    assert!(
        m.entry_point.msl.starts_with("sum7"),
        "{}",
        m.entry_point.msl
    );
    assert_eq!(m.entry_point.threads, [64, 1, 1]);
    assert!(m.entry_point.threadgroup_memory.is_empty());
    assert_eq!(m.sizes, (0..8).collect::<Vec<u32>>());
    let args = arguments(&m.source, &m.entry_point.msl);
    for (k, name) in ["a", "b", "c", "d", "e", "f", "g", "y"].iter().enumerate() {
        assert!(
            args.contains(&format!("{name} [[buffer({k})]]")),
            "binding {k} `{name}`: {args}"
        );
    }
    assert!(
        args.contains(&format!("constant Params& p [[buffer({PARAMS_INDEX})]]")),
        "{args}"
    );
    assert!(
        args.contains(&format!(
            "constant _mslBufferSizes& _buffer_sizes [[buffer({SIZES_INDEX})]]"
        )),
        "{args}"
    );
}

/// Bounds checks: every buffer access is guarded by the sizes block.
#[test]
fn user_kernels_are_bounds_checked() {
    let m = msl(Kernel::new(&EIGHT)).unwrap();
    let start = format!("kernel void {}(", m.entry_point.msl);
    let body = &m.source[m.source.find(&start).unwrap()..];
    assert!(body.contains("_buffer_sizes.size"), "{body}");
}

#[test]
fn the_example_kernels_lower_with_their_threadgroup_memory() {
    let rope = msl(Kernel::new(&seam_kernels::user::ROPE)).unwrap();
    assert_eq!(rope.entry_point.threads, [64, 1, 1]);
    assert!(rope.entry_point.threadgroup_memory.is_empty());
    assert_eq!(rope.sizes, [0, 1, 2]);

    let norm = msl(Kernel::new(&seam_kernels::user::ADD_RMS_NORM)).unwrap();
    assert_eq!(norm.entry_point.threads, [256, 1, 1]);
    // `var<workgroup> scratch: array<f32, 256>`: one argument of 1024 bytes.
    assert_eq!(norm.entry_point.threadgroup_memory, [1024]);
    assert_eq!(norm.sizes, [0, 1, 2, 3]);
    let args = arguments(&norm.source, &norm.entry_point.msl);
    // naga declares it `threadgroup T& scratch` (index by position, as the
    // catalogue's gemm; docs/metal.md lists this among what only an Apple
    // machine proves).
    assert_eq!(args.matches("threadgroup ").count(), 1, "{args}");
    assert!(
        args.contains(&format!("[[buffer({PARAMS_INDEX})]]")),
        "{args}"
    );
    assert!(args.contains("[[buffer(3)]]"), "{args}");

    let layer = msl(Kernel::new(&seam_kernels::user::NORM_GEMV_SILU_ADD)).unwrap();
    assert_eq!(layer.entry_point.threads, [256, 1, 1]);
    // `part: array<vec4<f32>, 256>` and `sq: array<f32, 64>`.
    let mut memory = layer.entry_point.threadgroup_memory.clone();
    memory.sort_unstable();
    assert_eq!(memory, [256, 4096]);
    // Its workspace (binding 4) too, though the WGSL never touches it.
    assert_eq!(layer.sizes, [0, 1, 2, 3, 4]);
}

#[test]
fn a_renamed_entry_point_is_found_by_its_msl_name() {
    let m = msl(Kernel::new(&MAIN)).unwrap();
    assert_eq!(m.entry_point.wgsl, "main");
    assert_ne!(m.entry_point.msl, "main");
    arguments(&m.source, &m.entry_point.msl);
}

#[test]
fn a_fixed_size_binding_is_refused_by_the_shared_checks() {
    match msl(Kernel::new(&FIXED)) {
        Err(ErrorKind::KernelCompile { kernel, log, .. }) => {
            assert_eq!(kernel, "fixed4");
            assert!(log.contains("fixed-size array"), "{log}");
        }
        other => panic!("{:?}", other.err()),
    }
    // A dispatch of a module without sizes members still binds one (unread).
    assert_eq!(crate::dispatch::sizes(&[], &[16]), [0]);
}

#[test]
fn wgsl_errors_and_missing_sources_come_from_the_shared_checks() {
    match msl(Kernel::new(&SYNTAX)) {
        Err(ErrorKind::KernelCompile {
            kernel,
            compiler,
            log,
        }) => {
            assert_eq!(kernel, "broken");
            assert_eq!(compiler, seam::wgsl::COMPILER);
            assert!(log.contains("broken.wgsl:4:"), "{log}");
        }
        other => panic!("{:?}", other.err()),
    }
    assert!(matches!(
        msl(Kernel::new(&NONE)).err(),
        Some(ErrorKind::KernelSourceMissing { kernel: "none", .. })
    ));
}

/// A module the layout cannot take (a binding past the buffer indices
/// before Params) is naga-msl-out's KernelCompile, never invalid MSL.
#[test]
fn a_binding_past_the_layout_is_refused_by_the_writer() {
    let src = format!(
        "{}@group(0) @binding(9) var<storage, read_write> y: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn far(@builtin(global_invocation_id) i: vec3<u32>) {{ y[i.x] = 1.0; }}\n",
        seam_kernels::WGSL_PARAMS
    );
    let module = naga::front::wgsl::parse_str(&src).unwrap();
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        seam::wgsl::CAPABILITIES,
    )
    .validate(&module)
    .unwrap();
    match lower("far", &module, &info) {
        Err(ErrorKind::KernelCompile { compiler, log, .. }) => {
            assert_eq!(compiler, WRITER);
            assert!(log.contains("@binding(9)"), "{log}");
        }
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn metals_refusal_carries_its_message_and_the_numbered_msl() {
    let e = metal_refused("k", "error: bad", "line one\nline two\n");
    let ErrorKind::KernelCompile {
        kernel,
        compiler,
        log,
    } = e
    else {
        panic!("{e:?}")
    };
    assert_eq!((kernel, compiler.as_str()), ("k", METAL));
    assert!(log.starts_with("error: bad"), "{log}");
    assert!(log.contains("   2 | line two"), "{log}");
}
