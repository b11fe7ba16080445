//! One run against an app under test (`--target`): seed its schema (and give it a database
//! role of its own on a managed Postgres), start it (`--app-cmd`) and wait until it is ready,
//! drive it over HTTP with the run's workload and faults while the servers are sampled, then
//! read the load ledger and build the result from what the servers counted. The app is
//! stopped on every way out of here: it is owned by this function's frame.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::build::{Measured, build};
use super::env::{Env, Status};
use super::heartbeat::Heartbeat;
use super::lifecycle::{self, Progress, Readings, RunSpace};
use super::setup::Setup;
use crate::app::http::{HttpFigures, HttpTarget};
use crate::app::process::{ManagedApp, Ready};
use crate::app::sample::{ACTIVITY_EVERY, AppStatements, Sampled, Sampler};
use crate::app::{self as target, TargetSpec};
use crate::cache;
use crate::driver::Driver;
use crate::error::{EnvError, UsageError};
use crate::fault::Server;
use crate::live::Live;
use crate::origin::Db;
use crate::origin::role;
use crate::redact;
use crate::results::{AppFigures, AppProcess, Known, RunResult, StartFigures};
use crate::scenario::Scenario;
use crate::workload::Start;

/// Set up the app's schema and role, run, and remove both whatever happened.
pub async fn run_on(
    sc: &Scenario,
    env: &mut Env,
    shutdown: CancellationToken,
    out: &Progress,
    status: &Status,
) -> Result<RunResult> {
    let t = sc
        .target
        .as_ref()
        .ok_or_else(|| UsageError::new("no --target"))?;
    let run_id = format!("{:08x}", rand::random::<u32>());
    let prefix: Arc<str> = Arc::from(format!("stampede:{run_id}:"));
    let seed_start = Instant::now();
    let schema = t
        .schema
        .clone()
        .unwrap_or_else(|| format!("stampede_{run_id}"));
    let logged = sc.faults_on(Server::Postgres);
    let db = Db::setup_in(
        &env.pg_url,
        &schema,
        sc.keys,
        &sc.sizes(),
        None,
        logged,
        sc.db_cost.0,
    )
    .await
    .with_context(|| format!("seeding schema {schema} for the app"))?;
    // On a managed Postgres the app gets a role of its own: its statements are then told
    // from stampede's by the server itself. The space drops it with the schema.
    let app_role = sc
        .pg_url
        .is_none()
        .then(|| format!("stampede_app_{run_id}"));
    let space = RunSpace::new(db, sc, env).with_role(app_role.clone());
    // An error from here on drops the space, which removes what was made.
    if let Some(r) = &app_role {
        role::create(&env.pg_url, r, &schema).await?;
    }
    let seed_ms = seed_start.elapsed().as_millis() as u64;
    // On the managed Redis too, the run's keys go with it: the next run of a comparison must
    // have its memory limit to itself.
    let admin = cache::Admin::open(&env.redis_url, &env.redis_tls, prefix.clone()).await?;
    let space = space.with_admin(admin.clone());
    let setup = Setup {
        db: space.db(),
        admin: &admin,
        prefix: prefix.clone(),
        seed_ms,
        heavy_query_ms: None,
    };
    // Each heartbeat on its own clock: a stalled Postgres must not let the Redis key lapse.
    let beat = Heartbeat::new();
    let result = beat
        .both(
            &admin,
            space.db(),
            measure(
                sc,
                t,
                env,
                &setup,
                app_role.as_deref(),
                shutdown,
                out,
                status,
            ),
        )
        .await
        .map(|mut r| {
            r.servers.heartbeat = Some(beat.figures());
            r
        });
    space.release().await;
    result
}

