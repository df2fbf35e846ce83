//! `cargo xtask mutations`: every conformance case names the mutation of the
//! implementation that turns it red. This applies each one to a scratch copy
//! of the tree, runs that case on the CPU device, and checks it went red.
//! The table is the record; docs/contract.md lists the outcome.

use crate::root;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One mutation: replace `find` (must occur exactly once) in `file` and expect `case` to fail.
pub struct Mutation {
    pub case: &'static str,
    pub file: &'static str,
    pub find: &'static str,
    pub replace: &'static str,
    pub what: &'static str,
}

const CPU: &str = "backends/cpu/src/lib.rs";
const REF: &str = "backends/cpu/src/reference.rs";
const DEV: &str = "core/src/device.rs";
const VAL: &str = "core/src/validate.rs";

pub const MUTATIONS: &[Mutation] = &[
    Mutation {
        case: "c1_replay_reexecutes",
        file: CPU,
        find: "        self.send(Command::RunGraph(graph))",
        replace: "        static SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);\n        if SEEN.swap(true, std::sync::atomic::Ordering::SeqCst) {\n            return Ok(());\n        }\n        self.send(Command::RunGraph(graph))",
        what: "replay runs only the first time and serves that result afterwards (a snapshot)",
    },
    Mutation {
        case: "c1_current_exec_reexecutes",
        file: DEV,
        find: "            st.backend.replay(raw_target)?;",
        replace: "            if raw_target != ReplayTarget::Current {\n                st.backend.replay(raw_target)?;\n            }",
        what: "Device::replay(Current) returns Ok without calling the backend",
    },
    Mutation {
        case: "c1_capture_does_not_execute",
        file: CPU,
        find: "                list.push(launch.clone());\n                Ok(())",
        replace: "                list.push(launch.clone());\n                self.send(Command::Run(launch.clone()))",
        what: "the CPU backend also runs launches while recording",
    },
    Mutation {
        case: "c1_dependent_chain_replays_in_order",
        file: CPU,
        find: "Command::RunGraph(g) => g.iter().for_each(",
        replace: "Command::RunGraph(g) => g.iter().rev().for_each(",
        what: "replay runs the recorded list in reverse",
    },
    Mutation {
        case: "c2_host_write_seen_by_next_replay",
        file: CPU,
        find: "    fn write(&mut self, buffer: RawBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {",
        replace: "    fn write(&mut self, buffer: RawBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {\n        if !self.graphs.is_empty() {\n            return Ok(());\n        }",
        what: "host writes are dropped once a graph exists",
    },
    Mutation {
        case: "c2_partial_write_seen_by_next_replay",
        file: DEV,
        find: "st.backend.write(meta.raw, offset * dtype.size(), bytes)",
        replace: "st.backend.write(meta.raw, 0, bytes)",
        what: "Device::write ignores the element offset",
    },
    Mutation {
        case: "c3_handles_do_not_alias",
        file: CPU,
        find: "                .get(&g.0)",
        replace: "                .get(&(self.next - 1))",
        what: "replaying a handle runs the most recently ended graph",
    },
    Mutation {
        case: "c3_current_exec_and_handle_distinct",
        file: CPU,
        find: "        self.graphs.insert(id, Arc::new(list));",
        replace: "        let list = Arc::new(list);\n        self.current = Some(list.clone());\n        self.graphs.insert(id, list);",
        what: "end_capture_graph also replaces the current exec",
    },
    Mutation {
        case: "c3_new_current_exec_replaces_old",
        file: CPU,
        find: "        self.current = Some(Arc::new(list));",
        replace: "        if self.current.is_none() {\n            self.current = Some(Arc::new(list));\n        }",
        what: "end_capture keeps the first exec",
    },
    Mutation {
        case: "c4_eager_and_captured_identical",
        file: CPU,
        find: "                list.push(launch.clone());\n                Ok(())",
        replace: "                let mut l = launch.clone();\n                if l.op == OpKind::ScaleAdd {\n                    std::mem::swap(&mut l.params.s0, &mut l.params.s1);\n                }\n                list.push(l);\n                Ok(())",
        what: "scale_add's scalars are swapped when recorded",
    },
    Mutation {
        case: "c4_decode_stack_eager_and_captured_identical",
        file: CPU,
        find: "    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {\n        let list = self.recording.take().ok_or(ErrorKind::NotCapturing)?;",
        replace: "    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {\n        let mut list = self.recording.take().ok_or(ErrorKind::NotCapturing)?;\n        list.pop();",
        what: "the last recorded launch is dropped at end of capture",
    },
    Mutation {
        case: "c5_alloc_inside_capture_refused",
        file: DEV,
        find: "            if st.capture.is_some() {\n                return Err(ErrorKind::AllocInCapture);",
        replace: "            if false {\n                return Err(ErrorKind::AllocInCapture);",
        what: "core no longer refuses alloc inside a capture",
    },
    Mutation {
        case: "c5_free_inside_capture_refused",
        file: DEV,
        find: "            if st.capture.is_some() {\n                return Err(ErrorKind::FreeInCapture);",
        replace: "            if false {\n                return Err(ErrorKind::FreeInCapture);",
        what: "core no longer refuses free inside a capture",
    },
    Mutation {
        case: "c5_dropped_buffer_deferred_until_safe",
        file: DEV,
        find: "            b.released = true;\n        }\n        st.sweep();",
        replace: "            b.released = true;\n        }\n        if let Some(raw) = st.buffers.get(&id).map(|b| b.meta.raw) {\n            let _ = st.backend.free(raw);\n            st.buffers.remove(&id);\n        }",
        what: "a dropped buffer is freed at once, even inside a capture or while a graph reads it",
    },
    Mutation {
        case: "c6_nested_begin_refused",
        file: DEV,
        find: "            if st.capture.is_some() {\n                return Err(ErrorKind::NestedCapture);",
        replace: "            if false {\n                return Err(ErrorKind::NestedCapture);",
        what: "core no longer refuses a nested begin_capture",
    },
    Mutation {
        case: "c6_end_without_begin_refused",
        file: DEV,
        find: "            Some(_) => Ok(st.capture.take().expect(\"checked above\")),",
        replace: "            Some(c) => Ok(Capture { thread: c.thread, uses: c.uses.clone(), launches: c.launches }),",
        what: "ending a capture does not close it in core",
    },
    Mutation {
        case: "c6_unknown_or_destroyed_handle_refused",
        file: DEV,
        find: "            st.graphs.remove(&id);",
        replace: "",
        what: "destroy_graph leaves the handle in core's table",
    },
    Mutation {
        case: "c6_host_calls_inside_capture_refused",
        file: DEV,
        find: "        if self.capture.is_some() {\n            return Err(ErrorKind::HostAccessInCapture { what });",
        replace: "        if false {\n            return Err(ErrorKind::HostAccessInCapture { what });",
        what: "host reads and writes are allowed inside a capture",
    },
    Mutation {
        case: "c6_launch_from_other_thread_refused",
        file: DEV,
        find: "                if cap.thread != me {",
        replace: "                if false && cap.thread != me {",
        what: "launches from another thread are recorded into the capture",
    },
    Mutation {
        case: "c6_capture_scope_aborts_on_early_return",
        file: DEV,
        find: "        if self.open {",
        replace: "        if false && self.open {",
        what: "a dropped capture scope leaves the capture open",
    },
    Mutation {
        case: "c6_nothing_leaks_after_errors",
        file: DEV,
        find: "        for id in bufs {",
        replace: "        for id in bufs.into_iter().take(0) {",
        what: "released buffers are never freed",
    },
    Mutation {
        case: "c7_prepared_gemm_captures_and_replays",
        file: CPU,
        find: "Command::RunGraph(g) => g.iter().for_each(",
        replace: "Command::RunGraph(g) => g.iter().filter(|l| l.op != OpKind::Gemm).for_each(",
        what: "replay skips GEMM launches",
    },
    Mutation {
        case: "c7_cold_vendor_op_fails_loudly_or_succeeds",
        file: CPU,
        find: "                list.push(launch.clone());\n                Ok(())",
        replace: "                if launch.op == OpKind::Gemm {\n                    if let Some(b) = self.mem.lock().unwrap().get_mut(&launch.buffers[0].0) {\n                        b.fill(0);\n                    }\n                }\n                list.push(launch.clone());\n                Ok(())",
        what: "recording a GEMM corrupts its input",
    },
    Mutation {
        case: "c8_destroy_while_replay_in_flight",
        file: CPU,
        find: "Command::RunGraph(g) => g.iter().for_each(|l| run(l, &mut sticky)),",
        replace: "Command::RunGraph(g) if Arc::strong_count(&g) > 1 => g.iter().for_each(|l| run(l, &mut sticky)),\n            Command::RunGraph(_) => {}",
        what: "queued replays of a destroyed graph are dropped",
    },
    Mutation {
        case: "c8_replace_current_exec_while_in_flight",
        file: CPU,
        find: "Command::RunGraph(g) => g.iter().for_each(|l| run(l, &mut sticky)),",
        replace: "Command::RunGraph(g) if Arc::strong_count(&g) > 1 => g.iter().for_each(|l| run(l, &mut sticky)),\n            Command::RunGraph(_) => {}",
        what: "queued replays of a replaced exec are dropped",
    },
    Mutation {
        case: "c9_report_matches_behaviour",
        file: CPU,
        find: "        CaptureSupport::Native\n",
        replace: "        CaptureSupport::Unsupported(\"mutant\".into())\n",
        what: "the CPU backend reports Unsupported although it declares native",
    },
    Mutation {
        case: "c9_report_matches_behaviour",
        file: CPU,
        find: "        self.recording = Some(Vec::new());\n        Ok(())",
        replace: "        Err(ErrorKind::driver(\"mutant\", \"begin refused\"))",
        what: "the CPU backend reports Native but refuses begin_capture",
    },
    Mutation {
        case: "c10_every_replay_counted",
        file: DEV,
        find: "            st.trace.record(|| EventKind::Replay { graph, index });",
        replace: "            if index % 2 == 0 {\n                st.trace.record(|| EventKind::Replay { graph, index });\n            }",
        what: "only every other replay is traced",
    },
    Mutation {
        case: "c10_counts_are_per_handle",
        file: DEV,
        find: "                GraphRef::Handle(id) => st.graphs.get_mut(&id),",
        replace: "                GraphRef::Handle(_) => st.graphs.values_mut().next(),",
        what: "every handle's replay is counted on the first graph",
    },
    Mutation {
        case: "c10_device_spans_match_replays",
        file: CPU,
        find: "        Ok(spans)\n    }",
        replace: "        spans.pop();\n        Ok(spans)\n    }",
        what: "the CPU backend drops the last device span",
    },
    Mutation {
        case: "c11_every_op_agrees_with_cpu",
        file: CPU,
        find: "                list.push(launch.clone());\n                Ok(())",
        replace: "                let mut l = launch.clone();\n                if l.op == OpKind::ScaleAdd {\n                    std::mem::swap(&mut l.params.s0, &mut l.params.s1);\n                }\n                list.push(l);\n                Ok(())",
        what: "scale_add's scalars are swapped when recorded (red in the captured trial)",
    },
    Mutation {
        case: "c11_known_values",
        file: REF,
        find: "out[r * cols + c] = exps[c] / sum;",
        replace: "out[r * cols + c] = exps[c];",
        what: "the reference softmax skips the division by the row sum",
    },
    Mutation {
        case: "c11_known_values",
        file: REF,
        find: "v / (1.0 + (-v).exp())",
        replace: "v / (1.0 + v.exp())",
        what: "the reference silu uses exp(x) instead of exp(-x)",
    },
    Mutation {
        case: "c12_bad_launches_refused_before_work",
        file: VAL,
        find: "        if need > meta.len as u64 {",
        replace: "        if false && need > meta.len as u64 {",
        what: "launch sizes are not checked against buffer lengths",
    },
    Mutation {
        case: "c12_bad_host_access_refused",
        file: DEV,
        find: "is_none_or(|end| end > meta.len)",
        replace: "is_none()",
        what: "host accesses are not checked against buffer lengths",
    },
    Mutation {
        case: "c12_bad_memory_calls_refused",
        file: DEV,
        find: "            if !users.is_empty() {",
        replace: "            if false && !users.is_empty() {",
        what: "a buffer a live graph reads can be freed",
    },
];

