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

    /// The newest version of `id` whose commit was acknowledged (1, the seed, when none).
    pub fn last_committed(&self, id: u64) -> u64 {
        let s = self.shard(id).lock().unwrap_or_else(|p| p.into_inner());
        s.get(&id)
            .and_then(|v| v.iter().rposition(|&t| t != 0))
            .map_or(1, |i| i as u64 + 2)
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

/// Per key, what is in flight that a write's probe must wait for: the fills (a load and its
/// write-back; a fill that read the row before a commit may write the old version back after
/// the invalidation) by token, and the writes. Touched only by misses and writes of a run
/// with writes, never by a hit.
#[derive(Default)]
struct InFlightKey {
    fills: Vec<u64>,
    writes: u32,
}

/// The in-flight fills and writes of every key, sharded like the commit log.
pub struct InFlight {
    next_token: AtomicU64,
    shards: Box<[Mutex<HashMap<u64, InFlightKey>>]>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            next_token: AtomicU64::new(1),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

/// A fill of one key in flight; dropping it (however the fill ends) takes it off.
pub struct FillGuard<'a> {
    log: &'a InFlight,
    id: u64,
    token: u64,
}

impl Drop for FillGuard<'_> {
    fn drop(&mut self) {
        self.log
            .with(self.id, |k| k.fills.retain(|&t| t != self.token));
    }
}

impl InFlight {
    fn with<R>(&self, id: u64, f: impl FnOnce(&mut InFlightKey) -> R) -> R {
        let mut s = self.shards[(id as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let k = s.entry(id).or_default();
        let r = f(k);
        if k.fills.is_empty() && k.writes == 0 {
            s.remove(&id);
        }
        r
    }

    /// A fill of `id` begins: its load may read the row before a commit of it.
    pub fn fill(&self, id: u64) -> FillGuard<'_> {
        let token = self.next_token.fetch_add(1, Relaxed);
        self.with(id, |k| k.fills.push(token));
        FillGuard {
            log: self,
            id,
            token,
        }
    }

    /// A write of `id` begins (`true`) or ends (`false`).
    pub fn write(&self, id: u64, begins: bool) {
        self.with(id, |k| {
            if begins {
                k.writes += 1;
            } else {
                k.writes = k.writes.saturating_sub(1);
            }
        });
    }

    /// The fills of `id` in flight now.
    pub fn fills_of(&self, id: u64) -> Vec<u64> {
        self.with(id, |k| k.fills.clone())
    }

    /// Whether none of `fills` is still in flight and no write of `id` but the caller's
    /// (`own_writes`) is.
    pub fn settled(&self, id: u64, fills: &[u64], own_writes: u32) -> bool {
        self.with(id, |k| {
            k.writes <= own_writes && !k.fills.iter().any(|t| fills.contains(t))
        })
    }
}

/// A write its probe found left wrong: when, and until when the entry would live.
struct Wrong {
    id: u64,
    /// The version the probe found cached.
    cached: u64,
    /// Stamp of the probe (as the commit log's).
    at: u64,
    /// Stamp at which Redis drops the entry.
    expires: u64,
}

/// The per-write race figures: each write is probed once its own invalidation is done, every
/// fill of its key that was in flight at its commit has written back, and no other write of
/// the key is in flight; a probe that finds an older version cached than the last committed
/// one counts the write as left wrong.
#[derive(Default)]
pub struct Probes {
    pub in_flight: InFlight,
    /// Writes probed.
    pub probed: AtomicU64,
    /// Of those, writes whose probe found the cache holding an older version.
    pub left_wrong: AtomicU64,
    /// Writes not probed: their key never settled within the probe's bound, or the probe's
    /// GET failed.
    pub unprobed: AtomicU64,
    /// Probes started and not finished (the driver waits for them).
    pub pending: AtomicU64,
    wrong: Mutex<Vec<Wrong>>,
}

impl Probes {
    /// Record a probe's reading of `id`: `cached` the version found (None: no entry, a
    /// negative entry or another writer's bytes), `committed` the last version acknowledged
    /// when the key settled, read *before* the GET (a write that commits while the GET is on
    /// its way has not had its invalidation yet, and is probed itself), `expires_in_ms` the
    /// entry's remaining life.
    pub fn record(
        &self,
        versions: &Versions,
        id: u64,
        committed: u64,
        cached: Option<u64>,
        expires_in_ms: u64,
        at: Instant,
    ) {
        self.probed.fetch_add(1, Relaxed);
        let Some(v) = cached.filter(|&v| v < committed) else {
            return;
        };
        self.left_wrong.fetch_add(1, Relaxed);
        let at = versions.stamp(at);
        self.wrong
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Wrong {
                id,
                cached: v,
                at,
                expires: at + expires_in_ms * 1000,
            });
    }

