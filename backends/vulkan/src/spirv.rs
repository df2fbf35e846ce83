//! SPIR-V words: reading a module's instructions, writing new ones, and the
//! patch that moves a kernel's parameters out of the command buffer.
//!
//! **Parameters in a uniform buffer.** naga turns the WGSL prelude's
//! `var<immediate> p: Params` into a `PushConstant` variable, and push
//! constants are recorded in the command buffer: a graph update that
//! changes a launch's parameters (a Llama step's position, its attention
//! length, a view's offset) would have to record the command buffer again.
//! So the backend reads every kernel's 64-byte parameter block from a
//! uniform buffer instead (`Gpu::compute_pipeline` patches each module):
//! the variable and every pointer type of the `PushConstant` class become
//! `Uniform`, and the variable is decorated `DescriptorSet 0`,
//! `Binding n` (n: the kernel's number of storage buffers, so the block is
//! the binding after them). The block is a struct of sixteen 32-bit
//! scalars at offsets 0, 4, …, 60, already decorated `Block` (push
//! constants need it), which the std140 rules of a uniform block accept as
//! it is. No id is added; the two decorations go first in the annotation
//! section.

/// The SPIR-V magic number, the module's first word.
const MAGIC: u32 = 0x0723_0203;
/// Words of the module header (magic, version, generator, bound, schema).
pub(crate) const HEADER_WORDS: usize = 5;

/// `OpTypeStruct`.
const OP_TYPE_STRUCT: u32 = 30;
/// `OpTypePointer`: result id, storage class, pointee.
const OP_TYPE_POINTER: u32 = 32;
/// `OpVariable`: result type, result id, storage class[, initialiser].
const OP_VARIABLE: u32 = 59;
/// `OpDecorate`: target, decoration, operands.
const OP_DECORATE: u32 = 71;
/// The other annotation opcodes (`OpMemberDecorate`, `OpDecorationGroup`,
/// `OpGroupDecorate`, `OpGroupMemberDecorate`, `OpDecorateId`,
/// `OpDecorateString`, `OpMemberDecorateString`).
const OP_ANNOTATIONS: [u32; 7] = [72, 73, 74, 75, 332, 5632, 5633];
/// Storage class `Uniform`.
const CLASS_UNIFORM: u32 = 2;
/// Storage class `PushConstant`.
const CLASS_PUSH_CONSTANT: u32 = 9;
/// Decoration `Block`.
const DECORATION_BLOCK: u32 = 2;
/// Decoration `Binding`.
const DECORATION_BINDING: u32 = 33;
/// Decoration `DescriptorSet`.
const DECORATION_DESCRIPTOR_SET: u32 = 34;

/// A module's instructions, each as (offset of its first word, opcode,
/// word count).
pub(crate) type Instructions = Vec<(usize, u32, usize)>;

/// A module's instructions, in order.
pub(crate) fn instructions(words: &[u32]) -> Result<Instructions, String> {
    if words.len() < HEADER_WORDS || words[0] != MAGIC {
        return Err("not a SPIR-V module (bad magic or no header)".into());
    }
    let mut out = Vec::new();
    let mut at = HEADER_WORDS;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        if count == 0 || at + count > words.len() {
            return Err(format!(
                "instruction at word {at} has a bad word count {count}"
            ));
        }
        out.push((at, words[at] & 0xffff, count));
        at += count;
    }
    Ok(out)
}

