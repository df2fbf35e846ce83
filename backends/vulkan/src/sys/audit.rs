//! seam's own barrier audit. Synchronization validation (layer 1.3.239)
//! reports no hazard for dependent compute dispatches with every barrier
//! removed, nor with a barrier whose access masks leave the shader's reads
//! out (tried on lavapipe and on an H200's NVIDIA driver 580.159.04,
//! 2026-12-01 and 2026-12-03), so each command buffer checks its own
//! commands as they are recorded, by Vulkan's rules for a pipeline barrier:
//!
//! - two commands that touch the same buffer, at least one of them writing,
//!   must have a barrier between them whose stage scopes hold the earlier
//!   command's stage (first scope) and the later's (second scope); where the
//!   earlier one writes, its access masks must also hold the earlier write
//!   (made available) and the later access (made visible);
//! - a command buffer's first access of each kind must follow a barrier that
//!   orders it so after a write of either stage in an earlier submission;
//! - every write must be made visible to the host by a barrier before the
//!   command buffer ends (second scope: HOST stage, HOST_READ access).
//!
//! A dispatch is a compute-shader access (SHADER_READ / SHADER_WRITE), a
//! copy a transfer (TRANSFER_READ / TRANSFER_WRITE), an indirect dispatch's
//! read of its arguments an indirect-command read (DRAW_INDIRECT /
//! INDIRECT_COMMAND_READ); a write to a buffer that may hold indirect
//! arguments ([`Audit::indirect_args`]) waits for a barrier that orders
//! indirect reads after it too. The barrier's masks come
//! from the same [`Scope`] the command is recorded with, and the audit is
//! told of a barrier where `vkCmdPipelineBarrier` is called, so a mask that
//! loses a bit, or a barrier that is not recorded, is refused at the first
//! command it fails to order. It costs
//! one scan of the accesses since the last barrier per command — nothing,
//! when every dispatch follows a barrier — so it is always on.

use ash::vk;
use std::fmt;

/// A pipeline barrier's two synchronisation scopes, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scope {
    pub src_stages: vk::PipelineStageFlags,
    pub dst_stages: vk::PipelineStageFlags,
    pub src_access: vk::AccessFlags,
    pub dst_access: vk::AccessFlags,
}

/// What a command is, for its stage and access flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// `vkCmdDispatch`: the compute-shader stage.
    Dispatch,
    /// `vkCmdCopyBuffer`, `vkCmdUpdateBuffer`: the transfer stage.
    Copy,
    /// `vkCmdDispatchIndirect`'s read of its arguments: the draw-indirect
    /// stage (its shader's own accesses are a `Dispatch`). Never writes.
    Indirect,
}

impl Command {
    /// The commands that write.
    const WRITERS: [Command; 2] = [Command::Dispatch, Command::Copy];
    /// Every later access: each command, reading and writing.
    const LATER: [(Command, bool); 5] = [
        (Command::Dispatch, false),
        (Command::Dispatch, true),
        (Command::Copy, false),
        (Command::Copy, true),
        (Command::Indirect, false),
    ];

    fn name(self) -> &'static str {
        match self {
            Command::Dispatch => "dispatch",
            Command::Copy => "copy",
            Command::Indirect => "indirect arguments of a dispatch",
        }
    }

    fn stage(self) -> vk::PipelineStageFlags {
        match self {
            Command::Dispatch => vk::PipelineStageFlags::COMPUTE_SHADER,
            Command::Copy => vk::PipelineStageFlags::TRANSFER,
            Command::Indirect => vk::PipelineStageFlags::DRAW_INDIRECT,
        }
    }

    fn access(self, writes: bool) -> vk::AccessFlags {
        match (self, writes) {
            (Command::Dispatch, false) => vk::AccessFlags::SHADER_READ,
            (Command::Dispatch, true) => vk::AccessFlags::SHADER_WRITE,
            (Command::Copy, false) => vk::AccessFlags::TRANSFER_READ,
            (Command::Copy, true) => vk::AccessFlags::TRANSFER_WRITE,
            (Command::Indirect, _) => vk::AccessFlags::INDIRECT_COMMAND_READ,
        }
    }

    /// This command's bit among a later access's five kinds: dispatch and
    /// copy, reading and writing, then the indirect read (the third
    /// command, which never writes: bit 4, [`INDIRECT_KIND`]).
    fn kind(self, writes: bool) -> u8 {
        1 << (2 * self as u8 + writes as u8)
    }
}

