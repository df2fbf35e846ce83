//! The fake's stream calls (memory, modules, kernel launches) and the fake
//! compiler and vendor BLAS.

use super::*;
use crate::driver::{Compiler, NodeIn, StreamDriver, VendorBlas};
use crate::launch::{check_range, KernelLaunch, VendorLaunch};

impl StreamDriver for FakeDriver {
    type Memory = FakeBuffer;
    type Module = u32;
    type Function = FakeFunction;

    fn select(&self) -> Result<(), ErrorKind> {
        self.step(Call::Select, "select")
    }

    fn alloc(&self, bytes: usize) -> Result<FakeBuffer, ErrorKind> {
        let id = self.id();
        self.step(Call::Alloc { buffer: id, bytes }, "alloc")?;
        self.flag_if_capturing(|| format!("alloc of buffer {id}"));
        self.s().memory.insert(id, vec![0; bytes]);
        Ok(FakeBuffer { id, bytes })
    }

    fn memory_bytes(&self, memory: &FakeBuffer) -> usize {
        memory.bytes
    }

    fn device_address(&self, memory: &FakeBuffer) -> u64 {
        u64::from(memory.id) << 32
    }

    fn free(&self, memory: FakeBuffer) {
        let _ = self.step(Call::Free(memory.id), "free");
        let mut s = self.s();
        if s.busy || !s.pending.is_empty() {
            s.violations
                .push(format!("buffer {} freed with work pending", memory.id));
        }
        if s.memory.remove(&memory.id).is_none() {
            s.violations
                .push(format!("buffer {} freed twice", memory.id));
        }
    }

    fn write(&self, memory: &FakeBuffer, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        let (buffer, len) = (memory.id, data.len());
        self.step(
            Call::Write {
                buffer,
                offset,
                len,
            },
            "write",
        )?;
        check_range("write", offset, len, memory.bytes)?;
        let mut s = self.s();
        if let Some(m) = s.memory.get_mut(&buffer) {
            m[offset..offset + len].copy_from_slice(data);
        }
        Ok(())
    }

    fn read(&self, memory: &FakeBuffer, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        let (buffer, len) = (memory.id, out.len());
        self.step(
            Call::Read {
                buffer,
                offset,
                len,
            },
            "read",
        )?;
        check_range("read", offset, len, memory.bytes)?;
        if let Some(m) = self.s().memory.get(&buffer) {
            out.copy_from_slice(&m[offset..offset + len]);
        }
        Ok(())
    }

    fn load_module(&self, image: &[u8]) -> Result<u32, ErrorKind> {
        let m = self.id();
        self.step(Call::LoadModule(m), "load_module")?;
        self.flag_if_capturing(|| format!("module {m} ({} bytes) loaded", image.len()));
        self.s().modules.insert(m);
        Ok(m)
    }

    fn function(&self, module: &u32, name: &str) -> Result<FakeFunction, ErrorKind> {
        let call = Call::Function {
            module: *module,
            name: name.into(),
        };
        self.step(call, "function")?;
        Ok(FakeFunction { name: name.into() })
    }

    fn launch_kernel(&self, l: &KernelLaunch<'_, Self>) -> Result<(), ErrorKind> {
        let mut args = l.args(self);
        // The array a real driver reads: one pointer per parameter.
        let params = args.pointers().len();
        if params != l.buffers().len() + 1 {
            let n = l.buffers().len();
            self.s().violations.push(format!(
                "{params} kernel parameter pointers for {n} buffers and the params block"
            ));
        }
        // The ids back from the packed arguments, as a kernel would see them.
        let call = || Call::LaunchKernel {
            name: l.function().name.clone(),
            buffers: args.addresses().iter().map(|a| (a >> 32) as u32).collect(),
        };
        self.step_with(call, "launch_kernel")?;
        self.s().kernel_launches += 1;
        self.queue_kernel(|| self.node_of(l));
        Ok(())
    }

    fn launch_beside(
        &self,
        l: &KernelLaunch<'_, Self>,
        join: Option<&FakeNode>,
    ) -> Result<FakeNode, ErrorKind> {
        if !self.s().capturing {
            return Err(ErrorKind::driver(
                "launch_beside",
                "the stream is not capturing",
            ));
        }
        self.launch_kernel(l)?;
        let node = self.captured_node()?;
        let mut s = self.s();
        // A join must name a node recorded beside earlier in this capture.
        if let Some(j) = join {
            let ok = j.capture == s.capture && s.recorded.get(j.index).is_some_and(|k| k.beside);
            if !ok {
                s.violations.push(format!(
                    "{j:?} joined: not a node beside the work of this capture"
                ));
            }
        }
        s.beside_joins.push((node.index, join.map(|j| j.index)));
        if let Some(k) = s.recorded.last_mut() {
            k.beside = true;
        }
        Ok(node)
    }

