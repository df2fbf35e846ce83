//! A process-wide map filled once per key: compiled images and loaded
//! modules, shared by every backend of a process.

use seam::ErrorKind;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, OnceLock};

/// Filled under its lock, so several devices opening at once still make
/// each value once; a poisoned lock still holds valid values.
pub struct OnceMap<K, V> {
    map: OnceLock<Mutex<HashMap<K, V>>>,
}

impl<K, V> OnceMap<K, V> {
    pub const fn new() -> Self {
        OnceMap {
            map: OnceLock::new(),
        }
    }
}

impl<K, V> Default for OnceMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash, V: Clone> OnceMap<K, V> {
    /// The value for `key`, made by `make` the first time it is asked for.
    /// A failed `make` stores nothing.
    pub fn get_or_try_insert(
        &self,
        key: K,
        make: impl FnOnce() -> Result<V, ErrorKind>,
    ) -> Result<V, ErrorKind> {
        let mut map = self
            .map
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(v) = map.get(&key) {
            return Ok(v.clone());
        }
        let v = make()?;
        map.insert(key, v.clone());
        Ok(v)
    }
}