/// What every run of an app under test costs besides its window and warm-up: its schema
/// seeded (and its role made), the app started until it is ready, both removed afterwards.
/// Measured once, for `advise --target`'s plan: the app is started again for every candidate.
pub async fn start_cost(
    sc: &Scenario,
    env: &mut Env,
    shutdown: &CancellationToken,
) -> Result<Duration> {
    let t = sc
        .target
        .as_ref()
        .ok_or_else(|| UsageError::new("no --target"))?;
    let began = Instant::now();
    let run_id = format!("{:08x}", rand::random::<u32>());
    let prefix: Arc<str> = Arc::from(format!("stampede:{run_id}:"));
    let schema = t
        .schema
        .clone()
        .unwrap_or_else(|| format!("stampede_{run_id}"));
    let db = Db::setup_in(
        &env.pg_url,
        &schema,
        sc.keys,
        &sc.sizes(),
        None,
        sc.faults_on(Server::Postgres),
        sc.db_cost.0,
    )
    .await
    .with_context(|| format!("seeding schema {schema} for the app"))?;
    let app_role = sc
        .pg_url
        .is_none()
        .then(|| format!("stampede_app_{run_id}"));
    let space = RunSpace::new(db, sc, env).with_role(app_role.clone());
    if let Some(r) = &app_role {
        role::create(&env.pg_url, r, &schema).await?;
    }
    let admin = cache::Admin::open(&env.redis_url, &env.redis_tls, prefix.clone()).await?;
    let space = space.with_admin(admin.clone());
    let setup = Setup {
        db: space.db(),
        admin: &admin,
        prefix,
        seed_ms: 0,
        heavy_query_ms: None,
    };
    let port = crate::servers::free_port().context("finding a free port for the app")?;
    let quiet = Status::new(true);
    let started = start_apps(
        sc,
        t,
        env,
        &setup,
        app_role.as_deref(),
        &[port],
        shutdown,
        &quiet,
    )
    .await;
    // Stopped (dropped) before the space goes: the app must not outlive its schema.
    let ready = started.map(drop);
    space.release().await;
    ready.map(|()| began.elapsed())
}

/// `host:port` of a URL, for a TCP probe.
fn host_port(url: &str) -> Result<String> {
    let u = reqwest::Url::parse(url)
        .map_err(|e| UsageError::new(format!("--target {}: {e}", redact::url(url))))?;
    let host = u
        .host_str()
        .ok_or_else(|| UsageError::new(format!("--target {}: no host", redact::url(url))))?;
    let port = u.port_or_known_default().unwrap_or(80);
    Ok(if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// Whether the target accepts connections: a run against a target that refuses them ends
/// here with exit 3 (no request is sent, so the app's cache stays cold).
async fn probe(url: &str, timeout: Duration) -> Result<()> {
    let addr = host_port(url)?;
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr.as_str())).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(EnvError(format!(
            "cannot reach the target {}: {e} (is the app running and listening on {addr}?)",
            redact::url(url)
        ))
        .into()),
        Err(_) => Err(EnvError(format!(
            "cannot reach the target {}: no connection within --http-timeout {}",
            redact::url(url),
            humantime::format_duration(timeout)
        ))
        .into()),
    }
}

/// How many connections the run opens to process `i` of the app's `processes`:
/// `--http-conns`, by default 64 or one per closed-loop client if there are more (a client
/// never waits for another's connection), shared out between the processes as the requests
/// are, so that together they open no more (but at least one each).
fn connections(t: &TargetSpec, sc: &Scenario, i: usize, processes: usize) -> usize {
    const DEFAULT: u32 = 64;
    let clients = match sc.load {
        crate::scenario::LoadShape::Closed { clients } => clients,
        crate::scenario::LoadShape::Open { .. } => 0,
    };
    let all = t.http_conns.unwrap_or(DEFAULT.max(clients)).max(1) as usize;
    let n = processes.max(1);
    (all / n + usize::from(i < all % n)).max(1)
}

/// One process of the app started and ready, when stampede starts it.
struct Started {
    app: ManagedApp,
    port: u16,
    ready_ms: u64,
}

