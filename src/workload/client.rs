//! The simulated client: its own timeout and retries (what keeps a system down once the
//! trigger is gone), and how long an answer may take and still count as goodput.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::values::{Dur, Percent};

/// How the simulated client treats a request: it gives up at `timeout` (the work it started
/// goes on), and sends a request that ended in an error or a timeout again, up to `retries`
/// times, after an exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Client {
    /// `--request-timeout`: the client gives up after this long (null: it waits).
    pub timeout: Option<Dur>,
    /// `--retries`: attempts after the first.
    pub retries: u32,
    /// `--retry-backoff`: the wait before the first retry, doubled for each one after.
    pub backoff: Dur,
    /// `--retry-jitter`: each wait spread uniformly within ±this share.
    pub jitter: Percent,
}

impl Client {
    /// The wait before retry `n` (from 1), spread by `unit` in [0, 1).
    pub fn backoff_for(&self, n: u32, unit: f64) -> Duration {
        let base = self.backoff.0.as_secs_f64() * 2f64.powi(n.saturating_sub(1).min(30) as i32);
        let spread = 1.0 + self.jitter.0 * (2.0 * unit - 1.0);
        Duration::from_secs_f64((base * spread).max(0.0))
    }
}

/// How long an answer may take and still count as goodput when no request timeout is set.
pub const DEFAULT_GOODPUT_WITHIN: Duration = Duration::from_secs(1);

/// Goodput's deadline in a results file written before it existed.
pub fn default_goodput_within() -> Dur {
    Dur(DEFAULT_GOODPUT_WITHIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_jitter_spreads_it() {
        let c = Client {
            timeout: None,
            retries: 3,
            backoff: Dur(Duration::from_millis(100)),
            jitter: Percent(0.0),
        };
        assert_eq!(c.backoff_for(1, 0.3), Duration::from_millis(100));
        assert_eq!(c.backoff_for(3, 0.9), Duration::from_millis(400));
        let j = Client {
            jitter: Percent(0.5),
            ..c
        };
        assert_eq!(j.backoff_for(1, 0.0), Duration::from_millis(50));
        assert!(j.backoff_for(1, 0.999) < Duration::from_millis(150));
    }
}
