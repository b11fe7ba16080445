//! What `run` and `compare` share: the shutdown signal, the servers of a session (managed or
//! external, always stopped — on success, error and Ctrl-C alike), and one strategy's run on
//! them, from a fresh schema and cache namespace to the finished [`RunResult`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::cache;
use crate::chaos::{self, Chaos, PgSide, RedisSide};
use crate::cli::OutputFlags;
use crate::driver::{Driver, Raw};
use crate::error::EnvError;
use crate::fault::{FaultKind, Server};
use crate::live::Live;
use crate::metrics::Outcome;
use crate::origin::Db;
use crate::origin::DbQuery;
use crate::results::{self, RunResult, StartFigures};
use crate::scenario::Scenario;
use crate::servers::{ManagedPostgres, ManagedRedis, postgres::PgStartOptions};
use crate::values::redact_url;

/// Ctrl-C, SIGTERM and SIGHUP (a closed terminal) all become one shutdown signal handed to
/// every task, so the servers are stopped however the tool is told to end.
pub fn shutdown_on_signals() -> CancellationToken {
    use tokio::signal::unix::{SignalKind, signal};
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(mut term), Ok(mut hup)) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        t.cancel();
    });
    token
}

/// Status lines for a person watching; silent with --quiet.
pub struct Status {
    quiet: bool,
}

impl Status {
    pub fn new(quiet: bool) -> Status {
        Status { quiet }
    }

    pub fn line(&self, s: &str) {
        if !self.quiet {
            eprintln!("{s}");
        }
    }
}

/// The servers of a run: started by the tool (and stopped by it) or given by URL.
pub struct Env {
    pub redis_url: String,
    pub pg_url: String,
    redis: Option<ManagedRedis>,
    pg: Option<ManagedPostgres>,
    redis_startup: Option<Duration>,
}

impl Env {
    pub async fn start(sc: &Scenario, status: &Status) -> Result<Env> {
        let mut env = Env {
            redis_url: String::new(),
            pg_url: String::new(),
            redis: None,
            pg: None,
            redis_startup: None,
        };
        match &sc.redis_url {
            Some(u) => env.redis_url = u.clone(),
            None => {
                let t = Instant::now();
                let r = ManagedRedis::start().await?;
                env.redis_startup = Some(t.elapsed());
                env.redis_url = r.url();
                env.redis = Some(r);
            }
        }
        match &sc.pg_url {
            Some(u) => env.pg_url = u.clone(),
            None => {
                // Every instance's pool plus the admin connections, with headroom.
                let max_connections = sc.instances * sc.db_pool + 10;
                let p = ManagedPostgres::start(PgStartOptions { max_connections }).await?;
                let (took, reused) = p.startup();
                status.line(&format!(
                    "managed servers up: redis {} in {} ms, postgres {} in {} ms ({})",
                    env.redis_url,
                    env.redis_startup.map_or(0, |d| d.as_millis()),
                    p.url(),
                    took.as_millis(),
                    if reused {
                        "from template"
                    } else {
                        "first run: template created"
                    }
                ));
                env.pg_url = p.url();
                env.pg = Some(p);
            }
        }
        Ok(env)
    }

    /// The managed servers' pids (none for external ones).
    pub fn pids(&self) -> (Option<u32>, Option<u32>) {
        (
            self.redis.as_ref().and_then(|r| r.pid()),
            self.pg.as_ref().and_then(|p| p.pid()),
        )
    }

    pub fn managed(&self) -> bool {
        self.redis.is_some() || self.pg.is_some()
    }

    pub fn stop(&mut self) {
        if let Some(mut r) = self.redis.take() {
            r.stop();
        }
        if let Some(mut p) = self.pg.take() {
            p.stop();
        }
    }
}