/// `n` distinct free ports, one per process of the app.
fn free_ports(n: u32) -> Result<Vec<u16>> {
    let mut ports: Vec<u16> = Vec::with_capacity(n as usize);
    // A port just released may be handed out again: each is taken once.
    let mut tries = 0;
    while ports.len() < n as usize {
        let p = crate::servers::free_port().context("finding a free port for the app")?;
        if !ports.contains(&p) {
            ports.push(p);
        }
        tries += 1;
        if tries > 100 * n {
            return Err(EnvError(format!(
                "could not find {n} distinct free ports for the app"
            ))
            .into());
        }
    }
    Ok(ports)
}

/// Where instance `i` of `n` writes its output: `--app-log` (every instance appends to it,
/// each saying its INSTANCE), else a file of its own in the temp dir.
fn log_path(t: &TargetSpec, prefix: &str, i: u32, n: u32) -> std::path::PathBuf {
    if let Some(p) = &t.app_log {
        return std::path::PathBuf::from(p);
    }
    let run = prefix.trim_start_matches("stampede:").trim_end_matches(':');
    let name = if n > 1 {
        format!("stampede-app-{}-{run}-{i}.log", t.name())
    } else {
        format!("stampede-app-{}-{run}.log", t.name())
    };
    std::env::temp_dir().join(name)
}

/// Start `--instances` processes of the app (none without `--app-cmd`), each on its own port
/// with its own INSTANCE, and wait until every one is ready. Dropping what it returns (or a
/// failure half way) stops those already started.
#[allow(clippy::too_many_arguments)]
async fn start_apps(
    sc: &Scenario,
    t: &TargetSpec,
    env: &Env,
    setup: &Setup<'_>,
    app_role: Option<&str>,
    ports: &[u16],
    shutdown: &CancellationToken,
    status: &Status,
) -> Result<Vec<Started>> {
    let Some(cmd) = &t.app_cmd else {
        return Ok(Vec::new());
    };
    let n = ports.len() as u32;
    let mut apps = Vec::with_capacity(ports.len());
    for (i, &port) in ports.iter().enumerate() {
        let vars = app_env(sc, t, env, setup, app_role, port, i as u32);
        let log = log_path(t, &setup.prefix, i as u32, n);
        let app = ManagedApp::start(cmd, &vars, &log).await?;
        let which = if n > 1 {
            format!("app {} instance {i}", t.name())
        } else {
            format!("app {}", t.name())
        };
        status.line(&format!(
            "{which} started (pid {}), output in {}",
            app.pid().unwrap_or(0),
            log.display()
        ));
        apps.push((app, port));
    }
    // Started together, waited for in turn: the slowest sets the time.
    let started = Instant::now();
    let mut out = Vec::with_capacity(apps.len());
    for (mut app, port) in apps.drain(..) {
        let url = t.url_for(Some(port));
        let ready = match &t.app_ready {
            Some(u) => Ready::Url(target::fill_port(u, Some(port))),
            None => Ready::Tcp(host_port(&url)?),
        };
        tokio::select! {
            r = app.wait_ready(&ready, t.app_ready_timeout.0) => r?,
            _ = shutdown.cancelled() => {
                return Err(EnvError("interrupted while waiting for the app to be ready".to_string()).into());
            }
        }
        out.push(Started {
            app,
            port,
            ready_ms: started.elapsed().as_millis() as u64,
        });
    }
    Ok(out)
}

