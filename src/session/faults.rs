//! The fault schedule of a run: started with the servers it faults (a managed server moves into
//! it) and ended with them handed back to the session, to be stopped with it.

use tokio_util::sync::CancellationToken;

use anyhow::Result;

use super::env::Env;
use super::setup::Setup;
use crate::driver::Driver;
use crate::fault::chaos::{self, Chaos, DropSide, HolderSide, PgSide, RedisSide};
use crate::fault::{FaultKind, Server};
use crate::scenario::Scenario;

/// Start the fault schedule, if the scenario has faults. A managed server with faults moves
/// into it (it kills and restarts it) and comes back to `env` in [`finish_faults`]. An
/// external one is faulted through the user's commands (the scenario requires them).
pub(crate) fn start_faults(
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
        cluster: crate::cache::is_cluster(&env.redis_url).then(|| {
            chaos::primaries::ClusterSide::new(
                if sc.faults_on(Server::Redis) {
                    env.cluster.take()
                } else {
                    None
                },
                env.redis_url.clone(),
                env.redis_tls.clone(),
                sc.cluster.node.clone(),
                sc.cluster.slot,
                // Id 1 is the most popular item (popularity rank = id).
                crate::cluster::client::entry_slot(1),
                sc.seed,
            )
        }),
    };
    let postgres = sc.faults_on(Server::Postgres).then(|| PgSide {
        managed: env.pg.take(),
        probe: setup.db.probe(),
        kill_cmd: sc.pg_kill_cmd.clone(),
        restart_cmd: sc.pg_restart_cmd.clone(),
    });
    let drops = sc
        .faults
        .iter()
        .any(|f| f.kind == FaultKind::DropCache)
        .then(|| DropSide {
            admin: setup.admin.clone(),
            keys: sc.keys,
            seed: sc.seed,
            app: sc.target.is_some(),
        });
    let holders = driver.holders().map(|(instances, board)| HolderSide {
        instances,
        board,
        admin: setup.admin.clone(),
        lock_wait: sc.lock.lock_wait.0,
    });
    Some(Chaos::spawn(
        sc.faults.clone(),
        redis,
        postgres,
        drops,
        holders,
        driver.links(),
        driver.gauges(),
        driver.window_start(),
        sc.duration.0,
        shutdown.clone(),
    ))
}

/// End the fault schedule and give the managed servers back to `env` (to be stopped with it).
pub(crate) async fn finish_faults(
    chaos: Option<Chaos>,
    env: &mut Env,
) -> Result<Option<chaos::Done>> {
    let Some(c) = chaos else { return Ok(None) };
    let mut done = c.finish().await?;
    if let Some(r) = done.redis.take() {
        env.redis = Some(r);
    }
    if let Some(c) = done.cluster.take() {
        env.cluster = Some(c);
    }
    if let Some(p) = done.postgres.take() {
        env.pg = Some(p);
    }
    Ok(Some(done))
}