fn copy_tree(to: &Path) -> Result<(), String> {
    let out = Command::new("git")
        .args(["ls-files", "-co", "--exclude-standard"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("git ls-files: {e}"))?;
    for f in String::from_utf8_lossy(&out.stdout).lines() {
        let (src, dst) = (root().join(f), to.join(f));
        if !src.is_file() {
            continue;
        }
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p).map_err(|e| e.to_string())?;
        }
        std::fs::copy(&src, &dst).map_err(|e| format!("copying {f}: {e}"))?;
    }
    Ok(())
}

/// Apply every mutation (or those whose case contains `filter`) and check its case goes red.
pub fn run(filter: Option<&str>) -> Result<(), String> {
    let scratch: PathBuf = root().join("target/mutants/tree");
    let _ = std::fs::remove_dir_all(&scratch);
    copy_tree(&scratch)?;
    let target = root().join("target/mutants/target");
    let mut survivors = Vec::new();
    let selected: Vec<&Mutation> = MUTATIONS
        .iter()
        .filter(|m| filter.is_none_or(|f| m.case.contains(f)))
        .collect();
    for (i, m) in selected.iter().enumerate() {
        let path = scratch.join(m.file);
        let original = std::fs::read_to_string(root().join(m.file)).map_err(|e| e.to_string())?;
        let hits = original.matches(m.find).count();
        if hits != 1 {
            return Err(format!(
                "mutation for {}: `find` occurs {hits} times in {}",
                m.case, m.file
            ));
        }
        std::fs::write(&path, original.replacen(m.find, m.replace, 1))
            .map_err(|e| e.to_string())?;
        let out = Command::new(crate::cargo())
            .args([
                "run",
                "--quiet",
                "-p",
                "seam-conformance",
                "--no-default-features",
                "--bin",
                "seam-conformance",
                "--",
                "--backend",
                "cpu",
                "--case",
                m.case,
            ])
            .env("CARGO_TARGET_DIR", &target)
            .env("SEAM_CASE_DEADLINE_S", "60")
            .current_dir(&scratch)
            .output()
            .map_err(|e| format!("running the suite: {e}"))?;
        std::fs::write(&path, &original).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let red: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("FAILED cpu:0::"))
            .filter(|l| l.contains(m.case))
            .collect();
        let compiled = !text.contains("error[E") && !text.contains("error: could not compile");
        let verdict = if !compiled {
            "DID NOT COMPILE"
        } else if red.is_empty() {
            "SURVIVED"
        } else {
            "red"
        };
        println!(
            "[{}/{}] {verdict:>7}  {}  — {}",
            i + 1,
            selected.len(),
            m.case,
            m.what
        );
        for l in &red {
            println!("           {}", l.chars().take(200).collect::<String>());
        }
        if verdict != "red" {
            if !compiled {
                println!("{text}");
            }
            survivors.push(m.case);
        }
    }
    if survivors.is_empty() {
        println!("mutations: all {} went red", selected.len());
        Ok(())
    } else {
        Err(format!("mutations not caught: {survivors:?}"))
    }
}
