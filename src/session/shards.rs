//! A sharded run (`run --shard I/N`, `--shards N`) and `stampede prepare`: one experiment split
//! over processes that meet through Redis. Set up once (shard 0, or `prepare`, seeds the
//! schema, warms the cache for the start instant and writes that instant under the run's
//! `shard:start` key); the others wait for it, bounded, and attach to the schema; all start
//! their traffic at that wall-clock instant; shard 0 alone executes the faults. At the end
//! each shard joins the `shard:done` set; shard 0 waits for all of them, reads the server
//! counters once for the whole window, then removes the run's keys and schema.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::Progress;
use super::build::{Measured, build};
use super::env::{Env, Status};
use super::heartbeat::{BOUND, Heartbeat};
use super::lifecycle::{self, Readings, RunSpace};
use super::setup::{Setup, heavy_setup};
use crate::cache::{self, Admin};
use crate::driver::Driver;
use crate::error::{EnvError, UsageError};
use crate::fault::Server;
use crate::instance::now_ms;
use crate::live::Live;
use crate::metrics::Outcome;
use crate::origin::Db;
use crate::redact;
use crate::results::shard::{LedgerFigures, ShardFigures, WholeRun};
use crate::results::{self, FaultReport, RunResult, StartFigures};
use crate::scenario::Scenario;
use crate::shard::Plan;

/// The run's key holding the start instant (Unix ms): the start signal.
const START_KEY: &str = "shard:start";
/// The run's set of shards done (`index:statements`): the end barrier.
const DONE_KEY: &str = "shard:done";

/// What the load cost is for XFetch entries written before any load.
fn delta_us(sc: &Scenario, heavy_query_ms: Option<f64>) -> u32 {
    match heavy_query_ms {
        Some(ms) => (ms * 1000.0) as u32,
        None => sc.db_cost.0.as_micros().min(u128::from(u32::MAX)) as u32,
    }
}

/// Seed the run's schema (refused when one of this run id exists: an earlier run's leftovers
/// or another run with the same id).
async fn seed(sc: &Scenario, env: &Env, run_id: &str) -> Result<Db> {
    Db::setup(
        &env.pg_url,
        run_id,
        sc.keys,
        &sc.sizes(),
        Some(sc.instances * sc.db_pool),
        sc.faults_on(Server::Postgres),
        sc.db_cost.0,
    )
    .await
    .with_context(|| {
        format!(
            "setting up run {run_id} (if its schema exists, an earlier run with this id left it: `stampede cleanup`, or give another --run-id)"
        )
    })
}

/// Warm the cache for the start instant and write the start signal.
async fn publish_start(
    sc: &Scenario,
    driver: &Driver,
    db: &Db,
    admin: &Admin,
    plan: &Plan,
    heavy_query_ms: Option<f64>,
    shutdown: &CancellationToken,
) -> Result<(u64, StartFigures)> {
    let at = plan
        .start_at
        .unwrap_or_else(|| now_ms() + plan.start_delay.as_millis() as u64);
    let start = driver
        .warm_for(db, admin, delta_us(sc, heavy_query_ms), shutdown, Some(at))
        .await
        .context("warming the cache")?;
    if !admin.set_signal(START_KEY, &at.to_string()).await? {
        return Err(EnvError(format!(
            "run {} was already set up by another process (its start signal exists): give each run its own --run-id",
            plan.run_id
        ))
        .into());
    }
    Ok((at, start))
}

