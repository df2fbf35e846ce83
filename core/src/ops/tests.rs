use super::*;

/// A user kernel's op names its kernel, a catalogue op none; catalogue
/// ops are found by name. Mutations: `OpKind::user` → `None` or its
/// `User` arm deleted, `from_name` → `None` or its `==` → `!=` → red.
#[test]
fn ops_name_their_kernel_and_are_found_by_name() {
    static K: crate::kernel::KernelDef = crate::kernel::KernelDef {
        name: "k",
        bindings: &[Binding::fixed("y", Access::Write, DType::F32)],
        reads: &[],
        extents: |_, out| out.fill(1),
        workgroup_size: [1, 1, 1],
        grid: |_| [1, 1, 1],
        check: None,
        allows_aliasing: false,
        tolerance: Tolerance::BitExact,
        wgsl: None,
        cuda: None,
        cpu: None,
        samples: &[],
    };
    let k = Kernel::new(&K);
    assert_eq!(OpKind::User(k).user(), Some(k));
    assert_eq!(OpKind::Add.user(), None);
    assert_eq!(OpKind::from_name("add"), Some(OpKind::Add));
    assert_eq!(OpKind::from_name("nope"), None);
}

/// An `add` over three views at element offsets 3, 0 and 1000, with
/// every parameter set.
fn three_view_add() -> Launch {
    use crate::RawBuffer;
    Launch {
        op: OpKind::Add,
        dtype: DType::F32,
        buffers: [
            RawView::at(RawBuffer(1), 3, 4, 16),
            RawView::at(RawBuffer(2), 0, 4, 16),
            RawView::at(RawBuffer(3), 1000, 4, 16),
        ]
        .into(),
        params: Params::dims(7, 8, 9).with_scalars(0.5, -2.0),
    }
}

/// What a GPU kernel receives: each view's element offset in binding
/// order (zero past the last), and the immediate block of the params'
/// bytes then those offsets; `Params::dims` and `with_scalars` set the
/// fields they name. Mutations: `offsets` / `immediates` → a constant
/// array, `IMMEDIATE_BYTES`' arithmetic, a field dropped from `dims` or
/// `with_scalars` → red.
#[test]
fn kernels_receive_offsets_after_the_params() {
    let launch = three_view_add();
    let params = launch.params;
    assert_eq!((params.d0, params.d1, params.d2), (7, 8, 9));
    assert_eq!((params.s0, params.s1), (0.5, -2.0));
    assert_eq!(launch.offsets(), [3, 0, 1000, 0, 0, 0, 0, 0]);
    assert_eq!(launch.buffers[0].byte_offset, 12, "3 elements of 4 bytes");
    assert_eq!(IMMEDIATE_BYTES, 64);
    let imm = launch.immediates();
    assert_eq!(&imm[..Params::BYTES], &params.to_bytes()[..]);
    let words: Vec<u32> = imm[Params::BYTES..]
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(words, [3, 0, 1000, 0, 0, 0, 0, 0]);
}

/// The block kernels receive: eight native-endian words in field order.
/// Mutation: swap two fields in `Params` → red.
#[test]
fn params_bytes_are_the_fields_in_order() {
    let p = Params {
        d0: 1,
        d1: 2,
        d2: 3,
        bits: 4,
        s0: 1.5,
        s1: -2.0,
        _pad: [7, 8],
    };
    let words: Vec<u32> = p
        .to_bytes()
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(
        words,
        [1, 2, 3, 4, 1.5f32.to_bits(), (-2.0f32).to_bits(), 7, 8]
    );
}

/// `name()` is the identifier kernels are looked up by
/// (`kernels/wgsl/<op>.wgsl`, entry points `<op>_<dtype>`), what errors
/// print, and must equal the serde name the JSON reports carry.
/// Mutations: `OpKind::name` / `DType::name` → `""` or `"xyzzy"`, either
/// `Display` → `Ok(Default::default())` → red.
#[test]
fn names_match_display_and_serde() {
    fn check<T: fmt::Display + Serialize>(
        all: &[T],
        name: impl Fn(&T) -> &'static str,
        want: &[&str],
    ) {
        let names: Vec<&str> = all.iter().map(&name).collect();
        assert_eq!(names, want);
        for v in all {
            assert_eq!(v.to_string(), name(v));
            assert_eq!(
                serde_json::to_string(v).unwrap(),
                format!("\"{}\"", name(v))
            );
        }
    }
    check(
        &OpKind::ALL,
        |o| o.name(),
        &[
            "fill",
            "copy",
            "scale_add",
            "add",
            "mul",
            "silu",
            "rms_norm",
            "softmax",
            "gemm",
        ],
    );
    check(
        &DType::ALL,
        |d| d.name(),
        &["f32", "f16", "bf16", "i32", "u32"],
    );
}

/// `clone_from` makes a launch equal to its source in every field, as
/// `clone` does, whatever the two held (a graph update stores launches
/// this way). Mutations: a field left uncopied, by either → red.
#[test]
fn a_launch_cloned_from_another_equals_it() {
    use crate::RawBuffer;
    let source = three_view_add();
    let mut target = Launch {
        op: OpKind::Fill,
        dtype: DType::U32,
        buffers: [RawView::at(RawBuffer(9), 0, 4, 4)].into(),
        params: Params::ZERO,
    };
    assert_eq!(source.clone(), source);
    target.clone_from(&source);
    assert_eq!(target, source);
}