/// The environment of the app's instance `instance` on `port`.
fn app_env(
    sc: &Scenario,
    t: &TargetSpec,
    env: &Env,
    setup: &Setup<'_>,
    app_role: Option<&str>,
    port: u16,
    instance: u32,
) -> Vec<(String, String)> {
    let database_url = match app_role {
        Some(r) => role::with_user(&env.pg_url, r),
        None => env.pg_url.clone(),
    };
    let mut vars = vec![
        ("REDIS_URL".to_string(), env.redis_url.clone()),
        ("DATABASE_URL".to_string(), database_url),
        ("DB_SCHEMA".to_string(), setup.db.schema.clone()),
        ("PORT".to_string(), port.to_string()),
        ("CACHE_PREFIX".to_string(), setup.prefix.to_string()),
        ("CACHE_TTL_MS".to_string(), sc.ttl.0.as_millis().to_string()),
        ("INSTANCE".to_string(), instance.to_string()),
        ("DB_POOL".to_string(), sc.db_pool.to_string()),
    ];
    vars.extend(t.app_env.iter().cloned());
    vars
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    sc: &Scenario,
    t: &TargetSpec,
    env: &mut Env,
    setup: &Setup<'_>,
    app_role: Option<&str>,
    shutdown: CancellationToken,
    out: &Progress,
    status: &Status,
) -> Result<RunResult> {
    let redis_version = lifecycle::redis_version(setup.admin).await?;
    // The app's cache is the run's Redis: a limit is in place before the app starts.
    let memory_config = super::memory::configure(sc, env, setup.admin)
        .await
        .context("setting the managed Redis's memory limit")?;
    // One process per instance when stampede starts the app (one when the target has no
    // {port}: the instances could not have ports of their own); one URL when it is running.
    let own_ports = t.url.contains(target::PORT_MARK);
    let ports = match &t.app_cmd {
        Some(_) => free_ports(if own_ports { sc.instances.max(1) } else { 1 })?,
        None => Vec::new(),
    };
    let urls: Vec<String> = match ports.as_slice() {
        [] => vec![t.url_for(None)],
        p => p.iter().map(|&p| t.url_for(Some(p))).collect(),
    };
    let mut started = start_apps(sc, t, env, setup, app_role, &ports, &shutdown, status).await?;
    let mut http = Vec::with_capacity(urls.len());
    for (i, url) in urls.iter().enumerate() {
        probe(url, t.http_timeout.0).await?;
        let conns = connections(t, sc, i, urls.len());
        http.push(Arc::new(HttpTarget::new(t, url, conns)?));
    }
    let driver = Driver::for_targets(sc, &http);
    let which = match (&t.db_match, app_role) {
        (Some(m), r) => AppStatements::Matching {
            regex: m.clone(),
            role: r.map(str::to_string),
        },
        (None, Some(r)) => AppStatements::Role(r.to_string()),
        (None, None) => AppStatements::Schema(setup.db.schema.clone()),
    };
    let sampler = Sampler::start(
        &env.pg_url,
        &which,
        setup.admin.clone(),
        sc.interval.0,
        driver.window_start(),
        driver.gauges().loads,
    )
    .await?;
    let before = Readings::read(setup.admin).await;
    let live = Live::new(sc.duration.0, out.quiet).for_app();
    let bar = live.bar();
    bar.set_prefix(t.name().to_string());
    let (first_redis_pid, first_pg_pid) = env.pids();
    let traffic = lifecycle::traffic(sc, env, &driver, setup, true, shutdown, live).await;
    let sampled = sampler.finish().await;
    let (raw, faults) = traffic?;
    bar.finish_and_clear();
    let after = Readings::read(setup.admin).await;
    let restarted = lifecycle::redis_restarted(faults.as_ref());
    let memory = super::memory::figures(sc, setup.admin, memory_config.as_ref(), restarted).await;
    let (processes, notes) = processes(sc, t, own_ports, &mut started);
    let ready_ms = started.iter().map(|s| s.ready_ms).max();
    let ledger = crate::app::ledger::read(setup.db, &sampled).await;
    // Stopped before the result is built, so nothing of the app outlives its figures.
    drop(started);
    let measured = Measured {
        raw,
        calls_server: sampled.db_calls,
        redis_stats: before.stats.zip(after.stats),
        redis_version,
        faults,
        first_redis_pid,
        first_pg_pid,
        start: StartFigures {
            mode: Start::Cold,
            keys_cached: 0,
            expiring_in_window: 0,
            left_out_at_limit: 0,
            budget_note: None,
            ms: 0,
        },
        // Writes are refused with --target: the tool cannot see the app's commits.
        divergence: None,
        writes_server: None,
        memory: Some(memory),
        nodes: None,
    };
    let mut r = build(sc, measured, setup, env);
    let http = HttpFigures::sum(http.iter().map(|h| h.figures()));
    shape(
        &mut r, t, http, &which, &sampled, ledger, notes, processes, ready_ms,
    );
    lifecycle::warn_fault_notes(&r);
    Ok(r)
}