/// One strategy's run on servers that are already up: its own schema (fresh DB counters) and
/// its own Redis namespace (a fresh cache), both removed afterwards. Shared by `run` and
/// `compare`.
pub async fn run_on(
    sc: &Scenario,
    env: &mut Env,
    shutdown: CancellationToken,
    out: &OutputFlags,
    status: &Status,
) -> Result<RunResult> {
    if sc.target.is_some() {
        return super::app_run::run_on(sc, env, shutdown, out, status).await;
    }
    let run_id = format!("{:08x}", rand::random::<u32>());
    let prefix: Arc<str> = Arc::from(format!("stampede:{run_id}:"));
    let seed_start = Instant::now();
    // A Postgres crash empties unlogged tables: with a Postgres fault the items are logged.
    let logged = sc.faults_on(Server::Postgres);
    let db = Db::setup(
        &env.pg_url,
        &run_id,
        sc.keys,
        sc.value_size,
        sc.pg_url.is_some().then_some(sc.instances * sc.db_pool),
        logged,
        sc.db_cost.0,
    )
    .await?;
    let heavy_query_ms = heavy_setup(sc, &db, status).await;
    let seed_ms = seed_start.elapsed().as_millis() as u64;
    let admin = cache::Admin::open(&env.redis_url, prefix.clone()).await?;
    // From here on the run's schema and keys exist: remove them whatever happens next.
    let result = match heavy_query_ms {
        Ok(heavy_query_ms) => {
            let setup = Setup {
                db: &db,
                admin: &admin,
                prefix,
                seed_ms,
                heavy_query_ms,
            };
            // While the run goes it says it is alive, in Redis and in its schema, so that
            // `stampede cleanup` can tell a dead run's leftovers from a live run's.
            let beat = async {
                loop {
                    let _ = admin.heartbeat().await;
                    let _ = db.heartbeat().await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            };
            tokio::select! {
                biased;
                () = beat => unreachable!("the heartbeat loop never ends"),
                r = measure(sc, env, setup, shutdown, out, status) => r,
            }
        }
        Err(e) => Err(e),
    };
    if sc.redis_url.is_some()
        && let Err(e) = admin.remove_namespace().await
    {
        eprintln!(
            "warning: could not remove this run's keys from {}: {e:#}",
            redact_url(&env.redis_url)
        );
    }
    if let Err(e) = db.teardown().await {
        eprintln!("warning: {e:#}");
    }
    result
}

/// What the run's setup made, for the measurement.
pub(super) struct Setup<'a> {
    pub(super) db: &'a Db,
    pub(super) admin: &'a cache::Admin,
    pub(super) prefix: Arc<str>,
    pub(super) seed_ms: u64,
    pub(super) heavy_query_ms: Option<f64>,
}

/// Under `--db-query heavy`, seed the reviews table and measure one heavy query.
async fn heavy_setup(sc: &Scenario, db: &Db, status: &Status) -> Result<Option<f64>> {
    if sc.db_query != DbQuery::Heavy {
        return Ok(None);
    }
    let ms = db.seed_reviews(sc.keys).await?;
    status.line(&format!(
        "heavy DB query: one aggregate over {} reviews takes {ms:.1} ms on the idle server (median of 5, one core: no parallel workers)",
        crate::origin::REVIEW_ROWS
    ));
    Ok(Some(ms))
}

/// Start the fault schedule, if the scenario has faults. A managed server with faults moves
/// into it (it kills and restarts it) and comes back to `env` in [`finish_faults`]. An
/// external one is faulted through the user's commands (the scenario requires them).
pub(super) fn start_faults(
    sc: &Scenario,
    env: &mut Env,
    driver: &Driver,
    setup: &Setup<'_>,
    shutdown: &CancellationToken,
) -> Option<Chaos> {
    if sc.faults.is_empty() {
        return None;
    }
    let redis = RedisSide {
        managed: if sc.faults_on(Server::Redis) {
            env.redis.take()
        } else {
            None
        },
        admin: setup.admin.clone(),
        restart_cmd: sc.redis_restart_cmd.clone(),
    };
    let postgres = sc.faults_on(Server::Postgres).then(|| PgSide {
        managed: env.pg.take(),
        probe: setup.db.probe(),
        kill_cmd: sc.pg_kill_cmd.clone(),
        restart_cmd: sc.pg_restart_cmd.clone(),
    });
    Some(Chaos::spawn(
        sc.faults.clone(),
        redis,
        postgres,
        driver.gauges(),
        driver.window_start(),
        sc.duration.0,
        shutdown.clone(),
    ))
}

/// End the fault schedule and give the managed servers back to `env` (to be stopped with it).
pub(super) async fn finish_faults(
    chaos: Option<Chaos>,
    env: &mut Env,
) -> Result<Option<chaos::Done>> {
    let Some(c) = chaos else { return Ok(None) };
    let mut done = c.finish().await?;
    if let Some(r) = done.redis.take() {
        env.redis = Some(r);
    }
    if let Some(p) = done.postgres.take() {
        env.pg = Some(p);
    }
    Ok(Some(done))
}

