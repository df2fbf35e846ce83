//! How a backend waits for a submission: poll its completion for a bounded
//! time, then block.
//!
//! A blocking wait costs the wake-up of a sleeping thread on top of the
//! work: about 40 µs per submit on the NVIDIA driver (580.159.04, an H200:
//! an ash probe of one tiny dispatch, submit + `vkWaitForFences`, 2026-11),
//! which is almost all of a replay of one tiny dispatch. Polling returns as
//! soon as the work is done; blocking after the budget keeps a long wait
//! from burning a core. The budget is [`DEFAULT_SPIN_US`] µs, or a
//! backend's variable ([`SpinSetting`]: whole microseconds; `0`: always
//! block at once). The polls and the block are the backend's
//! ([`FenceStatus`]: Vulkan's fences, wgpu's submission index); this module
//! is the policy, tested against a fake status source.

use std::sync::OnceLock;
use std::time::Duration;

/// The spin budget when a backend's variable is not set, in microseconds:
/// above the ~40 µs a short submission takes to signal on the NVIDIA
/// driver, far below anything a long wait costs.
pub const DEFAULT_SPIN_US: u64 = 50;

/// The largest budget accepted (1 s): past that, polling is a busy wait.
pub const MAX_SPIN_US: u64 = 1_000_000;

/// How long a wait polls before it blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpinBudget(pub Duration);

impl SpinBudget {
    /// The budget a value of the variable `var` asks for (`None`: not set).
    pub fn parse(var: &str, value: Option<&str>) -> Result<SpinBudget, String> {
        let us = match value.map(str::trim) {
            None | Some("") => DEFAULT_SPIN_US,
            Some(v) => v.parse::<u64>().map_err(|_| {
                format!("{var}={v}: not a whole number of microseconds (0: always block)")
            })?,
        };
        if us > MAX_SPIN_US {
            return Err(format!(
                "{var}={us}: more than {MAX_SPIN_US} µs of polling is a busy wait"
            ));
        }
        Ok(SpinBudget(Duration::from_micros(us)))
    }
}

/// A backend's spin budget, read once from its variable (e.g.
/// `SEAM_VULKAN_SPIN_US`): a `static` of the backend's.
pub struct SpinSetting {
    var: &'static str,
    read: OnceLock<Result<SpinBudget, String>>,
}

impl SpinSetting {
    /// The setting read from `var` (at its first use).
    pub const fn new(var: &'static str) -> SpinSetting {
        SpinSetting {
            var,
            read: OnceLock::new(),
        }
    }

    /// The variable's name.
    pub fn var(&self) -> &'static str {
        self.var
    }

    /// The process's budget: the variable, read once. An invalid value is
    /// an error here (opening a device refuses it) and the default in
    /// [`SpinSetting::current`].
    pub fn get(&self) -> Result<SpinBudget, String> {
        self.read().clone()
    }

    /// The budget every wait uses (allocates nothing once read).
    pub fn current(&self) -> SpinBudget {
        match self.read() {
            Ok(b) => *b,
            Err(_) => SpinBudget(Duration::from_micros(DEFAULT_SPIN_US)),
        }
    }

    fn read(&self) -> &Result<SpinBudget, String> {
        self.read_with(|var| std::env::var(var).ok())
    }

    /// The first read: `lookup` gives the variable's value.
    fn read_with(
        &self,
        lookup: impl FnOnce(&str) -> Option<String>,
    ) -> &Result<SpinBudget, String> {
        self.read
            .get_or_init(|| SpinBudget::parse(self.var, lookup(self.var).as_deref()))
    }
}

/// What a wait asks of the work it waits on (Vulkan's fences, wgpu's
/// submission index).
pub trait FenceStatus {
    /// A failed poll or block.
    type Error;
    /// Whether the awaited work has completed (`vkGetFenceStatus`, a
    /// zero-timeout `wgpu::Device::poll`); never blocks.
    fn signalled(&mut self) -> Result<bool, Self::Error>;
    /// Block until the awaited work has completed, or fail
    /// (`vkWaitForFences`, `wgpu::Device::poll`, with their timeouts).
    fn block(&mut self) -> Result<(), Self::Error>;
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// Seen signalled by the `polls`-th poll, without blocking.
    Polled {
        /// Polls made, the last one seeing the work done.
        polls: u32,
    },
    /// Blocked after `polls` polls (0: the budget is zero).
    Blocked {
        /// Polls made before blocking.
        polls: u32,
    },
}