    fn set_kernel_node(
        &self,
        at: NodeIn<'_, u32>,
        graph: &u32,
        node: &FakeNode,
        l: &KernelLaunch<'_, Self>,
    ) -> Result<(), ErrorKind> {
        let call = match at {
            NodeIn::Exec(exec) => Call::SetKernelNode {
                exec: *exec,
                node: node.index,
            },
            NodeIn::Graph => Call::SetGraphKernelNode {
                graph: *graph,
                node: node.index,
            },
        };
        self.step(call, "set_kernel_node")?;
        let new = self.node_of(l);
        let mut s = self.s();
        let refuse = |why: String| Err(ErrorKind::driver("set_kernel_node", why));
        // Membership, as the real drivers check it against the node set
        // kept with the graph: O(1), from what the graph holds.
        match s.graphs.get(graph) {
            Some(g) if g.capture == node.capture && node.index < g.nodes.len() => {}
            Some(_) => return refuse(format!("{node:?} is not a node of graph {graph}")),
            None => return refuse(format!("graph {graph} is not live")),
        }
        let nodes = match at {
            NodeIn::Exec(exec) => {
                if s.update_needs_idle && (s.pending.contains(exec) || s.busy) {
                    s.violations
                        .push(format!("exec {exec} patched with work pending"));
                }
                let Some(e) = s.execs.get_mut(exec) else {
                    return refuse(format!("exec {exec} is not live"));
                };
                if e.graph != *graph {
                    return refuse(format!(
                        "exec {exec} was instantiated from graph {}, not {graph}",
                        e.graph
                    ));
                }
                &mut e.nodes
            }
            // The graph's own nodes: what later instantiations copy; execs
            // already made keep their copies.
            NodeIn::Graph => match s.graphs.get_mut(graph) {
                Some(g) => &mut g.nodes,
                None => return refuse(format!("graph {graph} is not live")),
            },
        };
        match nodes.get_mut(node.index) {
            // New parameters; where the node sits in the graph stays.
            Some(k) if k.kernel => {
                *k = FakeKernel {
                    beside: k.beside,
                    ..new
                };
                Ok(())
            }
            _ => refuse(format!("node {} is not a kernel node", node.index)),
        }
    }

    fn update_needs_idle_stream(&self) -> bool {
        self.s().update_needs_idle
    }

    fn keeps_execs(&self) -> bool {
        !self.s().no_kept_execs
    }

    fn node_stamps(&self) -> bool {
        self.s().node_stamps
    }
}

impl FakeDriver {
    /// The node a kernel launch records: entry point, buffer ids back from
    /// the packed arguments (as a kernel would see them), and its scalars.
    fn node_of(&self, l: &KernelLaunch<'_, Self>) -> FakeKernel {
        let args = l.args(self);
        FakeKernel {
            name: l.function().name.clone(),
            buffers: args.addresses().iter().map(|a| (a >> 32) as u32).collect(),
            params: Some(*l.params()),
            offsets: args.addresses().iter().map(|a| *a as u32).collect(),
            shape: Some((l.grid(), l.block())),
            kernel: true,
            beside: false,
        }
    }
}

/// The fake compiler: an op's image is its name.
pub struct FakeCompiler {
    driver: FakeDriver,
}

impl FakeCompiler {
    /// Logs into `driver`'s log.
    pub fn new(driver: &FakeDriver) -> Self {
        FakeCompiler {
            driver: driver.observer(),
        }
    }
}

impl Compiler<FakeDriver> for FakeCompiler {
    fn image(&self, op: OpKind) -> Result<Arc<Vec<u8>>, ErrorKind> {
        self.driver.step(Call::Image(op), "image")?;
        Ok(Arc::new(op.name().as_bytes().to_vec()))
    }
}

/// A fake vendor BLAS that takes GEMM (like cuBLAS) where `gemm`, and
/// nothing otherwise.
pub struct FakeBlas {
    gemm: bool,
    ready: bool,
}

impl FakeBlas {
    /// Routes GEMM to itself where `gemm`.
    pub fn new(gemm: bool) -> Self {
        FakeBlas { gemm, ready: false }
    }
}

impl VendorBlas<FakeDriver> for FakeBlas {
    fn routes(&self, op: OpKind) -> bool {
        self.gemm && op == OpKind::Gemm
    }

    fn ready(&self) -> bool {
        self.ready
    }

    fn prepare(&mut self, d: &FakeDriver) -> Result<(), ErrorKind> {
        d.step(Call::VendorPrepare, "vendor_prepare")?;
        d.flag_if_capturing(|| "vendor handle created".into());
        self.ready = true;
        Ok(())
    }

    fn launch(&self, d: &FakeDriver, l: &VendorLaunch<'_, FakeDriver>) -> Result<(), ErrorKind> {
        d.step(Call::VendorLaunch(l.op()), "vendor_launch")?;
        d.queue_kernel(|| FakeKernel::named(format!("vendor_{}", l.op().name()), false));
        Ok(())
    }
}
