//! The run-time policy from the resolved scenario: one pure function, [`of`], where every
//! value the request path applies is derived (the grace, the lease and marker TTLs, the
//! floors of 1 ms), so the driver only allocates the run's state and wires the instances.

use std::time::Duration;

use super::Scenario;
use crate::strategy::failsafe;
use crate::strategy::freshness;
use crate::strategy::invalidate::Invalidate;
use crate::strategy::lock::LockTimeoutPolicy;
use crate::strategy::policy::{Bench, RunPolicy};

/// How long a lease token lives unless its SET consumes it, when `--lease-ttl` is not given.
pub const LEASE_TTL_DEFAULT: Duration = Duration::from_secs(2);

/// How much longer than the longest entry it guards a writer's version marker lives, ms.
const MARKER_MARGIN_MS: u64 = 10_000;

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// The policy the request path applies for a run of `sc`; `bench`: the benchmark switches
/// (read from the environment by the caller, so this stays a function of its arguments).
pub fn of(sc: &Scenario, bench: Bench) -> RunPolicy {
    // How long a lock can keep a waiter from its value: the lock's lease, or its wait.
    let lock_hold_ms = sc.lock.hold_ms();
    let fail_safe_ms = sc.fail_safe.map_or(0, |f| ms(f.max.0));
    RunPolicy {
        freshness: freshness::Policy {
            kind: sc.strategy.freshness,
            ttl_ms: ms(sc.ttl.0),
            stale_ms: ms(sc.stale.0),
            stale_read: sc.strategy.stale_read,
            beta: sc.beta,
            jitter: sc.jitter.0,
            negative_ttl_ms: sc.negative_ttl.map(|d| ms(d.0).max(1)),
            grace_ms: grace_ms(sc.lock.lock_timeout_policy, lock_hold_ms, fail_safe_ms),
            eager: sc.eager_refresh.map(|p| p.0),
            expiry: sc
                .strategy
                .library
                .map_or(freshness::ExpiryStamp::Exact, |l| l.decl().expiry),
        },
        coordination: sc.strategy.coordination,
        refresh: sc.strategy.refresh,
        refresh_rechecks: sc
            .strategy
            .library
            .is_none_or(|l| l.decl().refresh_rechecks),
        fail_safe: sc
            .fail_safe
            .map_or_else(Default::default, |f| failsafe::Settings {
                max_ms: ms(f.max.0).max(1),
                throttle_ms: ms(f.throttle.0),
                soft_timeout: f.soft_timeout.map(|d| d.0),
            }),
        lock: sc.lock.settings(),
        lease_ttl_ms: ms(sc.lease_ttl.map_or(LEASE_TTL_DEFAULT, |d| d.0)).max(1),
        writes: sc.writes.is_some(),
        invalidate: sc.invalidate.unwrap_or(Invalidate::Delete),
        write_gap: sc.writes.and_then(|w| w.gap),
        // Outlives any entry a reader could still store (its hard expiry, the grace) by far.
        marker_px_ms: 2 * (ms(sc.ttl.0) + ms(sc.stale.0) + lock_hold_ms + fail_safe_ms)
            + MARKER_MARGIN_MS,
        track_staleness: !bench.no_staleness,
        crashable: crate::fault::FaultKind::HolderCrash.among(&sc.faults),
        store: sc
            .strategy
            .library
            .map_or(crate::strategy::EntryStore::Redis, |l| l.decl().store),
    }
}

