//! What consistency is measured against: every write goes through the tool, which records
//! each version it committed and when the commit was acknowledged. A read is stale when the
//! version it served is older than a version whose commit was acknowledged before the read
//! started; the staleness is how long the oldest such newer version had been committed. A
//! commit is stamped when its acknowledgement arrives, after the commit itself, so a read is
//! never called stale for a version it could not have seen.
//!
//! Nothing here is touched by a run without writes: the request path asks only when writes
//! are on.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use hdrhistogram::Histogram;

const SHARDS: usize = 16;

/// One shard of the commit log: key → acknowledgement stamps by version.
type Shard = Mutex<HashMap<u64, Vec<u64>>>;

/// The commits of every written key: per key, the acknowledgement time of each version the
/// tool committed (µs since `base`, plus one; 0 while a version's ack is not in yet).
/// Versions of a key are consecutive (every UPDATE adds one, and the seed is version 1), so a
/// key's commits are a vector indexed by version − 2.
pub struct Versions {
    base: Instant,
    shards: Box<[Shard]>,
}

impl Default for Versions {
    fn default() -> Self {
        Versions {
            base: Instant::now(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

impl Versions {
    fn shard(&self, id: u64) -> &Shard {
        &self.shards[(id as usize) % SHARDS]
    }

    fn stamp(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_micros() as u64 + 1
    }

    /// Record that `version` of `id` was committed, acknowledged at `at`.
    pub fn commit(&self, id: u64, version: u64, at: Instant) {
        if version < 2 {
            return;
        }
        let i = (version - 2) as usize;
        let stamp = self.stamp(at);
        let mut s = self.shard(id).lock().unwrap_or_else(|p| p.into_inner());
        let v = s.entry(id).or_default();
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        v[i] = stamp;
    }

    /// When a read of `id` that started at `began` served `served`: how long (µs) a newer
    /// version had been committed, or None when no newer version was committed before it
    /// started (the read was not stale). `served` 0 (no version: an error, a missing item) is
    /// never stale.
    pub fn staleness(&self, id: u64, served: u64, began: Instant) -> Option<u64> {
        if served == 0 {
            return None;
        }
        let began = self.stamp(began);
        let s = self.shard(id).lock().unwrap_or_else(|p| p.into_inner());
        let v = s.get(&id)?;
        // Versions newer than `served` start at index served − 1.
        let from = (served.max(1) - 1) as usize;
        v.get(from..)?
            .iter()
            .filter(|&&t| t != 0 && t < began)
            .min()
            .map(|&t| began - t)
    }

    /// Every key written so far.
    pub fn written(&self) -> Vec<u64> {
        let mut keys: Vec<u64> = self
            .shards
            .iter()
            .flat_map(|s| {
                s.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .keys()
                    .copied()
                    .collect::<Vec<_>>()
            })
            .collect();
        keys.sort_unstable();
        keys
    }
}

/// The writers' own figures: the run-wide counts, the latency of every write, and the
/// commit log reads are judged against.
pub struct Writes {
    pub versions: Versions,
    /// Writes committed (one UPDATE each, its own transaction).
    pub committed: AtomicU64,
    /// Writes whose UPDATE failed (no commit) or never got a connection.
    pub errors: AtomicU64,
    /// Writes started and not finished (the driver waits for them before it looks for
    /// divergent keys).
    pub in_flight: AtomicU64,
    /// Writes committed since the timeline last asked.
    pub interval_committed: AtomicU64,
    /// From a write's scheduled start to the end of its invalidation, µs.
    latency: Mutex<Histogram<u64>>,
}

impl Default for Writes {
    fn default() -> Self {
        Writes {
            versions: Versions::default(),
            committed: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            interval_committed: AtomicU64::new(0),
            latency: Mutex::new(super::histogram(3)),
        }
    }
}

impl Writes {
    /// A write ended (committed or not), `us` after it was due.
    pub fn record_latency(&self, us: u64) {
        self.latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .saturating_record(us.clamp(1, super::MAX_US));
    }

    pub fn latency(&self) -> Histogram<u64> {
        self.latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn note_committed(&self) {
        self.committed.fetch_add(1, Relaxed);
        self.interval_committed.fetch_add(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_read_is_stale_only_for_versions_acknowledged_before_it_started() {
        let v = Versions::default();
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        // Version 3's ack arrives before version 2's: both are recorded.
        v.commit(7, 3, ms(20));
        v.commit(7, 2, ms(10));
        assert_eq!(v.staleness(7, 1, ms(5)), None, "nothing newer yet");
        assert_eq!(v.staleness(7, 1, ms(15)), Some(5_000), "v2 for 5 ms");
        assert_eq!(v.staleness(7, 2, ms(15)), None, "v2 is the newest acked");
        assert_eq!(v.staleness(7, 2, ms(30)), Some(10_000), "v3 for 10 ms");
        assert_eq!(v.staleness(7, 3, ms(30)), None);
        assert_eq!(v.staleness(7, 1, ms(30)), Some(20_000), "the oldest newer");
        assert_eq!(v.staleness(8, 1, ms(30)), None, "a key never written");
        assert_eq!(v.staleness(7, 0, ms(30)), None, "no version served");
        assert_eq!(v.written(), vec![7]);
    }
}
