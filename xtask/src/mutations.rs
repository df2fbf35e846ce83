//! `cargo xtask mutations`: every conformance case names the mutation of the
//! implementation that turns it red. This applies each one to a scratch copy
//! of the tree, runs that case on the CPU device, and checks it went red.
//! The table is the record; docs/contract.md lists the outcome.

use crate::root;
use seam_conformance::report::Report;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One mutation: replace `find` (must occur exactly once) in `file` and expect `case` to fail.
#[derive(Debug)]
pub struct Mutation {
    pub case: &'static str,
    pub file: &'static str,
    pub find: &'static str,
    pub replace: &'static str,
    pub what: &'static str,
}

const CPU: &str = "backends/cpu/src/lib.rs";
const REF: &str = "backends/cpu/src/reference.rs";
const DEV: &str = "core/src/device/mod.rs";
const CAP: &str = "core/src/device/capture.rs";
const STATE: &str = "core/src/device/state.rs";
const HANDLES: &str = "core/src/device/handles.rs";
const VAL: &str = "core/src/validate.rs";
const UPDATE: &str = "core/src/device/update.rs";

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
        file: CAP,
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
        file: CAP,
        find: "            if st.capture.is_some() {\n                return Err(ErrorKind::NestedCapture);",
        replace: "            if false {\n                return Err(ErrorKind::NestedCapture);",
        what: "core no longer refuses a nested begin_capture",
    },
    Mutation {
        case: "c6_end_without_begin_refused",
        file: CAP,
        find: "            Some(_) => Ok(st.capture.take().expect(\"checked above\")),",
        replace: "            Some(c) => Ok(Capture { thread: c.thread, uses: c.uses.clone(), launches: c.launches }),",
        what: "ending a capture does not close it in core",
    },
    Mutation {
        case: "c6_unknown_or_destroyed_handle_refused",
        file: STATE,
        find: "        self.graphs.remove(&id);",
        replace: "",
        what: "destroy_graph leaves the handle in core's table",
    },
    Mutation {
        case: "c6_host_calls_inside_capture_refused",
        file: STATE,
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
        file: HANDLES,
        find: "        if self.open {",
        replace: "        if false && self.open {",
        what: "a dropped capture scope leaves the capture open",
    },
    Mutation {
        case: "c6_nothing_leaks_after_errors",
        file: STATE,
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
        file: CAP,
        find: "            st.trace.record(|| EventKind::Replay { graph, index });",
        replace: "            if index % 2 == 0 {\n                st.trace.record(|| EventKind::Replay { graph, index });\n            }",
        what: "only every other replay is traced",
    },
    Mutation {
        case: "c10_counts_are_per_handle",
        file: CAP,
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
        case: "c11_subnormals_as_declared",
        file: REF,
        find: ".map(|(x, y)| if op == OpKind::Add { x + y } else { x * y })",
        replace: ".map(|(x, y)| if op == OpKind::Add { let r = x + y; if r.is_subnormal() { f32::copysign(0.0, r) } else { r } } else { x * y })",
        what: "the reference's f32 add flushes subnormal results to zero while the CPU device declares them preserved",
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
        file: STATE,
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
    Mutation {
        case: "c12_foreign_ids_refused",
        file: STATE,
        find: "        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);",
        replace: "        let id = self.buffers.len() as u64 + self.graphs.len() as u64 + 1;\n        let _ = &NEXT_ID;",
        what: "ids counted per device again: another device's buffer reaches this device's buffer of the same number",
    },
    Mutation {
        case: "c13_rebind_equals_fresh_capture",
        file: UPDATE,
        find: "        match st.backend.update_launches(raw_target, &lowered) {",
        replace: "        let _ = raw_target;\n        match Ok::<(), ErrorKind>(()) {",
        what: "core updates its tables but the backend's graph is never patched (nor re-recorded)",
    },
    Mutation {
        case: "c13_queued_replays_keep_old_bindings",
        file: CPU,
        find: "        let mut list = Vec::clone(slot);",
        replace: "        let Some(list) = Arc::get_mut(slot) else {\n            return Ok(());\n        };\n        let mut list = list.clone();",
        what: "the CPU backend patches only a list no queued replay holds, and returns Ok otherwise (success with the stale launch)",
    },
    Mutation {
        case: "c13_update_params_equals_fresh_capture",
        file: UPDATE,
        find: "            let call = OpCall {\n                params,\n                ..recorded.call.clone()\n            };",
        replace: "            let _ = params;\n            let call = recorded.call.clone();",
        what: "update_params keeps the recorded parameters",
    },
    Mutation {
        case: "c13_bad_updates_refused",
        file: UPDATE,
        find: "                if o.dtype != n.dtype {",
        replace: "                if o.dtype != n.dtype && false {",
        what: "rebind does not compare the new buffer's dtype with the old one's",
    },
    Mutation {
        case: "c13_rebinds_leave_resources_flat",
        file: CPU,
        find: "        *slot = Arc::new(list);\n        Ok(())",
        replace: "        let _ = slot;\n        let id = self.next;\n        self.next += 1;\n        self.graphs.insert(id, Arc::new(list.clone()));\n        match target {\n            ReplayTarget::Current => self.current = Some(Arc::new(list)),\n            ReplayTarget::Graph(g) => {\n                self.graphs.insert(g.0, Arc::new(list));\n            }\n        }\n        Ok(())",
        what: "the CPU backend's in-place update leaves a copy of the graph behind every time",
    },
    Mutation {
        case: "c13_update_report_matches_behaviour",
        file: UPDATE,
        find: "    if st.backend.update_support() == UpdateSupport::Native {",
        replace: "    if false && st.backend.update_support() == UpdateSupport::Native {",
        what: "core re-records every update, even where the backend reports Native",
    },    Mutation {
        case: "c2_eager_work_and_replays_keep_stream_order",
        file: CPU,
        find: "        self.send(Command::RunGraph(graph))\n",
        replace: "        let mut mem = self.mem.lock().unwrap_or_else(|p| p.into_inner());\n        for l in graph.iter() {\n            let (out, bytes) = {\n                let inputs: Vec<&[u8]> = l.buffers.iter().map(|b| mem[&b.0].as_slice()).collect();\n                reference::execute(l, &inputs)\n            };\n            mem.get_mut(&l.buffers[out].0).expect(\"allocated\")[..bytes.len()].copy_from_slice(&bytes);\n        }\n        Ok(())\n",
        what: "the CPU backend runs a replay at once on the calling thread, ahead of queued eager work and host writes",
    },
    Mutation {
        case: "c2_half_host_access_at_odd_offsets",
        file: CPU,
        find: "Some(b) => b[offset..offset + data.len()].copy_from_slice(&data),",
        replace: "Some(b) => b[offset & !3..(offset & !3) + data.len()].copy_from_slice(&data),",
        what: "the CPU queue aligns a write's byte offset down to a 4-byte word",
    },
    Mutation {
        case: "c3_handle_keeps_its_work_across_later_ends",
        file: CPU,
        find: "        self.current = Some(Arc::new(list));",
        replace: "        let list = Arc::new(list);\n        if let Some(newest) = self.graphs.keys().max().copied() {\n            self.graphs.insert(newest, list.clone());\n        }\n        self.current = Some(list);",
        what: "end_capture also overwrites the newest handle's graph (one shared slot)",
    },
    Mutation {
        case: "c4_tracing_does_not_change_outputs",
        file: CAP,
        find: "            st.backend.replay(raw_target)?;\n            if timed {\n",
        replace: "            st.backend.replay(raw_target)?;\n            if timed {\n                st.backend.replay(raw_target)?;\n",
        what: "a traced replay is submitted twice (once more for its timing)",
    },
    Mutation {
        case: "c5_unused_drops_in_capture_wait_for_its_end",
        file: STATE,
        find: "    pub(super) fn sweep(&mut self) {\n        if self.capture.is_some() {\n            return;\n        }",
        replace: "    pub(super) fn sweep(&mut self) {\n        if false {\n            return;\n        }",
        what: "the deferred-release sweep runs inside a capture",
    },
    Mutation {
        case: "c6_empty_capture_is_a_replayable_no_op",
        file: CPU,
        find: "    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {\n        let list = self.recording.take().ok_or(ErrorKind::NotCapturing)?;\n",
        replace: "    fn end_capture_graph(&mut self) -> Result<RawGraph, ErrorKind> {\n        let list = self.recording.take().ok_or(ErrorKind::NotCapturing)?;\n        if list.is_empty() {\n            return Err(ErrorKind::driver(\"instantiate\", \"an empty graph\"));\n        }\n",
        what: "the CPU backend refuses to end an empty capture into a handle",
    },
    Mutation {
        case: "c6_capture_cycles_keep_resources_flat",
        file: CPU,
        find: "        // A queued replay holds its own reference: it completes (C8).\n",
        replace: "        // A queued replay holds its own reference: it completes (C8).\n        self.live_bytes += 4096;\n",
        what: "destroy_graph leaves 4 KiB of device bytes behind per graph (a workspace never given back)",
    },
    Mutation {
        case: "c6_two_devices_capture_concurrently",
        file: CPU,
        find: "        self.recording = Some(Vec::new());\n        Ok(())",
        replace: "        static OWNER: Mutex<Option<std::thread::ThreadId>> = Mutex::new(None);\n        let me = std::thread::current().id();\n        let mut owner = OWNER.lock().unwrap_or_else(|p| p.into_inner());\n        if owner.is_some_and(|t| t != me) {\n            return Err(ErrorKind::driver(\"begin_capture\", \"another thread's capture is open (global capture mode)\"));\n        }\n        *owner = Some(me);\n        self.recording = Some(Vec::new());\n        Ok(())",
        what: "a capture from a second thread is refused process-wide (a global capture mode)",
    },
    Mutation {
        case: "c7_eager_gemm_between_replays",
        file: CPU,
        find: "            None => self.send(Command::Run(launch.clone())),",
        replace: "            None => {\n                if launch.op == OpKind::Gemm {\n                    for g in self.graphs.values_mut() {\n                        if g.iter().any(|l| l.op == OpKind::Gemm) {\n                            *g = Arc::new(vec![launch.clone()]);\n                        }\n                    }\n                }\n                self.send(Command::Run(launch.clone()))\n            }",
        what: "an eager GEMM replaces the GEMM of every live graph (a plan cache keyed by op)",
    },
    Mutation {
        case: "c8_free_while_queued_work_reads",
        file: CPU,
        find: "        self.send(Command::Free { buffer: buffer.0 })?;",
        replace: "        self.mem.lock().unwrap_or_else(|p| p.into_inner()).remove(&buffer.0);",
        what: "the CPU backend frees memory at once instead of queueing the free behind queued work",
    },
    Mutation {
        case: "c10_replay_events_name_their_graph",
        file: CAP,
        find: "                GraphRef::Handle(id) => Some(id.0),\n            };",
        replace: "                GraphRef::Handle(_) => st.graphs.keys().next_back().map(|g| g.0),\n            };",
        what: "a replay event is recorded under the newest handle's id",
    },
    Mutation {
        case: "c12_bounds_from_the_rules",
        file: VAL,
        find: "OpKind::Gemm => [d0 * d2, d2 * d1, d0 * d1],",
        replace: "OpKind::Gemm => [d0 * d2, d2 * d1, d0 * d2],",
        what: "GEMM's output is sized m*k instead of m*n in validate::needed",
    },
    Mutation {
        case: "c12_bounds_from_the_rules",
        file: VAL,
        find: "        if need > meta.len as u64 {",
        replace: "        if need >= meta.len as u64 {",
        what: "the range check refuses an exact-size buffer (>= for >)",
    },
    Mutation {
        case: "c1_ten_thousand_launches_in_one_capture",
        file: CPU,
        find: "                list.push(launch.clone());\n                Ok(())",
        replace: "                if list.len() < 4096 {\n                    list.push(launch.clone());\n                }\n                Ok(())",
        what: "the CPU backend keeps only the first 4,096 launches of a recording",
    },
    Mutation {
        case: "c11_every_op_agrees_with_cpu",
        file: CPU,
        find: "                list.push(launch.clone());\n                Ok(())",
        replace: "                let mut l = launch.clone();\n                if l.op == OpKind::RmsNorm {\n                    l.params.s0 = f32::MIN_POSITIVE;\n                }\n                list.push(l);\n                Ok(())",
        what: "the CPU backend records rms_norm with eps ignored (red in the captured trial)",
    },
    Mutation {
        case: "c12_bad_launches_refused_before_work",
        file: DEV,
        find: "            let launch = validate::lower(call, |id| st.live_meta(id))?;",
        replace: "            let captured = st.capture.is_some();\n            st.trace.record(|| EventKind::Launch { op: call.op, captured });\n            let launch = validate::lower(call, |id| st.live_meta(id))?;",
        what: "a launch is traced before it is validated (a refused launch looks queued)",
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

/// `source` with the mutation applied, or why it no longer applies: its
/// text must occur exactly once, and replacing it must change the file.
pub fn apply(m: &Mutation, source: &str) -> Result<String, String> {
    match source.matches(m.find).count() {
        0 => Err(format!(
            "mutation no longer applies: {}: {}",
            m.file, m.find
        )),
        1 => {
            let mutated = source.replacen(m.find, m.replace, 1);
            if mutated == source {
                Err(format!("mutation changes nothing: {}: {}", m.file, m.find))
            } else {
                Ok(mutated)
            }
        }
        n => Err(format!(
            "mutation is ambiguous ({n} matches): {}: {}",
            m.file, m.find
        )),
    }
}

/// Each mutation's file as it is under `tree`, with the mutated text; every
/// mutation that does not apply is named, and then nothing runs.
pub fn prepare<'a>(
    mutations: &[&'a Mutation],
    tree: &Path,
) -> Result<Vec<(&'a Mutation, String, String)>, String> {
    let mut ready = Vec::new();
    let mut stale = Vec::new();
    for m in mutations {
        let original = match std::fs::read_to_string(tree.join(m.file)) {
            Ok(s) => s,
            Err(e) => {
                stale.push(format!("mutation no longer applies: {}: {e}", m.file));
                continue;
            }
        };
        match apply(m, &original) {
            Ok(mutated) => ready.push((*m, original, mutated)),
            Err(e) => stale.push(format!("{e}\n    (for {})", m.case)),
        }
    }
    if stale.is_empty() {
        Ok(ready)
    } else {
        Err(stale.join("\n"))
    }
}

/// What a mutated run's JSON report says about the mutation's case.
#[derive(Debug, PartialEq)]
pub enum Judgement {
    /// These trials of the case fail the run (failed, crashed, timed out…).
    Red(Vec<String>),
    /// Every trial of the case passed, or was ignored or expected to fail.
    Survived,
    /// The report holds no trial of the case (renamed, or filtered away).
    NoTrial,
}

/// Judge by the verdicts of the case's trials in `report` (the exact case
/// name: `--case` matches substrings, so the report may hold others).
pub fn judge(report: &Report, case: &str) -> Judgement {
    let trials: Vec<_> = report.trials.iter().filter(|t| t.case == case).collect();
    if trials.is_empty() {
        return Judgement::NoTrial;
    }
    let red: Vec<String> = trials
        .iter()
        .filter(|t| t.verdict.fails_run())
        .map(|t| {
            let detail = t.verdict.detail().lines().next().unwrap_or("");
            format!("{} {}: {detail}", t.verdict.short(), t.name)
        })
        .collect();
    if red.is_empty() {
        Judgement::Survived
    } else {
        Judgement::Red(red)
    }
}

/// Apply every mutation (or those whose case contains `filter`) and check its case goes red.
pub fn run(filter: Option<&str>) -> Result<(), String> {
    let selected: Vec<&Mutation> = MUTATIONS
        .iter()
        .filter(|m| filter.is_none_or(|f| m.case.contains(f)))
        .collect();
    let scratch: PathBuf = root().join("target/mutants/tree");
    let _ = std::fs::remove_dir_all(&scratch);
    copy_tree(&scratch)?;
    // Every mutation must still apply before any runs: a stale one would
    // run the suite unmutated and call that a survivor (or, worse, a kill).
    let ready = prepare(&selected, &scratch)?;
    let target = root().join("target/mutants/target");
    let json = root().join("target/mutants/report.json");
    let mut survivors = Vec::new();
    for (i, (m, original, mutated)) in ready.iter().enumerate() {
        let path = scratch.join(m.file);
        std::fs::write(&path, mutated).map_err(|e| format!("writing {}: {e}", path.display()))?;
        if std::fs::read_to_string(&path).ok().as_ref() != Some(mutated) {
            return Err(format!(
                "{} did not take the mutation for {}",
                path.display(),
                m.case
            ));
        }
        let _ = std::fs::remove_file(&json);
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
                "--json",
            ])
            .arg(&json)
            .env("CARGO_TARGET_DIR", &target)
            .env("SEAM_CASE_DEADLINE_S", "60")
            .current_dir(&scratch)
            .output()
            .map_err(|e| format!("running the suite: {e}"))?;
        std::fs::write(&path, original).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let report = std::fs::read_to_string(&json)
            .map_err(|e| e.to_string())
            .and_then(|s| Report::parse(&s).map_err(|e| e.to_string()));
        let (verdict, lines) = match &report {
            Ok(r) => match judge(r, m.case) {
                Judgement::Red(lines) => ("red", lines),
                Judgement::Survived => ("SURVIVED", Vec::new()),
                Judgement::NoTrial => ("NO TRIAL", Vec::new()),
            },
            Err(_) if text.contains("error[E") || text.contains("error: could not compile") => {
                ("DID NOT COMPILE", Vec::new())
            }
            Err(e) => ("NO REPORT", vec![format!("{}: {e}", json.display())]),
        };
        println!(
            "[{}/{}] {verdict:>7}  {}  — {}",
            i + 1,
            ready.len(),
            m.case,
            m.what
        );
        for l in &lines {
            println!("           {}", l.chars().take(200).collect::<String>());
        }
        if verdict != "red" {
            if report.is_err() || verdict == "NO TRIAL" {
                println!("{text}");
            }
            survivors.push(m.case);
        }
    }
    if survivors.is_empty() {
        println!("mutations: all {} went red", ready.len());
        Ok(())
    } else {
        Err(format!("mutations not caught: {survivors:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALE: Mutation = Mutation {
        case: "c1_replay_reexecutes",
        file: "Cargo.toml",
        find: "[workspace]\nthis line was never there",
        replace: "",
        what: "a mutation whose text has gone",
    };

    #[test]
    fn a_mutation_whose_text_has_gone_fails_loudly_and_nothing_runs() {
        let source = "fn replay() {\n    run();\n}\n";
        let gone = Mutation {
            find: "    skip();",
            file: "core/src/device.rs",
            ..STALE
        };
        assert_eq!(
            apply(&gone, source).unwrap_err(),
            "mutation no longer applies: core/src/device.rs:     skip();"
        );
        let twice = Mutation { find: "r", ..gone };
        assert!(apply(&twice, source)
            .unwrap_err()
            .starts_with("mutation is ambiguous"));
        let same = Mutation {
            find: "run();",
            replace: "run();",
            ..gone
        };
        assert!(apply(&same, source)
            .unwrap_err()
            .starts_with("mutation changes nothing"));
        let good = Mutation {
            find: "run();",
            replace: "return;",
            ..gone
        };
        assert_eq!(
            apply(&good, source).unwrap(),
            "fn replay() {\n    return;\n}\n"
        );
        // Against the tree: one stale mutation refuses the whole set, naming it.
        let e = prepare(&[&MUTATIONS[0], &STALE], &root()).unwrap_err();
        assert!(
            e.starts_with(
                "mutation no longer applies: Cargo.toml: [workspace]\nthis line was never there"
            ),
            "{e}"
        );
        let missing = Mutation {
            file: "no/such/file.rs",
            ..STALE
        };
        let e = prepare(&[&missing], &root()).unwrap_err();
        assert!(
            e.starts_with("mutation no longer applies: no/such/file.rs: "),
            "{e}"
        );
    }

    /// Every mutation of the table still applies to this tree.
    #[test]
    fn every_mutation_still_applies() {
        let all: Vec<&Mutation> = MUTATIONS.iter().collect();
        if let Err(e) = prepare(&all, &root()) {
            panic!("{e}");
        }
    }

    #[test]
    fn red_is_read_from_the_json_verdicts() {
        let report = |trials: &str| {
            let text = format!(
                r#"{{"format_version":2,"seam_version":"0.1.0","machine":{{"os":"linux","arch":"x86_64","hostname":"h"}},
                "devices":[],"missing":[],"trials":[{trials}],
                "summary":{{"passed":0,"failed":0,"ignored":0,"expected_failures":0,"unexpected_passes":0,"timed_out":0}}}}"#
            );
            Report::from_json(&text).unwrap()
        };
        let t = |case: &str, verdict: &str| {
            format!(
                r#"{{"name":"cpu:0::{case}","device":"cpu:0","case":"{case}","rule":"C1","mode":"eager",{verdict},"duration_ms":1.0,"digest":null}}"#
            )
        };
        let passed = r#""verdict":"passed""#;
        let failed = r#""verdict":"failed","detail":"dst = 17, want 34\nmore""#;
        let crashed = r#""verdict":"crashed","detail":"killed by signal 11""#;
        let ignored = r#""verdict":"ignored","detail":"no device""#;
        // A pass of the case survives, whatever a longer-named case did.
        let r = report(&[t("c1_x", passed), t("c1_x_longer", failed)].join(","));
        assert_eq!(judge(&r, "c1_x"), Judgement::Survived);
        let r = report(&t("c1_x", failed));
        assert_eq!(
            judge(&r, "c1_x"),
            Judgement::Red(vec!["FAIL cpu:0::c1_x: dst = 17, want 34".into()])
        );
        // A crash or a timeout caught the mutation too.
        let r = report(&[t("c1_x", passed), t("c1_x", crashed)].join(","));
        assert!(matches!(judge(&r, "c1_x"), Judgement::Red(l) if l[0].starts_with("CRASH")));
        let r = report(&t("c1_x", ignored));
        assert_eq!(judge(&r, "c1_x"), Judgement::Survived);
        // Output that merely looks like a failure line is not a verdict.
        let r = report(&t("c1_y", passed));
        assert_eq!(judge(&r, "c1_x"), Judgement::NoTrial);
    }
}
