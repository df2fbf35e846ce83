//! SPIR-V float controls after naga. naga 30 emits no
//! `SPV_KHR_float_controls` execution modes and has no option for them, so
//! on a device that reports `shaderDenormPreserveFloat32` the module naga
//! made at build time is patched before `vkCreateShaderModule`:
//!
//! - `OpCapability DenormPreserve` after the module's capabilities;
//! - `OpExtension "SPV_KHR_float_controls"` when the module's version is
//!   below 1.4 (where the capability became core);
//! - `OpExecutionMode %entry DenormPreserve 32` for every entry point.
//!
//! No id is added, so the header's bound stays. Each instruction goes where
//! SPIR-V's logical layout puts it (capabilities, extensions, imports,
//! memory model, entry points, execution modes, …), which the unit tests
//! check on every module of `seam-kernels` and `spirv-val` confirmed
//! (docs/vulkan.md).

/// `OpExtension`.
const OP_EXTENSION: u32 = 10;
/// `OpCapability`.
const OP_CAPABILITY: u32 = 17;
/// `OpEntryPoint`.
const OP_ENTRY_POINT: u32 = 15;
/// `OpExecutionMode`.
const OP_EXECUTION_MODE: u32 = 16;
/// `OpExecutionModeId` (SPIR-V 1.2).
const OP_EXECUTION_MODE_ID: u32 = 331;
/// Capability `DenormPreserve` (SPV_KHR_float_controls).
pub const CAPABILITY_DENORM_PRESERVE: u32 = 4464;
/// Execution mode `DenormPreserve` (its operand: the float width).
pub const MODE_DENORM_PRESERVE: u32 = 4459;
const EXTENSION: &str = "SPV_KHR_float_controls";