/// Wait for the start signal, at most `--start-timeout`.
async fn wait_for_start(admin: &Admin, plan: &Plan, shutdown: &CancellationToken) -> Result<u64> {
    let deadline = Instant::now() + plan.start_timeout;
    loop {
        if let Some(v) = admin.get_signal(START_KEY).await? {
            let at: u64 = v.parse().map_err(|_| {
                EnvError(format!(
                    "the start signal of run {} holds {v:?}, not a Unix ms",
                    plan.run_id
                ))
            })?;
            if let Some(mine) = plan.start_at
                && mine != at
            {
                return Err(UsageError::new(format!(
                    "--start-at says {mine} ms but the run was set up to start at {at} ms: give every shard the same --start-at"
                ))
                .into());
            }
            return Ok(at);
        }
        if Instant::now() >= deadline {
            return Err(EnvError(format!(
                "shard {} waited {} s for the start signal of run {} and it never came: shard 0 (or `stampede prepare`) writes it into Redis once it has set the run up. Is it running, with the same --run-id, --redis-url and --pg-url? (--start-timeout sets the wait)",
                plan.spec,
                plan.start_timeout.as_secs(),
                plan.run_id
            ))
            .into());
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = shutdown.cancelled() => {
                return Err(EnvError("interrupted while waiting for the start signal".into()).into());
            }
        }
    }
}

/// Refuse to start late: a shard that missed the agreed instant would measure another window.
fn check_on_time(plan: &Plan, at: u64) -> Result<()> {
    let now = now_ms();
    if now > at {
        return Err(EnvError(format!(
            "shard {} of run {} was ready {} ms after the start instant: the shards would not measure the same window. Give a longer --start-delay (or a later --start-at)",
            plan.spec,
            plan.run_id,
            now - at
        ))
        .into());
    }
    Ok(())
}

/// `stampede prepare`: set a sharded run up and write its start signal, then exit.
pub async fn prepare(sc: &Scenario, plan: &Plan) -> Result<()> {
    let status = Status::new(false);
    let env = Env::start(sc, &status).await?;
    let shutdown = super::shutdown_on_signals();
    let prefix: Arc<str> = Arc::from(format!("stampede:{}:", plan.run_id));
    let admin = Admin::open(&env.redis_url, &env.redis_tls, prefix.clone()).await?;
    // While it seeds and warms, the run is alive like any other: a `cleanup` meanwhile must
    // not remove the keys it is warming.
    let beat = Heartbeat::new();
    let (db, done) = beat
        .redis(&admin, async {
            let db = seed(sc, &env, &plan.run_id).await?;
            let done = beat
                .postgres(&db, async {
                    let heavy = heavy_setup(sc, &db, &status).await?;
                    let driver = Driver::build_part(
                        sc,
                        &env.redis_url,
                        &env.redis_tls,
                        prefix,
                        &db,
                        Some(plan.spec),
                    )
                    .await?;
                    let (at, start) =
                        publish_start(sc, &driver, &db, &admin, plan, heavy, &shutdown).await?;
                    lease_until_start(&admin, &db, at).await?;
                    Ok((at, start))
                })
                .await;
            Ok::<_, anyhow::Error>((db, done))
        })
        .await?;
    match done {
        Ok((at, start)) => {
            println!(
                "run {} prepared on {} and {}: {} keys cached; its {} shards start at {} (Unix ms {at}), and its heartbeat lasts until then, so `stampede cleanup` leaves it alone",
                plan.run_id,
                redact::url(&env.redis_url),
                redact::url(&env.pg_url),
                start.keys_cached,
                plan.spec.count,
                humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(at)),
            );
            Ok(())
        }
        Err(e) => {
            let _ = admin.remove_namespace().await;
            let _ = db.teardown().await;
            Err(e)
        }
    }
}

