//! seam's own barrier audit. Synchronization validation (layer 1.3.239)
//! reports no hazard for dependent compute dispatches with every barrier
//! removed (tried on lavapipe and the H200's NVIDIA driver, 2026-12-01), so each command buffer checks its own
//! commands as they are recorded: two commands that touch the same buffer,
//! at least one of them writing, must have a barrier between them, and a
//! command buffer's first access must follow a barrier (which orders it
//! after every earlier submission to the queue). It costs one scan of the
//! accesses since the last barrier per command — nothing, when every
//! dispatch follows a barrier — so it is always on.

use std::fmt;

/// Accesses since the last barrier, and whether one was recorded at all.
#[derive(Debug, Default)]
pub(super) struct Audit {
    /// (buffer, writes, command number) of every access since the last barrier.
    since_barrier: Vec<(u64, bool, usize)>,
    /// A barrier has been recorded in this command buffer.
    ordered: bool,
    /// Commands checked so far; the next is number `commands + 1`.
    commands: usize,
}

/// Two accesses to one buffer with no barrier between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hazard {
    /// What the later command is (`dispatch`, `copy`).
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
            None => write!(
                f,
                "barrier audit: {} #{} {} buffer {:#x} before any barrier, unordered with earlier submissions",
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
                    "barrier audit: {} #{} {} buffer {:#x}, which command #{n} {} with no barrier between them ({kind})",
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
        self.since_barrier.clear();
        self.ordered = false;
        self.commands = 0;
    }

    /// The audit as it stands right after a barrier that follows
    /// `commands` earlier commands. The audit of a command depends only on
    /// the accesses since the last barrier and on whether there was one, so
    /// auditing each stretch of a command buffer from here is auditing it
    /// whole (`CommandBuffer::check_update`; a stretch with a dispatch
    /// always follows a barrier).
    pub(super) fn after_barrier(commands: usize) -> Audit {
        Audit {
            since_barrier: Vec::new(),
            ordered: true,
            commands,
        }
    }

    /// A global memory barrier: it orders every later access after every
    /// earlier one, here and in earlier submissions.
    pub(super) fn barrier(&mut self) {
        self.since_barrier.clear();
        self.ordered = true;
    }

    /// Check a command's accesses (buffer, writes) and record them.
    pub(super) fn command(
        &mut self,
        command: &'static str,
        accesses: &[(u64, bool)],
    ) -> Result<(), Hazard> {
        let number = self.commands + 1;
        for &(buffer, writes) in accesses {
            let hazard = |earlier| Hazard {
                command,
                number,
                earlier,
                writes,
                buffer,
            };
            if !self.ordered {
                return Err(hazard(None));
            }
            if let Some(&(_, w, n)) = self
                .since_barrier
                .iter()
                .find(|&&(b, w, _)| b == buffer && (w || writes))
            {
                return Err(hazard(Some((n, w))));
            }
        }
        self.commands = number;
        self.since_barrier
            .extend(accesses.iter().map(|&(b, w)| (b, w, number)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u64 = 0xa;
    const B: u64 = 0xb;
    const OUT: u64 = 0xc;

    fn after_barrier() -> Audit {
        let mut a = Audit::default();
        a.barrier();
        a
    }

    #[test]
    fn a_barrier_before_every_dependent_dispatch_passes() {
        let mut a = after_barrier();
        for _ in 0..3 {
            a.command("dispatch", &[(A, false), (OUT, true)]).unwrap();
            a.barrier();
            a.command("dispatch", &[(OUT, false), (B, true)]).unwrap();
            a.barrier();
        }
    }

    #[test]
    fn read_after_write_without_a_barrier_is_a_hazard() {
        let mut a = after_barrier();
        a.command("dispatch", &[(A, false), (OUT, true)]).unwrap();
        let h = a
            .command("dispatch", &[(OUT, false), (B, true)])
            .unwrap_err();
        assert_eq!(h.earlier, Some((1, true)));
        assert_eq!((h.number, h.writes, h.buffer), (2, false, OUT));
        let text = h.to_string();
        assert!(
            text.contains("read after write") && text.contains("#1"),
            "{text}"
        );
    }

    #[test]
    fn write_after_read_and_write_after_write_are_hazards() {
        let mut a = after_barrier();
        a.command("dispatch", &[(A, false), (OUT, true)]).unwrap();
        let war = a.command("copy", &[(B, false), (A, true)]).unwrap_err();
        assert!(war.to_string().contains("write after read"), "{war}");
        let waw = a.command("dispatch", &[(OUT, true)]).unwrap_err();
        assert!(waw.to_string().contains("write after write"), "{waw}");
    }

    #[test]
    fn reads_of_one_buffer_need_no_barrier() {
        let mut a = after_barrier();
        a.command("dispatch", &[(A, false), (OUT, true)]).unwrap();
        a.command("dispatch", &[(A, false), (B, true)]).unwrap();
    }

    #[test]
    fn one_command_may_read_and_write_one_buffer() {
        // `add(a, dst, dst)`: each invocation reads, then writes, its element.
        let mut a = after_barrier();
        a.command("dispatch", &[(A, false), (OUT, false), (OUT, true)])
            .unwrap();
    }

    #[test]
    fn the_first_access_must_follow_a_barrier() {
        let mut a = Audit::default();
        let h = a.command("dispatch", &[(A, false)]).unwrap_err();
        assert_eq!(h.earlier, None);
        assert!(h.to_string().contains("before any barrier"), "{h}");
    }

    #[test]
    fn a_refused_command_is_not_recorded() {
        let mut a = after_barrier();
        a.command("dispatch", &[(OUT, true)]).unwrap();
        a.command("dispatch", &[(OUT, false)]).unwrap_err();
        a.barrier();
        // Numbering continues from the last recorded command.
        let h = {
            a.command("dispatch", &[(OUT, true)]).unwrap();
            a.command("dispatch", &[(OUT, true)]).unwrap_err()
        };
        assert_eq!((h.number, h.earlier), (3, Some((2, true))));
    }
}
