//! The distributed mutex's rules: a Redis lock taken with `SET NX PX` and a random owner
//! token, released by a Lua compare-and-delete so a holder whose lease ran out can never
//! delete the lock someone else now holds; waiters poll with jitter up to a bounded wait.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// What a waiter does when `--lock-wait` runs out under the mutex coordination.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LockTimeoutPolicy {
    /// Load from the database anyway (outcome `fallback`).
    Load,
    /// Give up (outcome `error`).
    Error,
    /// Serve the stale value if there is one (needs the swr freshness), else load.
    Stale,
    /// Answer "retry after D" (outcome `retry-after`): D is `--retry-after`, else the lock's
    /// remaining lease; a client with `--retries` waits D before its next attempt.
    RetryAfter,
}

impl std::fmt::Display for LockTimeoutPolicy {
    /// Its flag value, as `--help` and the settings table name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => Ok(()),
        }
    }
}

/// What a mutex waiter does after a poll that found no value.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    ValueEnum,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LockWaiters {
    /// Try to take the lock: a holder that died or whose lease ran out is replaced at once.
    #[default]
    Takeover,
    /// Only read the cache again (the references' waiters): a key whose holder is gone waits
    /// for `--lock-wait`.
    Reread,
}

/// Whether a load made past `--lock-wait` is written back to the cache.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Writeback {
    /// Written back, as the holder's would be.
    On,
    /// Answered with, not cached (the references): only the holder writes the key.
    Off,
}

/// Deletes KEYS[1] only if it still holds ARGV[1] (the caller's token); returns 1 if deleted.
pub const RELEASE_LUA: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
else
    return 0
end
"#;

/// Extends KEYS[1]'s expiry to ARGV[2] ms only if it still holds ARGV[1] (the holder's token);
/// returns 1 if extended.
pub const EXTEND_LUA: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
    return 0
end
"#;

/// The shortest lease `--lock-ttl auto` gives.
pub const AUTO_FLOOR_MS: u64 = 100;

/// The lock's settings as a scenario holds them, flattened into it under their flags' names
/// (`lock_ttl`, `lock_wait`, …), so a results file reads as it did before they were grouped.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LockSpec {
    /// The lock's lease, or auto (from the loads measured).
    pub lock_ttl: crate::values::LockTtl,
    /// `--lock-ttl auto`'s multiple of the load p99 (3 in results written before it existed).
    #[serde(default = "three")]
    pub lock_ttl_factor: f64,
    /// The holder extends its lease while it loads.
    #[serde(default)]
    pub lock_extend: bool,
    pub lock_poll: crate::values::Dur,
    pub lock_wait: crate::values::Dur,
    pub lock_timeout_policy: LockTimeoutPolicy,
    /// After a poll that found nothing: take the lock over, or only re-read.
    #[serde(default)]
    pub lock_waiters: LockWaiters,
    /// The hint of a retry-after answer (None: the lock's remaining lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<crate::values::Dur>,
    /// A load made past `--lock-wait` is written back (on in results written before it
    /// existed).
    #[serde(default = "yes")]
    pub fallback_writeback: bool,
}

fn three() -> f64 {
    3.0
}

fn yes() -> bool {
    true
}

impl LockSpec {
    /// How long a key may stay locked, in ms: the longer of the lease and the wait.
    pub fn hold_ms(&self) -> u64 {
        (self.lock_ttl.initial().0)
            .max(self.lock_wait.0)
            .as_millis() as u64
    }

