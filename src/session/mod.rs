//! The orchestration of a run, apart from the commands that ask for it: `run`'s own ([`run`]:
//! one strategy, its `--repeat` trials or this process's part of a sharded run, with the live
//! metrics served while it goes and for `--metrics-linger` after the results are shown), the
//! servers of a session ([`env`]), one measured run in phases ([`lifecycle`]) of the built-in
//! app on them (here: [`run_on`]) or of an app under test ([`app_run`]), both starting from
//! what their setup made ([`setup`]), repeated trials and comparisons ([`trials`]), sharded runs
//! ([`shards`]) and the removal of dead runs' leftovers ([`cleanup`]). A command reads its
//! arguments, calls one function here and says how the process ends.

pub mod app_run;
pub mod build;
pub mod cleanup;
pub mod env;
pub mod faults;
pub(crate) mod heartbeat;
pub mod lifecycle;
pub(crate) mod memory;
mod setup;
pub mod shards;
pub mod sweep;
pub mod traces;
pub mod trials;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

pub use env::{Env, Status, shutdown_on_signals};
pub use lifecycle::Progress;

use build::{Measured, build};
use heartbeat::Heartbeat;
use lifecycle::{Readings, RunSpace};
use setup::{Setup, heavy_setup};
use trials::{Ended, Output};

use crate::cache;
use crate::driver::Driver;
use crate::exporter::{self, Export};
use crate::fault::Server;
use crate::live::Live;
use crate::origin::Db;
use crate::redact;
use crate::results::RunResult;
use crate::scenario::Scenario;
use crate::shard::Plan;
use crate::values::Dur;

/// One strategy's run on servers that are already up: the app under test's when the scenario
/// has a `--target`, else the built-in app's. Shared by `run`, `compare` and their trials.
pub async fn run_on(
    sc: &Scenario,
    env: &mut Env,
    shutdown: CancellationToken,
    out: &Progress,
    status: &Status,
) -> Result<RunResult> {
    if sc.target.is_some() {
        return app_run::run_on(sc, env, shutdown, out, status).await;
    }
    run_builtin(sc, env, shutdown, out, status).await
}

/// What a run did: one result to show, or trials already written and shown.
pub enum Done {
    One(Box<RunResult>),
    Trials(Ended),
}

/// How `run` runs its scenario: trials, live metrics and where the output goes.
pub struct Options {
    pub trials: trials::Trials,
    pub metrics_listen: Option<std::net::SocketAddr>,
    pub metrics_linger: Option<Dur>,
    pub output: Output,
}

/// Run `sc` (this process's part of it under a shard `plan`); `show` writes and prints a
/// single run's result (before the metrics linger, so the last scrape sees what the user saw).
pub async fn run(
    sc: Scenario,
    plan: Option<Plan>,
    opts: &Options,
    show: impl FnOnce(&RunResult) -> Result<()>,
) -> Result<Done> {
    if opts.trials.repeat > 1 {
        let ended =
            trials::run_trials(std::slice::from_ref(&sc), opts.trials, &opts.output).await?;
        return Ok(Done::Trials(ended));
    }
    let shutdown = shutdown_on_signals();
    let status = Status::new(opts.output.quiet);
    let mut output = Progress {
        quiet: opts.output.quiet,
        export: None,
    };
    let metrics = match opts.metrics_listen {
        Some(addr) => {
            let label = plan.as_ref().map_or(String::new(), |p| p.spec.to_string());
            let export = Export::new(&sc.strategy.to_string(), &label);
            output.export = Some(export.clone());
            let stop = CancellationToken::new();
            let server = exporter::serve(addr, export, stop.clone()).await?;
            status.line(&format!("metrics at http://{addr}/metrics"));
            Some((stop, server))
        }
        None => None,
    };
    let mut env = Env::start(&sc, &status).await?;
    let outcome = match &plan {
        Some(p) => shards::run_shard(&sc, p, &mut env, shutdown.clone(), &output, &status).await,
        None => run_on(&sc, &mut env, shutdown.clone(), &output, &status).await,
    };
    env.stop();
    let linger = opts.metrics_linger.map_or(Duration::ZERO, |d| d.0);
    let written = outcome.and_then(|r| show(&r).map(|()| r));
    if let Some((stop, server)) = metrics {
        // The final values stay up for the last scrape, unless the user asked to stop.
        if written.is_ok() && !linger.is_zero() {
            status.line(&format!("serving the final metrics for {}", Dur(linger)));
            tokio::select! {
                _ = tokio::time::sleep(linger) => {}
                _ = shutdown.cancelled() => {}
            }
        }
        stop.cancel();
        let _ = server.await;
    }
    Ok(Done::One(Box::new(written?)))
}

