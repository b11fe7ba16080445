//! The shocks on the workload rather than on a server: a share of the cached entries removed
//! at once (drop-cache), loads made slower for a while (slow-db), the offered rate multiplied
//! for a while (spike: the open loop's schedule does it; this lane marks when). Each kind has
//! its own lane, so a spike may strike during a slow database.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::{Record, STAMPEDE_WINDOW, ms_since};
use crate::cache::Admin;
use crate::fault::{DropOrder, FaultKind, FaultSpec};
use crate::metrics::Gauges;
use crate::stats::{Purpose, derive_seed};

/// What a cache drop needs: the tool's own connection, and the key space it draws from.
#[derive(Clone)]
pub struct DropSide {
    pub admin: Admin,
    pub keys: u64,
    pub seed: u64,
    /// An app under test's cache: its keys under `CACHE_PREFIX` have the app's own names, so
    /// the drop removes all of them (SCAN + UNLINK) rather than the entries of chosen ids.
    pub app: bool,
}

impl DropSide {
    /// Remove what drop `nth` of `spec` asks for: how many keys went.
    async fn strike(&self, spec: &FaultSpec, nth: u64) -> anyhow::Result<u64> {
        if self.app {
            return self.admin.unlink_app_keys().await;
        }
        let order = spec.order.unwrap_or_default();
        let ids = drop_ids(self.keys, spec.drop_fraction(), order, self.seed, nth);
        self.admin.unlink_entries(&ids).await
    }
}

/// The entries a drop of `fraction` removes, in `order`: the hottest ids are the lowest
/// (id r is popularity rank r).
pub fn drop_ids(keys: u64, fraction: f64, order: DropOrder, seed: u64, nth: u64) -> Vec<u64> {
    let n = ((keys as f64 * fraction).round() as u64).clamp(1, keys.max(1));
    match order {
        DropOrder::Hottest => (1..=n).collect(),
        DropOrder::Random => {
            let mut all: Vec<u64> = (1..=keys).collect();
            let mut rng = SmallRng::seed_from_u64(derive_seed(seed, Purpose::Drops, nth));
            all.shuffle(&mut rng);
            all.truncate(n as usize);
            all
        }
    }
}

/// Strike the shocks of one lane in order; what each did.
pub(super) async fn lane(
    faults: Vec<FaultSpec>,
    side: Option<DropSide>,
    shared: Gauges,
    window: watch::Receiver<Option<Instant>>,
    duration: Duration,
    stop: CancellationToken,
) -> Vec<Record> {
    let mut records = Vec::new();
    let Some(clock) = Clock::open(&faults, window, duration, stop).await else {
        return records;
    };
    let (start, end) = (clock.start, clock.end);
    let loads = &shared.loads;
    let calls = || loads.calls.load(Relaxed);
    let redundant = || loads.redundant.load(Relaxed);
    let db_errors = || {
        loads.statement_errors.load(Relaxed)
            + loads.connect_errors.load(Relaxed)
            + loads.pool_timeouts.load(Relaxed)
    };
    for (nth, spec) in faults.iter().enumerate() {
        if !clock.sleep_until(clock.due(spec)).await {
            break;
        }
        let (calls0, errors0) = (calls(), db_errors());
        let struck = Instant::now();
        let mut r = Record {
            kind: spec.kind,
            injected: true,
            kill_ms: ms_since(struck, start),
            factor: matches!(spec.kind, FaultKind::SlowDb | FaultKind::Spike)
                .then(|| spec.shock_factor()),
            ..Record::default()
        };
        match spec.kind {
            FaultKind::DropCache => {
                match &side {
                    Some(d) => {
                        // Before and after the UNLINKs: a key missed while they run, or stored
                        // meanwhile and then removed, is lost to the drop either way.
                        loads.book.cache_lost();
                        match d.strike(spec, nth as u64).await {
                            Ok(n) => {
                                r.removed = Some(n);
                                loads.book.cache_lost();
                                if d.app && n == 0 {
                                    r.note = Some("the app had no key under CACHE_PREFIX in Redis: its cache is elsewhere (in its own memory?), which a drop-cache cannot reach".into());
                                } else if loads.book.is_per_process() {
                                    r.note = Some("the instances keep their entries in their own memory, as the preset's library does: a drop-cache removes Redis keys only and does not reach them".into());
                                }
                            }
                            Err(e) => {
                                r.injected = false;
                                r.note = Some(format!("not injected: {e:#}"));
                            }
                        }
                    }
                    None => {
                        r.injected = false;
                        r.note = Some("not injected: no connection to drop entries with".into());
                    }
                }
            }
            FaultKind::SlowDb => {
                loads.set_cost_factor(spec.shock_factor());
                let over = clock.sleep_until(struck + spec.down_for.0).await;
                loads.set_cost_factor(1.0);
                if !over {
                    r.note = Some("cut short: the run was interrupted".into());
                }
            }
            // The schedule multiplies the rate by itself; the lane only marks the span.
            _ => {
                if !clock.sleep_until(start + spec.ends_at()).await {
                    r.note = Some("cut short: the run was interrupted".into());
                }
            }
        }
        let over = Instant::now();
        r.restart_ms = Some(ms_since(over, start));
        r.db_calls_during = calls() - calls0;
        r.db_errors_during = db_errors() - errors0;
        // The stampede after the shock: DB calls in the first second after it ends (cut at
        // the lane's next shock or the end of the window).
        let next = clock.next(&faults, nth).min(end);
        let until = (over + STAMPEDE_WINDOW).min(next).max(over);
        let begun = || loads.begun.load(Relaxed);
        let (c0, d0, b0) = (calls(), redundant(), begun());
        clock.sleep_until(until).await;
        r.loads_after = begun() - b0;
        r.recovery_stampede = calls() - c0;
        r.recovery_redundant = redundant() - d0;
        r.recovery_window_ms = ms_since(Instant::now().min(until), over);
        records.push(r);
    }
    // A shock cut short by Ctrl-C must not leave loads slow for a later run of the session.
    loads.set_cost_factor(1.0);
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drop_takes_the_hottest_or_a_seeded_random_share() {
        assert_eq!(drop_ids(10, 0.3, DropOrder::Hottest, 1, 0), vec![1, 2, 3]);
        assert_eq!(drop_ids(10, 1.0, DropOrder::Hottest, 1, 0).len(), 10);
        let a = drop_ids(1000, 0.5, DropOrder::Random, 7, 0);
        assert_eq!(a.len(), 500);
        assert_eq!(a, drop_ids(1000, 0.5, DropOrder::Random, 7, 0));
        assert_ne!(a, drop_ids(1000, 0.5, DropOrder::Random, 7, 1));
        let mut s = a.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 500, "no id twice");
        // A tiny share still removes one entry.
        assert_eq!(drop_ids(10, 0.01, DropOrder::Hottest, 1, 0), vec![1]);
    }
}
