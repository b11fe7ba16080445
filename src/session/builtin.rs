//! One strategy's run of the built-in app on servers that are already up: a fresh schema and
//! cache namespace, the heartbeat that tells `cleanup` the run is alive, the warm start, the
//! traffic and the faults, the servers' own counts read back, and both removed afterwards.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::Progress;
use super::build::{Measured, build};
use super::env::{Env, Status};
use super::heartbeat::Heartbeat;
use super::lifecycle::{self, Readings, RunSpace};
use super::setup::{Setup, heavy_setup};
use crate::cache;
use crate::driver::Driver;
use crate::fault::Server;
use crate::live::Live;
use crate::origin::Db;
use crate::redact;
use crate::results::RunResult;
use crate::scenario::Scenario;

/// One strategy's run on servers that are already up: its own schema (fresh DB counters) and
/// its own Redis namespace (a fresh cache), both held by a [`RunSpace`] that removes them
/// afterwards. Shared by `run` and `compare`.
pub(super) async fn run_on(
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
    let memory_config = super::memory::configure(sc, env, setup.admin)
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
    let memory = super::memory::figures(sc, setup.admin, memory_config.as_ref(), restarted).await;
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
    let result = build(sc, measured, &setup, env);
    lifecycle::warn_fault_notes(&result);
    Ok(result)
}
