//! Counts of rare events (Redis errors, lock contention, early recomputes, …) shared by every
//! instance as relaxed atomics, and the servers' health as the fault schedule sets it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use serde::Serialize;

/// Counts of rare events, shared by every instance.
#[derive(Debug, Default)]
pub struct Counters {
    pub redis_errors: AtomicU64,
    pub redis_timeouts: AtomicU64,
    /// Redis commands refused with OOM (a write at `maxmemory` under noeviction): also in
    /// `redis_errors`.
    pub redis_oom: AtomicU64,
    pub background_refreshes: AtomicU64,
    pub refreshes_skipped: AtomicU64,
    pub early_recomputes: AtomicU64,
    /// Sum over early recomputes of how long before the hard expiry they started, µs.
    pub early_lead_us: AtomicU64,
    pub lock_acquired: AtomicU64,
    pub lock_contended: AtomicU64,
    pub lock_timeouts: AtomicU64,
    pub lock_lost: AtomicU64,
    pub lock_unavailable: AtomicU64,
    pub negative_hits: AtomicU64,
    pub cold_misses: AtomicU64,
    /// Cache writes whose TTL (soft expiry under swr) runs out before the window closes.
    pub expiring_writes: AtomicU64,
    /// Loads refused because `--db-limit` loads of the instance were in flight.
    pub limit_refusals: AtomicU64,
    /// Loads refused because the instance's breaker was open.
    pub breaker_refusals: AtomicU64,
    /// Loads refused because `--db-rate` had no token left.
    pub rate_refusals: AtomicU64,
    /// Cache SETs refused because they would have stored an older version (versioned) or
    /// presented a lease token no longer the key's (deleted by a write, or run out).
    pub stale_sets_refused: AtomicU64,
    /// Invalidations after a committed write that failed or came back late (Redis down or
    /// slow): the cache may keep the old version until its TTL.
    pub invalidation_failures: AtomicU64,
    /// In-process tier (`--l1`): entries evicted to make room (least recently used first).
    pub l1_evictions: AtomicU64,
    /// In-process tier: invalidations received, one per key (a pub/sub message, a tracking
    /// push), whether or not the instance held the key.
    pub l1_invalidations_received: AtomicU64,
    /// In-process tier: flushes of a whole instance's tier (its invalidation connection
    /// dropped under `--l1-invalidate tracking`).
    pub l1_flushes: AtomicU64,
    /// In-process tier: values read while an invalidation of their key (or a flush) arrived,
    /// and so not cached in the tier.
    pub l1_spoiled: AtomicU64,
    /// In-process tier: measured requests served from it with a version older than one
    /// committed before they started (also in the run's stale reads).
    pub l1_stale_reads: AtomicU64,
    /// Requests served a kept value past its expiry because their load failed (`--fail-safe`),
    /// the throttled ones included.
    pub fail_safe: AtomicU64,
    /// Of `fail_safe`, requests served it without a load because the key was throttled.
    pub fail_safe_throttled: AtomicU64,
    /// Requests answered with the kept value at `--soft-timeout` while their load went on.
    pub soft_timeouts: AtomicU64,
    /// Loads that went on behind a soft timeout and wrote their value back.
    pub soft_timeout_write_backs: AtomicU64,
    /// Background refreshes started by `--eager-refresh`.
    pub eager_refreshes: AtomicU64,
    /// Race-TTL push-backs written (`rails-race-ttl`).
    pub race_pushes: AtomicU64,
    /// Whether Redis is up (not killed, not paused), as the fault schedule knows it (not a
    /// counter: not in snapshots). A success is a request's Redis command.
    pub redis_health: ServerHealth,
    /// Whether Postgres is up, as the fault schedule knows it. A success is a load that got
    /// its answer.
    pub pg_health: ServerHealth,
}

/// A server's state as the fault schedule ([`crate::chaos`]) sets it, for the timeline, and
/// the moment requests first got through to it after a restart. The request path pays one
/// relaxed load per success; the lock is taken once per restart.
#[derive(Debug, Default)]
pub struct ServerHealth {
    down: AtomicBool,
    /// Down at some moment since the timeline last asked.
    went_down: AtomicBool,
    armed: AtomicBool,
    first_ok: Mutex<Option<Instant>>,
}

impl ServerHealth {
    /// The server was just killed (or paused).
    pub fn set_down(&self) {
        self.down.store(true, Relaxed);
        self.went_down.store(true, Relaxed);
    }

    /// The server answers again; the next success of a request is recorded.
    pub fn set_up(&self) {
        *self.first_ok.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.armed.store(true, Relaxed);
        self.down.store(false, Relaxed);
    }

    /// For one timeline bucket: true when the server was up during the whole bucket since the last call.
    pub fn take_bucket_up(&self) -> bool {
        let down_now = self.down.load(Relaxed);
        let was_down = self.went_down.swap(down_now, Relaxed);
        !(was_down || down_now)
    }

    /// A request got through to the server.
    #[inline]
    pub fn note_ok(&self) {
        if self.armed.load(Relaxed) && self.armed.swap(false, Relaxed) {
            *self.first_ok.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
    }

    /// When the first success came after the last [`ServerHealth::set_up`], if one has.
    pub fn first_ok(&self) -> Option<Instant> {
        *self.first_ok.lock().unwrap_or_else(|p| p.into_inner())
    }
}

macro_rules! counters_snapshot {
    ($($f:ident),* $(,)?) => {
        /// A copy of [`Counters`] at one moment; the difference of two is what happened between.
        #[derive(Debug, Default, Clone, Copy, Serialize)]
        pub struct CountersSnapshot { $(pub $f: u64,)* }
        impl Counters {
            pub fn snapshot(&self) -> CountersSnapshot {
                CountersSnapshot { $($f: self.$f.load(Relaxed),)* }
            }
        }
        impl std::ops::Sub for CountersSnapshot {
            type Output = CountersSnapshot;
            fn sub(self, o: Self) -> Self { CountersSnapshot { $($f: self.$f.saturating_sub(o.$f),)* } }
        }
    };
}
counters_snapshot!(
    redis_errors,
    redis_timeouts,
    redis_oom,
    background_refreshes,
    refreshes_skipped,
    early_recomputes,
    early_lead_us,
    lock_acquired,
    lock_contended,
    lock_timeouts,
    lock_lost,
    lock_unavailable,
    negative_hits,
    cold_misses,
    expiring_writes,
    limit_refusals,
    breaker_refusals,
    rate_refusals,
    stale_sets_refused,
    invalidation_failures,
    l1_evictions,
    l1_invalidations_received,
    l1_flushes,
    l1_spoiled,
    l1_stale_reads,
    fail_safe,
    fail_safe_throttled,
    soft_timeouts,
    soft_timeout_write_backs,
    eager_refreshes,
    race_pushes,
);

pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_health_marks_every_bucket_that_saw_an_outage() {
        let h = ServerHealth::default();
        assert!(h.take_bucket_up());
        h.set_down();
        assert!(!h.take_bucket_up(), "the bucket in which Redis died");
        assert!(!h.take_bucket_up(), "a bucket spent down");
        h.note_ok();
        assert_eq!(h.first_ok(), None, "not armed while down");
        h.set_up();
        assert!(!h.take_bucket_up(), "the bucket in which Redis came back");
        assert!(h.take_bucket_up());
        h.note_ok();
        let first = h.first_ok().expect("recorded");
        h.note_ok();
        assert_eq!(h.first_ok(), Some(first), "only the first command counts");
    }
}
