//! A scenario pointed at an app under test (`--target`): the target's flags checked and
//! joined to the workload, and what a target changes about the run (a cold start).

use crate::cli::{RunFlags, TargetFlags};
use crate::error::UsageError;
use crate::metric::Metric;
use crate::scenario::Scenario;
use crate::workload::Start;

/// `sc` with the app under test of `target` (unchanged without `--target`). `flags` are the
/// run's flags as given, to tell a `--start` the user asked for from the default.
pub fn with_target(
    mut sc: Scenario,
    flags: &RunFlags,
    target: &TargetFlags,
) -> Result<Scenario, UsageError> {
    let on_cluster = sc.cluster.managed.is_some()
        || sc
            .redis_url
            .as_deref()
            .is_some_and(crate::cache::is_cluster);
    if target.target.is_some() && on_cluster {
        // The app reaches its Redis through its own client: stampede cannot make it speak
        // cluster, and its figures (INFO, the kill) would be of another server than the app's.
        return Err(UsageError::new(
            "--redis-cluster and redis+cluster:// URLs are for the built-in app: an app under test connects to its own Redis with its own client; give its Redis with --redis-url (one server) or drop --target",
        ));
    }
    let managed = sc.redis_url.is_none() || sc.pg_url.is_none();
    let Some(spec) = super::resolve(target, managed)? else {
        return Ok(sc);
    };
    // stampede writes only its own cache entries: an app's cache it cannot fill.
    match flags.start {
        None | Some(Start::Cold) => sc.start = Start::Cold,
        Some(s) => {
            return Err(UsageError::new(format!(
                "--start {} needs stampede to fill the cache, which it cannot do for an app under test: with --target the start is cold (let a --warmup fill the app's cache instead)",
                s.name()
            )));
        }
    }
    if sc.warm > 0 {
        return Err(UsageError::new(
            "--warm writes stampede's own cache entries, which an app under test does not read: use --warmup to let the app fill its cache",
        ));
    }
    if let Some(f) = sc.faults.iter().find(|f| {
        matches!(
            f.kind,
            crate::fault::FaultKind::DropCache | crate::fault::FaultKind::SlowDb
        )
    }) {
        // The app's cache entries and its queries are its own: stampede knows neither.
        return Err(UsageError::new(format!(
            "a {} shock acts on the built-in app's {}, and an app under test has its own: with --target use a spike, a --kill-redis-at (its Redis comes back empty) or a --kill-postgres-at",
            f.kind,
            if f.kind == crate::fault::FaultKind::DropCache {
                "cache entries"
            } else {
                "loads"
            }
        )));
    }
    if sc.client.is_some_and(|c| c.timeout.is_some()) {
        return Err(UsageError::new(
            "--request-timeout is the built-in app's client deadline: with --target, --http-timeout is the client's",
        ));
    }
    if sc.writes.is_some() {
        // The consistency figures are exact only because the tool sees every commit; an
        // app's own writes it cannot see.
        return Err(UsageError::new(
            "--write-rps sends the built-in app's writes, and an app under test writes through its own code, which stampede cannot see commit: drop --write-rps with --target (writes and their consistency figures are measured on the built-in strategies)",
        ));
    }
    // The built-in app's own policies: an app under test has its own code for each, which
    // these flags cannot change (they were ignored before, so a run looked protected when
    // nothing had been switched on).
    let builtin = [
        ("--l1", sc.l1.is_some()),
        ("--fail-safe", sc.fail_safe.is_some()),
        ("--eager-refresh", sc.eager_refresh.is_some()),
        ("--rewarm-every", sc.rewarm.is_some()),
        ("--db-rate", sc.db_rate.is_some()),
    ];
    if let Some((flag, _)) = builtin.iter().find(|(_, on)| *on) {
        return Err(UsageError::new(format!(
            "{flag} is a policy of the built-in app, and an app under test runs its own code: drop {flag} with --target (switch the app's own policy with --app-cmd's environment, or compare --variant)"
        )));
    }
    // What an app under test can never tell the tool, refused before anything starts: its
    // answers do not say whether they came from its cache.
    for (m, _) in sc.thresholds.iter() {
        if matches!(
            m,
            Metric::HitRate | Metric::Stale | Metric::StaleRatio | Metric::Waited
        ) {
            return Err(UsageError::new(format!(
                "{}: with --target, {} is never known (an app under test's HTTP answers do not say whether they were served from its cache); the run reports Redis's own redis.keyspace_hit_rate instead: drop the threshold",
                m.threshold_name().unwrap_or_default(),
                m.name()
            )));
        }
    }
    sc.target = Some(spec);
    Ok(sc)
}
