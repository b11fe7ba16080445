//! Turns a scenario file plus command-line flags into one validated [`Scenario`]: flags win
//! over the file, the file over the defaults, and every check that can fail before a server
//! starts fails here, naming the file, the key and what is allowed.

use std::path::{Path, PathBuf};

use super::faults::{fault_name, faults_from_flags};
use super::optional::{breaker, cache_policy, db_rate, l1, rewarm, survival_settings, writes};
use super::servers::{net_settings, own_load, redis_client, tls_settings};
use super::shape::{DEFAULT_RPS, Shape, Src};
use super::{LoadShape, Scenario};
use crate::fault::{RecoveryCriteria, verdict_possible};

/// Most payload a run may seed (keys × value size): it is stored twice, in Postgres and Redis.
const MAX_DATA_BYTES: u64 = 8 << 30;
use crate::cli::{MAX_DB_CONNECTIONS, RunFlags};
use crate::error::{Problems, UsageError};
use crate::origin::DbQuery;
use crate::strategy::StrategySpec;
use crate::strategy::lock::{LockSpec, Writeback};
use crate::values::{Dur, Percent, Rate};
use crate::workload::{Arrival, Start};

/// Read and parse a scenario file; a missing file, a TOML syntax error (with its line) and an
/// unknown key are usage errors naming the file. The settings' groups share the file's one
/// table, which serde cannot check for unknown keys across groups, so the keys are checked here
/// against the file's schema (made from the same declarations) before the groups read it.
pub fn read_file(path: &Path) -> Result<RunFlags, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError::new(format!("cannot read scenario file {}: {e}", path.display()))
    })?;
    let said = |e: &dyn std::fmt::Display| {
        UsageError::new(format!(
            "scenario file {}: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| said(&e))?;
    let known = RunFlags::file_keys();
    if let Some(key) = table.keys().find(|k| !known.contains(k)) {
        let line = text
            .lines()
            .position(|l| {
                l.trim_start()
                    .strip_prefix(key.as_str())
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            })
            .map_or(String::new(), |i| format!(" (line {})", i + 1));
        return Err(said(&format!(
            "unknown field `{key}`{line}; the keys are the run flags with `_` for `-`: {}",
            known.join(", ")
        )));
    }
    RunFlags::from_toml(&text).map_err(|e| said(&e))
}

/// Checks that need only one source's values: each setting's declared checks, then the
/// faults' own settings.
fn check(f: &RunFlags, src: &Src, problems: &mut Problems) {
    f.check(&mut |key, what| problems.push(src.said(key, &what)));
    if matches!(src, Src::File(_)) && f.load.rps.is_some() && f.load.clients.is_some() {
        problems.push(format!(
            "{} and {} both set: choose open loop (rps) or closed loop (clients)",
            src.name("rps"),
            src.name("clients")
        ));
    }
    for (i, fault) in f.faults.fault.iter().enumerate() {
        problems.take(fault.check(&fault_name(src, i, fault)));
    }
}

/// Build the run's scenario from an optional file and the command-line flags.
pub fn resolve(file: Option<&PathBuf>, flags: RunFlags) -> Result<Scenario, UsageError> {
    let (sc, unused) = resolve_one(file, flags)?;
    unused.map_or(Ok(sc), Err)
}

/// [`resolve`] for one strategy of a comparison: the scenario, and the error for a setting
/// given that this strategy does not use (`--lease-ttl` without the lease coordination),
/// which `compare` refuses only when none of its strategies uses it (never silently ignored).
pub fn resolve_one(
    file: Option<&PathBuf>,
    flags: RunFlags,
) -> Result<(Scenario, Option<UsageError>), UsageError> {
    let mut unused = None;
    let sc = build(file, flags, &mut unused)?;
    Ok((sc, unused))
}

/// The scenario file and the flags, each checked on its own, then merged: every problem of a
/// setting's own value is said at once, before the checks between settings (which would only
/// repeat them).
fn build(
    file: Option<&PathBuf>,
    mut flags: RunFlags,
    unused: &mut Option<UsageError>,
) -> Result<Scenario, UsageError> {
    let names = faults_from_flags(&mut flags)?;
    let mut p = Problems::default();
    check(&flags, &Src::Flags(&names), &mut p);
    let from_file = match file {
        Some(path) => {
            let f = read_file(path)?;
            check(&f, &Src::File(path), &mut p);
            f
        }
        None => RunFlags::default(),
    };
    p.into_result()?;
    let faults_src = match file {
        Some(path) if flags.faults.fault.is_empty() => Src::File(path),
        _ => Src::Flags(&names),
    };
    let mut m = flags.merge(from_file);
    // A sweep axis on a fault's key lands on the merged list, whoever wrote the fault.
    for set in &m.faults.fault_keys {
        set.apply(&mut m.faults.fault).map_err(UsageError::new)?;
    }
    super::trace::workload_from(&mut m)?;
    let mut p = Problems::default();
    let sc = assemble(file, m, &faults_src, &mut p, unused);
    p.into_result()?;
    sc.ok_or_else(|| UsageError::new("the scenario could not be resolved"))
}

/// The strategy, the trace, the load, the keys and the window.
fn shape(m: &RunFlags, p: &mut Problems) -> Option<Shape> {
    let strategy = p.take(
        StrategySpec::parse(m.cache.strategy.as_deref().unwrap_or("cache-aside"))
            .map_err(UsageError::new),
    )?;
    let trace = p.take(super::trace::settings(m))?;
    let arrival = m.load.arrival.unwrap_or(Arrival::Constant);
    let load = match (&trace, m.load.rps, m.load.clients) {
        // The trace's own mean rate: the schedule is the trace's.
        (Some(t), _, _) => LoadShape::Open {
            rps: t.found.requests as f64 / t.found.run_s,
            arrival: Arrival::Constant,
        },
        (None, _, Some(c)) => LoadShape::Closed { clients: c },
        (None, Some(Rate(r)), None) => LoadShape::Open { rps: r, arrival },
        (None, None, None) => LoadShape::Open {
            rps: DEFAULT_RPS,
            arrival,
        },
    };
    let own_load = p.take(own_load(m))?;
    // Under --db-sql the keys are the user's: --keys only caps them (0: all).
    let keys = match (&trace, &own_load) {
        (Some(t), _) => t.found.distinct_keys,
        (None, Some(_)) => m.data.keys.unwrap_or(0),
        (None, None) => m.data.resolved().keys(),
    };
    let duration = match &trace {
        Some(t) => super::trace::duration(t, m.load.warmup),
        None => m.load.resolved().duration(),
    };
    Some(Shape {
        strategy,
        trace,
        load,
        own_load,
        keys,
        duration,
    })
}

/// The checks between settings, each problem noted, and the scenario they leave.
fn assemble(
    file: Option<&PathBuf>,
    mut m: RunFlags,
    faults_src: &Src,
    p: &mut Problems,
    unused: &mut Option<UsageError>,
) -> Option<Scenario> {
    super::needs::check(&m, p);
    let s = shape(&m, p)?;
    // Before the faults are resolved: a migrate-slot's `slot` is read here, then folded.
    let cluster = p.take(super::cluster::cluster_settings(&m));
    super::faults::resolve(&mut m, faults_src, &s, p);
    let tls = p.take(tls_settings(&m));
    p.take(net_settings(&m));
    let ttl = m.data.resolved().ttl();
    let cache = p.take(cache_policy(&m, &s.strategy, ttl, unused));
    let sizes = p.take(super::memory::value_sizes(&m));
    let memory = p.take(super::memory::limit(&m));
    limits(&m, &s, sizes.as_ref().map(|v| v.0), p);
    let (rewarm, l1) = (p.take(rewarm(&m, s.keys)), p.take(l1(&m, &s.strategy)));
    let zipf = m.data.resolved().zipf();
    let writes = p.take(writes(&m, s.trace.as_ref(), s.own_load.is_some(), zipf));
    let (redis_client, redis_conns, redis_timeout) = redis_client(&m);
    let survival = p.take(survival_settings(&m));
    let thresholds = thresholds(&m, s.duration, survival.as_ref().map(|s| &s.2), p);
    let ((tls, redis_tls), cluster, cache, (value_size, value_size_dist), memory) =
        (tls?, cluster?, cache?, sizes?, memory?);
    let (rewarm, l1, (writes, invalidate), (client, goodput_within, recovery)) =
        (rewarm?, l1?, writes?, survival?);
    Some(Scenario {
        scenario_file: file.map(|p| p.display().to_string()),
        load: s.load,
        duration: s.duration,
        warmup: m.load.resolved().warmup(),
        keys: s.keys,
        zipf,
        seed: m.data.resolved().seed(),
        value_size,
        value_size_dist,
        memory,
        ttl,
        db_cost: m.db.resolved().db_cost(),
        db_pool: m.db.resolved().db_pool(),
        // A crash must turn loads into errors quickly, never into a hang: with a Postgres
        // fault and no deadline of the user's, loads get one.
        db_timeout: super::faults::db_timeout(&m),
        instances: m.load.resolved().instances(),
        redis_conns,
        max_inflight: m.load.resolved().max_inflight(),
        backlog: m.load.resolved().backlog(),
        // A steady start under --db-sql would run the user's query once per key on their
        // server before the run: only when asked.
        start: m.data.start.unwrap_or(if s.own_load.is_some() {
            Start::Cold
        } else {
            Start::Steady
        }),
        warm: m.data.resolved().warm(),
        redis_timeout,
        redis_client,
        check_values: m.servers.check_values.unwrap_or(false),
        redis_rtt: m.servers.redis_rtt.or(m.servers.net_rtt),
        pg_rtt: m.servers.pg_rtt.or(m.servers.net_rtt),
        interval: m.report.resolved().interval(),
        beta: m.cache.resolved().beta(),
        stale: cache.stale,
        lock: LockSpec {
            lock_ttl: m.cache.resolved().lock_ttl(),
            lock_ttl_factor: m.cache.resolved().lock_ttl_factor(),
            lock_extend: m.cache.lock_extend.unwrap_or(false),
            lock_poll: m.cache.resolved().lock_poll(),
            lock_wait: m.cache.resolved().lock_wait(),
            lock_timeout_policy: cache.lock_timeout_policy,
            lock_waiters: m.cache.lock_waiters.unwrap_or_default(),
            retry_after: m.cache.retry_after,
            fallback_writeback: m.cache.fallback_writeback != Some(Writeback::Off),
        },
        jitter: m
            .cache
            .jitter
            .unwrap_or(Percent(s.strategy.default_jitter())),
        missing_ratio: m.data.resolved().missing_ratio(),
        missing_ids: m.data.missing_ids.unwrap_or_default(),
        negative_ttl: m.data.negative_ttl,
        db_query: m.db.resolved().db_query(),
        db_limit: m.protect.db_limit,
        breaker: breaker(&m),
        db_rate: db_rate(&m),
        rewarm,
        l1,
        fail_safe: cache.fail_safe,
        eager_refresh: cache.eager_refresh,
        lease_ttl: cache.lease_ttl,
        strategy: s.strategy,
        redis_url: m.servers.redis_url,
        pg_url: m.servers.pg_url,
        faults: m.faults.fault,
        redis_restart_cmd: m.faults.redis_restart_cmd,
        allow_pause_external: m.faults.allow_pause_external,
        allow_kill_external: m.faults.allow_kill_external,
        pg_kill_cmd: m.faults.pg_kill_cmd,
        pg_restart_cmd: m.faults.pg_restart_cmd,
        thresholds,
        writes,
        invalidate,
        tls,
        redis_tls,
        cluster,
        own_load: s.own_load,
        target: None,
        client,
        goodput_within,
        recovery,
        trace: s.trace,
        load_via_ledger: false,
    })
}

/// What the machine and the servers can hold: the keys warmed, the payload seeded, the
/// database connections opened, and a cost that only the sleep query has.
fn limits(m: &RunFlags, s: &Shape, value_size: Option<usize>, p: &mut Problems) {
    let (keys, own_load) = (s.keys, s.own_load.is_some());
    let warm = m.data.resolved().warm();
    if warm > keys && !own_load {
        p.push(format!(
            "--warm {warm} is more than --keys {keys}: warm at most every key"
        ));
    }
    if let Some(value_size) = value_size {
        let payload = (keys as f64 * value_size as f64) as u64;
        if !own_load && payload > MAX_DATA_BYTES {
            p.push(format!(
                "--keys {keys} × --value-size {value_size} is {} GiB of payload, more than {} GiB: the seeded table and a full cache must fit the machine; fewer keys or smaller values",
                payload >> 30,
                MAX_DATA_BYTES >> 30
            ));
        }
    }
    let (instances, db_pool) = (m.load.resolved().instances(), m.db.resolved().db_pool());
    if u64::from(instances) * u64::from(db_pool) > u64::from(MAX_DB_CONNECTIONS) {
        p.push(format!(
            "--instances {instances} × --db-pool {db_pool} = {} database connections, more than {MAX_DB_CONNECTIONS}: each is a Postgres backend process; use fewer instances or a smaller pool",
            u64::from(instances) * u64::from(db_pool)
        ));
    }
    if m.db.db_query == Some(DbQuery::Heavy) && m.db.db_cost.is_some() {
        p.push(
            "--db-cost sets the pg_sleep of --db-query sleep; under --db-query heavy a load costs what its aggregate costs on this server: drop --db-cost (or db_cost in the file)",
        );
    }
}

/// The file's `[thresholds]` with each `--threshold` over it; a limit on the recovery needs a
/// run that can have a verdict.
fn thresholds(
    m: &RunFlags,
    duration: Dur,
    recovery: Option<&RecoveryCriteria>,
    p: &mut Problems,
) -> crate::thresholds::Thresholds {
    let thresholds = m
        .report
        .thresholds
        .clone()
        .unwrap_or_default()
        .overridden_by(&m.report.threshold);
    if let Some(recovery) = recovery
        && thresholds
            .iter()
            .any(|(t, _)| t == crate::metric::Metric::RecoveryBack)
        && let Err(why) = verdict_possible(&m.faults.fault, duration, recovery)
    {
        p.push(format!(
            "threshold recovery_back_ms_max needs a recovery verdict, and {why}"
        ));
    }
    thresholds
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