/// The app's processes as they ran, and what to say of them: one process where the target
/// had no port mark for each instance, and any instance that exited during the run.
fn processes(
    sc: &Scenario,
    t: &TargetSpec,
    own_ports: bool,
    started: &mut [Started],
) -> (Vec<AppProcess>, Vec<String>) {
    let mut notes = Vec::new();
    if t.app_cmd.is_some() && !own_ports && sc.instances > 1 {
        notes.push(format!(
            "--target has no {}: one process of the app was started, not --instances {} (each instance needs a port of its own)",
            target::PORT_MARK,
            sc.instances
        ));
    }
    let several = started.len() > 1;
    let mut processes = Vec::with_capacity(started.len());
    for (i, s) in started.iter_mut().enumerate() {
        if let Some(st) = s.app.exited() {
            let which = if several {
                format!("the app's instance {i}")
            } else {
                "the app".to_string()
            };
            notes.push(format!(
                "{which} exited during the run ({st}): requests after that failed; see its log"
            ));
        }
        processes.push(AppProcess {
            instance: i as u32,
            port: s.port,
            pid: s.app.pid(),
            log: s.app.log().display().to_string(),
        });
    }
    (processes, notes)
}

/// Redis's server-wide hit ratio over the window, said for what it is.
fn keyspace_hit_rate(sampled: &Sampled, notes: &mut Vec<String>) -> Option<f64> {
    let rate = match (sampled.redis_hits, sampled.redis_misses) {
        (Some(h), Some(m)) if h + m > 0 => Some(h as f64 / (h + m) as f64),
        _ => {
            notes.push("redis.keyspace_hit_rate is unknown: Redis INFO could not be read at both ends of the window (or Redis restarted)".to_string());
            None
        }
    };
    notes.push("redis.keyspace_hit_rate is Redis's keyspace_hits / (hits + misses) over the window, and a timeline bucket's hits its keyspace hits: every GET the server answered, the app's lock reads and other clients' included".to_string());
    rate
}

/// The timeline's DB calls and hits from the servers' samples, the app's own being unseen.
fn timeline_from_servers(r: &mut RunResult, sampled: &Sampled) {
    for (b, s) in r.timeline.iter_mut().zip(&sampled.buckets) {
        b.db_calls = s.db_calls.unwrap_or(0);
        b.pool_wait_ms = 0.0;
        b.hits = s.redis_hits.unwrap_or(0);
    }
    // What the sampler read after the last bucket was taken belongs to the last bucket.
    let n = r.timeline.len();
    if sampled.buckets.len() > n
        && let Some(last) = r.timeline.last_mut()
    {
        last.db_calls += sampled.buckets[n..]
            .iter()
            .filter_map(|s| s.db_calls)
            .sum::<u64>();
    }
}