/// Wait for `fences`: poll until they have signalled or `elapsed()` (time
/// since the wait began) reaches `budget`, then block. A zero budget blocks
/// at once, without polling.
pub fn wait<F: FenceStatus>(
    budget: SpinBudget,
    fences: &mut F,
    mut elapsed: impl FnMut() -> Duration,
) -> Result<Waited, F::Error> {
    let mut polls = 0;
    if !budget.0.is_zero() {
        loop {
            polls += 1;
            if fences.signalled()? {
                return Ok(Waited::Polled { polls });
            }
            if elapsed() >= budget.0 {
                break;
            }
            std::hint::spin_loop();
        }
    }
    fences.block()?;
    Ok(Waited::Blocked { polls })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fences that signal at the `signal_at`-th poll (never: `None`), or
    /// once blocked on; counts polls and blocks.
    struct Fake {
        signal_at: Option<u32>,
        polls: u32,
        blocks: u32,
        fail_block: bool,
    }

    impl Fake {
        fn new(signal_at: Option<u32>) -> Fake {
            Fake {
                signal_at,
                polls: 0,
                blocks: 0,
                fail_block: false,
            }
        }
    }

    impl FenceStatus for Fake {
        type Error = &'static str;
        fn signalled(&mut self) -> Result<bool, &'static str> {
            self.polls += 1;
            Ok(self.signal_at.is_some_and(|at| self.polls >= at))
        }
        fn block(&mut self) -> Result<(), &'static str> {
            self.blocks += 1;
            if self.fail_block {
                return Err("timeout");
            }
            Ok(())
        }
    }

    /// A clock that advances `step` µs each time it is read: no real time.
    fn clock(step: u64) -> impl FnMut() -> Duration {
        let mut now = 0;
        move || {
            now += step;
            Duration::from_micros(now)
        }
    }

    fn us(n: u64) -> SpinBudget {
        SpinBudget(Duration::from_micros(n))
    }

    /// Not signalled within the budget: polls until the clock passes it,
    /// then blocks once. Mutations: `>=` → `>` (one poll more), the block
    /// skipped after the loop, `break` → `return` → red.
    #[test]
    fn spins_for_the_budget_then_blocks() {
        let mut f = Fake::new(None);
        // 50 µs budget, 10 µs per clock read: reads at 10, 20, …, 50.
        assert_eq!(
            wait(us(50), &mut f, clock(10)),
            Ok(Waited::Blocked { polls: 5 })
        );
        assert_eq!((f.polls, f.blocks), (5, 1));
    }

    /// Signalled while polling: returns without blocking.
    #[test]
    fn a_signalled_fence_returns_without_blocking() {
        let mut f = Fake::new(Some(1));
        assert_eq!(
            wait(us(50), &mut f, clock(10)),
            Ok(Waited::Polled { polls: 1 })
        );
        assert_eq!(f.blocks, 0);
        let mut f = Fake::new(Some(3));
        assert_eq!(
            wait(us(50), &mut f, clock(10)),
            Ok(Waited::Polled { polls: 3 })
        );
        assert_eq!((f.polls, f.blocks), (3, 0));
    }

    /// A zero budget blocks at once, without a poll (even if the fence has
    /// signalled: `vkWaitForFences` returns at once then).
    #[test]
    fn zero_blocks_at_once() {
        let mut f = Fake::new(Some(1));
        assert_eq!(
            wait(us(0), &mut f, || panic!("no clock read for a zero budget")),
            Ok(Waited::Blocked { polls: 0 })
        );
        assert_eq!((f.polls, f.blocks), (0, 1));
    }

    /// A failed block (the timeout) is the wait's error.
    #[test]
    fn a_failed_block_is_the_error() {
        let mut f = Fake::new(None);
        f.fail_block = true;
        assert_eq!(wait(us(5), &mut f, clock(10)), Err("timeout"));
        assert_eq!((f.polls, f.blocks), (1, 1));
    }

    /// The variable: unset or empty → the default, whole microseconds,
    /// `0` allowed, anything else or above the cap refused with the name.
    #[test]
    fn the_variable_sets_the_budget() {
        let parse = |v| SpinBudget::parse("SEAM_X_SPIN_US", v);
        assert_eq!(parse(None), Ok(us(DEFAULT_SPIN_US)));
        assert_eq!(parse(Some("")), Ok(us(DEFAULT_SPIN_US)));
        assert_eq!(parse(Some("0")), Ok(us(0)));
        assert_eq!(parse(Some(" 200 ")), Ok(us(200)));
        assert_eq!(parse(Some("1000000")), Ok(us(MAX_SPIN_US)));
        for bad in ["-1", "2.5", "50us", "1000001"] {
            let e = parse(Some(bad)).unwrap_err();
            assert!(e.starts_with("SEAM_X_SPIN_US="), "{bad}: {e}");
        }
    }

    /// A setting reads its own variable, once; an invalid value is its
    /// error and the default budget.
    #[test]
    fn a_setting_reads_its_variable_once() {
        let good = SpinSetting::new("SEAM_X_SPIN_US");
        let asked = std::cell::Cell::new(0);
        let lookup = |v: &str| {
            asked.set(asked.get() + 1);
            assert_eq!(v, "SEAM_X_SPIN_US");
            Some("7".to_string())
        };
        assert_eq!(good.read_with(lookup), &Ok(us(7)));
        assert_eq!(
            good.read_with(|_| Some("9".into())),
            &Ok(us(7)),
            "read once"
        );
        assert_eq!(
            (good.get(), good.current(), asked.get()),
            (Ok(us(7)), us(7), 1)
        );
        assert_eq!(good.var(), "SEAM_X_SPIN_US");
        let bad = SpinSetting::new("SEAM_Y_SPIN_US");
        bad.read_with(|_| Some("x".into()));
        assert!(bad.get().unwrap_err().starts_with("SEAM_Y_SPIN_US=x"));
        assert_eq!(bad.current(), us(DEFAULT_SPIN_US));
    }
}