/// Every later kind but an indirect read: dispatch and copy, reading and
/// writing.
const ALL_KINDS: u8 = 0b1111;
/// An indirect dispatch's read of its arguments.
const INDIRECT_KIND: u8 = 0b1_0000;
/// Every later kind.
const EVERY_KIND: u8 = ALL_KINDS | INDIRECT_KIND;
/// The later kinds that conflict with an earlier read: the writes.
const WRITE_KINDS: u8 = 0b1010;

impl Scope {
    /// The later kinds this barrier orders after an earlier access by
    /// `earlier` (`writes`: a write, which also needs its memory made
    /// available and visible; a read needs the execution dependency alone).
    fn orders(&self, earlier: Command, writes: bool) -> u8 {
        if !self.src_stages.contains(earlier.stage()) {
            return 0;
        }
        if writes && !self.src_access.contains(earlier.access(true)) {
            return 0;
        }
        let mut kinds = 0;
        for (later, w) in Command::LATER {
            let visible = !writes || self.dst_access.contains(later.access(w));
            if self.dst_stages.contains(later.stage()) && visible {
                kinds |= later.kind(w);
            }
        }
        kinds
    }

    /// The later kinds ordered after a write of either stage: what a
    /// barrier orders after every earlier submission to the queue.
    fn orders_any_write(&self) -> u8 {
        Command::WRITERS
            .iter()
            .fold(EVERY_KIND, |k, &c| k & self.orders(c, true))
    }

    /// Whether it makes a write by `earlier` visible to the host.
    fn shows_host(&self, earlier: Command) -> bool {
        self.src_stages.contains(earlier.stage())
            && self.src_access.contains(earlier.access(true))
            && self.dst_stages.contains(vk::PipelineStageFlags::HOST)
            && self.dst_access.contains(vk::AccessFlags::HOST_READ)
    }
}

/// One access not yet ordered before every later access it conflicts with.
#[derive(Clone, Copy, Debug)]
struct Pending {
    buffer: u64,
    writes: bool,
    number: usize,
    command: Command,
    /// The later kinds a barrier since has ordered it before.
    ordered: u8,
}

/// Accesses since the last barrier, and what the barriers so far order.
#[derive(Debug, Default)]
pub(super) struct Audit {
    /// Accesses some later kind may still conflict with.
    pending: Vec<Pending>,
    /// The later kinds ordered after earlier submissions (a barrier that
    /// orders them after a write of either stage has been recorded).
    ordered: u8,
    /// Commands checked so far; the next is number `commands + 1`.
    commands: usize,
    /// The last write of each command kind (buffer, command number) not yet
    /// made visible to the host.
    last_write: [Option<(u64, usize)>; 2],
    /// Buffers that may hold indirect arguments: a write to one stays
    /// pending until indirect reads are ordered after it too.
    indirect: Vec<u64>,
}

/// Two accesses to one buffer with no barrier ordering them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hazard {
    /// What the later access is (`dispatch`, `copy`, or `host` for the host's
    /// read after the command buffer).
    pub command: &'static str,
    /// Its number in the command buffer, from 1.
    pub number: usize,
    /// The earlier access: command number and whether it wrote; `None`: an
    /// earlier submission, not ordered by any barrier yet.
    pub earlier: Option<(usize, bool)>,
    pub writes: bool,
    /// The buffer, as its Vulkan handle.
    pub buffer: u64,
}