/// `prepare` exits before its shards start, and nothing renews the run's heartbeats in
/// between: leave them lasting until the start instant (the Redis key a heartbeat's life
/// past it, the schema's row dated then, so `cleanup --older-than` counts from then). A shard
/// renews both from the moment it starts, and one started after the instant is refused
/// anyway, so a run prepared and never started is a dead run's leftovers soon after.
async fn lease_until_start(admin: &Admin, db: &Db, at: u64) -> Result<()> {
    let until = Duration::from_millis(at.saturating_sub(now_ms()));
    let fail = |e: anyhow::Error| {
        EnvError(format!(
            "leaving the prepared run's heartbeat until its start: {e:#} (without it a `stampede cleanup` would remove the run before its shards start)"
        ))
    };
    tokio::time::timeout(BOUND, admin.heartbeat_for(until + cache::HEARTBEAT_TTL))
        .await
        .map_err(|_| fail(anyhow::anyhow!("Redis did not answer")))?
        .map_err(fail)?;
    tokio::time::timeout(BOUND, db.heartbeat_ahead(until))
        .await
        .map_err(|_| fail(anyhow::anyhow!("Postgres did not answer")))?
        .map_err(fail)?;
    Ok(())
}

/// One shard's run: set up or wait, start at the agreed instant, meet at the end. Shard 0
/// removes the run's keys and schema once every shard is done, whatever happened.
pub async fn run_shard(
    sc: &Scenario,
    plan: &Plan,
    env: &mut Env,
    shutdown: CancellationToken,
    out: &Progress,
    status: &Status,
) -> Result<RunResult> {
    let prefix: Arc<str> = Arc::from(format!("stampede:{}:", plan.run_id));
    let admin = Admin::open(&env.redis_url, &env.redis_tls, prefix.clone()).await?;
    // The shard says the run is alive from now until it is done (shard 0: until it removes
    // the run): through the setup, the wait for the start instant and the end barrier too,
    // when the run's keys are there and a `cleanup` must leave them alone.
    let beat = Heartbeat::new();
    let (space, result) = beat
        .redis(&admin, async {
            let prepared = admin.get_signal(START_KEY).await?.is_some();
            let seed_start = Instant::now();
            let sets_up = plan.spec.leads() && !prepared;
            let db = if sets_up {
                seed(sc, env, &plan.run_id).await?
            } else {
                // Shard 0 of a prepared run finds the signal at once.
                let _ = wait_for_start(&admin, plan, &shutdown).await?;
                Db::attach_run(&env.pg_url, &plan.run_id, sc.faults_on(Server::Postgres)).await?
            };
            // Shard 0 removes the run's keys and schema once every shard is done, whatever
            // happened; the other shards leave them.
            let space = RunSpace::new(db, sc, env).with_admin(admin.clone());
            let space = match plan.spec.leads() {
                true => space,
                false => space.borrowed(),
            };
            let seed_ms = seed_start.elapsed().as_millis() as u64;
            let db = space.db();
            let result = beat
                .postgres(
                    db,
                    shard_on(
                        sc, plan, env, db, &admin, prefix, seed_ms, sets_up, shutdown, out, status,
                    ),
                )
                .await;
            Ok::<_, anyhow::Error>((space, result))
        })
        .await?;
    let result = result.map(|mut r| {
        r.servers.heartbeat = Some(beat.figures());
        r
    });
    space.release().await;
    result
}

