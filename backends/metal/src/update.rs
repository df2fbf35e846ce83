//! The bookkeeping of a native graph update (C13), in plain Rust so it is
//! unit-tested off Apple: which indirect command buffer (ICB) command each
//! captured launch was encoded at, which commands an update re-encodes,
//! which in-flight submissions must complete before the ICB is touched, and
//! the set of resources the ICB holds after a rebind.

use seam::ErrorKind;

/// Per captured launch (in capture order), the index of the ICB command it
/// was encoded at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandMap {
    at: Vec<usize>,
}

impl CommandMap {
    /// `launches` launches encoded as commands 0.. in capture order (what
    /// `Device::new_icb` does).
    pub fn sequential(launches: usize) -> CommandMap {
        CommandMap {
            at: (0..launches).collect(),
        }
    }

    pub fn launches(&self) -> usize {
        self.at.len()
    }

    /// The ICB command launch `launch` was encoded at.
    pub fn command(&self, launch: usize) -> Option<usize> {
        self.at.get(launch).copied()
    }

    /// The commands an update of `launches` (launch indices, in the order
    /// of the changes) re-encodes: (position in the changes, command), one
    /// per command, the last change of a launch winning, in command order.
    /// Every index is checked before any is returned, so a bad one changes
    /// nothing.
    pub fn plan(&self, launches: &[usize]) -> Result<Vec<(usize, usize)>, ErrorKind> {
        let mut plan: Vec<(usize, usize)> = Vec::with_capacity(launches.len());
        for (change, &launch) in launches.iter().enumerate() {
            let command = self.command(launch).ok_or(ErrorKind::NoSuchLaunch {
                index: launch,
                launches: self.launches(),
            })?;
            match plan.iter_mut().find(|(_, c)| *c == command) {
                Some(entry) => entry.0 = change,
                None => plan.push((change, command)),
            }
        }
        plan.sort_by_key(|&(_, command)| command);
        Ok(plan)
    }
}

/// How many of the oldest in-flight submissions to wait for (in order) so
/// that none still holds the graph: up to and including the newest that
/// does. `holds` is, oldest first, whether each holds it.
pub fn waits_before_update(holds: impl IntoIterator<Item = bool>) -> usize {
    holds
        .into_iter()
        .enumerate()
        .filter(|&(_, h)| h)
        .last()
        .map_or(0, |(i, _)| i + 1)
}

/// Every item of `lists`, once each (`same` says when two are one), in
/// first-seen order: the buffers an ICB declares with `useResource`, from
/// what each of its commands binds.
pub fn union<'a, T: Clone + 'a>(
    lists: impl IntoIterator<Item = &'a [T]>,
    same: impl Fn(&T, &T) -> bool,
) -> Vec<T> {
    let mut all: Vec<T> = Vec::new();
    for item in lists.into_iter().flatten() {
        if !all.iter().any(|x| same(x, item)) {
            all.push(item.clone());
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn launches_map_to_commands_in_capture_order() {
        let map = CommandMap::sequential(3);
        assert_eq!(map.launches(), 3);
        assert_eq!(
            (0..4).map(|l| map.command(l)).collect::<Vec<_>>(),
            [Some(0), Some(1), Some(2), None]
        );
        assert_eq!(CommandMap::sequential(0).command(0), None);
    }

    #[test]
    fn a_plan_reencodes_each_changed_command_once_last_change_wins() {
        let map = CommandMap::sequential(5);
        assert_eq!(map.plan(&[]).unwrap(), []);
        assert_eq!(map.plan(&[3]).unwrap(), [(0, 3)]);
        // Command order; launch 1 changed twice: the second change (2) wins.
        assert_eq!(map.plan(&[4, 1, 1, 0]).unwrap(), [(3, 0), (2, 1), (0, 4)]);
    }

    #[test]
    fn a_plan_with_an_unknown_launch_is_refused_whole() {
        let map = CommandMap::sequential(2);
        match map.plan(&[0, 2, 1]) {
            Err(ErrorKind::NoSuchLaunch { index, launches }) => {
                assert_eq!((index, launches), (2, 2))
            }
            other => panic!("expected NoSuchLaunch, got {other:?}"),
        }
    }

    #[test]
    fn waits_cover_the_newest_submission_holding_the_graph() {
        assert_eq!(waits_before_update([]), 0);
        assert_eq!(waits_before_update([false, false]), 0);
        assert_eq!(waits_before_update([true, false, false]), 1);
        // A later submission holds it: the ones before are waited for too
        // (the queue is waited for in order).
        assert_eq!(waits_before_update([false, true, false, true, false]), 4);
    }

    #[test]
    fn the_held_set_follows_a_rebind() {
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        let same = |x: &Arc<i32>, y: &Arc<i32>| Arc::ptr_eq(x, y);
        let values = |held: &[Arc<i32>]| held.iter().map(|x| **x).collect::<Vec<_>>();
        // Per command, what it binds; `held` is what the ICB holds.
        let mut commands = [vec![a.clone(), b.clone()], vec![b.clone(), a.clone()]];
        let mut held = union(commands.iter().map(Vec::as_slice), same);
        assert_eq!(values(&held), [1, 2]);
        // Command 1 rebound from (b, a) to (c, a): b is still bound by 0.
        commands[1] = vec![c.clone(), a.clone()];
        held = union(commands.iter().map(Vec::as_slice), same);
        assert_eq!(values(&held), [1, 2, 3]);
        // Command 0 rebound too: nothing binds b any more, so it is let go.
        commands[0] = vec![a.clone(), c.clone()];
        held = union(commands.iter().map(Vec::as_slice), same);
        assert_eq!(values(&held), [1, 3]);
        assert_eq!(Arc::strong_count(&b), 1);
    }
}
