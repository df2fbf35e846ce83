//! `KernelDef::well_formed`, rule by rule, and the `Field` table: what
//! `Device::register_kernel` refuses before any backend sees a kernel.

use super::*;

fn extents(_: &Params, out: &mut [u64]) {
    out.fill(1);
}
fn grid(_: &Params) -> [u32; 3] {
    [1, 1, 1]
}
fn cpu(_: &Params, _: &mut [Vec<u8>]) {}

const X: Binding = Binding::fixed("x", Access::Read, DType::F32);
const Y: Binding = Binding::fixed("y", Access::Write, DType::F32);

/// A definition every rule accepts; each test changes one thing.
fn base() -> KernelDef {
    KernelDef {
        name: "k",
        bindings: &[X, Y],
        reads: &[Field::D0],
        extents,
        workgroup_size: [64, 1, 1],
        grid,
        check: None,
        allows_aliasing: false,
        tolerance: Tolerance::BitExact,
        wgsl: None,
        cuda: None,
        cpu: Some(cpu),
        samples: &[],
    }
}

fn refused(def: KernelDef, why: &str) {
    match def.well_formed() {
        Ok(()) => panic!("{} was accepted; want `{why}`", def.name),
        Err(e) => assert!(e.contains(why), "`{e}` does not say `{why}`"),
    }
}

/// Mutations: `well_formed` → `Ok(())`, the identifier rule's `&&` → `||`
/// or `== '_'` → `!= '_'` → red.
#[test]
fn names_are_identifiers() {
    base().well_formed().unwrap();
    for ok in ["_k", "a_b9", "K"] {
        KernelDef { name: ok, ..base() }.well_formed().unwrap();
    }
    for bad in ["", "9k", "a-b", "a b", "k!"] {
        refused(
            KernelDef {
                name: bad,
                ..base()
            },
            "is not an identifier",
        );
    }
    const B: &[Binding] = &[Binding::fixed("x-1", Access::Write, DType::F32)];
    refused(
        KernelDef {
            bindings: B,
            ..base()
        },
        "binding 0: `x-1`",
    );
}

/// One to `MAX_BINDINGS` bindings, each of a fixed type, named once, one
/// at least written. Mutations: the count's `||` → `&&`, `>` → `>=` / `==`,
/// the duplicate check's `==` → `!=`, the written check dropped → red.
#[test]
fn bindings_are_counted_typed_unique_and_one_written() {
    refused(
        KernelDef {
            bindings: &[],
            ..base()
        },
        "0 bindings",
    );
    // The written binding first, so the first eight are a kernel too.
    const NINE: &[Binding] = &[
        Binding::fixed("w", Access::Write, DType::F32),
        Binding::fixed("a", Access::Read, DType::F32),
        Binding::fixed("b", Access::Read, DType::F32),
        Binding::fixed("c", Access::Read, DType::F32),
        Binding::fixed("d", Access::Read, DType::F32),
        Binding::fixed("e", Access::Read, DType::F32),
        Binding::fixed("f", Access::Read, DType::F32),
        Binding::fixed("g", Access::Read, DType::F32),
        Binding::fixed("h", Access::Read, DType::F32),
    ];
    const EIGHT: &[Binding] = NINE.split_at(crate::signature::MAX_BINDINGS).0;
    KernelDef {
        bindings: EIGHT,
        ..base()
    }
    .well_formed()
    .unwrap();
    refused(
        KernelDef {
            bindings: NINE,
            ..base()
        },
        "9 bindings",
    );
    const INPUT: &[Binding] = &[Binding {
        name: "y",
        access: Access::Write,
        role: Role::Input,
        zeroed: false,
    }];
    refused(
        KernelDef {
            bindings: INPUT,
            ..base()
        },
        "fixed element types",
    );
    const TWICE: &[Binding] = &[X, Binding::fixed("x", Access::Write, DType::F32)];
    refused(
        KernelDef {
            bindings: TWICE,
            ..base()
        },
        "`x` is named twice",
    );
    const READ_ONLY: &[Binding] = &[X];
    refused(
        KernelDef {
            bindings: READ_ONLY,
            ..base()
        },
        "no binding is written",
    );
    // A workspace is no output: it comes back as it went in (zeros).
    const ONLY_WORKSPACE: &[Binding] = &[X, Binding::workspace("ws", DType::F32)];
    refused(
        KernelDef {
            bindings: ONLY_WORKSPACE,
            ..base()
        },
        "no binding is written",
    );
    const READ_WORKSPACE: &[Binding] = &[
        X,
        Binding {
            access: Access::Read,
            ..Binding::workspace("ws", DType::F32)
        },
    ];
    refused(
        KernelDef {
            bindings: READ_WORKSPACE,
            ..base()
        },
        "a workspace is written",
    );
}

