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
        // SAFETY: recording, outside a render pass; the pool is live (held
        // below) and the range inside it.
        unsafe {
            inner
                .shared
                .device
                .cmd_reset_query_pool(inner.cmd, pool.0.pool, first, count)
        };
        inner.query_op(pool, QueryOp::Reset { first, count });
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
        // SAFETY: recording on a queue family with timestampValidBits > 0
        // (checked); the pool is a live timestamp pool (held below), the
        // query inside it; that it was reset and not written since is
        // checked in queue order when the command buffer is submitted.
        unsafe {
            inner
                .shared
                .device
                .cmd_write_timestamp(inner.cmd, stage, pool.0.pool, query)
        };
        inner.query_op(pool, QueryOp::Write(query));
        Ok(())
    }

    // ----- graph update (C13) -----
}

impl Inner {
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
