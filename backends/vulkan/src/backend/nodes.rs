//! Node timing (C10): the span of every dispatch inside a replay.
//!
//! A graph captured with node timing on writes a timestamp before its first
//! dispatch and one after each dispatch, into query pools of its own, each
//! reset in the command buffer before its first write (so every submission
//! starts from reset queries). Every dispatch of a node-timed graph begins
//! with a barrier on all earlier work (`VulkanBackend::launch` elides none
//! there), and every timestamp is taken at
//! BOTTOM_OF_PIPE, once each earlier command has finished: dispatch `i`
//! runs from timestamp `i` to timestamp `i + 1`, the spans tile the replay
//! in capture order, and they sit inside the replay's own span (whose
//! markers are BOTTOM_OF_PIPE timestamps in the batches before and after).
//!
//! The queries are read once per traced replay. A graph's pools hold one
//! replay's stamps, so a replay of a graph whose previous traced replay is
//! still unread first waits on the host for that one and reads it: node
//! timing serialises the replays of one graph with the host (replays of
//! other graphs, and eager work, still queue behind it). With node timing
//! off, graphs record no timestamps and nothing waits.

use super::timing::Clock;
use super::VulkanBackend;
use crate::sys::{CommandBuffer, QueryPool};

use ash::vk;
use seam::kept::Runs;
use seam::{DeviceSpan, ErrorKind, ReplayTarget};

/// Timestamps per query pool of a graph.
const STAMPS_PER_POOL: u32 = 1024;

/// A graph: its command buffer and, where node timing was on when it was
/// captured, its timestamps.
pub(super) struct VkGraph {
    pub(super) cmd: CommandBuffer,
    pub(super) nodes: Option<NodeStamps>,
    /// Command buffers kept for launch sets the graph ran (`update.rs`).
    pub(super) runs: Runs<CommandBuffer>,
}

/// The timestamp queries of one node-timed graph.
pub(super) struct NodeStamps {
    pools: Vec<QueryPool>,
    /// Timestamps recorded: one more than the graph's dispatches.
    stamps: u32,
    /// The launch each dispatch ran (its span's node), in record order;
    /// `None` for a conditional body's gate, which is no launch.
    launch_of: Vec<Option<u32>>,
    /// The tag of a traced replay whose stamps are not yet read.
    unread: Option<u64>,
}

impl VulkanBackend {
    /// Whether captures from now on are node-timed.
    pub(super) fn set_node_timing_on(&mut self, on: bool) -> Result<(), ErrorKind> {
        if on {
            self.timing_support()
                .map_err(|reason| ErrorKind::Unavailable { reason })?;
        }
        self.node_timing = on;
        Ok(())
    }

    /// At `begin_capture`: with node timing on, the graph's first timestamp.
    pub(super) fn begin_node_stamps(&mut self) -> Result<(), ErrorKind> {
        self.capture_nodes = None;
        if self.node_timing {
            self.capture_nodes = Some(NodeStamps {
                pools: Vec::new(),
                stamps: 0,
                launch_of: Vec::new(),
                unread: None,
            });
            self.stamp()?;
        }
        Ok(())
    }

    /// Record the capture's next timestamp after a dispatch of `launch`
    /// (`None`: a gate); nothing where the capture is not node-timed.
    pub(super) fn node_stamp(&mut self, launch: Option<u32>) -> Result<(), ErrorKind> {
        if let Some(nodes) = self.capture_nodes.as_mut() {
            nodes.launch_of.push(launch);
        }
        self.stamp()
    }

    /// Record the capture's next timestamp, where it is node-timed.
    fn stamp(&mut self) -> Result<(), ErrorKind> {
        let (Some(nodes), Some(rec)) = (self.capture_nodes.as_mut(), self.capture.as_mut()) else {
            return Ok(());
        };
        let (p, query) = (
            (nodes.stamps / STAMPS_PER_POOL) as usize,
            nodes.stamps % STAMPS_PER_POOL,
        );
        if p == nodes.pools.len() {
            let pool = self.gpu.create_query_pool(STAMPS_PER_POOL)?;
            // Reset in the command buffer itself, ahead of its first write:
            // every replay rewrites the pool from reset queries.
            rec.reset_queries(&pool, 0, STAMPS_PER_POOL)?;
            nodes.pools.push(pool);
        }
        rec.write_timestamp(
            vk::PipelineStageFlags::BOTTOM_OF_PIPE,
            &nodes.pools[p],
            query,
        )?;
        nodes.stamps += 1;
        Ok(())
    }

