//! The result of a run, built once from everything measured: the tool's counts beside the
//! servers' own, the faults' reports, the consistency and generator figures, the verdicts.

use std::time::Duration;

use super::env::Env;
use super::setup::Setup;
use crate::cache;
use crate::driver::{Divergence, Raw};
use crate::fault::FaultKind;
use crate::fault::chaos;
use crate::metrics::Outcome;
use crate::redact;
use crate::results::{self, Known, RunResult, StartFigures};
use crate::scenario::Scenario;

/// Everything a result is built from, gathered before it is built once.
pub(crate) struct Measured {
    pub(crate) raw: Raw,
    pub(crate) calls_server: Option<u64>,
    pub(crate) redis_stats: Option<(cache::RedisStats, cache::RedisStats)>,
    pub(crate) redis_version: String,
    pub(crate) faults: Option<chaos::Done>,
    pub(crate) first_redis_pid: Option<u32>,
    pub(crate) first_pg_pid: Option<u32>,
    pub(crate) start: StartFigures,
    /// With writes: the written keys after the run (or why they could not be read), and the
    /// server's count of the write statement.
    pub(crate) divergence: Option<Result<Divergence, String>>,
    pub(crate) writes_server: Option<u64>,
    /// Redis's memory at the end (the built-in app's runs).
    pub(crate) memory: Option<crate::memory::figures::MemoryFigures>,
    /// A cluster's nodes at the window's start and end.
    pub(crate) nodes: Option<(
        Vec<crate::cluster::figures::NodeReading>,
        Vec<crate::cluster::figures::NodeReading>,
    )>,
}

/// The result of a run, built once from everything measured.
pub(crate) fn build(sc: &Scenario, m: Measured, setup: &Setup<'_>, env: &Env) -> RunResult {
    let Measured {
        raw,
        calls_server,
        redis_stats: redis,
        redis_version,
        faults,
        first_redis_pid,
        first_pg_pid,
        start,
        divergence,
        writes_server,
        memory,
        nodes,
    } = m;
    let cluster = nodes.map(|(b, a)| crate::cluster::figures::window(&b, &a));
    let generator = generator_figures(sc, &raw);
    let t = &raw.totals;
    let o = |x: Outcome| t.outcomes[x as usize];
    let completed = t.completed();
    let c = &raw.counters;
    let fault_reports = faults
        .as_ref()
        .map(|d| results::faults::reports(&d.records, results::whole(&raw.timeline)))
        .unwrap_or_default();
    let (redis_pids, postgres_pids) = pids(env, faults.as_ref(), first_redis_pid, first_pg_pid);
    // A fault's seconds (and those observed after it) are not caching's: the break-even and
    // the herd model of a run with a fault are read from the rest of its window.
    let part = results::undisturbed::of(sc, &fault_reports, &raw.timeline);
    let mut r = RunResult {
        schema: results::SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        strategy: sc.label(),
        started_at_ms: raw.started_at_ms,
        interrupted: raw.interrupted,
        scenario: sc.clone(),
        start: Some(start.clone()),
        requests: requests(&raw),
        outcomes: outcomes(&raw),
        hit_rate: Known::or_unknown(
            (completed > 0).then(|| {
                (o(Outcome::Hit) + o(Outcome::Stale) + o(Outcome::L1Hit)) as f64 / completed as f64
            }),
            || "no request completed".to_string(),
        ),
        l1: sc.l1.map(|_| l1_figures(&raw)),
        db: db_figures(
            sc,
            &raw,
            setup,
            faults.as_ref(),
            calls_server,
            writes_server,
        ),
        // L is the load as the app waits for it: its pool wait, then its statement.
        cost: Some(match &part {
            Some(p) => results::cost::CostFigures::of_part(p),
            None => results::cost::CostFigures::measured(
                (raw.cost.read_us, raw.cost.reads),
                (raw.db.pool_wait_us + raw.db.statement_us, raw.db.calls),
                (raw.cost.write_back_us, raw.cost.write_backs),
            ),
        }),
        redis: redis_figures(
            sc,
            &raw,
            redis,
            &fault_reports,
            start.expiring_in_window,
            memory,
            cluster,
        ),
        lock: lock_figures(&raw),
        latency_ms: results::Latency::of(&t.latency),
        service_ms: results::Latency::of(&t.service),
        latency_by_outcome_ms: latency_by_outcome(&raw),
        histograms: results::Histograms {
            encoding: "hdrhistogram-v2-deflate-base64".to_string(),
            latency_us: results::encode_histogram(&t.latency),
            service_us: results::encode_histogram(&t.service),
            by_outcome_us: Default::default(),
        },
        timeline: raw.timeline,
        faults: fault_reports,
        recovery: None,
        breaker: raw.breaker,
        instances: raw
            .instances
            .iter()
            .map(results::InstanceFigures::of)
            .collect(),
        servers: servers(env, setup, redis_version, redis_pids, postgres_pids),
        generator,
        thresholds: Vec::new(),
        diagnoses: Vec::new(),
        consistency: consistency(t, completed, c, divergence, raw.writes.as_ref()),
        http: None,
        app: None,
        shard: None,
        merged: None,
    };
    if let Some(p) = &part {
        r.db.herd_model = r.db.herd_model.take().map(|m| m.within(p));
    }
    r.recovery =
        results::recovery::judge(sc, &r.faults, results::whole(&r.timeline), r.app.is_some());
    r.thresholds = r.judge(&sc.thresholds);
    r.diagnoses = results::diagnose::diagnose(&r);
    r
}

