//! Timestamp queries recorded into a command buffer (device timing, C10):
//! resets and writes, and the per-pool record a submission reads back.

use super::*;

impl CommandBuffer {
    /// Record a reset of queries `first..first + count` of `pool`.
    pub fn reset_queries(
        &mut self,
        pool: &QueryPool,
        first: u32,
        count: u32,
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdResetQueryPool";
        let inner = self.recording(CALL)?;
        if !Arc::ptr_eq(&pool.0.shared, &inner.shared) {
            return Err(ErrorKind::driver(CALL, "a query pool of another device"));
        }
        if first
            .checked_add(count)
            .is_none_or(|end| end > pool.0.count)
        {
            return Err(ErrorKind::driver(CALL, "query range outside the pool"));
        }
        let cmd = QueryCmd {
            op: QueryOp::Reset { first, count },
            stage: vk::PipelineStageFlags::empty(),
        };
        inner.cmd_query(pool, cmd);
        inner.query_op(pool, cmd.op);
        if inner.reusable {
            inner.log.push(Recorded::Query(pool.clone(), cmd));
        }
        Ok(())
    }

    /// Record a timestamp write into query `query` of `pool`, taken once every
    /// command submitted earlier to the queue has finished `stage`. The query
    /// must be reset, earlier in queue order, since it was last written:
    /// [`super::Gpu::submit`] refuses a submission that would break this.
    pub fn write_timestamp(
        &mut self,
        stage: vk::PipelineStageFlags,
        pool: &QueryPool,
        query: u32,
    ) -> Result<(), ErrorKind> {
        const CALL: &str = "vkCmdWriteTimestamp";
        let inner = self.recording(CALL)?;
        if inner.shared.adapter.timestamp_valid_bits == 0 {
            return Err(ErrorKind::driver(
                CALL,
                "the queue family has no timestamps",
            ));
        }
        if !Arc::ptr_eq(&pool.0.shared, &inner.shared) {
            return Err(ErrorKind::driver(CALL, "a query pool of another device"));
        }
        if query >= pool.0.count {
            return Err(ErrorKind::driver(CALL, "query outside the pool"));
        }
        let cmd = QueryCmd {
            op: QueryOp::Write(query),
            stage,
        };
        inner.cmd_query(pool, cmd);
        inner.query_op(pool, cmd.op);
        if inner.reusable {
            inner.log.push(Recorded::Query(pool.clone(), cmd));
        }
        Ok(())
    }

    // ----- graph update (C13) -----
}

impl Inner {
    /// Record one query command (checked by its caller, or logged after
    /// those checks and recorded again by `rerecord`).
    pub(super) fn cmd_query(&self, pool: &QueryPool, cmd: QueryCmd) {
        debug_assert_eq!(self.state, State::Recording);
        let d = &self.shared.device;
        match cmd.op {
            // SAFETY: recording, outside a render pass; the pool is a live
            // pool of this device (held by `queries`, and by the log entry
            // of a reusable buffer) and the range inside it (checked by
            // `reset_queries`).
            QueryOp::Reset { first, count } => unsafe {
                d.cmd_reset_query_pool(self.cmd, pool.0.pool, first, count)
            },
            // SAFETY: recording on a queue family with timestampValidBits >
            // 0; the pool is a live timestamp pool of this device, the query
            // inside it (both checked by `write_timestamp`); that it was
            // reset and not written since is checked in queue order when
            // the command buffer is submitted.
            QueryOp::Write(query) => unsafe {
                d.cmd_write_timestamp(self.cmd, cmd.stage, pool.0.pool, query)
            },
        }
    }

    fn query_op(&mut self, pool: &QueryPool, op: QueryOp) {
        match self
            .queries
            .iter_mut()
            .find(|(p, _)| Arc::ptr_eq(&p.0, &pool.0))
        {
            Some((_, ops)) => ops.push(op),
            None => self.queries.push((pool.clone(), vec![op])),
        }
    }
}
