//! The queue, command buffers and encoders, and what a command buffer holds while it may run.

use super::*;

/// The device's command queue.
pub struct Queue {
    pub(super) raw: Retained<ProtocolObject<dyn MTLCommandQueue>>,
}

impl Queue {
    /// A command buffer that retains the objects its commands reference.
    pub fn command_buffer(&self) -> Result<CommandBuffer> {
        pool(|| {
            let raw = self
                .raw
                .commandBuffer()
                .ok_or_else(|| nil("commandBuffer"))?;
            Ok(CommandBuffer {
                raw,
                uses: Arc::new(Mutex::new(Uses::default())),
            })
        })
    }
}

/// Where a committed command buffer stands.
#[derive(Debug, PartialEq)]
pub enum Status {
    Pending,
    Completed,
    Failed(String),
}

/// What a command buffer's commands use, held until it is seen completed.
#[derive(Default)]
struct Uses {
    buffers: Vec<Buffer>,
    icbs: Vec<Icb>,
    pipelines: Vec<Retained<ProtocolObject<dyn MTLComputePipelineState>>>,
    /// An encoder of it has not ended (Metal allows one at a time).
    encoding: bool,
    committed: bool,
    /// Seen completed or failed: `buffers`' use counts were given back.
    released: bool,
}

impl Uses {
    fn hold(&mut self, buffer: &Buffer) {
        if !self.buffers.iter().any(|b| Arc::ptr_eq(&b.0, &buffer.0)) {
            // Under the host lock: a host copy in progress finishes first,
            // and every later one sees the use.
            let _host = buffer.0.host.lock().unwrap_or_else(|p| p.into_inner());
            buffer.0.users.fetch_add(1, Ordering::AcqRel);
            self.buffers.push(buffer.clone());
        }
    }

    /// The commands will not run (again): give back the use counts.
    fn release(&mut self) {
        if !self.released {
            self.released = true;
            for b in self.buffers.drain(..) {
                b.0.users.fetch_sub(1, Ordering::AcqRel);
            }
            self.icbs.clear();
            self.pipelines.clear();
        }
    }
}

fn lock(uses: &Mutex<Uses>) -> MutexGuard<'_, Uses> {
    uses.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct CommandBuffer {
    raw: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
    /// Shared with its encoder.
    uses: Arc<Mutex<Uses>>,
}

// SAFETY: Metal command buffers may be encoded and committed from any thread,
// one at a time; `Send` without `Sync` allows exactly that. What it holds is
// behind a `Mutex`.
unsafe impl Send for CommandBuffer {}

impl CommandBuffer {
    /// A serial compute encoder: dispatches run in order. Refused while
    /// another encoder of it is open or once it is committed.
    pub fn encoder(&self) -> Result<Encoder> {
        let mut uses = lock(&self.uses);
        if uses.encoding || uses.committed {
            return Err(ErrorKind::driver(
                "computeCommandEncoder",
                "an encoder is open or the command buffer is committed",
            ));
        }
        pool(|| {
            let raw = self
                .raw
                .computeCommandEncoder()
                .ok_or_else(|| nil("computeCommandEncoder"))?;
            uses.encoding = true;
            Ok(Encoder {
                raw: Some(raw),
                uses: self.uses.clone(),
            })
        })
    }

    /// Submit. Refused while an encoder of it is open, or a second time.
    pub fn commit(&self) -> Result<()> {
        let mut uses = lock(&self.uses);
        if uses.encoding || uses.committed {
            return Err(ErrorKind::driver(
                "commit",
                "an encoder is open or the command buffer is committed",
            ));
        }
        uses.committed = true;
        self.raw.commit();
        Ok(())
    }

    /// Where it stands; once completed or failed, what it holds is released.
    pub fn status(&self) -> Status {
        let status = match self.raw.status() {
            MTLCommandBufferStatus::Completed => Status::Completed,
            MTLCommandBufferStatus::Error => Status::Failed(pool(|| {
                self.raw
                    .error()
                    .map(|e| e.localizedDescription().to_string())
                    .unwrap_or_else(|| "command buffer failed".into())
            })),
            _ => return Status::Pending,
        };
        lock(&self.uses).release();
        status
    }

    /// Wait for a committed command buffer to finish (completed or failed),
    /// up to `WAIT_LIMIT`: polls `status` (spinning briefly, then sleeping)
    /// instead of the unbounded `waitUntilCompleted`. Err: still running.
    pub fn wait(&self) -> Result<Status> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            match self.status() {
                Status::Pending => {}
                done => return Ok(done),
            }
            if start.elapsed() > WAIT_LIMIT {
                return Err(ErrorKind::driver(
                    "MTLCommandBuffer.status",
                    format!("not completed after {} s", WAIT_LIMIT.as_secs()),
                ));
            }
            if spins < 1000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }
}

impl Drop for CommandBuffer {
    fn drop(&mut self) {
        let mut uses = lock(&self.uses);
        if !uses.committed {
            // Never submitted: nothing of it runs.
            uses.release();
        } else if !uses.released
            && matches!(
                self.raw.status(),
                MTLCommandBufferStatus::Completed | MTLCommandBufferStatus::Error
            )
        {
            uses.release();
        } else if !uses.released {
            // Still running: keep what it uses alive and its buffers marked
            // in use, for good.
            std::mem::forget(std::mem::take(&mut *uses));
        }
    }
}

/// A compute command encoder; ended on drop if not ended before.
pub struct Encoder {
    raw: Option<Retained<ProtocolObject<dyn MTLComputeCommandEncoder>>>,
    uses: Arc<Mutex<Uses>>,
}

