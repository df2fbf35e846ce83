//! The fake's graph calls: capture, instantiate, launch, patch, events.

use super::*;
use seam_kernels::stamp::STAMP;

impl GraphDriver for FakeDriver {
    fn events_available(&self) -> Result<(), String> {
        match self.s().no_events {
            true => Err("the fake driver was told it has no events".into()),
            false => Ok(()),
        }
    }

    type Graph = u32;
    type Exec = u32;
    type Event = u32;
    type Node = FakeNode;

    fn api(&self) -> &'static str {
        "fake"
    }

    fn captured_node(&self) -> Result<FakeNode, ErrorKind> {
        let index = self.s().recorded.len().saturating_sub(1);
        self.step(Call::CapturedNode { index }, "captured_node")?;
        let mut s = self.s();
        if !s.capturing {
            return Err(ErrorKind::driver(
                "captured_node",
                "the stream is not capturing",
            ));
        }
        let capture = if std::mem::take(&mut s.misreport_node) {
            s.capture - 1
        } else {
            s.capture
        };
        match s.recorded.last() {
            Some(k) if k.kernel => Ok(FakeNode { capture, index }),
            Some(k) => Err(ErrorKind::driver(
                "captured_node",
                format!("the last node ({}) is not a kernel node", k.name),
            )),
            None => Err(ErrorKind::driver("captured_node", "nothing captured yet")),
        }
    }

    fn begin_capture(&self) -> Result<(), ErrorKind> {
        self.step(Call::BeginCapture, "begin_capture")?;
        let mut s = self.s();
        if s.capturing {
            s.violations.push("begin_capture while capturing".into());
        }
        s.capturing = true;
        s.recorded.clear();
        s.recorded_events.clear();
        s.capture += 1;
        Ok(())
    }

    fn end_capture(&self) -> Result<u32, ErrorKind> {
        let g = self.id();
        let mut s = self.s();
        let was = std::mem::replace(&mut s.capturing, false);
        let kernels = std::mem::take(&mut s.recorded);
        let events = std::mem::take(&mut s.recorded_events);
        if !was {
            s.violations.push("end_capture without a capture".into());
        }
        if !s.bodies.is_empty() {
            let open = s.bodies.len();
            s.violations
                .push(format!("end_capture with {open} body(ies) open"));
            s.bodies.clear();
        }
        if std::mem::take(&mut s.invalidate) {
            s.log.push(Call::EndCapture(0));
            return Err(ErrorKind::driver("end_capture", "capture invalidated"));
        }
        s.log.push(Call::EndCapture(g));
        if s.fail == Some("end_capture") {
            s.fail = None;
            return Err(ErrorKind::driver(
                "end_capture",
                "injected by the fake driver",
            ));
        }
        let capture = s.capture;
        s.graphs.insert(
            g,
            FakeGraph {
                capture,
                nodes: kernels,
                events,
            },
        );
        Ok(g)
    }

    fn is_capturing(&self) -> Result<bool, ErrorKind> {
        self.step(Call::IsCapturing, "is_capturing")?;
        Ok(self.s().capturing)
    }

    fn instantiate(&self, graph: &u32) -> Result<u32, ErrorKind> {
        let exec = self.id();
        self.step(
            Call::Instantiate {
                graph: *graph,
                exec,
            },
            "instantiate",
        )?;
        let mut s = self.s();
        let nodes = match s.graphs.get(graph) {
            Some(g) => g.nodes.clone(),
            None => {
                s.violations
                    .push(format!("instantiate of dead graph {graph}"));
                Vec::new()
            }
        };
        s.execs.insert(
            exec,
            FakeExec {
                graph: *graph,
                nodes,
            },
        );
        Ok(exec)
    }

    fn upload(&self, exec: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Upload(*exec), "upload")
    }

    fn launch(&self, exec: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Launch(*exec), "launch")?;
        self.flag_if_capturing(|| format!("graph launch {exec}"));
        let mut s = self.s();
        s.graph_launches += 1;
        match s.execs.get(exec).map(|e| e.graph) {
            Some(g) if s.graphs.contains_key(&g) => {
                if !s.pending.contains(exec) {
                    s.pending.push(*exec);
                }
                let nodes = &s.execs[exec].nodes;
                let ran = nodes.iter().filter(|k| !k.beside).count() as f32;
                // What it runs, as queued: a copy (allocates), left out when quiet.
                let run = (!s.quiet).then(|| nodes.clone());
                // Each kernel takes 1 ms, but one recorded beside the others
                // none; an event node records the time after the kernels
                // before it, and so does a stamp kernel, into its view (ns;
                // `seam_kernels::stamp`).
                let t0 = s.clock_ms;
                for i in 0..s.graphs[&g].events.len() {
                    let (before, ev) = s.graphs[&g].events[i];
                    s.recorded_at.insert(ev, t0 + before as f32);
                }
                let mut elapsed = 0.0f32;
                let mut stamps: Vec<(u32, usize, u64)> = Vec::new();
                for k in &s.execs[exec].nodes {
                    if k.name == STAMP.name {
                        let ns = ((t0 + elapsed) as f64 * 1e6) as u64;
                        stamps.push((k.buffers[0], k.offsets[0] as usize, ns));
                    }
                    if !k.beside {
                        elapsed += 1.0;
                    }
                }
                for (buffer, at, ns) in stamps {
                    match s.memory.get_mut(&buffer) {
                        Some(m) if at + 8 <= m.len() => {
                            m[at..at + 8].copy_from_slice(&ns.to_le_bytes());
                        }
                        _ => s.violations.push(format!(
                            "exec {exec}'s stamp writes outside live buffer {buffer}"
                        )),
                    }
                }
                s.clock_ms += ran;
                s.runs.extend(run.map(|nodes| (*exec, nodes)));
            }
            Some(g) => s
                .violations
                .push(format!("launch of exec {exec} whose graph {g} is gone")),
            None => s.violations.push(format!("launch of dead exec {exec}")),
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<(), ErrorKind> {
        self.step(Call::Sync, "synchronize")?;
        self.synchronize_for_test();
        Ok(())
    }

    fn destroy_exec(&self, exec: u32) {
        let _ = self.step(Call::DestroyExec(exec), "destroy_exec");
        let mut s = self.s();
        if s.pending.contains(&exec) {
            s.violations
                .push(format!("exec {exec} destroyed while a replay is pending"));
        }
        if s.execs.remove(&exec).is_none() {
            s.violations.push(format!("exec {exec} destroyed twice"));
        }
    }

    fn destroy_graph(&self, graph: u32) {
        let _ = self.step(Call::DestroyGraph(graph), "destroy_graph");
        let mut s = self.s();
        if s.execs.values().any(|e| e.graph == graph) {
            s.violations
                .push(format!("graph {graph} destroyed before its exec"));
        }
        if s.graphs.remove(&graph).is_none() {
            s.violations.push(format!("graph {graph} destroyed twice"));
        }
    }

    fn create_event(&self) -> Result<u32, ErrorKind> {
        let ev = self.id();
        self.step(Call::CreateEvent(ev), "create_event")?;
        self.s().events.insert(ev);
        Ok(ev)
    }

    fn record_event(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Record(*event), "record_event")?;
        self.flag_if_capturing(|| format!("event {event} recorded"));
        let mut s = self.s();
        let t = s.clock_ms;
        s.recorded_at.insert(*event, t);
        Ok(())
    }

    fn node_events_available(&self) -> Result<(), String> {
        self.events_available()
    }

    fn conditional_available(&self) -> Result<(), String> {
        match self.s().conditional {
            true => Ok(()),
            false => Err("the fake driver was not told it has conditional nodes".into()),
        }
    }

    fn conditional_handle(&self) -> Result<u64, ErrorKind> {
        self.conditional_available()
            .map_err(|reason| ErrorKind::ConditionalUnsupported { reason })?;
        let handle = u64::from(self.id()) << 32 | 7;
        self.step(Call::ConditionalHandle(handle), "conditional_handle")?;
        if !self.s().capturing {
            self.s()
                .violations
                .push("a conditional handle outside a capture".into());
        }
        Ok(handle)
    }

    fn begin_body(&self, kind: seam::ConditionalKind, handle: u64) -> Result<(), ErrorKind> {
        let while_ = matches!(kind, seam::ConditionalKind::While { .. });
        self.step(Call::BeginBody { handle, while_ }, "begin_body")?;
        self.s().bodies.push(handle);
        Ok(())
    }

    fn end_body(&self) -> Result<(), ErrorKind> {
        self.step(Call::EndBody, "end_body")?;
        let mut s = self.s();
        if s.bodies.pop().is_none() {
            s.violations.push("end_body with no body open".into());
        }
        Ok(())
    }

    fn record_event_in_capture(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::RecordInCapture(*event), "record_event_in_capture")?;
        let mut s = self.s();
        if !s.capturing {
            s.violations
                .push(format!("event {event} recorded into no capture"));
        }
        if !s.bodies.is_empty() {
            s.violations
                .push(format!("event {event} recorded into a conditional body"));
        }
        let before = s.recorded.len();
        s.recorded_events.push((before, *event));
        Ok(())
    }

    fn wait_event(&self, event: &u32) -> Result<(), ErrorKind> {
        self.step(Call::Wait(*event), "wait_event")?;
        self.synchronize_for_test();
        Ok(())
    }

    fn elapsed_ms(&self, start: &u32, end: &u32) -> Result<f32, ErrorKind> {
        self.step(Call::Elapsed(*start, *end), "elapsed")?;
        let s = self.s();
        match (s.recorded_at.get(start), s.recorded_at.get(end)) {
            (Some(a), Some(b)) => Ok(b - a),
            _ => Err(ErrorKind::driver("elapsed", "event not recorded")),
        }
    }

    fn destroy_event(&self, event: u32) {
        let _ = self.step(Call::DestroyEvent(event), "destroy_event");
        let mut s = self.s();
        if !s.events.remove(&event) {
            s.violations.push(format!("event {event} destroyed twice"));
        }
        // An event record node names its event for the life of its graph.
        let named = s.recorded_events.iter().any(|&(_, e)| e == event)
            || s.graphs
                .values()
                .any(|g| g.events.iter().any(|&(_, e)| e == event));
        if named {
            s.violations.push(format!(
                "event {event} destroyed while an event record node of a live graph or the open capture names it"
            ));
        }
        s.recorded_at.remove(&event);
    }
}