/// What the run's locks did.
fn lock_figures(raw: &Raw) -> results::LockFigures {
    let c = &raw.counters;
    results::LockFigures {
        acquired: c.lock_acquired,
        contended: c.lock_contended,
        timeouts: c.lock_timeouts,
        lost: c.lock_lost,
        unavailable: c.lock_unavailable,
        extended: c.lock_extended,
        unkept: c.lock_unkept,
        lease_ms_max: raw.lease_max_ms,
    }
}

/// The latencies of each outcome that occurred.
fn latency_by_outcome(raw: &Raw) -> std::collections::BTreeMap<String, results::Latency> {
    let mut by_outcome = std::collections::BTreeMap::new();
    for x in Outcome::ALL {
        let h = &raw.totals.by_outcome[x as usize];
        if !h.is_empty() {
            by_outcome.insert(x.name().to_string(), results::Latency::of(h));
        }
    }
    by_outcome
}

/// What became of the requests scheduled.
fn requests(raw: &Raw) -> results::Requests {
    let t = &raw.totals;
    let o = |x: Outcome| t.outcomes[x as usize];
    // Abandoned requests are recorded as errors at the moment they were given up.
    let (errors, completed) = (o(Outcome::Error), t.completed());
    results::Requests {
        scheduled: raw.scheduled,
        completed,
        shed: raw.shed,
        unsent: raw.unsent,
        errors,
        abandoned: raw.abandoned,
        warmup: raw.warmup_requests,
        timed_out: o(Outcome::TimedOut),
        goodput: raw.goodput,
        retries: raw.retries,
        attempts: completed + raw.retries,
        amplification: results::per_scheduled(completed + raw.retries, raw.scheduled),
        retry_after_waits: raw.retry_after_waits,
        retry_after_wait_ms_min: raw.retry_after_wait_ms_min,
    }
}

/// How the completed requests were answered.
fn outcomes(raw: &Raw) -> results::Outcomes {
    let o = |x: Outcome| raw.totals.outcomes[x as usize];
    let errors = o(Outcome::Error);
    results::Outcomes {
        hit: o(Outcome::Hit),
        miss: o(Outcome::Miss),
        stale: o(Outcome::Stale),
        waited: o(Outcome::Waited),
        fallback: o(Outcome::Fallback),
        error: errors,
        rejected: o(Outcome::Rejected),
        ok: o(Outcome::Ok),
        timed_out: o(Outcome::TimedOut),
        l1_hit: o(Outcome::L1Hit),
        retry_after: o(Outcome::RetryAfter),
    }
}