// SAFETY: as `CommandBuffer`: an encoder may be used from any thread, one at
// a time, which `Send` without `Sync` allows.
unsafe impl Send for Encoder {}

impl Encoder {
    /// Encode one dispatch: pipeline, buffers 0.., `Params` and sizes with
    /// `setBytes`, threadgroup memory lengths, then the threadgroups.
    pub fn dispatch(&self, d: &Dispatch<'_>) -> Result<()> {
        let enc = self.bind(d)?;
        let [tx, ty, tz] = d.threads;
        let [gx, gy, gz] = d.groups;
        enc.dispatchThreadgroups_threadsPerThreadgroup(size(gx, gy, gz), size(tx, ty, tz));
        Ok(())
    }

    /// Encode `d` with the threadgroup counts the device reads at byte
    /// `offset` of `args` when it reaches the command (three `u32`s, as
    /// `MTLDispatchThreadgroupsIndirectArguments`; zeros run nothing): a
    /// conditional body's copy (C14, `seam_kernels::conditional`). The
    /// serial encoder's hazard tracking orders the read after the gate
    /// that wrote them.
    pub fn dispatch_indirect(&self, d: &Dispatch<'_>, args: &Buffer, offset: usize) -> Result<()> {
        if !offset.is_multiple_of(4) || offset.checked_add(12).is_none_or(|end| end > args.len()) {
            return Err(ErrorKind::driver(
                "dispatchThreadgroupsWithIndirectBuffer",
                format!("arguments at byte {offset} of a {}-byte buffer", args.len()),
            ));
        }
        let enc = self.bind(d)?;
        lock(&self.uses).hold(args);
        let [tx, ty, tz] = d.threads;
        // SAFETY: the offset is 4-aligned with three u32s inside `args`
        // (checked); the command buffer holds `args` until it is seen
        // completed (above); the counts there are the recorded ones, each
        // within the device's limits, or zeros (the gate writes nothing else).
        unsafe {
            enc.dispatchThreadgroupsWithIndirectBuffer_indirectBufferOffset_threadsPerThreadgroup(
                &args.0.raw,
                offset,
                size(tx, ty, tz),
            )
        };
        Ok(())
    }

    /// Bind `d`'s pipeline and arguments; the encoder, to dispatch.
    fn bind(
        &self,
        d: &Dispatch<'_>,
    ) -> Result<&Retained<ProtocolObject<dyn MTLComputeCommandEncoder>>> {
        d.check()?;
        let Some(enc) = &self.raw else {
            return Err(nil("computeCommandEncoder (ended)"));
        };
        let mut uses = lock(&self.uses);
        enc.setComputePipelineState(&d.pipeline.raw);
        uses.pipelines.push(d.pipeline.raw.clone());
        for (index, buf) in d.buffers.iter().enumerate() {
            // SAFETY: index < PARAMS_INDEX (checked); the command buffer
            // holds `buf` until it is seen completed (below), and Metal
            // retains it too (`commandBuffer`: retained references).
            unsafe { enc.setBuffer_offset_atIndex(Some(&buf.0.raw), 0, index) };
            uses.hold(buf);
        }
        let params = NonNull::from(&d.params).cast::<c_void>();
        // SAFETY: `params` points at d.params.len() (64) live bytes; Metal copies them now.
        unsafe { enc.setBytes_length_atIndex(params, d.params.len(), PARAMS_INDEX) };
        let sizes = NonNull::from(d.sizes.as_slice()).cast::<c_void>();
        // SAFETY: `sizes` points at sizes.len() live u32s (checked non-empty);
        // Metal copies them now.
        unsafe { enc.setBytes_length_atIndex(sizes, d.sizes.len() * 4, SIZES_INDEX) };
        for (index, &len) in d.threadgroup_memory.iter().enumerate() {
            // SAFETY: index < MAX_THREADGROUP_ARGS (checked), within Metal's
            // 31 threadgroup slots; lengths are multiples of 16 (lowering.rs).
            unsafe { enc.setThreadgroupMemoryLength_atIndex(len as usize, index) };
        }
        Ok(enc)
    }

    /// Run a recorded graph: declare every buffer its commands use
    /// (`useResource:usage:`, which also orders it after earlier writers),
    /// then execute every command.
    pub fn execute(&self, icb: &Icb) -> Result<()> {
        let Some(enc) = &self.raw else {
            return Err(nil("computeCommandEncoder (ended)"));
        };
        let mut uses = lock(&self.uses);
        let rw = MTLResourceUsage::Read | MTLResourceUsage::Write;
        for buf in &icb.0.buffers {
            enc.useResource_usage(buf.resource(), rw);
            uses.hold(buf);
        }
        enc.useResource_usage(icb.0.args.resource(), MTLResourceUsage::Read);
        uses.hold(&icb.0.args);
        let range = NSRange {
            location: 0,
            length: icb.0.count,
        };
        // SAFETY: the range is exactly the commands encoded in `new_icb`;
        // every buffer and pipeline they reference is held by the Icb, which
        // this command buffer holds (below) until it is seen completed.
        unsafe { enc.executeCommandsInBuffer_withRange(&icb.0.raw, range) };
        uses.icbs.push(icb.clone());
        Ok(())
    }

    /// `endEncoding`; required before the command buffer is committed or
    /// another encoder is made.
    pub fn end(self) {
        drop(self);
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        if let Some(enc) = self.raw.take() {
            enc.endEncoding();
            lock(&self.uses).encoding = false;
        }
    }
}