/// The result of the built-in shape, made the app's: the DB figures are the servers', the
/// outcomes are HTTP's, the hit rate is Redis's.
#[allow(clippy::too_many_arguments)]
fn shape(
    r: &mut RunResult,
    t: &TargetSpec,
    http: HttpFigures,
    which: &AppStatements,
    sampled: &Sampled,
    ledger: crate::app::ledger::Ledger,
    mut notes: Vec<String>,
    mut processes: Vec<AppProcess>,
    ready_ms: Option<u64>,
) {
    r.strategy = t.name().to_string();
    r.http = Some(http);
    // The client's timeouts over HTTP are --http-timeout's (their outcome is `error`).
    r.requests.timed_out = r.http.as_ref().map_or(0, |h| h.timeouts);
    let d = &mut r.db;
    // What the built-in app's own bookkeeping would have said is not there: the app's loads
    // are seen only from the servers.
    d.calls = Known::or_unknown(sampled.db_calls, || {
        "pg_stat_statements could not be read at the window's start or end (a Postgres crash empties it, or the read missed its deadline)".to_string()
    });
    d.calls_server = sampled.db_calls;
    d.calls_server_note = match sampled.db_calls {
        Some(_) => Some(format!(
            "read from pg_stat_statements at the window's start and end (and every --interval for the timeline): {}",
            which.describe()
        )),
        None => Some("pg_stat_statements could not be read at the window's start or end (a Postgres crash empties it): the app's DB calls are unknown".to_string()),
    };
    d.statement_errors = 0;
    d.warmup_calls = 0;
    d.peak_concurrent = sampled.peak_active;
    // The app's loads in flight (queued for its pool included) are its own: the servers
    // show only the statements active, sampled.
    d.peak_in_flight = Known::unknown(
        "an app under test's loads queued in its own pool are invisible from the servers: see db.peak_active_sampled",
    );
    d.peak_active_sampled = Some(sampled.peak_active);
    d.statement_ms_mean = None;
    d.pool_wait_ms_mean = None;
    // The app's own Redis reads, loads and write-backs are not seen from outside.
    r.cost = None;
    d.pool_busy = 0.0;
    // The herds are known only from the load ledger: an app that does not load through
    // `stampede_load(id)` leaves them unknown, never 0.
    let herd_unknown = || {
        ledger
            .note
            .clone()
            .unwrap_or_else(|| "the app does not load through stampede_load".to_string())
    };
    d.peak_key_herd = Known::or_unknown(ledger.herds.as_ref().map(|h| h.peak_herd), herd_unknown);
    d.redundant_loads = Known::or_unknown(ledger.herds.as_ref().map(|h| h.redundant), herd_unknown);
    d.by_cause = Known::unknown(
        "the app's loads are its own: the tool cannot see why each was made (what its cache read found, whether another load of the key was in flight)",
    );
    d.herd_model = None;
    if let Some(n) = &ledger.note {
        notes.push(n.clone());
    }
    // The built-in hit rate counts the tool's own outcomes, which an app's HTTP answers do
    // not carry; Redis's server-wide ratio is named for what it is.
    r.hit_rate = Known::unknown(
        "an app under test's answers do not say whether they came from its cache: see redis.keyspace_hit_rate",
    );
    r.redis.keyspace_hit_rate = keyspace_hit_rate(sampled, &mut notes);
    timeline_from_servers(r, sampled);
    r.app = Some(AppFigures {
        target: t.shown(),
        variant: t.variant.clone(),
        env: t.shown_env(),
        pid: processes.first().and_then(|p| p.pid),
        log: processes.first().map(|p| p.log.clone()),
        processes: if processes.len() > 1 {
            std::mem::take(&mut processes)
        } else {
            Vec::new()
        },
        ready_ms,
        db_calls_counted: which.describe(),
        peak_concurrent_note: format!(
            "the app's statements running at once, from pg_stat_activity sampled every {} ms ({} samples): a shorter peak between two samples is not seen; the ledger's peak herd is exact",
            ACTIVITY_EVERY.as_millis(),
            sampled.activity_samples
        ),
        redis_by_bucket: sampled
            .buckets
            .iter()
            .map(|b| (b.redis_hits, b.redis_misses))
            .collect(),
        ledger_loads: ledger.herds.as_ref().map(|h| h.loads),
        ledger_keys: ledger.herds.as_ref().map(|h| h.keys),
        notes,
    });
    r.recovery = crate::results::recovery::judge(
        &r.scenario,
        &r.faults,
        crate::results::whole(&r.timeline),
        true,
    );
    r.thresholds = r.judge(&r.scenario.thresholds);
    // The expiries and the mechanism's firings are the built-in app's bookkeeping: unknown
    // for an app under test, so what they would diagnose is not said.
    r.diagnoses = crate::results::diagnose::diagnose(r)
        .into_iter()
        .filter(|d| !matches!(d.code.as_str(), "no-expiry" | "mechanism-idle"))
        .collect();
}