/// Mutations: the repeated-field check's `contains` inverted or dropped → red.
#[test]
fn reads_list_each_field_once() {
    KernelDef {
        reads: &[Field::D0, Field::S1],
        ..base()
    }
    .well_formed()
    .unwrap();
    refused(
        KernelDef {
            reads: &[Field::D0, Field::S1, Field::D0],
            ..base()
        },
        "reads lists `d0` twice",
    );
}

/// 1 to `MAX_WORKGROUP_INVOCATIONS` invocations, the product of the
/// three edges. Mutations: either `*` → `/`, `||` → `&&`, `>` → `>=` /
/// `==` → red.
#[test]
fn workgroups_hold_one_to_the_most_invocations() {
    let size = |workgroup_size| KernelDef {
        workgroup_size,
        ..base()
    };
    size([256, 1, 1]).well_formed().unwrap();
    size([16, 16, 1]).well_formed().unwrap();
    for bad in [
        [0, 1, 1],
        [1, 0, 64],
        [257, 1, 1],
        [512, 2, 1],
        [128, 4, 2],
        [16, 16, 2],
    ] {
        refused(size(bad), "invocations");
    }
}

/// At least one source. Mutation: the `&&`s → `||` → red.
#[test]
fn a_kernel_has_some_source() {
    refused(
        KernelDef {
            cpu: None,
            ..base()
        },
        "no source at all",
    );
    KernelDef {
        cpu: None,
        wgsl: Some("fn k() {}"),
        ..base()
    }
    .well_formed()
    .unwrap();
}

/// Each field's name, and zero as bits (`-0.0` is not zero). Mutations:
/// `Field::name` → `""` / `"xyzzy"`, an `is_zero` arm's `==` → `!=` → red.
#[test]
fn fields_name_and_test_their_params() {
    let names: Vec<&str> = Field::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["d0", "d1", "d2", "bits", "s0", "s1"]);
    let zero = Params::default();
    assert!(Field::ALL.iter().all(|f| f.is_zero(&zero)));
    let set = [
        Params { d0: 1, ..zero },
        Params { d1: 1, ..zero },
        Params { d2: 1, ..zero },
        Params { bits: 1, ..zero },
        Params { s0: -0.0, ..zero },
        Params { s1: 1.0, ..zero },
    ];
    for (i, p) in set.iter().enumerate() {
        for (j, f) in Field::ALL.iter().enumerate() {
            assert_eq!(f.is_zero(p), i != j, "{} in params #{i}", f.name());
        }
    }
}

static A: std::sync::OnceLock<KernelDef> = std::sync::OnceLock::new();
static A_TWIN: std::sync::OnceLock<KernelDef> = std::sync::OnceLock::new();
static B: std::sync::OnceLock<KernelDef> = std::sync::OnceLock::new();

/// A kernel is its definition: equal, hashed and ordered by it (the name
/// first), printed by name; a catalogue op is no kernel. Mutations: `eq`
/// → `true`, `hash` → `()`, `partial_cmp` → `None`, `Debug` → `Ok(())`,
/// `OpKind::user` → `None` or its `User` arm deleted → red.
#[test]
fn kernels_are_their_definitions() {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};
    let a = Kernel::new(A.get_or_init(|| KernelDef {
        name: "a",
        ..base()
    }));
    let twin = Kernel::new(A_TWIN.get_or_init(|| KernelDef {
        name: "a",
        ..base()
    }));
    let b = Kernel::from(B.get_or_init(|| KernelDef {
        name: "b",
        ..base()
    }));
    assert!(a == a && a != twin && a != b);
    let hash = |k: Kernel| {
        let mut h = DefaultHasher::new();
        k.hash(&mut h);
        h.finish()
    };
    assert_eq!(hash(a), hash(Kernel::new(a.def())));
    assert_ne!(hash(a), hash(twin), "two definitions hash apart");
    assert_eq!(a.partial_cmp(&b), Some(std::cmp::Ordering::Less));
    assert_eq!(b.partial_cmp(&a), Some(std::cmp::Ordering::Greater));
    assert_eq!(format!("{a:?}"), "Kernel(a)");
}

/// A trusted CUDA source is the text it was given, and starts early only
/// where it says so. Mutations: `CudaSource::source` → `""` / `"xyzzy"`,
/// `early` → `true` / `false` → red.
#[test]
#[allow(unsafe_code)] // the marker of trust `CudaSource` exists for
fn cuda_sources_keep_their_text() {
    // SAFETY: never compiled or launched; only its text is read.
    let src = unsafe { CudaSource::trusted("extern \"C\" __global__ void k() {}") };
    assert_eq!(src.source(), "extern \"C\" __global__ void k() {}");
    assert!(!src.early());
    // SAFETY: as above.
    let early = unsafe { src.starts_early() };
    assert!(early.early());
    assert_eq!(early.source(), src.source());
}
