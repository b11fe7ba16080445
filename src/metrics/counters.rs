//! Counts of rare events (Redis errors, lock contention, early recomputes, …) shared by every
//! instance as relaxed atomics, and the servers' health as the fault schedule sets it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use serde::Serialize;

/// Declares the run's counters once: each becomes an atomic of [`Counters`] (bumped on the
/// hot path with one relaxed add) and a field of [`CountersSnapshot`], with the snapshot,
/// the difference of two snapshots, their sum and the serialization generated from the one
/// list. Adding a counter is a line here and the place that bumps it (and, to report it, the
/// result field it fills).
macro_rules! counters {
    ($($(#[$doc:meta])* $f:ident,)*) => {
        /// Counts of rare events, shared by every instance, and the servers' health.
        #[derive(Debug, Default)]
        pub struct Counters {
            $($(#[$doc])* pub $f: AtomicU64,)*
            /// Whether Redis is up (not killed, not paused), as the fault schedule knows it
            /// (not a counter: not in snapshots). A success is a request's Redis command.
            pub redis_health: ServerHealth,
            /// Whether Postgres is up, as the fault schedule knows it. A success is a load that
            /// got its answer.
            pub pg_health: ServerHealth,
        }

        /// A copy of [`Counters`] at one moment; the difference of two is what happened
        /// between, the sum of two what two sets of instances counted.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
        pub struct CountersSnapshot {
            $($(#[$doc])* pub $f: u64,)*
        }

        impl Counters {
            pub fn snapshot(&self) -> CountersSnapshot {
                CountersSnapshot { $($f: self.$f.load(Relaxed),)* }
            }
        }

        impl std::ops::Sub for CountersSnapshot {
            type Output = CountersSnapshot;
            fn sub(self, o: Self) -> Self {
                CountersSnapshot { $($f: self.$f.saturating_sub(o.$f),)* }
            }
        }

        impl std::ops::Add for CountersSnapshot {
            type Output = CountersSnapshot;
            fn add(self, o: Self) -> Self {
                CountersSnapshot { $($f: self.$f + o.$f,)* }
            }
        }

        impl CountersSnapshot {
            /// Every counter by name, in declaration order.
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($f), self.$f),)*]
            }
        }
    };
}

counters! {
    redis_errors,
    redis_timeouts,
    /// Redis commands refused with OOM (a write at `maxmemory` under noeviction): also in
    /// `redis_errors`.
    redis_oom,
    /// Values served from Redis that were not their key's (`--check-values`): a reply handed
    /// to the wrong request.
    value_mismatches,
    background_refreshes,
    refreshes_skipped,
    early_recomputes,
    /// Sum over early recomputes of how long before the hard expiry they started, µs.
    early_lead_us,
    lock_acquired,
    lock_contended,
    lock_timeouts,
    lock_lost,
    lock_unavailable,
    /// Leases extended by their holder while it loaded (`--lock-extend`).
    lock_extended,
    /// Loads past `--lock-wait` answered and not cached (`--fallback-writeback off`).
    lock_unkept,
    negative_hits,
    cold_misses,
    /// Cache writes whose TTL (soft expiry under swr) runs out before the window closes.
    expiring_writes,
    /// Loads refused because `--db-limit` loads of the instance were in flight.
    limit_refusals,
    /// Loads refused because the instance's breaker was open.
    breaker_refusals,
    /// Loads refused because `--db-rate` had no token left.
    rate_refusals,
    /// Cache SETs refused because they would have stored an older version (versioned) or
    /// presented a lease token no longer the key's (deleted by a write, or run out).
    stale_sets_refused,
    /// Invalidations after a committed write that failed or came back late (Redis down or
    /// slow): the cache may keep the old version until its TTL.
    invalidation_failures,
    /// In-process tier (`--l1`): entries evicted to make room (least recently used first).
    l1_evictions,
    /// In-process tier: invalidations received, one per key (a pub/sub message, a tracking
    /// push), whether or not the instance held the key.
    l1_invalidations_received,
    /// In-process tier: flushes of a whole instance's tier (its invalidation connection
    /// dropped under `--l1-invalidate tracking`).
    l1_flushes,
    /// In-process tier: values read while an invalidation of their key (or a flush) arrived,
    /// and so not cached in the tier.
    l1_spoiled,
    /// In-process tier: measured requests served from it with a version older than one
    /// committed before they started (also in the run's stale reads).
    l1_stale_reads,
    /// Requests served a kept value past its expiry because their load failed (`--fail-safe`),
    /// the throttled ones included.
    fail_safe,
    /// Of `fail_safe`, requests served it without a load because the key was throttled.
    fail_safe_throttled,
    /// Requests answered with the kept value at `--soft-timeout` while their load went on.
    soft_timeouts,
    /// Loads that went on behind a soft timeout and wrote their value back.
    soft_timeout_write_backs,
    /// Background refreshes started by `--eager-refresh`.
    eager_refreshes,
    /// Race-TTL push-backs written (`rails-race-ttl`).
    race_pushes,
}

/// A server's state as the fault schedule ([`crate::fault::chaos`]) sets it, for the timeline, and
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

pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_declaration_gives_the_snapshot_its_difference_and_sum() {
        let c = Counters::default();
        bump(&c.eager_refreshes);
        let a = c.snapshot();
        bump(&c.eager_refreshes);
        bump(&c.redis_errors);
        let b = c.snapshot();
        let d = b - a;
        assert_eq!((d.eager_refreshes, d.redis_errors, d.lock_lost), (1, 1, 0));
        assert_eq!((a + b).eager_refreshes, 3);
        let named = b.named();
        assert_eq!(named[0], ("redis_errors", 1));
        assert!(named.contains(&("eager_refreshes", 2)));
        let json = serde_json::to_value(b).unwrap();
        assert_eq!(json.as_object().unwrap().len(), named.len());
    }

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