/// The in-process tier's figures.
fn l1_figures(raw: &Raw) -> results::l1::L1Figures {
    let (t, c) = (&raw.totals, &raw.counters);
    let o = |x: Outcome| t.outcomes[x as usize];
    let completed = t.completed();
    results::l1::L1Figures {
        hits: o(Outcome::L1Hit),
        hit_rate: (completed > 0).then(|| o(Outcome::L1Hit) as f64 / completed as f64),
        redis_hit_rate: (completed > 0)
            .then(|| (o(Outcome::Hit) + o(Outcome::Stale)) as f64 / completed as f64),
        evictions: c.l1_evictions,
        invalidations_received: c.l1_invalidations_received,
        flushes: c.l1_flushes,
        spoiled: c.l1_spoiled,
        stale_reads: c.l1_stale_reads,
    }
}

/// The database's figures: the tool's counts, the server's beside them, the pool and the
/// strategy's own loads.
fn db_figures(
    sc: &Scenario,
    raw: &Raw,
    setup: &Setup<'_>,
    faults: Option<&chaos::Done>,
    calls_server: Option<u64>,
    writes_server: Option<u64>,
) -> results::DbFigures {
    let (c, d, db) = (&raw.counters, &raw.db, setup.db);
    let calls_server_read = faults
        .map(|d| &d.server_calls)
        .filter(|c| !c.readings.is_empty())
        .map(|c| {
            let sum = match (c.unreadable, c.lost) {
                (true, _) => String::new(),
                (false, 0) => ", which kept its counts across the restart".to_string(),
                (false, lost) => format!(" plus the {lost} a crash erased"),
            };
            format!(
                "pg_stat_statements read at the end of the run{sum}; {}",
                c.readings.join("; ")
            )
        });
    results::DbFigures {
        calls: Known::Value(d.calls),
        calls_server,
        calls_server_note: match (&db.stat_statements_missing, faults) {
            (Some(n), _) => Some(n.clone()),
            (None, Some(d)) if d.server_calls.unreadable => Some(
                "a Postgres crash erased pg_stat_statements' counts and they could not be read just before it: the server's total is unknown".to_string(),
            ),
            _ => None,
        },
        calls_server_read,
        statement_errors: d.statement_errors,
        statement_timeouts: d.statement_timeouts,
        pool_timeouts: d.pool_timeouts,
        connect_errors: d.connect_errors,
        limit_refusals: c.limit_refusals,
        breaker_refusals: c.breaker_refusals,
        rate_refusals: c.rate_refusals,
        rate_fallback_ms: raw.rate_fallback.as_millis() as u64,
        rewarm_calls: d.rewarm_calls,
        rewarm_runs: raw.rewarm_runs,
        warmup_calls: d.warmup_calls,
        peak_concurrent: d.peak_concurrent,
        peak_in_flight: Known::Value(d.peak_in_flight),
        peak_active_sampled: None,
        peak_key_herd: Known::Value(d.peak_herd),
        redundant_loads: Known::Value(d.redundant),
        by_cause: Known::Value(d.by_cause),
        herd_model: results::causes::HerdModel::of(&d.hot, raw.window.as_secs_f64()),
        ledger_peak_key_herd: None,
        ledger_redundant_loads: None,
        statement_ms_mean: (d.calls > 0)
            .then(|| d.statement_us as f64 / 1000.0 / d.calls as f64),
        pool_wait_ms_mean: (d.calls > 0)
            .then(|| d.pool_wait_us as f64 / 1000.0 / d.calls as f64),
        pool_busy: d.statement_us as f64
            / (f64::from(sc.instances) * f64::from(sc.db_pool) * raw.window.as_micros() as f64)
                .max(1.0),
        background_refreshes: c.background_refreshes,
        refreshes_skipped: c.refreshes_skipped,
        early_recomputes: c.early_recomputes,
        early_lead_ms_mean: (c.early_recomputes > 0)
            .then(|| c.early_lead_us as f64 / 1000.0 / c.early_recomputes as f64),
        fail_safe: c.fail_safe,
        fail_safe_throttled: c.fail_safe_throttled,
        soft_timeouts: c.soft_timeouts,
        soft_timeout_write_backs: c.soft_timeout_write_backs,
        eager_refreshes: c.eager_refreshes,
        race_pushes: c.race_pushes,
        heavy_query_ms: setup.heavy_query_ms,
        seeded_bytes: None,
        writes: raw.writes.as_ref().map_or(0, |w| w.committed),
        writes_server,
        write_errors: raw.writes.as_ref().map_or(0, |w| w.errors),
        write_latency_ms: raw
            .writes
            .as_ref()
            .map(|w| results::Latency::of(&w.latency)),
    }
}