#[allow(clippy::too_many_arguments)]
async fn shard_on(
    sc: &Scenario,
    plan: &Plan,
    env: &mut Env,
    db: &Db,
    admin: &Admin,
    prefix: Arc<str>,
    seed_ms: u64,
    sets_up: bool,
    shutdown: CancellationToken,
    out: &Progress,
    status: &Status,
) -> Result<RunResult> {
    let spec = plan.spec;
    let heavy_query_ms = if sets_up {
        heavy_setup(sc, db, status).await?
    } else {
        None
    };
    let mut driver = Driver::build_part(
        sc,
        &env.redis_url,
        &env.redis_tls,
        prefix.clone(),
        db,
        Some(spec),
    )
    .await?;
    let (at, start) = if sets_up {
        publish_start(sc, &driver, db, admin, plan, heavy_query_ms, &shutdown).await?
    } else {
        let at = wait_for_start(admin, plan, &shutdown).await?;
        let nothing = StartFigures {
            mode: sc.start,
            keys_cached: 0,
            expiring_in_window: 0,
            left_out_at_limit: 0,
            budget_note: None,
            ms: 0,
        };
        (at, nothing)
    };
    check_on_time(plan, at)?;
    status.line(&format!(
        "shard {spec} of run {}: {} app instance(s), starting at {}",
        plan.run_id,
        spec.instances(sc.instances).len(),
        humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(at))
    ));
    driver.start_at(at);
    if let Some(e) = &out.export {
        driver.export(e.clone());
    }
    let redis_version = lifecycle::redis_version(admin).await?;
    let setup = Setup {
        db,
        admin,
        prefix,
        seed_ms,
        heavy_query_ms,
    };
    let before = match spec.leads() {
        true => Readings::read(admin).await.stats,
        false => None,
    };
    let live = Live::new(sc.duration.0, out.quiet);
    let bar = live.bar();
    bar.set_prefix(format!("{} {spec}", sc.strategy));
    // One shard executes the faults (through the restart commands: the servers are
    // external); the others record the schedule.
    let (raw, faults) = lifecycle::traffic(
        sc,
        env,
        &driver,
        &setup,
        spec.leads(),
        shutdown.clone(),
        live,
    )
    .await?;
    bar.finish_and_clear();
    let completed_statements = raw.db.calls.saturating_sub(raw.db.statement_errors);
    admin
        .join_set(DONE_KEY, &format!("{}:{completed_statements}", spec.index))
        .await?;
    let whole_run = if spec.leads() {
        Some(end_barrier(sc, at, admin, db, plan, before, &shutdown).await)
    } else {
        None
    };
    let by_outcome = by_outcome_histograms(&raw);
    let measured = Measured {
        raw,
        calls_server: None,
        redis_stats: None,
        redis_version,
        faults,
        first_redis_pid: None,
        first_pg_pid: None,
        start,
        // Writes are refused with shards (see `run`).
        divergence: None,
        writes_server: None,
        memory: None,
        nodes: None,
    };
    let mut r = build(sc, measured, &setup, env);
    r.histograms.by_outcome_us = by_outcome;
    as_shard(sc, plan, &mut r, at, sets_up, whole_run);
    Ok(r)
}

/// The latency histogram of each outcome, encoded: `merge` adds them up losslessly.
fn by_outcome_histograms(raw: &crate::driver::Raw) -> std::collections::BTreeMap<String, String> {
    Outcome::ALL
        .iter()
        .filter(|o| !raw.totals.by_outcome[**o as usize].is_empty())
        .map(|o| {
            (
                o.name().to_string(),
                results::encode_histogram(&raw.totals.by_outcome[*o as usize]),
            )
        })
        .collect()
}

/// A shard's result as one part of the experiment: its own instances' shares, the server
/// figures left to shard 0's whole-run reading, and the thresholds left to `merge`.
fn as_shard(
    sc: &Scenario,
    plan: &Plan,
    r: &mut RunResult,
    at: u64,
    sets_up: bool,
    whole_run: Option<WholeRun>,
) {
    let spec = plan.spec;
    // A shard runs its own instances, not the experiment's: its generator and its pools' busy
    // share are of those (`merge` weighs the shares by them).
    let own = spec.instances(sc.instances).len() as u32;
    r.generator.instances = own;
    r.db.pool_busy *= f64::from(sc.instances) / f64::from(own.max(1));
    r.db.calls_server_note = Some(
        "the server counts the statements of all shards together: shard 0 reads that count once for the whole run (shard.whole_run.calls_server), and `stampede merge` sets it beside the merged calls".to_string(),
    );
    r.redis.note = Some(
        "INFO counts the whole server: shard 0 reads it once for the whole run (shard.whole_run)"
            .to_string(),
    );
    if !spec.leads() {
        r.faults = planned_faults(sc);
    }
    // Thresholds bound the experiment, not a share of it: `stampede merge` judges them.
    r.thresholds.clear();
    r.shard = Some(ShardFigures {
        index: spec.index,
        count: spec.count,
        run_id: plan.run_id.clone(),
        start_at_ms: at,
        set_up: sets_up,
        executed_faults: spec.leads() && !sc.faults.is_empty(),
        whole_run,
    });
}

