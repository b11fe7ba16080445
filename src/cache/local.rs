//! The entries of a library that keeps them in its own process (Caffeine's `LoadingCache`):
//! each app instance holds whole entries in its memory, with their expiry, and shares none
//! with another instance or with Redis. A preset declared so (`EntryStore::Process`) reads
//! and writes here instead of Redis, so its loads per expiry are one per instance, as the
//! library's are, and neither a drop of the run's Redis keys nor a Redis outage reaches it.
//!
//! Shards of a map behind short mutexes, never held across an await: the request path locks
//! one shard for a lookup or an insert and copies the entry out, as a Redis GET returns one.

use std::collections::HashMap;
use std::sync::Mutex;

/// Shards: the instance's request tasks run on every worker thread; 64 keep two of them
/// from meeting on one lock at the rates a run reaches.
const SHARDS: usize = 64;

/// key → (encoded entry, hard expiry in ms since the epoch).
type Shard = HashMap<u64, (Vec<u8>, u64)>;

/// One instance's entries.
pub struct Entries {
    shards: Box<[Mutex<Shard>]>,
}

impl Default for Entries {
    fn default() -> Self {
        Entries {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

/// The wall clock in ms since the epoch, as entries' expiries are kept.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Entries {
    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, Shard> {
        // A poisoned shard only means a panic elsewhere mid-insert; its map is still whole.
        self.shards[(id as usize) % SHARDS]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The entry of `id` at `now_ms`, copied out; an expired one is removed, as the library
    /// evicts an entry past `expireAfterWrite`.
    pub fn get(&self, id: u64, now_ms: u64) -> Option<Vec<u8>> {
        let mut s = self.shard(id);
        match s.get(&id) {
            Some((v, until)) if *until > now_ms => Some(v.clone()),
            Some(_) => {
                s.remove(&id);
                None
            }
            None => None,
        }
    }

    /// Keep `value` for `px_ms` from `now_ms`.
    pub fn set(&self, id: u64, value: &[u8], px_ms: u64, now_ms: u64) {
        let until = now_ms.saturating_add(px_ms.max(1));
        let mut s = self.shard(id);
        match s.get_mut(&id) {
            // The buffer is reused: a refresh of a key rewrites an entry of the same size.
            Some((v, u)) => {
                v.clear();
                v.extend_from_slice(value);
                *u = until;
            }
            None => {
                s.insert(id, (value.to_vec(), until));
            }
        }
    }

    pub fn delete(&self, id: u64) {
        self.shard(id).remove(&id);
    }

    /// How many entries are held, expired ones not yet read included.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |m| m.len()))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_until_its_expiry_and_not_after() {
        let e = Entries::default();
        e.set(7, b"abc", 100, 1_000);
        assert_eq!(e.get(7, 1_099).as_deref(), Some(&b"abc"[..]));
        assert_eq!(e.get(7, 1_100), None);
        // Read once expired, it is gone.
        assert!(e.is_empty());
    }

    #[test]
    fn a_rewrite_replaces_the_value_and_the_expiry_and_a_delete_removes_it() {
        let e = Entries::default();
        e.set(1, b"old", 10, 0);
        e.set(1, b"newer", 50, 20);
        assert_eq!(e.get(1, 60).as_deref(), Some(&b"newer"[..]));
        e.delete(1);
        assert_eq!(e.get(1, 61), None);
        assert_eq!(e.len(), 0);
    }
}