/// Redis's own figures over the window (INFO before and after), unless a restart reset them.
fn redis_figures(
    sc: &Scenario,
    raw: &Raw,
    redis: Option<(cache::RedisStats, cache::RedisStats)>,
    fault_reports: &[results::FaultReport],
    expiring_in_window: u64,
    memory: Option<crate::memory::figures::MemoryFigures>,
    cluster: Option<crate::cluster::figures::ClusterWindow>,
) -> results::RedisFigures {
    let c = &raw.counters;
    // INFO's counters start again at zero with every restart of Redis.
    let redis_restarted = fault_reports
        .iter()
        .any(|f| f.kind == FaultKind::KillRedis && f.down_ms > 0);
    let redis_paused = fault_reports
        .iter()
        .any(|f| f.kind == FaultKind::PauseRedis && f.down_ms > 0);
    results::RedisFigures {
        keyspace_hit_rate: redis
            .filter(|_| !redis_restarted)
            .map(|(b, a)| {
                (
                    a.keyspace_hits.saturating_sub(b.keyspace_hits),
                    a.keyspace_misses.saturating_sub(b.keyspace_misses),
                )
            })
            .filter(|(h, m)| h + m > 0)
            .map(|(h, m)| h as f64 / (h + m) as f64),
        keyspace_hits: redis
            .filter(|_| !redis_restarted)
            .map(|(b, a)| a.keyspace_hits.saturating_sub(b.keyspace_hits)),
        keyspace_misses: redis
            .filter(|_| !redis_restarted)
            .map(|(b, a)| a.keyspace_misses.saturating_sub(b.keyspace_misses)),
        note: match (redis, sc.redis_url.is_some()) {
            _ if redis_restarted => Some(
                "Redis restarted during the run and its INFO counters with it: the run's keyspace totals cannot be read back".to_string(),
            ),
            (None, _) => Some("INFO could not be read".to_string()),
            _ if redis_paused => Some(
                "Redis was paused during the run: commands that timed out in the app still ran when the pause ended, and INFO counts them".to_string(),
            ),
            (Some(_), true) => Some(
                "INFO counts the whole server: other clients' reads are included".to_string(),
            ),
            (Some(_), false) if sc.warmup.0 > Duration::ZERO => {
                Some("INFO has no windows: the warm-up's reads are included".to_string())
            }
            _ => None,
        },
        errors: c.redis_errors,
        timeouts: c.redis_timeouts,
        cold_misses: c.cold_misses,
        negative_hits: c.negative_hits,
        expiries: c.expiring_writes + expiring_in_window,
        oom_errors: c.redis_oom,
        value_mismatches: sc.check_values.then_some(c.value_mismatches),
        evicted_keys: redis
            .filter(|_| !redis_restarted)
            .map(|(b, a)| a.evicted_keys.saturating_sub(b.evicted_keys)),
        memory,
        hottest_node_share: cluster.as_ref().and_then(|c| c.hottest_node_share),
        moved: cluster.as_ref().and_then(|c| c.moved),
        ask: cluster.as_ref().and_then(|c| c.ask),
        nodes: cluster.map(|c| c.nodes),
    }
}

/// Every pid the servers ran under: the first, each restart's, a managed cluster's nodes.
fn pids(
    env: &Env,
    faults: Option<&chaos::Done>,
    first_redis_pid: Option<u32>,
    first_pg_pid: Option<u32>,
) -> (Vec<u32>, Vec<u32>) {
    let mut redis_pids: Vec<u32> = first_redis_pid.into_iter().collect();
    let mut postgres_pids: Vec<u32> = first_pg_pid.into_iter().collect();
    if let Some(d) = faults {
        redis_pids.extend(&d.restarted_pids);
        postgres_pids.extend(&d.pg_restarted_pids);
    }
    // A managed cluster's nodes as they run at the end (a restarted node is there already).
    for p in env.cluster_pids() {
        if !redis_pids.contains(&p) {
            redis_pids.push(p);
        }
    }
    (redis_pids, postgres_pids)
}