#[cfg(test)]
use super::spirv::HEADER_WORDS;
use super::spirv::{instruction, instructions, literal};
/// `words` with 32-bit `DenormPreserve` on every entry point. Idempotent:
/// what the module already has is not added twice. An error if the words
/// are not a well-formed module with at least one entry point.
pub fn denorm_preserve_f32(words: &[u32]) -> Result<Vec<u32>, String> {
    let insts = instructions(words)?;
    let version = words[1];
    let (major, minor) = ((version >> 16) & 0xff, (version >> 8) & 0xff);
    let needs_extension = (major, minor) < (1, 4);
    let operand = |at: usize, i: usize| words[at + 1 + i];
    let has_capability = insts.iter().any(|&(at, op, n)| {
        op == OP_CAPABILITY && n == 2 && operand(at, 0) == CAPABILITY_DENORM_PRESERVE
    });
    let has_extension = insts
        .iter()
        .any(|&(at, op, n)| op == OP_EXTENSION && words[at + 1..at + n] == literal(EXTENSION)[..]);
    let entries: Vec<u32> = insts
        .iter()
        .filter(|&&(_, op, _)| op == OP_ENTRY_POINT)
        .map(|&(at, _, _)| operand(at, 1))
        .collect();
    if entries.is_empty() {
        return Err("the module has no entry point".into());
    }
    let has_mode = |entry: u32| {
        insts.iter().any(|&(at, op, n)| {
            op == OP_EXECUTION_MODE
                && n == 4
                && operand(at, 0) == entry
                && operand(at, 1) == MODE_DENORM_PRESERVE
                && operand(at, 2) == 32
        })
    };
    // Where each new instruction goes: after the last capability; after the
    // last capability or extension; after the last entry point or
    // execution mode.
    let last = |pred: &dyn Fn(u32) -> bool| {
        insts
            .iter()
            .filter(|&&(_, op, _)| pred(op))
            .map(|&(at, _, n)| at + n)
            .max()
    };
    let after_caps = last(&|op| op == OP_CAPABILITY)
        .ok_or("the module declares no capability (not a shader module)")?;
    let after_exts = last(&|op| op == OP_CAPABILITY || op == OP_EXTENSION).unwrap_or(after_caps);
    let after_modes =
        last(&|op| op == OP_ENTRY_POINT || op == OP_EXECUTION_MODE || op == OP_EXECUTION_MODE_ID)
            .unwrap_or(after_exts);

    let mut out = Vec::with_capacity(words.len() + 8 + 4 * entries.len());
    out.extend_from_slice(&words[..after_caps]);
    if !has_capability {
        out.extend(instruction(OP_CAPABILITY, &[CAPABILITY_DENORM_PRESERVE]));
    }
    out.extend_from_slice(&words[after_caps..after_exts]);
    if needs_extension && !has_extension {
        out.extend(instruction(OP_EXTENSION, &literal(EXTENSION)));
    }
    out.extend_from_slice(&words[after_exts..after_modes]);
    for entry in entries {
        if !has_mode(entry) {
            out.extend(instruction(
                OP_EXECUTION_MODE,
                &[entry, MODE_DENORM_PRESERVE, 32],
            ));
        }
    }
    out.extend_from_slice(&words[after_modes..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seam::OpKind;

    /// The SPIR-V logical layout's section of an opcode, for the order check
    /// (0: capability, 1: extension, 2: ext inst import, 3: memory model,
    /// 4: entry point, 5: execution mode, 6: everything after).
    fn section(op: u32) -> u32 {
        match op {
            OP_CAPABILITY => 0,
            OP_EXTENSION => 1,
            11 => 2,
            14 => 3,
            OP_ENTRY_POINT => 4,
            OP_EXECUTION_MODE | OP_EXECUTION_MODE_ID => 5,
            _ => 6,
        }
    }

    fn modules() -> Vec<(OpKind, &'static [u32])> {
        OpKind::ALL
            .into_iter()
            .filter_map(|op| seam_kernels::spirv(op).map(|w| (op, w)))
            .collect()
    }

    /// Every module of seam-kernels, patched: the header and bound are
    /// kept, the capability, the extension (naga writes SPIR-V 1.0) and one
    /// execution mode per entry point are there once each, in layout order,
    /// and every original instruction is still there in its order.
    /// Mutations: insert the modes before the entry points, or skip the
    /// extension → red.
    #[test]
    fn every_kernel_module_gets_denorm_preserve_in_layout_order() {
        assert!(!modules().is_empty());
        for (op, words) in modules() {
            let patched = denorm_preserve_f32(words).unwrap();
            assert_eq!(
                patched[..HEADER_WORDS],
                words[..HEADER_WORDS],
                "{op}: header"
            );
            let insts = instructions(&patched).unwrap();
            let sections: Vec<u32> = insts.iter().map(|&(_, op, _)| section(op)).collect();
            assert!(
                sections.windows(2).all(|w| w[0] <= w[1]),
                "{op}: instructions out of layout order: {sections:?}"
            );
            let count = |pred: &dyn Fn(usize, u32, usize) -> bool| {
                insts.iter().filter(|&&(at, op, n)| pred(at, op, n)).count()
            };
            assert_eq!(
                count(&|at, op, _| op == OP_CAPABILITY && patched[at + 1] == 4464),
                1,
                "{op}: capability"
            );
            assert_eq!(
                count(&|at, op, n| op == OP_EXTENSION
                    && patched[at + 1..at + n] == literal(EXTENSION)[..]),
                1,
                "{op}: extension"
            );
            let entries = count(&|_, op, _| op == OP_ENTRY_POINT);
            assert!(entries > 0, "{op}: no entry point");
            assert_eq!(
                count(&|at, op, _| op == OP_EXECUTION_MODE
                    && patched[at + 2] == 4459
                    && patched[at + 3] == 32),
                entries,
                "{op}: one DenormPreserve 32 per entry point"
            );
            // Removing what was added gives the original back.
            let mut stripped = patched[..HEADER_WORDS].to_vec();
            for &(at, o, n) in &insts {
                let added = (o == OP_CAPABILITY && patched[at + 1] == 4464)
                    || (o == OP_EXTENSION && patched[at + 1..at + n] == literal(EXTENSION)[..])
                    || (o == OP_EXECUTION_MODE && patched[at + 2] == 4459);
                if !added {
                    stripped.extend_from_slice(&patched[at..at + n]);
                }
            }
            assert_eq!(stripped, words, "{op}: original instructions changed");
            // Idempotent.
            assert_eq!(
                denorm_preserve_f32(&patched).unwrap(),
                patched,
                "{op}: twice"
            );
        }
    }

    /// What is added goes at the end of its section, after what the module
    /// already has there: its own execution modes (every module sets its
    /// workgroup size) and, in a module given an extension of its own,
    /// that extension. Mutations: insert the modes after the entry points,
    /// or the extension after the capabilities → red.
    #[test]
    fn added_instructions_end_their_sections() {
        let own = instruction(
            OP_EXTENSION,
            &literal("SPV_KHR_storage_buffer_storage_class"),
        );
        for (op, words) in modules() {
            let after_caps = instructions(words)
                .unwrap()
                .iter()
                .filter(|&&(_, o, _)| o == OP_CAPABILITY)
                .map(|&(at, _, n)| at + n)
                .max()
                .unwrap();
            let with_extension = [&words[..after_caps], &own, &words[after_caps..]].concat();
            for module in [words.to_vec(), with_extension] {
                let patched = denorm_preserve_f32(&module).unwrap();
                let insts = instructions(&patched).unwrap();
                let added = |&(at, o, n): &(usize, u32, usize)| {
                    (o == OP_CAPABILITY && patched[at + 1] == CAPABILITY_DENORM_PRESERVE)
                        || (o == OP_EXTENSION && patched[at + 1..at + n] == literal(EXTENSION)[..])
                        || (o == OP_EXECUTION_MODE && patched[at + 2] == MODE_DENORM_PRESERVE)
                };
                for (k, i) in insts.iter().enumerate().filter(|(_, i)| added(i)) {
                    let later = insts[k + 1..].iter().filter(|j| !added(j));
                    for &(_, o, _) in later {
                        assert!(
                            section(o) > section(i.1),
                            "{op}: opcode {} added before opcode {o} of its section",
                            i.1
                        );
                    }
                }
            }
        }
    }

    /// The extension is added only below SPIR-V 1.4, where float controls
    /// became core: a module's version word (0x00MMmm00) read as such.
    #[test]
    fn the_extension_is_added_below_spirv_1_4_only() {
        let (_, words) = modules()[0];
        let has_extension = |version: u32| {
            let mut w = words.to_vec();
            w[1] = version;
            let patched = denorm_preserve_f32(&w).unwrap();
            instructions(&patched).unwrap().iter().any(|&(at, op, n)| {
                op == OP_EXTENSION && patched[at + 1..at + n] == literal(EXTENSION)[..]
            })
        };
        for (version, wanted) in [
            (0x0001_0000, true),
            (0x0001_0300, true),
            (0x0001_0400, false),
            (0x0001_0600, false),
            (0x0002_0000, false),
        ] {
            assert_eq!(has_extension(version), wanted, "version {version:#010x}");
        }
    }

    #[test]
    fn malformed_modules_are_refused() {
        assert!(denorm_preserve_f32(&[]).is_err());
        assert!(denorm_preserve_f32(&[1, 2, 3, 4, 5]).is_err());
        let words = seam_kernels::spirv(OpKind::Add).unwrap();
        let mut cut = words.to_vec();
        cut.push((5 << 16) | 1); // an instruction claiming 5 words, 1 present
        assert!(denorm_preserve_f32(&cut).is_err(), "truncated");
        let mut zero = words.to_vec();
        zero.push(0); // a word count of 0
        assert!(denorm_preserve_f32(&zero).is_err(), "zero word count");
    }

    /// With `SEAM_SPIRV_DUMP=<dir>`, write each patched module there (for
    /// `spirv-val --target-env vulkan1.2`; docs/vulkan.md).
    #[test]
    fn dump_patched_modules_for_spirv_val() {
        let Some(dir) = std::env::var_os("SEAM_SPIRV_DUMP") else {
            return;
        };
        std::fs::create_dir_all(&dir).unwrap();
        for (op, words) in modules() {
            let patched = denorm_preserve_f32(words).unwrap();
            let bytes: Vec<u8> = patched.iter().flat_map(|w| w.to_le_bytes()).collect();
            let path = std::path::Path::new(&dir).join(format!("{op}.spv"));
            std::fs::write(path, bytes).unwrap();
        }
    }
}
