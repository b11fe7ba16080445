//! The optional parts of a scenario, each on only when asked and its settings refused without
//! it (a `--breaker-*` setting with no breaker does nothing, so it is an error): the breaker,
//! the rate limit, the in-process tier, the re-warm job, the fail-safe and what the strategy
//! keeps, the writes, and the client's timeout and retries with the recovery criterion.

use std::time::Duration;

use super::{FailSafe, Rewarm, WriteLoad};
use crate::cli::{RecoveryFlags, RunFlags};
use crate::error::UsageError;
use crate::fault::RecoveryCriteria;
use crate::l1::L1Spec;
use crate::protect::BreakerSpec;
use crate::protect::rate::RateSpec;
use crate::strategy::StrategySpec;
use crate::strategy::invalidate::{Invalidate, invalidation};
use crate::strategy::lock::LockTimeoutPolicy;
use crate::values::{Dur, Percent, Rate};
use crate::workload::Client;

/// The breaker's settings when `--breaker` is on (its settings without it: [`super::needs`]).
pub(super) fn breaker(m: &RunFlags) -> Option<BreakerSpec> {
    let d = BreakerSpec::DEFAULT;
    if m.protect.breaker != Some(true) {
        return None;
    }
    Some(BreakerSpec {
        error_rate: m.protect.breaker_error_rate.unwrap_or(d.error_rate),
        latency: m.protect.breaker_latency.unwrap_or(d.latency),
        window: m.protect.breaker_window.unwrap_or(d.window),
        cooldown: m.protect.breaker_cooldown.unwrap_or(d.cooldown),
        probes: m.protect.breaker_probes.unwrap_or(d.probes),
        min_loads: m.protect.breaker_min_loads.unwrap_or(d.min_loads),
    })
}

/// The rate limit when `--db-rate` is given.
pub(super) fn db_rate(m: &RunFlags) -> Option<RateSpec> {
    let Rate(rate) = m.protect.db_rate?;
    Some(RateSpec {
        rate,
        burst: m
            .protect
            .db_burst
            .unwrap_or_else(|| RateSpec::default_burst(rate)),
        scope: m.protect.db_rate_scope.unwrap_or_default(),
    })
}

/// The in-process tier when `--l1` is given (a tier in front of no cache is refused).
pub(super) fn l1(m: &RunFlags, strategy: &StrategySpec) -> Result<Option<L1Spec>, UsageError> {
    let Some(entries) = m.cache.l1 else {
        return Ok(None);
    };
    if !strategy.caches() {
        return Err(UsageError::new(
            "--l1 puts an in-process tier in front of the cache, and --strategy no-cache has none: drop --l1 or pick a caching strategy",
        ));
    }
    Ok(Some(L1Spec {
        entries,
        ttl: m.cache.l1_ttl,
        invalidate: m.cache.l1_invalidate.unwrap_or_default(),
    }))
}

/// The re-warm job when `--rewarm-every` is given.
pub(super) fn rewarm(m: &RunFlags, keys: u64) -> Result<Option<Rewarm>, UsageError> {
    let Some(every) = m.cache.rewarm_every else {
        return Ok(None);
    };
    let top = m.cache.resolved().rewarm_top();
    if keys > 0 && top > keys {
        return Err(UsageError::new(format!(
            "--rewarm-top {top} is more than --keys {keys}: re-warm at most every key"
        )));
    }
    Ok(Some(Rewarm { every, top }))
}

/// The fail-safe when `--fail-safe` is given or the strategy's library preset sets one;
/// `--fail-safe-throttle` or `--soft-timeout` without it is refused (a soft timeout answers
/// with the kept value, and without the fail-safe none is kept).
pub(super) fn fail_safe(
    m: &RunFlags,
    strategy: &StrategySpec,
    ttl: Dur,
) -> Result<Option<FailSafe>, UsageError> {
    let lib = strategy.library_defaults();
    let max = m
        .cache
        .fail_safe
        .or_else(|| lib.and_then(|l| l.fail_safe_ttls).map(|n| Dur(ttl.0 * n)));
    let Some(max) = max else {
        return Ok(None);
    };
    let throttle = m
        .cache
        .fail_safe_throttle
        .unwrap_or(Dur(Duration::from_secs(
            lib.and_then(|l| l.fail_safe_throttle_s).unwrap_or(30),
        )));
    let soft_timeout = m.cache.soft_timeout.or_else(|| {
        lib.and_then(|l| l.soft_timeout_ms)
            .map(|ms| Dur(Duration::from_millis(ms)))
    });
    Ok(Some(FailSafe {
        max,
        throttle,
        soft_timeout,
    }))
}

/// What the strategy keeps and refreshes: the fail-safe, eager refresh, the lock's timeout
/// policy and the lease.
pub(super) struct CachePolicy {
    pub fail_safe: Option<FailSafe>,
    pub eager_refresh: Option<Percent>,
    pub lock_timeout_policy: LockTimeoutPolicy,
    pub lease_ttl: Option<Dur>,
    pub stale: Dur,
}