/// Everything a result is built from, gathered before it is built once.
pub(super) struct Measured {
    pub(super) raw: Raw,
    pub(super) calls_server: Option<u64>,
    pub(super) redis_stats: Option<(cache::RedisStats, cache::RedisStats)>,
    pub(super) redis_version: String,
    pub(super) faults: Option<chaos::Done>,
    pub(super) first_redis_pid: Option<u32>,
    pub(super) first_pg_pid: Option<u32>,
    pub(super) start: StartFigures,
}

async fn measure(
    sc: &Scenario,
    env: &mut Env,
    setup: Setup<'_>,
    shutdown: CancellationToken,
    out: &OutputFlags,
    status: &Status,
) -> Result<RunResult> {
    let redis_version = setup
        .admin
        .version()
        .await
        .map_err(|e| EnvError(format!("reading Redis INFO: {e:#}")))?;
    let driver = Driver::build(sc, &env.redis_url, setup.prefix.clone(), setup.db).await?;
    let delta_us = match setup.heavy_query_ms {
        Some(ms) => (ms * 1000.0) as u32,
        None => sc.db_cost.0.as_micros().min(u128::from(u32::MAX)) as u32,
    };
    let start = driver
        .warm(setup.db, setup.admin, delta_us, &shutdown)
        .await
        .context("warming the cache")?;
    status.line(&format!(
        "start {}: {} keys cached in {} ms",
        start.mode.name(),
        start.keys_cached,
        start.ms
    ));
    let before = setup.admin.stats().await.ok();
    let live = Live::new(sc.duration.0, out.quiet);
    let bar = live.bar();
    // Names the bar: `compare` shows one per strategy.
    bar.set_prefix(sc.strategy.to_string());
    let first_redis_pid = env.redis.as_ref().and_then(|r| r.pid());
    let first_pg_pid = env.pg.as_ref().and_then(|p| p.pid());
    let chaos = start_faults(sc, env, &driver, &setup, &shutdown);
    let raw = driver.run(shutdown, live).await;
    let faults = finish_faults(chaos, env).await;
    let raw = raw?;
    let faults = faults?;
    bar.finish_and_clear();
    let after = setup.admin.stats().await.ok();
    // The server counts a statement when it completes without error.
    let tool_total = raw.db.calls.saturating_sub(raw.db.statement_errors);
    // A Postgres crash empties pg_stat_statements: what it had counted before each kill is
    // added to the last reading (none when a reading failed: the sum would be short).
    let erased = faults.as_ref().map(|d| &d.server_calls);
    let read = || async {
        match erased {
            Some(e) if e.unreadable => None,
            Some(e) => Some(setup.db.server_calls().await? + e.lost),
            None => setup.db.server_calls().await,
        }
    };
    // pg_stat_statements records a statement as it ends; give the last ones a moment to land.
    let mut calls_server = read().await;
    let wait_until = Instant::now() + Duration::from_secs(1);
    while calls_server.is_some_and(|c| c < tool_total) && Instant::now() < wait_until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        calls_server = read().await;
    }
    let measured = Measured {
        raw,
        calls_server,
        redis_stats: before.zip(after),
        redis_version,
        faults,
        first_redis_pid,
        first_pg_pid,
        start,
    };
    let result = build(sc, measured, &setup, env);
    for f in result.faults.iter().filter_map(|f| f.note.as_deref()) {
        eprintln!("warning: fault: {f}");
    }
    Ok(result)
}