/// A SPIR-V literal string: UTF-8, NUL-terminated, padded to whole words.
pub(crate) fn literal(s: &str) -> Vec<u32> {
    let mut bytes = s.as_bytes().to_vec();
    bytes.push(0);
    while !bytes.len().is_multiple_of(4) {
        bytes.push(0);
    }
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// An instruction of `op` with `operands`.
pub(crate) fn instruction(op: u32, operands: &[u32]) -> Vec<u32> {
    let mut v = vec![(((operands.len() + 1) as u32) << 16) | op];
    v.extend_from_slice(operands);
    v
}

/// `words` with the parameter block read from the uniform buffer at set 0,
/// binding `binding` instead of push constants (see the module's header).
/// A module without a push-constant variable (a kernel that reads no
/// parameter) is returned as it is. An error if the words are not a
/// well-formed module, declare more than one push-constant variable, or
/// the block is not a `Block`-decorated struct without a binding of its
/// own, or `binding` is already used in set 0.
pub fn params_as_uniform(words: &[u32], binding: u32) -> Result<Vec<u32>, String> {
    let insts = instructions(words)?;
    let operand = |at: usize, i: usize| words[at + 1 + i];
    let blocks: Vec<u32> = insts
        .iter()
        .filter(|&&(at, op, n)| {
            op == OP_VARIABLE && n >= 4 && operand(at, 2) == CLASS_PUSH_CONSTANT
        })
        .map(|&(at, _, _)| at)
        .map(|at| operand(at, 1))
        .collect();
    let var = match blocks[..] {
        [] => return Ok(words.to_vec()),
        [var] => var,
        _ => return Err(format!("{} push-constant variables", blocks.len())),
    };
    let var_type = insts
        .iter()
        .find(|&&(at, op, n)| op == OP_VARIABLE && n >= 4 && operand(at, 1) == var)
        .map(|&(at, _, _)| operand(at, 0))
        .ok_or("the push-constant variable vanished")?;
    let pointee = insts
        .iter()
        .find(|&&(at, op, n)| op == OP_TYPE_POINTER && n == 4 && operand(at, 0) == var_type)
        .map(|&(at, _, _)| operand(at, 2))
        .ok_or("no pointer type for the push-constant variable")?;
    if !insts
        .iter()
        .any(|&(at, op, _)| op == OP_TYPE_STRUCT && operand(at, 0) == pointee)
    {
        return Err("the push-constant block is not a struct".into());
    }
    let decorated = |target: u32, decoration: u32| {
        insts.iter().any(|&(at, op, n)| {
            op == OP_DECORATE && n >= 3 && operand(at, 0) == target && operand(at, 1) == decoration
        })
    };
    if !decorated(pointee, DECORATION_BLOCK) {
        return Err("the push-constant struct is not decorated Block".into());
    }
    if decorated(var, DECORATION_BINDING) || decorated(var, DECORATION_DESCRIPTOR_SET) {
        return Err("the push-constant variable already has a binding".into());
    }
    // Variables of set 0 (set 0 is every kernel's only set) and their bindings.
    let in_set_0: Vec<u32> = insts
        .iter()
        .filter(|&&(at, op, n)| {
            op == OP_DECORATE
                && n == 4
                && operand(at, 1) == DECORATION_DESCRIPTOR_SET
                && operand(at, 2) == 0
        })
        .map(|&(at, _, _)| operand(at, 0))
        .collect();
    if insts.iter().any(|&(at, op, n)| {
        op == OP_DECORATE
            && n == 4
            && operand(at, 1) == DECORATION_BINDING
            && operand(at, 2) == binding
            && in_set_0.contains(&operand(at, 0))
    }) {
        return Err(format!("binding {binding} of set 0 is already used"));
    }
    let first_annotation = insts
        .iter()
        .find(|&&(_, op, _)| op == OP_DECORATE || OP_ANNOTATIONS.contains(&op))
        .map(|&(at, _, _)| at)
        .ok_or("the module has no annotation (the block's Block decoration)")?;

    let mut out = Vec::with_capacity(words.len() + 8);
    out.extend_from_slice(&words[..first_annotation]);
    out.extend(instruction(
        OP_DECORATE,
        &[var, DECORATION_DESCRIPTOR_SET, 0],
    ));
    out.extend(instruction(
        OP_DECORATE,
        &[var, DECORATION_BINDING, binding],
    ));
    out.extend_from_slice(&words[first_annotation..]);
    // Every pointer type and the variable of the PushConstant class become
    // Uniform (offsets shifted by the 8 words inserted before them: types
    // and variables come after the annotations).
    let shift = out.len() - words.len();
    for &(at, op, n) in &insts {
        let at = if at >= first_annotation {
            at + shift
        } else {
            at
        };
        let class = match op {
            OP_TYPE_POINTER if n == 4 => at + 2,
            OP_VARIABLE if n >= 4 => at + 3,
            _ => continue,
        };
        if out[class] == CLASS_PUSH_CONSTANT {
            out[class] = CLASS_UNIFORM;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seam::OpKind;

    fn modules() -> Vec<(OpKind, &'static [u32])> {
        OpKind::ALL
            .into_iter()
            .filter_map(|op| seam_kernels::spirv(op).map(|w| (op, w)))
            .collect()
    }

    /// The set-0 binding of each variable decorated with one.
    fn bindings(words: &[u32]) -> Vec<(u32, u32)> {
        let insts = instructions(words).unwrap();
        let dec = |var: u32, d: u32| {
            insts.iter().find_map(|&(at, op, n)| {
                (op == OP_DECORATE && n == 4 && words[at + 1] == var && words[at + 2] == d)
                    .then(|| words[at + 3])
            })
        };
        insts
            .iter()
            .filter(|&&(_, op, _)| op == OP_VARIABLE)
            .filter_map(|&(at, _, _)| {
                let var = words[at + 2];
                match (
                    dec(var, DECORATION_DESCRIPTOR_SET),
                    dec(var, DECORATION_BINDING),
                ) {
                    (Some(0), Some(b)) => Some((var, b)),
                    _ => None,
                }
            })
            .collect()
    }

    /// Every catalogue module, patched for its op's binding count: no
    /// push-constant class is left; one more set-0 variable, the block,
    /// at the binding after the storage buffers, of the Uniform class;
    /// the header kept; and every other word as it was (the patch only
    /// changes storage classes and adds two decorations). Mutations: skip
    /// the pointer types, or bind the block at the wrong slot → red.
    #[test]
    fn every_kernel_module_reads_its_parameters_from_the_binding_after_its_buffers() {
        assert!(!modules().is_empty());
        for (op, words) in modules() {
            let n = op.signature().len() as u32;
            let before = bindings(words);
            assert_eq!(before.len() as u32, n, "{op}: storage buffers");
            let patched = params_as_uniform(words, n).unwrap();
            assert_eq!(patched[..HEADER_WORDS], words[..HEADER_WORDS], "{op}");
            let insts = instructions(&patched).unwrap();
            assert!(
                !insts.iter().any(|&(at, o, c)| (o == OP_TYPE_POINTER
                    && c == 4
                    && patched[at + 2] == CLASS_PUSH_CONSTANT)
                    || (o == OP_VARIABLE && patched[at + 3] == CLASS_PUSH_CONSTANT)),
                "{op}: a PushConstant class is left"
            );
            let after = bindings(&patched);
            assert_eq!(after.len() as u32, n + 1, "{op}: {after:?}");
            let (var, b) = *after
                .iter()
                .find(|(v, _)| !before.iter().any(|(w, _)| w == v))
                .unwrap();
            assert_eq!(b, n, "{op}: the block's binding");
            let class = insts
                .iter()
                .find(|&&(at, o, _)| o == OP_VARIABLE && patched[at + 2] == var)
                .map(|&(at, _, _)| patched[at + 3]);
            assert_eq!(class, Some(CLASS_UNIFORM), "{op}");
            // Without the two decorations, and with the classes put back,
            // it is the original module.
            let mut back = Vec::new();
            back.extend_from_slice(&patched[..HEADER_WORDS]);
            for &(at, o, c) in &insts {
                if o == OP_DECORATE && patched[at + 1] == var {
                    continue;
                }
                back.extend_from_slice(&patched[at..at + c]);
            }
            let original = instructions(words).unwrap();
            for &(at, o, c) in &original {
                let class = match o {
                    OP_TYPE_POINTER if c == 4 => at + 2,
                    OP_VARIABLE => at + 3,
                    _ => continue,
                };
                if words[class] == CLASS_PUSH_CONSTANT {
                    back[class] = CLASS_PUSH_CONSTANT;
                }
            }
            assert_eq!(back, words, "{op}: other words changed");
        }
    }

    /// The two decorations go before the module's first annotation (after
    /// its debug names, before its types); a patched module, which has no
    /// push constant left, is kept as it is; a binding a storage buffer
    /// uses is refused. Mutations: insert after the types → red.
    #[test]
    fn the_decorations_open_the_annotation_section_and_nothing_is_patched_twice() {
        let (words, _, _) = add_module();
        let n = OpKind::Add.signature().len() as u32;
        let patched = params_as_uniform(words, n).unwrap();
        let insts = instructions(&patched).unwrap();
        let first = insts
            .iter()
            .position(|&(_, o, _)| o == OP_DECORATE || OP_ANNOTATIONS.contains(&o))
            .unwrap();
        for k in [first, first + 1] {
            let (at, o, _) = insts[k];
            assert_eq!(o, OP_DECORATE);
            assert!([DECORATION_DESCRIPTOR_SET, DECORATION_BINDING].contains(&patched[at + 2]));
        }
        assert!(!insts[..first]
            .iter()
            .any(|&(_, o, _)| o == OP_TYPE_POINTER || o == OP_VARIABLE || o == OP_TYPE_STRUCT));
        assert_eq!(params_as_uniform(&patched, n).unwrap(), patched, "twice");
        assert!(
            params_as_uniform(words, 0).is_err(),
            "binding 0 is a buffer's"
        );
    }

    /// The checks look at the block's own struct and pointer type, found
    /// by their ids: a debug name on the pointer type (an `OpName` of two
    /// words, ahead of it) changes nothing, and the block's struct without
    /// its `Block` decoration is refused although the storage buffers'
    /// structs have theirs. Mutations: `&&` → `||` in the pointer type's
    /// search, `==` → `!=` in the variable's → red.
    #[test]
    fn the_block_is_found_by_its_ids() {
        let (words, insts, var) = add_module();
        let n = OpKind::Add.signature().len() as u32;
        let (_, ptr, pointee) = block_pointer(words, &insts, var);
        // OpName %ptr "params_" (7 bytes and a NUL: two words), placed
        // where debug names go: before the annotations and the types.
        let first = first_annotation(&insts);
        let mut name = vec![ptr];
        name.extend(literal("params_"));
        let named = [&words[..first], &instruction(5, &name)[..], &words[first..]].concat();
        let plain = params_as_uniform(words, n).unwrap();
        let patched = params_as_uniform(&named, n).unwrap();
        assert_eq!(patched.len(), plain.len() + 4, "the name's 4 words kept");
        // The block's struct loses its Block decoration (the instruction
        // becomes another decoration of the struct).
        let mut unblocked = words.to_vec();
        let at = insts
            .iter()
            .find(|&&(at, o, c)| {
                o == OP_DECORATE
                    && c == 3
                    && words[at + 1] == pointee
                    && words[at + 2] == DECORATION_BLOCK
            })
            .map(|&(at, _, _)| at)
            .unwrap();
        unblocked[at + 2] = 1; // SpecId: any decoration but Block
        let e = params_as_uniform(&unblocked, n).unwrap_err();
        assert!(e.contains("not decorated Block"), "{e}");
    }

    /// The module add.wgsl became, its instructions, and the id of the
    /// push-constant variable.
    fn add_module() -> (&'static [u32], Instructions, u32) {
        let words = seam_kernels::spirv(OpKind::Add).unwrap();
        let insts = instructions(words).unwrap();
        let var = insts
            .iter()
            .find(|&&(at, o, c)| o == OP_VARIABLE && c >= 4 && words[at + 3] == CLASS_PUSH_CONSTANT)
            .map(|&(at, _, _)| words[at + 2])
            .unwrap();
        (words, insts, var)
    }

    /// `words` without the instruction at `at` of `n` words.
    fn without(words: &[u32], at: usize, n: usize) -> Vec<u32> {
        [&words[..at], &words[at + n..]].concat()
    }

    /// Where the module's first annotation starts (a word offset).
    fn first_annotation(insts: &Instructions) -> usize {
        insts
            .iter()
            .find(|&&(_, o, _)| o == OP_DECORATE || OP_ANNOTATIONS.contains(&o))
            .map(|&(at, _, _)| at)
            .unwrap()
    }

    /// The block variable `var`'s pointer type: where it starts, its id and
    /// the id of the type it points at.
    fn block_pointer(words: &[u32], insts: &Instructions, var: u32) -> (usize, u32, u32) {
        let ptr = insts
            .iter()
            .find(|&&(at, o, c)| o == OP_VARIABLE && c >= 4 && words[at + 2] == var)
            .map(|&(at, _, _)| words[at + 1])
            .unwrap();
        insts
            .iter()
            .find(|&&(at, o, c)| o == OP_TYPE_POINTER && c == 4 && words[at + 1] == ptr)
            .map(|&(at, _, _)| (at, ptr, words[at + 3]))
            .unwrap()
    }

    /// Each refusal, on the module it is for: a block whose pointer type
    /// points at a scalar; a block with a binding of its own (either
    /// decoration alone); a binding a storage buffer of set 0 has (binding
    /// 1 of add's three); and no refusal for a binding only another set
    /// uses. Mutations: any of the checks' comparisons turned (`==` → `!=`,
    /// `&&` ↔ `||`) → red.
    #[test]
    fn every_refusal_is_for_its_own_case() {
        let (words, insts, var) = add_module();
        let n = OpKind::Add.signature().len() as u32;
        let word_of = |at: usize, i: usize| words[at + 1 + i];
        // The block's pointer type pointing at the module's u32 type.
        let uint = insts
            .iter()
            .find(|&&(at, o, _)| o == 21 && word_of(at, 1) == 32)
            .map(|&(at, _, _)| word_of(at, 0))
            .unwrap();
        let (at, _, _) = block_pointer(words, &insts, var);
        let mut scalar = words.to_vec();
        scalar[at + 3] = uint;
        let e = params_as_uniform(&scalar, n).unwrap_err();
        assert!(e.contains("not a struct"), "{e}");
        // A binding of its own: the patched module with the variable's
        // class put back (both decorations), then with one of the two
        // removed.
        let patched = params_as_uniform(words, n).unwrap();
        let mut bound = patched.clone();
        for &(at, o, c) in &instructions(&patched).unwrap() {
            if o == OP_VARIABLE && c >= 4 && patched[at + 2] == var {
                bound[at + 3] = CLASS_PUSH_CONSTANT;
            }
        }
        let e = params_as_uniform(&bound, n).unwrap_err();
        assert!(e.contains("already has a binding"), "{e}");
        for decoration in [DECORATION_BINDING, DECORATION_DESCRIPTOR_SET] {
            let (at, c) = instructions(&bound)
                .unwrap()
                .into_iter()
                .find(|&(at, o, _)| {
                    o == OP_DECORATE && bound[at + 1] == var && bound[at + 2] == decoration
                })
                .map(|(at, _, c)| (at, c))
                .unwrap();
            let one = without(&bound, at, c);
            let e = params_as_uniform(&one, n).unwrap_err();
            assert!(e.contains("already has a binding"), "{e}");
        }
        // Binding 1 of set 0 is a storage buffer's.
        let e = params_as_uniform(words, 1).unwrap_err();
        assert!(e.contains("binding 1 of set 0"), "{e}");
        // Moved to set 1, that buffer leaves binding 1 of set 0 free.
        let buffer = insts
            .iter()
            .find(|&&(at, o, c)| {
                o == OP_DECORATE
                    && c == 4
                    && word_of(at, 1) == DECORATION_BINDING
                    && word_of(at, 2) == 1
            })
            .map(|&(at, _, _)| word_of(at, 0))
            .unwrap();
        let mut moved = words.to_vec();
        let at = insts
            .iter()
            .find(|&&(at, o, c)| {
                o == OP_DECORATE
                    && c == 4
                    && word_of(at, 0) == buffer
                    && word_of(at, 1) == DECORATION_DESCRIPTOR_SET
            })
            .map(|&(at, _, _)| at)
            .unwrap();
        moved[at + 3] = 1;
        assert!(params_as_uniform(&moved, 1).is_ok());
    }

    /// The decorations go after everything before the first annotation
    /// (capabilities, entry points, names), which is kept word for word.
    /// Mutation: `==` → `!=` in the search for the first annotation (the
    /// decorations then open the module) → red.
    #[test]
    fn what_precedes_the_annotations_is_kept_in_front() {
        let (words, insts, _) = add_module();
        let first = first_annotation(&insts);
        assert!(first > HEADER_WORDS);
        let patched = params_as_uniform(words, 3).unwrap();
        assert_eq!(patched[..first], words[..first]);
    }

    /// A truncated pointer type or variable at the module's end (too
    /// short to hold a storage class) is left alone, not read past.
    /// Mutations: the `n == 4` / `n >= 4` guards of the class rewrite
    /// made `true` → red (a read past the module's end).
    #[test]
    fn short_pointer_types_and_variables_are_not_read_past() {
        let (words, _, _) = add_module();
        for (op, count) in [(OP_TYPE_POINTER, 2u32), (OP_VARIABLE, 3)] {
            let mut w = words.to_vec();
            w.push((count << 16) | op);
            w.extend(std::iter::repeat_n(7, count as usize - 1));
            let patched = params_as_uniform(&w, 3).unwrap();
            assert_eq!(
                patched[patched.len() - count as usize..],
                w[w.len() - count as usize..]
            );
        }
    }

    #[test]
    fn malformed_modules_are_refused_and_a_module_without_parameters_is_kept() {
        assert!(params_as_uniform(&[], 3).is_err());
        assert!(params_as_uniform(&[MAGIC, 0x0001_0000, 0, 1, 0, 0], 3).is_err());
        assert!(params_as_uniform(&[MAGIC + 1, 0x0001_0000, 0, 1, 0], 3).is_err());
        let bare = [MAGIC, 0x0001_0000, 0, 1, 0];
        assert_eq!(params_as_uniform(&bare, 3).unwrap(), bare);
    }

    #[test]
    fn literal_strings_are_nul_terminated_and_padded() {
        assert_eq!(literal("abc"), vec![u32::from_le_bytes(*b"abc\0")]);
        assert_eq!(
            literal("abcd"),
            vec![u32::from_le_bytes(*b"abcd"), 0],
            "a string of whole words still gets its NUL"
        );
        assert_eq!(literal("SPV_KHR_float_controls").len(), 6);
    }
}