/// The servers the run used, as it found and left them.
fn servers(
    env: &Env,
    setup: &Setup<'_>,
    redis_version: String,
    redis_pids: Vec<u32>,
    postgres_pids: Vec<u32>,
) -> results::Servers {
    let db = setup.db;
    results::Servers {
        redis_version,
        postgres_version: db.version.clone(),
        managed: env.managed(),
        redis_url: redact::url(&env.redis_url),
        pg_url: redact::url(&env.pg_url),
        redis_pid: env.redis.as_ref().and_then(|r| r.pid()),
        postgres_pid: env.pg.as_ref().and_then(|p| p.pid()),
        redis_dir: env.redis.as_ref().map(|r| r.dir().display().to_string()),
        postgres_dir: env.pg.as_ref().map(|p| p.dir().display().to_string()),
        redis_pids,
        postgres_pids,
        redis_startup_ms: env.redis_startup.map(|d| d.as_millis() as u64),
        postgres_startup_ms: env.pg.as_ref().map(|p| p.startup().0.as_millis() as u64),
        postgres_template_reused: env.pg.as_ref().map(|p| p.startup().1),
        seed_ms: setup.seed_ms,
        tls: env.redis_url.starts_with("rediss") && db.ssl,
        // Set by the caller once the run's heartbeats have stopped.
        heartbeat: None,
    }
}

/// The consistency figures, from the stale reads recorded, the rare-event counters and the
/// written keys read back after the run.
fn consistency(
    t: &crate::metrics::Totals,
    completed: u64,
    c: &crate::metrics::CountersSnapshot,
    divergence: Option<Result<Divergence, String>>,
    writes: Option<&crate::driver::WritesRaw>,
) -> results::Consistency {
    let s = &t.staleness;
    let stale_reads = s.len();
    // Without writes the database never changes, so no key can differ from it: 0 is measured.
    let (keys_written, divergent_keys) = match divergence {
        None => (0, Known::Value(0)),
        Some(Ok(d)) => (d.keys_written, Known::Value(d.divergent_keys)),
        Some(Err(e)) => (
            0,
            Known::unknown(format!(
                "the written keys could not be read back after the run ({e})"
            )),
        ),
    };
    results::Consistency {
        stale_reads,
        stale_read_ratio: if completed == 0 {
            0.0
        } else {
            stale_reads as f64 / completed as f64
        },
        staleness_ms: results::Staleness {
            p50: crate::metrics::pct_ms(s, 0.50),
            p99: crate::metrics::pct_ms(s, 0.99),
            max: if s.is_empty() {
                0.0
            } else {
                s.max() as f64 / 1000.0
            },
        },
        keys_written,
        divergent_keys,
        writes_probed: writes.map_or(0, |w| w.probed),
        writes_left_wrong: writes.map_or(0, |w| w.left_wrong),
        writes_left_wrong_ratio: writes
            .filter(|w| w.probed > 0)
            .map_or(0.0, |w| w.left_wrong as f64 / w.probed as f64),
        writes_unprobed: writes.map_or(0, |w| w.unprobed),
        divergent_ms: writes.map_or(0, |w| w.divergent_ms),
        stale_sets_refused: c.stale_sets_refused,
        invalidation_failures: c.invalidation_failures,
        note: None,
    }
}

/// What the generator itself cost, and whether that casts doubt on the figures.
fn generator_figures(sc: &Scenario, raw: &Raw) -> results::Generator {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let cpu = raw.cpu.as_secs_f64();
    let requests = raw.scheduled + raw.warmup_requests;
    results::Generator {
        max_dispatch_lag_ms: raw.lag.map_or(0.0, |l| l.max),
        dispatch_lag_ms: raw.lag,
        instances: sc.instances,
        cpu_seconds: cpu,
        cpu_per_request_us: if requests == 0 {
            0.0
        } else {
            cpu * 1e6 / requests as f64
        },
        cpu_utilization: cpu / (raw.wall.as_secs_f64() * f64::from(cores)).max(1e-9),
        cores,
        peak_rss_mib: raw.peak_rss as f64 / (1024.0 * 1024.0),
        key_digest: format!("{:016x}", raw.key_digest.0),
        key_digest_draws: raw.key_digest.1,
    }
}