/// The fault schedule as planned, for a shard that did not execute it.
fn planned_faults(sc: &Scenario) -> Vec<FaultReport> {
    sc.faults
        .iter()
        .map(|f| FaultReport {
            kind: f.kind,
            at_ms: f.at.0.as_millis() as u64,
            down_ms: f.down_for.0.as_millis() as u64,
            note: Some(
                "executed by shard 0; times as planned (shard 0's result has what it cost)"
                    .to_string(),
            ),
            ..FaultReport::default()
        })
        .collect()
}

/// Shard 0 at the end: wait for every shard (at most `--end-timeout`), then read the server
/// counters of the whole window once.
async fn end_barrier(
    sc: &Scenario,
    at: u64,
    admin: &Admin,
    db: &Db,
    plan: &Plan,
    before: Option<cache::RedisStats>,
    shutdown: &CancellationToken,
) -> WholeRun {
    let deadline = Instant::now() + plan.end_timeout;
    let mut done: Vec<(u32, u64)> = Vec::new();
    loop {
        if let Ok(members) = admin.set_members(DONE_KEY).await {
            done = members
                .iter()
                .filter_map(|m| {
                    let (i, n) = m.split_once(':')?;
                    Some((i.parse().ok()?, n.parse().ok()?))
                })
                .collect();
        }
        if done.len() as u32 >= plan.spec.count || Instant::now() >= deadline {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = shutdown.cancelled() => break,
        }
    }
    done.sort_unstable();
    let statements: u64 = done.iter().map(|(_, n)| n).sum();
    let calls_server = lifecycle::settled_calls(statements, || db.server_calls()).await;
    let after = admin.stats().await.ok();
    let ledger = ledger_figures(sc, db, at).await;
    let missing = plan.spec.count as usize - done.len().min(plan.spec.count as usize);
    let keyspace = before.zip(after);
    WholeRun {
        shards_done: done.iter().map(|(i, _)| *i).collect(),
        calls_server,
        calls_server_note: match (&db.stat_statements_missing, missing) {
            (Some(n), _) => Some(n.clone()),
            (None, 0) => None,
            (None, m) => Some(format!(
                "{m} shard(s) had not reached the end barrier within --end-timeout: the count may miss their last statements"
            )),
        },
        keyspace_hits: keyspace.map(|(b, a)| a.keyspace_hits.saturating_sub(b.keyspace_hits)),
        keyspace_misses: keyspace.map(|(b, a)| a.keyspace_misses.saturating_sub(b.keyspace_misses)),
        ledger,
    }
}

/// Herds over every shard's loads of the measured window, from the ledger: loads that started
/// on the server's clock from the window's start (the agreed instant plus the warm-up, moved
/// onto the server's clock by its offset from this machine's) until now. None under
/// `--db-query heavy`, whose loads do not go through the ledger, or when it cannot be read.
async fn ledger_figures(sc: &Scenario, db: &Db, start_at: u64) -> Option<LedgerFigures> {
    if sc.db_query != crate::origin::DbQuery::Sleep {
        return None;
    }
    let server_now = db.server_now_us().await.ok()?;
    let local_now = now_ms() as i64 * 1000;
    let from = (start_at + sc.warmup.0.as_millis() as u64) as i64 * 1000 + (server_now - local_now);
    let loads = db.ledger_loads(from, server_now + 1).await.ok()?;
    let h = crate::ledger::herds(&loads);
    Some(LedgerFigures {
        loads: h.loads,
        keys: h.keys,
        peak_herd: h.peak_herd,
        redundant: h.redundant,
    })
}