/// The built-in app's run on servers that are already up: its own schema (fresh DB counters)
/// and its own Redis namespace (a fresh cache), both held by a [`RunSpace`] that removes them
/// afterwards; a fresh heartbeat tells `cleanup` the run is alive, and after the warm start,
/// the traffic and the faults, the servers' own counts are read back.
async fn run_builtin(
    sc: &Scenario,
    env: &mut Env,
    shutdown: CancellationToken,
    out: &Progress,
    status: &Status,
) -> Result<RunResult> {
    let run_id = format!("{:08x}", rand::random::<u32>());
    let prefix: Arc<str> = Arc::from(format!("stampede:{run_id}:"));
    let seed_start = Instant::now();
    let connections = sc.pg_url.is_some().then_some(sc.instances * sc.db_pool);
    // Under --db-sql the keys are the user's: the scenario takes their number from here on.
    let own_sc;
    let (db, sc) = match &sc.own_load {
        Some(own) => {
            let (db, n) = Db::attach(&env.pg_url, own, sc.keys, connections).await?;
            own_sc = Scenario {
                keys: n,
                warm: sc.warm.min(n),
                ..sc.clone()
            };
            status.line(&own_load_line(&own_sc, &env.pg_url));
            (db, &own_sc)
        }
        None => {
            // A Postgres crash empties unlogged tables: with a Postgres fault the items are logged.
            let logged = sc.faults_on(Server::Postgres);
            let db = Db::setup(
                &env.pg_url,
                &run_id,
                sc.keys,
                &sc.sizes(),
                connections,
                logged,
                sc.db_cost.0,
            )
            .await?;
            (db, sc)
        }
    };
    // From here on the run's schema exists (and its keys, once written): the space removes
    // them whatever happens next.
    let space = RunSpace::new(db, sc, env);
    let heavy_query_ms = heavy_setup(sc, space.db(), status).await?;
    // A replay's items carry the trace's sizes: Postgres's own count of them, for the record.
    let seeded_bytes = match &sc.trace {
        Some(_) => space.db().payload_bytes().await.ok(),
        None => None,
    };
    let seed_ms = seed_start.elapsed().as_millis() as u64;
    let admin = cache::Admin::open(&env.redis_url, &env.redis_tls, prefix.clone()).await?;
    let space = space.with_admin(admin.clone());
    let result = async {
        admin
            .check_access(
                &env.redis_url,
                sc.strategy.coordination.mutex(),
                &sc.strategy.to_string(),
            )
            .await?;
        let setup = Setup {
            db: space.db(),
            admin: &admin,
            prefix,
            seed_ms,
            heavy_query_ms,
        };
        // While the run goes it says it is alive, in Redis and in its schema, so that
        // `stampede cleanup` can tell a dead run's leftovers from a live run's.
        let beat = Heartbeat::new();
        let mut r = beat
            .both(
                &admin,
                space.db(),
                measure(sc, env, setup, shutdown, out, status),
            )
            .await?;
        r.servers.heartbeat = Some(beat.figures());
        r.db.seeded_bytes = seeded_bytes;
        Ok(r)
    }
    .await;
    space.release().await;
    result
}

/// What a run on the user's own query will do to their server, said before it starts.
fn own_load_line(sc: &Scenario, pg_url: &str) -> String {
    let mut s = format!(
        "--db-sql: {} keys; nothing is created in {} (every transaction there is read-only; your query ran once on the first key to check it)",
        sc.keys,
        redact::url(pg_url)
    );
    let warming = match sc.start {
        crate::workload::Start::Cold => sc.warm,
        _ => sc.keys,
    };
    if warming > 0 {
        s.push_str(&format!(
            "; warming the cache ({} start{}) runs your query once per key it caches: up to {warming} queries before traffic starts",
            sc.start.name(),
            if sc.warm > 0 {
                format!(", --warm {}", sc.warm)
            } else {
                String::new()
            }
        ));
    } else {
        s.push_str("; cold start: the cache is empty when traffic starts");
    }
    s
}