    /// Key-milliseconds the probes saw wrong: from each wrong probe until the key's next
    /// commit after the version found, its entry's expiry, or `end`, whichever came first.
    pub fn divergent_ms(&self, versions: &Versions, end: Instant) -> u64 {
        let end = versions.stamp(end);
        let wrong = self.wrong.lock().unwrap_or_else(|p| p.into_inner());
        wrong
            .iter()
            .map(|w| {
                // The next commit after the probe: a newer version than the one found that
                // was acknowledged after the probe (one acknowledged before it is what made
                // the probe call the write wrong).
                let next = versions
                    .next_commit_after_stamp(w.id, w.cached, w.at)
                    .unwrap_or(u64::MAX);
                next.min(w.expires).min(end).saturating_sub(w.at) / 1000
            })
            .sum()
    }
}

impl Versions {
    /// The first acknowledgement of a version of `id` newer than `version` stamped after
    /// `after`.
    fn next_commit_after_stamp(&self, id: u64, version: u64, after: u64) -> Option<u64> {
        let s = self.shard(id).lock().unwrap_or_else(|p| p.into_inner());
        let v = s.get(&id)?;
        let from = (version.max(1) - 1) as usize;
        v.get(from..)?
            .iter()
            .copied()
            .filter(|&t| t != 0 && t > after)
            .min()
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
    /// Each write read back once its key settled.
    pub probes: Probes,
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
            probes: Probes::default(),
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

    #[test]
    fn a_probe_counts_a_write_wrong_only_for_an_older_cached_version() {
        let v = Versions::default();
        let p = Probes::default();
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        v.commit(3, 2, ms(10));
        assert_eq!(v.last_committed(3), 2);
        assert_eq!(v.last_committed(4), 1, "never written: the seed");
        p.record(&v, 3, 2, Some(2), 1000, ms(12));
        p.record(&v, 3, 2, None, 0, ms(12));
        assert_eq!(p.left_wrong.load(Relaxed), 0);
        p.record(&v, 3, 2, Some(1), 1000, ms(20));
        assert_eq!(p.probed.load(Relaxed), 3);
        assert_eq!(p.left_wrong.load(Relaxed), 1);
        // Wrong from 20 ms until version 3 is committed at 70 ms: 50 key-ms.
        v.commit(3, 3, ms(70));
        assert_eq!(p.divergent_ms(&v, ms(1000)), 50);
        // Or until the entry expires, or the window ends.
        let q = Probes::default();
        q.record(&v, 3, 3, Some(1), 30, ms(20));
        assert_eq!(q.divergent_ms(&v, ms(1000)), 30);
        assert_eq!(q.divergent_ms(&v, ms(35)), 15);
    }

    #[test]
    fn a_key_settles_once_the_fills_in_flight_at_the_commit_end() {
        let f = InFlight::default();
        let before = f.fill(9);
        let at_commit = f.fills_of(9);
        f.write(9, true);
        let after = f.fill(9);
        assert!(
            !f.settled(9, &at_commit, 1),
            "a fill from before the commit"
        );
        drop(before);
        assert!(
            f.settled(9, &at_commit, 1),
            "a later fill reads the new row"
        );
        f.write(9, true);
        assert!(!f.settled(9, &at_commit, 1), "another write of the key");
        f.write(9, false);
        f.write(9, false);
        drop(after);
        assert!(
            f.shards.iter().all(|s| s.lock().unwrap().is_empty()),
            "nothing left"
        );
    }
}
