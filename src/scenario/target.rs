//! A scenario pointed at an app under test (`--target`): the target's flags checked and
//! joined to the workload, and what a target changes about the run (a cold start). The
//! target's settings are resolution's to read; `crate::app` holds the resolved type.

use std::time::Duration;

use crate::app::{KEY_MARK, PORT_MARK, TargetSpec};
use crate::cli::{RunFlags, TargetFlags};
use crate::error::{Problems, UsageError};
use crate::fault::FaultKind;
use crate::metric::Metric;
use crate::redact;
use crate::scenario::Scenario;
use crate::values::Dur;
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
    let Some(spec) = resolve(target, managed)? else {
        return Ok(sc);
    };
    // stampede writes only its own cache entries: an app's cache it cannot fill.
    match flags.data.start {
        None | Some(Start::Cold) => sc.start = Start::Cold,
        Some(s) => {
            return Err(UsageError::new(format!(
                "--start {} needs stampede to fill the cache, which it cannot do for an app under test: with --target the start is cold (let a --warmup fill the app's cache instead)",
                s.name()
            )));
        }
    }
    // The built-in app's own entries, loads, client deadline, writes and policies: an app
    // under test has its own code for each, which these settings cannot reach (ignored, a run
    // would look protected when nothing had been switched on). Every one is said at once.
    let mut p = Problems::default();
    p.refuse([
        (
            sc.warm > 0,
            "--warm writes stampede's own cache entries, which an app under test does not read: use --warmup to let the app fill its cache",
        ),
        (
            sc.faults
                .iter()
                .any(|f| f.kind == FaultKind::DropCache && f.drop_fraction() < 1.0),
            "a drop-cache of part of the cache picks the entries of chosen items, and an app under test names its keys itself: with --target a drop-cache removes every key under the app's CACHE_PREFIX (fraction=100%, the default)",
        ),
        (
            FaultKind::SlowDb.among(&sc.faults),
            "a slow-db shock acts on the built-in app's loads, and an app under test has its own: with --target use a spike, a --kill-redis-at (its Redis comes back empty) or a --kill-postgres-at",
        ),
        (
            sc.redis_rtt.is_some() || sc.pg_rtt.is_some(),
            "--net-rtt, --redis-rtt and --pg-rtt put a proxy between the built-in app's instances and the servers, and an app under test connects to its servers itself: with --target, put the delay in the app's own network",
        ),
        (
            sc.faults.iter().any(|f| f.kind.is_network()),
            "a network fault is made by the proxy between the built-in app's instances and the servers, and an app under test connects to its servers itself: with --target use --kill-redis-at, --pause-redis-at or --kill-postgres-at",
        ),
        (
            FaultKind::HolderCrash.among(&sc.faults),
            "a holder-crash kills one of the built-in app's instances, and stampede cannot kill the app under test's processes one by one: with --target use --kill-redis-at or --kill-postgres-at",
        ),
        (
            sc.client.is_some_and(|c| c.timeout.is_some()),
            "--request-timeout is the built-in app's client deadline: with --target, --http-timeout is the client's",
        ),
        // The consistency figures are exact only because the tool sees every commit.
        (
            sc.writes.is_some(),
            "--write-rps sends the built-in app's writes, and an app under test writes through its own code, which stampede cannot see commit: drop --write-rps with --target (writes and their consistency figures are measured on the built-in strategies)",
        ),
    ]);
    for (flag, on) in [
        ("--l1", sc.l1.is_some()),
        ("--fail-safe", sc.fail_safe.is_some()),
        ("--eager-refresh", sc.eager_refresh.is_some()),
        ("--rewarm-every", sc.rewarm.is_some()),
        ("--db-rate", sc.db_rate.is_some()),
    ] {
        if on {
            p.push(format!("{flag} is a policy of the built-in app, and an app under test runs its own code: drop {flag} with --target (switch the app's own policy with --app-cmd's environment, or compare --variant)"));
        }
    }
    p.into_result()?;
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

/// The target of `flags`, checked; None without `--target`. `managed_servers`: whether the
/// An app already running names its servers and schema; one stampede starts is told them.
fn check_app(flags: &TargetFlags, url: &str, managed_servers: bool) -> Result<(), UsageError> {
    let running = flags.app_cmd.is_none();
    let bad_schema = flags.schema.as_ref().is_some_and(|s| {
        s.is_empty()
            || s.len() > 60
            || s.starts_with(|c: char| c.is_ascii_digit())
            || !s
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    });
    let mut p = Problems::default();
    p.refuse([
        (
            running && url.contains(PORT_MARK),
            "--target has {port}, which stampede fills in only for an app it starts: give --app-cmd, or the app's port",
        ),
        (
            running && managed_servers,
            "an app that is already running (no --app-cmd) reads servers it was configured with: give them with --redis-url and --pg-url, and --schema NAME for where stampede seeds the items it reads",
        ),
        (
            running && !managed_servers && flags.schema.is_none(),
            "an app that is already running (no --app-cmd) was configured with the schema it reads: name it with --schema NAME (stampede creates it, seeds it and drops it at the end)",
        ),
        (
            !running && flags.schema.is_some(),
            "--schema is for an app that is already running; an app started with --app-cmd is told its schema in DB_SCHEMA",
        ),
        (
            bad_schema,
            "--schema: use a plain lower-case identifier (letters, digits, _)",
        ),
    ]);
    p.into_result()
}

/// What the answers are checked by: a body pattern, headers, statuses.
fn check_http(flags: &TargetFlags) -> Result<(), UsageError> {
    if let Some(b) = &flags.expect_body {
        regex::Regex::new(b).map_err(|e| UsageError::new(format!("--expect-body {b}: {e}")))?;
    }
    crate::app::http::headers(&flags.header)?;
    Ok(())
}

/// tool starts Redis and Postgres itself (then an already-running app could not know them).
pub fn resolve(
    flags: &TargetFlags,
    managed_servers: bool,
) -> Result<Option<TargetSpec>, UsageError> {
    // Its other flags require --target (clap refuses them without it).
    let Some(url) = flags.target.clone() else {
        return Ok(None);
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(UsageError::new(format!(
            "--target {}: give an http:// or https:// URL",
            redact::url(&url)
        )));
    }
    if !url.contains(KEY_MARK) {
        return Err(UsageError::new(format!(
            "--target {}: put {KEY_MARK} where the item id goes, e.g. http://127.0.0.1:8080/items/{KEY_MARK}",
            redact::url(&url)
        )));
    }
    check_app(flags, &url, managed_servers)?;
    check_http(flags)?;
    let http_timeout = flags.http_timeout.unwrap_or(Dur(Duration::from_secs(5)));
    if http_timeout.0.is_zero() {
        return Err(UsageError::new("--http-timeout must be more than 0"));
    }
    Ok(Some(TargetSpec {
        url,
        http_timeout,
        http_conns: flags.http_conns,
        headers: flags.header.clone(),
        expect_status: flags.expect_status.clone(),
        expect_body: flags.expect_body.clone(),
        app_cmd: flags.app_cmd.clone(),
        app_ready: flags.app_ready.clone(),
        app_ready_timeout: flags
            .app_ready_timeout
            .unwrap_or(Dur(Duration::from_secs(30))),
        app_log: flags.app_log.as_ref().map(|p| p.display().to_string()),
        schema: flags.schema.clone(),
        db_match: flags.db_match.clone(),
        variant: None,
        app_env: Vec::new(),
    }))
}