async fn measure(
    sc: &Scenario,
    env: &mut Env,
    setup: Setup<'_>,
    shutdown: CancellationToken,
    out: &Progress,
    status: &Status,
) -> Result<RunResult> {
    let redis_version = lifecycle::redis_version(setup.admin).await?;
    let mut driver = Driver::build(
        sc,
        &env.redis_url,
        &env.redis_tls,
        setup.prefix.clone(),
        setup.db,
    )
    .await?;
    if let Some(e) = &out.export {
        driver.export(e.clone());
    }
    let delta_us = match setup.heavy_query_ms {
        Some(ms) => (ms * 1000.0) as u32,
        None => sc.db_cost.0.as_micros().min(u128::from(u32::MAX)) as u32,
    };
    // The limit is in place before the start state is written, which then stops at it.
    let memory_config = memory::configure(sc, env, setup.admin)
        .await
        .context("setting the managed Redis's memory limit")?;
    let start = driver
        .warm(setup.db, setup.admin, delta_us, &shutdown)
        .await
        .context("warming the cache")?;
    status.line(&format!(
        "start {}: {} keys cached in {} ms{}",
        start.mode.name(),
        start.keys_cached,
        start.ms,
        start.budget_note.as_deref().unwrap_or("")
    ));
    // The server's clock beside this one's, to find the window on the ledger's clock.
    let ledger_clock = match sc.load_via_ledger {
        true => LedgerClock::read(setup.db).await,
        false => None,
    };
    let window = driver.window_start();
    let before = Readings::read(setup.admin).await;
    let live = Live::new(sc.duration.0, out.quiet);
    let bar = live.bar();
    // Names the bar: `compare` shows one per strategy.
    bar.set_prefix(sc.label());
    let (first_redis_pid, first_pg_pid) = env.pids();
    let (raw, faults) = lifecycle::traffic(sc, env, &driver, &setup, true, shutdown, live).await?;
    bar.finish_and_clear();
    let after = Readings::read(setup.admin).await;
    let restarted = lifecycle::redis_restarted(faults.as_ref());
    let memory = memory::figures(sc, setup.admin, memory_config.as_ref(), restarted).await;
    // Read after INFO: reading the written keys back counts in the keyspace figures.
    let divergence = driver
        .divergence(setup.db, setup.admin)
        .await
        .map_err(|e| format!("{e:#}"))
        .transpose();
    // As for the loads: the last counts are given a moment to land.
    let writes_server = lifecycle::server_writes(setup.db, &raw).await;
    let calls_server = lifecycle::server_calls(setup.db, &raw, faults.as_ref()).await;
    let measured = Measured {
        raw,
        calls_server,
        redis_stats: before.stats.zip(after.stats),
        redis_version,
        faults,
        first_redis_pid,
        first_pg_pid,
        start,
        divergence,
        writes_server,
        memory: Some(memory),
        nodes: before.nodes.zip(after.nodes),
    };
    let mut result = build(sc, measured, &setup, env);
    if let Some(clock) = ledger_clock {
        let opened = *window.borrow();
        if let Some(h) = clock.herds(setup.db, opened).await {
            result.db.ledger_peak_key_herd = Some(h.peak_herd);
            result.db.ledger_redundant_loads = Some(h.redundant);
        }
    }
    lifecycle::warn_fault_notes(&result);
    Ok(result)
}

/// The Postgres server's clock read beside this process's, so that the measured window
/// (an `Instant` here) can be found on the clock the load ledger is written by.
struct LedgerClock {
    server_us: i64,
    local: Instant,
}

impl LedgerClock {
    async fn read(db: &Db) -> Option<LedgerClock> {
        let local = Instant::now();
        let server_us = db.server_now_us().await.ok()?;
        Some(LedgerClock { server_us, local })
    }

    /// Herds over the loads that started from the window's opening until now (the drain
    /// included, as for an app under test); None when the ledger cannot be read.
    async fn herds(&self, db: &Db, opened: Option<Instant>) -> Option<crate::ledger::LedgerHerds> {
        let opened = opened?;
        let from = self.server_us + opened.saturating_duration_since(self.local).as_micros() as i64
            - self.local.saturating_duration_since(opened).as_micros() as i64;
        let to = db.server_now_us().await.ok()? + 1;
        let loads = db.ledger_loads(from, to).await.ok()?;
        Some(crate::ledger::herds(&loads))
    }
}