impl fmt::Display for Hazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let access = |w: bool| if w { "writes" } else { "reads" };
        match self.earlier {
            _ if self.command == "host" => write!(
                f,
                "barrier audit: command #{} writes buffer {:#x} and no barrier before the end makes the write visible to the host",
                self.number, self.buffer
            ),
            None => write!(
                f,
                "barrier audit: {} #{} {} buffer {:#x} before any barrier that orders it after earlier submissions",
                self.command,
                self.number,
                access(self.writes),
                self.buffer
            ),
            Some((n, w)) => {
                let kind = match (w, self.writes) {
                    (true, true) => "write after write",
                    (true, false) => "read after write",
                    _ => "write after read",
                };
                write!(
                    f,
                    "barrier audit: {} #{} {} buffer {:#x}, which command #{n} {} with no barrier between them that orders the two ({kind})",
                    self.command,
                    self.number,
                    access(self.writes),
                    self.buffer,
                    access(w)
                )
            }
        }
    }
}

impl Audit {
    /// Back to a fresh audit (a command buffer recorded again), keeping the
    /// list's allocation.
    pub(super) fn reset(&mut self) {
        self.pending.clear();
        self.ordered = 0;
        self.commands = 0;
        self.last_write = [None; 2];
        self.indirect.clear();
    }

    /// `buffer` may hold indirect arguments (it was made with
    /// INDIRECT_BUFFER usage): told before the first command that touches
    /// it.
    pub(super) fn indirect_args(&mut self, buffer: u64) {
        if !self.indirect.contains(&buffer) {
            self.indirect.push(buffer);
        }
    }

    /// The audit as it stands right after a barrier of `scope` that follows
    /// `commands` earlier commands, where every earlier access was ordered
    /// (the record-time audit passed them). The audit of a command depends
    /// only on the accesses since the last barrier and on what the barriers
    /// order, so auditing each stretch of a command buffer from here is
    /// auditing it whole (`CommandBuffer::check_update`; a stretch with a
    /// dispatch always follows a barrier).
    pub(super) fn after_barrier(commands: usize, scope: &Scope) -> Audit {
        Audit {
            ordered: scope.orders_any_write(),
            commands,
            ..Audit::default()
        }
    }

    /// A pipeline barrier of `scope`: it orders every later access of the
    /// kinds it covers after the earlier accesses it covers, here and in
    /// earlier submissions, and may make the writes so far visible to the
    /// host.
    pub(super) fn barrier(&mut self, scope: &Scope) {
        let indirect = &self.indirect;
        self.pending.retain_mut(|p| {
            p.ordered |= scope.orders(p.command, p.writes);
            let needed = match (p.writes, indirect.contains(&p.buffer)) {
                (true, true) => EVERY_KIND,
                (true, false) => ALL_KINDS,
                (false, _) => WRITE_KINDS,
            };
            p.ordered & needed != needed
        });
        self.ordered |= scope.orders_any_write();
        for c in Command::WRITERS {
            if scope.shows_host(c) {
                self.last_write[c as usize] = None;
            }
        }
    }

    /// Check a command's accesses (buffer, writes) and record them.
    pub(super) fn command(
        &mut self,
        command: Command,
        accesses: &[(u64, bool)],
    ) -> Result<(), Hazard> {
        let number = self.commands + 1;
        for &(buffer, writes) in accesses {
            let hazard = |earlier| Hazard {
                command: command.name(),
                number,
                earlier,
                writes,
                buffer,
            };
            let kind = command.kind(writes);
            if self.ordered & kind == 0 {
                return Err(hazard(None));
            }
            if let Some(p) = self
                .pending
                .iter()
                .find(|p| p.buffer == buffer && (p.writes || writes) && p.ordered & kind == 0)
            {
                return Err(hazard(Some((p.number, p.writes))));
            }
        }
        self.commands = number;
        for &(buffer, writes) in accesses {
            self.pending.push(Pending {
                buffer,
                writes,
                number,
                command,
                ordered: 0,
            });
            if writes {
                self.last_write[command as usize] = Some((buffer, number));
            }
        }
        Ok(())
    }

    /// The command buffer ends: every write recorded must have been made
    /// visible to the host by a barrier since (the one `cmd_end` records).
    pub(super) fn end(&self) -> Result<(), Hazard> {
        match self.last_write.iter().flatten().next() {
            Some(&(buffer, number)) => Err(Hazard {
                command: "host",
                number,
                earlier: Some((number, true)),
                writes: false,
                buffer,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
