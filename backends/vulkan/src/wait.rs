//! How the backend waits for a submission: poll the fences
//! (`vkGetFenceStatus`) for a bounded time, then block (`vkWaitForFences`).
//!
//! A blocking fence wait costs the wake-up of a sleeping thread on top of the
//! work: about 40 µs per submit on the NVIDIA driver (580.159.04, an H200:
//! an ash probe of one tiny dispatch, submit + `vkWaitForFences`, 2026-11),
//! which is almost all of a replay of one tiny dispatch. Polling returns as
//! soon as the fence signals; blocking after the budget keeps a long wait
//! from burning a core. The budget is [`DEFAULT_SPIN_US`] µs, or
//! `SEAM_VULKAN_SPIN_US` (whole microseconds; `0`: always block at once).
//! The calls themselves are in `sys` (`Gpu::wait_fences`); this module is
//! the policy, tested against a fake status source.

use std::sync::OnceLock;
use std::time::Duration;

/// The variable that sets the spin budget.
pub const SPIN_ENV: &str = "SEAM_VULKAN_SPIN_US";

/// The spin budget when [`SPIN_ENV`] is not set, in microseconds: above the
/// ~40 µs a short submission takes to signal on the NVIDIA driver, far
/// below anything a long wait costs.
pub const DEFAULT_SPIN_US: u64 = 50;

/// The largest budget accepted (1 s): past that, polling is a busy wait.
pub const MAX_SPIN_US: u64 = 1_000_000;

/// How long a wait polls before it blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpinBudget(pub Duration);

impl SpinBudget {
    /// The budget a value of [`SPIN_ENV`] asks for (`None`: not set).
    pub fn parse(value: Option<&str>) -> Result<SpinBudget, String> {
        let us = match value.map(str::trim) {
            None | Some("") => DEFAULT_SPIN_US,
            Some(v) => v.parse::<u64>().map_err(|_| {
                format!("{SPIN_ENV}={v}: not a whole number of microseconds (0: always block)")
            })?,
        };
        if us > MAX_SPIN_US {
            return Err(format!(
                "{SPIN_ENV}={us}: more than {MAX_SPIN_US} µs of polling is a busy wait"
            ));
        }
        Ok(SpinBudget(Duration::from_micros(us)))
    }

    /// The process's budget: [`SPIN_ENV`], read once. An invalid value is
    /// an error here (opening a device refuses it) and the default in
    /// [`SpinBudget::current`].
    pub fn from_env() -> Result<SpinBudget, String> {
        Self::read().clone()
    }

    /// The budget every wait uses (allocates nothing once read).
    pub fn current() -> SpinBudget {
        match Self::read() {
            Ok(b) => *b,
            Err(_) => SpinBudget(Duration::from_micros(DEFAULT_SPIN_US)),
        }
    }

    fn read() -> &'static Result<SpinBudget, String> {
        static READ: OnceLock<Result<SpinBudget, String>> = OnceLock::new();
        READ.get_or_init(|| SpinBudget::parse(std::env::var(SPIN_ENV).ok().as_deref()))
    }
}

/// What a wait asks of the fences it waits on.
pub trait FenceStatus {
    type Error;
    /// Whether every awaited fence has signalled (`vkGetFenceStatus`);
    /// never blocks.
    fn signalled(&mut self) -> Result<bool, Self::Error>;
    /// Block until every awaited fence has signalled, or fail (`vkWaitForFences`
    /// with its timeout).
    fn block(&mut self) -> Result<(), Self::Error>;
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// Seen signalled by the `polls`-th poll, without blocking.
    Polled { polls: u32 },
    /// Blocked after `polls` polls (0: the budget is zero).
    Blocked { polls: u32 },
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
        assert_eq!(SpinBudget::parse(None), Ok(us(DEFAULT_SPIN_US)));
        assert_eq!(SpinBudget::parse(Some("")), Ok(us(DEFAULT_SPIN_US)));
        assert_eq!(SpinBudget::parse(Some("0")), Ok(us(0)));
        assert_eq!(SpinBudget::parse(Some(" 200 ")), Ok(us(200)));
        assert_eq!(SpinBudget::parse(Some("1000000")), Ok(us(MAX_SPIN_US)));
        for bad in ["-1", "2.5", "50us", "1000001"] {
            let e = SpinBudget::parse(Some(bad)).unwrap_err();
            assert!(e.starts_with("SEAM_VULKAN_SPIN_US="), "{bad}: {e}");
        }
    }
}