    /// Before a replay of `target` is submitted: its unread stamps are
    /// read first (waiting for that replay), since this one rewrites them.
    pub(super) fn before_node_replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        let clock = self.clock();
        let VulkanBackend {
            gpu,
            graphs,
            timing,
            ..
        } = self;
        let graph = graphs.target_mut(target)?;
        let Some(nodes) = graph.nodes.as_mut() else {
            return Ok(());
        };
        if let Some(tag) = nodes.unread.take() {
            gpu.wait_for(&graph.cmd)?;
            timing.node_spans.extend(read(gpu, clock, nodes, tag)?);
        }
        Ok(())
    }

    /// After a replay of `target` was submitted inside a timed bracket:
    /// its stamps are the bracket's, to be read.
    pub(super) fn after_node_replay(&mut self, target: ReplayTarget) -> Result<(), ErrorKind> {
        let tag = self.bracket.filter(|_| self.timing.on());
        if let (Some(tag), Some(nodes)) = (tag, self.graphs.target_mut(target)?.nodes.as_mut()) {
            nodes.unread = Some(tag);
        }
        Ok(())
    }

    /// A graph leaves the table (destroyed, or a current one replaced):
    /// an unread replay's stamps are read with the others, once every
    /// submission has completed (the pools live on here).
    pub(super) fn retire(&mut self, graph: VkGraph) {
        if let Some(nodes) = graph.nodes.filter(|n| n.unread.is_some()) {
            self.timing.retired.push(nodes);
        }
    }

    /// Whether any node span is waiting to be taken.
    pub(super) fn has_unread_nodes(&self) -> bool {
        !self.timing.node_spans.is_empty()
            || !self.timing.retired.is_empty()
            || self
                .graphs
                .iter()
                .any(|(_, g)| g.nodes.as_ref().is_some_and(|n| n.unread.is_some()))
    }

    /// Every unread replay's node spans. Called after `wait_all`: every
    /// submission has completed.
    pub(super) fn take_node_spans(&mut self) -> Result<Vec<DeviceSpan>, ErrorKind> {
        let clock = self.clock();
        let VulkanBackend {
            gpu,
            graphs,
            timing,
            ..
        } = self;
        let mut spans = std::mem::take(&mut timing.node_spans);
        for nodes in std::mem::take(&mut timing.retired) {
            if let Some(tag) = nodes.unread {
                spans.extend(read(gpu, clock, &nodes, tag)?);
            }
        }
        let unread: Vec<ReplayTarget> = graphs
            .iter()
            .filter(|(_, g)| g.nodes.as_ref().is_some_and(|n| n.unread.is_some()))
            .map(|(t, _)| t)
            .collect();
        for target in unread {
            let nodes = graphs.target_mut(target)?.nodes.as_mut().expect("filtered");
            let tag = nodes.unread.take().expect("filtered");
            spans.extend(read(gpu, clock, nodes, tag)?);
        }
        Ok(spans)
    }
}

/// A completed replay's timestamps as one span per dispatch of a launch.
fn read(
    gpu: &mut crate::sys::Gpu,
    clock: Clock,
    nodes: &NodeStamps,
    tag: u64,
) -> Result<Vec<DeviceSpan>, ErrorKind> {
    let mut ticks = vec![0u64; nodes.stamps as usize];
    for (chunk, pool) in ticks.chunks_mut(STAMPS_PER_POOL as usize).zip(&nodes.pools) {
        gpu.query_results(pool, 0, chunk)?;
    }
    Ok(ticks
        .windows(2)
        .zip(&nodes.launch_of)
        .filter_map(|(w, launch)| {
            let (start, len) = clock.span(w[0], w[1]);
            launch.map(|i| DeviceSpan::node(tag, i, start, start.saturating_add(len)))
        })
        .collect())
}