/// The result of a run, built once from everything measured.
pub(super) fn build(sc: &Scenario, m: Measured, setup: &Setup<'_>, env: &Env) -> RunResult {
    let Measured {
        raw,
        calls_server,
        redis_stats: redis,
        redis_version,
        faults,
        first_redis_pid,
        first_pg_pid,
        start,
    } = m;
    let db = setup.db;
    let generator = generator_figures(sc, &raw);
    let t = &raw.totals;
    let o = |x: Outcome| t.outcomes[x as usize];
    // Abandoned requests are recorded as errors at the moment they were given up.
    let errors = o(Outcome::Error);
    let completed = t.completed();
    let c = &raw.counters;
    let d = &raw.db;
    let mut by_outcome = std::collections::BTreeMap::new();
    for x in Outcome::ALL {
        let h = &t.by_outcome[x as usize];
        if !h.is_empty() {
            by_outcome.insert(x.name().to_string(), results::Latency::of(h));
        }
    }
    let fault_reports = faults
        .as_ref()
        .map(|d| chaos::reports(&d.records, &raw.timeline))
        .unwrap_or_default();
    // INFO's counters start again at zero with every restart of Redis.
    let redis_restarted = fault_reports
        .iter()
        .any(|f| f.kind == FaultKind::KillRedis && f.down_ms > 0);
    let redis_paused = fault_reports
        .iter()
        .any(|f| f.kind == FaultKind::PauseRedis && f.down_ms > 0);
    let mut redis_pids: Vec<u32> = first_redis_pid.into_iter().collect();
    let mut postgres_pids: Vec<u32> = first_pg_pid.into_iter().collect();
    if let Some(d) = &faults {
        redis_pids.extend(&d.restarted_pids);
        postgres_pids.extend(&d.pg_restarted_pids);
    }
    let calls_server_read = faults
        .as_ref()
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
    let mut r = RunResult {
        schema: results::SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        strategy: sc.strategy.to_string(),
        started_at_ms: raw.started_at_ms,
        interrupted: raw.interrupted,
        scenario: sc.clone(),
        start: Some(start.clone()),
        requests: results::Requests {
            scheduled: raw.scheduled,
            completed,
            shed: raw.shed,
            unsent: raw.unsent,
            errors,
            abandoned: raw.abandoned,
            warmup: raw.warmup_requests,
        },
        outcomes: results::Outcomes {
            hit: o(Outcome::Hit),
            miss: o(Outcome::Miss),
            stale: o(Outcome::Stale),
            waited: o(Outcome::Waited),
            fallback: o(Outcome::Fallback),
            error: errors,
            rejected: o(Outcome::Rejected),
            ok: o(Outcome::Ok),
        },
        hit_rate: if completed == 0 {
            0.0
        } else {
            (o(Outcome::Hit) + o(Outcome::Stale)) as f64 / completed as f64
        },
        db: results::DbFigures {
            calls: d.calls,
            calls_server,
            calls_server_note: match (&db.stat_statements_missing, &faults) {
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
            warmup_calls: d.warmup_calls,
            peak_concurrent: d.peak_concurrent,
            peak_in_flight: d.peak_in_flight,
            peak_key_herd: d.peak_herd,
            redundant_loads: d.redundant,
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
            heavy_query_ms: setup.heavy_query_ms,
        },
        redis: results::RedisFigures {
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
            expiries: c.expiring_writes + start.expiring_in_window,
        },
        lock: results::LockFigures {
            acquired: c.lock_acquired,
            contended: c.lock_contended,
            timeouts: c.lock_timeouts,
            lost: c.lock_lost,
            unavailable: c.lock_unavailable,
        },
        latency_ms: results::Latency::of(&t.latency),
        service_ms: results::Latency::of(&t.service),
        latency_by_outcome_ms: by_outcome,
        histograms: results::Histograms {
            encoding: "hdrhistogram-v2-deflate-base64".to_string(),
            latency_us: results::encode_histogram(&t.latency),
            service_us: results::encode_histogram(&t.service),
        },
        timeline: raw.timeline,
        faults: fault_reports,
        breaker: raw.breaker,
        servers: results::Servers {
            redis_version,
            postgres_version: db.version.clone(),
            managed: env.managed(),
            redis_url: redact_url(&env.redis_url),
            pg_url: redact_url(&env.pg_url),
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
        },
        generator,
        thresholds: Vec::new(),
        diagnoses: Vec::new(),
        http: None,
        app: None,
    };
    r.thresholds = r.judge(&sc.thresholds);
    r.diagnoses = results::diagnose::diagnose(&r);
    r
}

/// What the generator itself cost, and whether that casts doubt on the figures.
fn generator_figures(sc: &Scenario, raw: &Raw) -> results::Generator {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let cpu = raw.cpu.as_secs_f64();
    let requests = raw.scheduled + raw.warmup_requests;
    results::Generator {
        max_dispatch_lag_ms: raw.max_lag.as_secs_f64() * 1000.0,
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
