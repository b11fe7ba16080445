//! The distributed mutex's rules: a Redis lock taken with `SET NX PX` and a random owner
//! token, released by a Lua compare-and-delete so a holder whose lease ran out can never
//! delete the lock someone else now holds; waiters poll with jitter up to a bounded wait.

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

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Lease of the lock (PX), ms.
    pub ttl_ms: u64,
    /// Mean pause between a waiter's polls.
    pub poll: Duration,
    /// How long a waiter waits before applying the policy.
    pub wait: Duration,
    pub on_timeout: LockTimeoutPolicy,
    /// After a poll that found nothing: take over, or only re-read.
    pub waiters: LockWaiters,
    /// A load past the wait is written back.
    pub fallback_writeback: bool,
}

impl Settings {
    /// The next poll pause: `poll` ±50%, so waiters that started together do not poll in step.
    /// `u` is uniform in [0, 1).
    pub fn poll_pause(&self, u: f64) -> Duration {
        self.poll.mul_f64(0.5 + u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_pause_stays_within_half_either_side() {
        let s = Settings {
            ttl_ms: 2000,
            poll: Duration::from_millis(50),
            wait: Duration::from_secs(2),
            on_timeout: LockTimeoutPolicy::Load,
            waiters: LockWaiters::Takeover,
            fallback_writeback: true,
        };
        assert_eq!(s.poll_pause(0.0), Duration::from_millis(25));
        assert_eq!(s.poll_pause(0.5), Duration::from_millis(50));
        assert!(s.poll_pause(0.999) < Duration::from_millis(75));
    }
}