    /// The run-time settings: leases in whole milliseconds, at least 1.
    pub fn settings(&self) -> Settings {
        Settings {
            ttl_ms: (self.lock_ttl.initial().0.as_millis() as u64).max(1),
            auto_factor: self.lock_ttl.is_auto().then_some(self.lock_ttl_factor),
            extend: self.lock_extend,
            poll: self.lock_poll.0,
            wait: self.lock_wait.0,
            on_timeout: self.lock_timeout_policy,
            waiters: self.lock_waiters,
            retry_after: self.retry_after.map(|d| d.0),
            fallback_writeback: self.fallback_writeback,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Lease of the lock (PX), ms; under `--lock-ttl auto`, until a load has completed.
    pub ttl_ms: u64,
    /// `--lock-ttl auto`: the lease is this many times the p99 of the loads so far.
    pub auto_factor: Option<f64>,
    /// The holder extends its lease every third of it while it loads.
    pub extend: bool,
    /// Mean pause between a waiter's polls.
    pub poll: Duration,
    /// How long a waiter waits before applying the policy.
    pub wait: Duration,
    pub on_timeout: LockTimeoutPolicy,
    /// After a poll that found nothing: take over, or only re-read.
    pub waiters: LockWaiters,
    /// `--retry-after`: the hint of a retry-after answer (None: the lock's remaining lease).
    pub retry_after: Option<Duration>,
    /// A load past the wait is written back.
    pub fallback_writeback: bool,
}

impl Settings {
    /// The lease to take now: fixed, or `--lock-ttl auto`'s from the loads measured so far.
    pub fn lease_ms(&self, times: &LoadTimes) -> u64 {
        self.auto_lease_ms(times).unwrap_or(self.ttl_ms)
    }

    /// `--lock-ttl auto`'s lease from the loads so far; None when not auto or none measured.
    pub fn auto_lease_ms(&self, times: &LoadTimes) -> Option<u64> {
        let (k, p99) = (self.auto_factor?, times.p99_us()?);
        Some(((p99 as f64 * k / 1000.0).ceil() as u64).max(AUTO_FLOOR_MS))
    }

    /// The next poll pause: `poll` ±50%, so waiters that started together do not poll in step.
    /// `u` is uniform in [0, 1).
    pub fn poll_pause(&self, u: f64) -> Duration {
        self.poll.mul_f64(0.5 + u)
    }
}

/// The run's load times, for `--lock-ttl auto`: a log histogram of atomic counters (four
/// buckets per doubling, so a quantile is known to within 19%, rounded up), cheap to record from
/// every load and to read at every lock.
pub struct LoadTimes {
    buckets: [AtomicU64; BUCKETS],
    /// The longest lease `--lock-ttl auto` sized from the loads, ms (0: none).
    pub lease_max_ms: AtomicU64,
}

const BUCKETS: usize = 96;

impl Default for LoadTimes {
    fn default() -> LoadTimes {
        LoadTimes {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            lease_max_ms: AtomicU64::new(0),
        }
    }
}

impl LoadTimes {
    fn bucket(us: u64) -> usize {
        ((((us + 1) as f64).log2() * 4.0) as usize).min(BUCKETS - 1)
    }

    /// The largest time that falls in bucket `i`, µs.
    fn upper_us(i: usize) -> u64 {
        (2f64.powf((i + 1) as f64 / 4.0) - 1.0).ceil() as u64
    }

    pub fn record(&self, took: Duration) {
        let us = took.as_micros().min(u128::from(u64::MAX)) as u64;
        self.buckets[Self::bucket(us)].fetch_add(1, Relaxed);
    }

    /// The p99 of the loads recorded (rounded up to its bucket's top); None before the first.
    pub fn p99_us(&self) -> Option<u64> {
        let counts: [u64; BUCKETS] = std::array::from_fn(|i| self.buckets[i].load(Relaxed));
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = (total as f64 * 0.99).ceil() as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Self::upper_us(i));
            }
        }
        Some(Self::upper_us(BUCKETS - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_pause_stays_within_half_either_side() {
        let s = Settings {
            ttl_ms: 2000,
            auto_factor: None,
            extend: false,
            poll: Duration::from_millis(50),
            wait: Duration::from_secs(2),
            on_timeout: LockTimeoutPolicy::Load,
            waiters: LockWaiters::Takeover,
            retry_after: None,
            fallback_writeback: true,
        };
        assert_eq!(s.poll_pause(0.0), Duration::from_millis(25));
        assert_eq!(s.poll_pause(0.5), Duration::from_millis(50));
        assert!(s.poll_pause(0.999) < Duration::from_millis(75));
    }

    #[test]
    fn an_auto_lease_is_k_times_the_load_p99_with_a_floor() {
        let mut s = Settings {
            ttl_ms: 2000,
            auto_factor: Some(3.0),
            extend: false,
            poll: Duration::from_millis(50),
            wait: Duration::from_secs(2),
            on_timeout: LockTimeoutPolicy::Load,
            waiters: LockWaiters::Takeover,
            retry_after: None,
            fallback_writeback: true,
        };
        let t = LoadTimes::default();
        assert_eq!(s.lease_ms(&t), 2000, "nothing measured: the starting lease");
        for _ in 0..99 {
            t.record(Duration::from_millis(50));
        }
        t.record(Duration::from_secs(1));
        let l = s.lease_ms(&t);
        assert!((150..=180).contains(&l), "3 × p99 (50 ms, within 19%): {l}");
        let fast = LoadTimes::default();
        fast.record(Duration::from_micros(200));
        assert_eq!(s.lease_ms(&fast), AUTO_FLOOR_MS);
        s.auto_factor = None;
        assert_eq!(s.lease_ms(&t), 2000, "a fixed lease ignores the loads");
    }
}