/// How long an entry is kept in Redis past its hard expiry: as long as a lock can be held
/// under `--lock-timeout-policy stale` (a waiter that gives up while a refresh is still
/// running finds the old value), and for the fail-safe: one grace for both.
fn grace_ms(on_timeout: LockTimeoutPolicy, lock_hold_ms: u64, fail_safe_ms: u64) -> u64 {
    let for_lock = if on_timeout == LockTimeoutPolicy::Stale {
        lock_hold_ms
    } else {
        0
    };
    for_lock.max(fail_safe_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::RunFlags;
    use crate::scenario::{FailSafe, resolve};
    use crate::strategy::{Coordination, StaleRead, StrategySpec};
    use crate::values::{Dur, LockTtl};

    fn scenario() -> Scenario {
        let mut sc = resolve(None, RunFlags::default()).expect("the defaults resolve");
        sc.ttl = Dur(Duration::from_secs(30));
        sc.stale = Dur(Duration::from_secs(10));
        sc.lock.lock_ttl = LockTtl::Fixed(Dur(Duration::from_secs(2)));
        sc.lock.lock_wait = Dur(Duration::from_secs(3));
        sc.lock.lock_timeout_policy = LockTimeoutPolicy::Load;
        sc.fail_safe = None;
        sc.lease_ttl = None;
        sc.writes = None;
        sc.invalidate = None;
        sc.negative_ttl = None;
        sc
    }

    #[test]
    fn the_grace_is_the_longer_of_the_lock_s_hold_and_the_fail_safe() {
        let mut sc = scenario();
        assert_eq!(of(&sc, Bench::default()).freshness.grace_ms, 0);
        sc.lock.lock_timeout_policy = LockTimeoutPolicy::Stale;
        assert_eq!(
            of(&sc, Bench::default()).freshness.grace_ms,
            3000,
            "the lock's wait, longer than its lease"
        );
        sc.fail_safe = Some(FailSafe {
            max: Dur(Duration::from_secs(60)),
            throttle: Dur(Duration::from_secs(5)),
            soft_timeout: None,
        });
        let p = of(&sc, Bench::default());
        assert_eq!(p.freshness.grace_ms, 60_000);
        assert_eq!(
            (p.fail_safe.max_ms, p.fail_safe.throttle_ms),
            (60_000, 5000)
        );
        sc.lock.lock_timeout_policy = LockTimeoutPolicy::Error;
        assert_eq!(of(&sc, Bench::default()).freshness.grace_ms, 60_000);
    }

    #[test]
    fn derived_ttls_and_floors() {
        let mut sc = scenario();
        let p = of(&sc, Bench::default());
        assert_eq!(p.lease_ttl_ms, 2000, "the lease's default");
        // 2 × (TTL + window + lock hold + fail-safe) + 10 s.
        assert_eq!(p.marker_px_ms, 2 * (30_000 + 10_000 + 3000) + 10_000);
        assert!(p.track_staleness && !p.writes && !p.versioned());
        assert_eq!(p.invalidate, Invalidate::Delete);
        sc.lease_ttl = Some(Dur(Duration::from_micros(10)));
        sc.negative_ttl = Some(Dur(Duration::from_micros(10)));
        sc.lock.lock_ttl = LockTtl::Fixed(Dur(Duration::ZERO));
        let p = of(&sc, Bench { no_staleness: true });
        assert_eq!(
            (p.lease_ttl_ms, p.freshness.negative_ttl_ms, p.lock.ttl_ms),
            (1, Some(1), 1),
            "a TTL under 1 ms is 1 ms"
        );
        assert!(!p.track_staleness);
        sc.writes = scenario_with_writes().writes;
        sc.invalidate = Some(Invalidate::Versioned);
        assert!(of(&sc, Bench::default()).versioned());
    }

    fn scenario_with_writes() -> Scenario {
        resolve(None, {
            let mut f: RunFlags = Default::default();
            f.writes.write_rps = Some(crate::values::Rate(10.0));
            f
        })
        .expect("writes resolve")
    }

    #[test]
    fn the_strategy_s_choices_are_copied() {
        let mut sc = scenario();
        sc.strategy = StrategySpec::parse("laravel-flexible").expect("a preset");
        let p = of(&sc, Bench::default());
        assert_eq!(
            (p.coordination, p.refresh, p.freshness.stale_read),
            (
                Coordination::None,
                Coordination::Mutex,
                StaleRead::RefreshBehind
            )
        );
        sc.strategy = StrategySpec::parse("rails-race-ttl").expect("a preset");
        let p = of(&sc, Bench::default());
        assert_eq!(
            (p.refresh, p.freshness.stale_read),
            (Coordination::None, StaleRead::ExtendAndRecompute)
        );
    }

    #[test]
    fn a_library_s_refresh_and_expiry_are_its_own() {
        let of_strategy = |name: &str| {
            let mut sc = scenario();
            sc.strategy = StrategySpec::parse(name).unwrap();
            of(&sc, Bench::default())
        };
        // dogpile.cache regenerates on taking its lock; Laravel and a plain strategy look first.
        assert!(!of_strategy("dogpile").refresh_rechecks);
        assert!(of_strategy("laravel-flexible").refresh_rechecks);
        assert!(of_strategy("swr+mutex").refresh_rechecks);
        // Symfony 5.4 writes its expiry in whole seconds; 7 and every plain strategy exactly.
        use freshness::ExpiryStamp::{Exact, WholeSeconds};
        assert_eq!(of_strategy("symfony-5.4").freshness.expiry, WholeSeconds);
        assert_eq!(of_strategy("symfony").freshness.expiry, Exact);
        assert_eq!(of_strategy("xfetch").freshness.expiry, Exact);
        // Caffeine keeps its entries in each JVM; every other library and strategy in Redis.
        use crate::strategy::EntryStore::{Process, Redis};
        assert_eq!(of_strategy("caffeine-refresh").store, Process);
        assert_eq!(of_strategy("spring-sync").store, Redis);
        assert_eq!(of_strategy("cache-aside").store, Redis);
    }
}