pub(super) fn cache_policy(
    m: &RunFlags,
    strategy: &StrategySpec,
    ttl: Dur,
    unused: &mut Option<UsageError>,
) -> Result<CachePolicy, UsageError> {
    let fail_safe = fail_safe(m, strategy, ttl)?;
    let eager_refresh = m.cache.eager_refresh.or_else(|| {
        strategy
            .library_defaults()
            .and_then(|l| l.eager_refresh)
            .map(Percent)
    });
    if !strategy.caches() && (fail_safe.is_some() || eager_refresh.is_some()) {
        return Err(UsageError::new(
            "--fail-safe and --eager-refresh keep or refresh cached entries, and --strategy no-cache caches nothing: drop them, or choose a strategy that caches",
        ));
    }
    let lock_timeout_policy = m.cache.resolved().lock_timeout_policy();
    if lock_timeout_policy == LockTimeoutPolicy::Stale
        && !strategy.serves_stale()
        && fail_safe.is_none()
    {
        return Err(UsageError::new(format!(
            "--lock-timeout-policy stale needs a value kept past expiry (there is none under {strategy}): use --strategy swr+mutex, add --fail-safe D, or --lock-timeout-policy load|error"
        )));
    }
    let lease_ttl = strategy
        .coordination
        .lease()
        .then(|| m.cache.resolved().lease_ttl());
    if m.cache.lease_ttl.is_some() && lease_ttl.is_none() {
        *unused = Some(UsageError::new(format!(
            "--lease-ttl is a setting of the lease coordination, and --strategy {strategy} has none: add lease to the strategy (--strategy lease, swr+lease, xfetch+lease), or drop --lease-ttl (lease_ttl in a scenario file)"
        )));
    }
    // laravel-flexible's `[$fresh, $stale]`: stale as long again as fresh.
    let stale_is_ttl = strategy.library_defaults().is_some_and(|l| l.stale_is_ttl);
    let stale = m
        .cache
        .stale
        .unwrap_or(if stale_is_ttl { ttl } else { Dur::secs(10) });
    Ok(CachePolicy {
        stale,
        fail_safe,
        eager_refresh,
        lock_timeout_policy,
        lease_ttl,
    })
}

/// The writes and their invalidation: the flags', or a trace's when it replays every op.
pub(super) fn writes(
    m: &RunFlags,
    trace: Option<&crate::trace::replay::TraceSpec>,
    own_load: bool,
    zipf: f64,
) -> Result<(Option<WriteLoad>, Option<Invalidate>), UsageError> {
    let writes = match trace {
        // A replay of every op writes what the trace writes, at its times: the rate is its mean.
        Some(t)
            if t.ops == crate::trace::replay::TraceOps::All
                && t.found.writes + t.found.deletes > 0 =>
        {
            Some(WriteLoad {
                rps: (t.found.writes + t.found.deletes) as f64 / t.found.run_s,
                zipf,
                writers: 1,
                gap: None,
            })
        }
        _ => m.writes.write_rps.filter(|r| r.0 > 0.0).map(|r| WriteLoad {
            rps: r.0,
            zipf: m.writes.write_zipf.unwrap_or(zipf),
            writers: m.writes.resolved().writers_per_key(),
            gap: m.writes.write_gap,
        }),
    };
    if writes.is_some() && own_load {
        // Writes UPDATE the seeded items; under --db-sql the table is the user's and the tool
        // changes nothing in their database.
        return Err(UsageError::new(
            "--write-rps writes to the table stampede seeds, and with --db-sql there is none: stampede changes nothing in your database. Drop --write-rps, or drop --db-sql to measure writes on the seeded table",
        ));
    }
    let invalidate = match (&writes, &m.writes.invalidate) {
        (None, _) => None,
        (Some(_), None) => Some(Invalidate::Delete),
        (Some(_), Some(i)) => Some(invalidation(i).map_err(UsageError::new)?),
    };
    Ok((writes, invalidate))
}

/// The client's timeout and retries, goodput's deadline and the recovery criterion.
pub(super) fn survival_settings(
    m: &RunFlags,
) -> Result<(Option<Client>, Dur, RecoveryCriteria), UsageError> {
    let c = m.client.resolved();
    let retries = c.retries();
    let client = (m.client.request_timeout.is_some() || retries > 0).then(|| Client {
        timeout: m.client.request_timeout,
        retries,
        backoff: c.retry_backoff(),
        jitter: c.retry_jitter(),
    });
    let within = m
        .client
        .goodput_within
        .or(m.client.request_timeout)
        .unwrap_or(Dur(crate::workload::DEFAULT_GOODPUT_WITHIN));
    Ok((client, within, recovery(&m.recovery)))
}

/// The recovery verdict's criterion: the flags' values over the declared defaults (which a
/// results file without one reads too).
pub(super) fn recovery(flags: &RecoveryFlags) -> RecoveryCriteria {
    let r = flags.resolved();
    RecoveryCriteria {
        baseline_window: r.baseline_window(),
        goodput: r.recovery_goodput(),
        hit_points: r.recovery_hit_points(),
        settle: r.settle(),
        observe: r.observe(),
    }
}
