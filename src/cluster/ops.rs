//! The async shells over [`super::topology`]: read a node's view and counters, and change
//! the cluster (a planned failover, a slot migration) or wait for it to change (a promotion
//! after a primary died), through plain connections to one node at a time, managed or
//! external. Every connection and every command has a deadline.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use redis::aio::MultiplexedConnection;

use super::topology::{
    ClusterNode, ClusterState, NodeStats, Role, SLOTS, info_fields, node_url, parse_cluster_info,
    parse_cluster_nodes, parse_node_stats,
};
use crate::redact;
use crate::tls::{RedisTls, redis_client};

/// How long one connection attempt or one command may take. Topology commands answer in
/// microseconds on a live node; a node that does not answer in this time is as good as down.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the waits poll: a twentieth of the managed node timeout, so a promotion is
/// timed to within ~50 ms without keeping a node busy.
const POLL: Duration = Duration::from_millis(50);

/// A connection to one node, with the connect deadline set.
async fn connect(url: &str, tls: &RedisTls) -> Result<MultiplexedConnection> {
    let client = redis_client(url, tls)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CALL_TIMEOUT))
        .set_response_timeout(None);
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .with_context(|| format!("connecting to the Redis node {}", redact::url(url)))
}

/// Run `cmd` with a deadline of `timeout`; errors name the command and the node.
async fn call<T: redis::FromRedisValue>(
    con: &mut MultiplexedConnection,
    cmd: &redis::Cmd,
    timeout: Duration,
    what: &str,
    url: &str,
) -> Result<T> {
    match tokio::time::timeout(timeout, cmd.query_async(con)).await {
        Ok(reply) => reply.with_context(|| format!("{what} on {}", redact::url(url))),
        Err(_) => bail!(
            "{what} on {} got no answer within {timeout:?}",
            redact::url(url)
        ),
    }
}

async fn text_of(url: &str, tls: &RedisTls, cmd: &redis::Cmd, what: &str) -> Result<String> {
    let mut con = connect(url, tls).await?;
    call(&mut con, cmd, CALL_TIMEOUT, what, url).await
}

fn cluster_cmd(sub: &str) -> redis::Cmd {
    let mut c = redis::cmd("CLUSTER");
    c.arg(sub);
    c
}

/// The nodes as the node at `url` sees them (CLUSTER NODES).
pub async fn cluster_nodes(url: &str, tls: &RedisTls) -> Result<Vec<ClusterNode>> {
    let text = text_of(url, tls, &cluster_cmd("NODES"), "CLUSTER NODES").await?;
    parse_cluster_nodes(&text).map_err(|e| anyhow::anyhow!("{}: {e}", redact::url(url)))
}

/// The cluster's state as the node at `url` sees it (CLUSTER INFO).
pub async fn cluster_state(url: &str, tls: &RedisTls) -> Result<ClusterState> {
    let text = text_of(url, tls, &cluster_cmd("INFO"), "CLUSTER INFO").await?;
    parse_cluster_info(&text).map_err(|e| anyhow::anyhow!("{}: {e}", redact::url(url)))
}

/// The node's counters (`INFO stats memory errorstats`).
pub async fn node_stats(url: &str, tls: &RedisTls) -> Result<NodeStats> {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("stats").arg("memory").arg("errorstats");
    let text = text_of(url, tls, &cmd, "INFO stats memory errorstats").await?;
    parse_node_stats(&text).map_err(|e| anyhow::anyhow!("{}: {e}", redact::url(url)))
}

/// Whether the replica at `url` has a live link to its primary (`master_link_status:up`).
pub async fn replica_link_up(url: &str, tls: &RedisTls) -> Result<bool> {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("replication");
    let text = text_of(url, tls, &cmd, "INFO replication").await?;
    Ok(info_fields(&text).contains(&("master_link_status", "up")))
}

/// The fewest replicas CLUSTER SLOTS of the node at `url` lists for a slot range: what a
/// cluster client learns of the replicas it may read from (a node lists a replica there only
/// once it knows it as healthy, which may come after CLUSTER NODES shows it attached).
pub async fn slots_replicas(url: &str, tls: &RedisTls) -> Result<usize> {
    let mut con = connect(url, tls).await?;
    let v: redis::Value = call(
        &mut con,
        &cluster_cmd("SLOTS"),
        CALL_TIMEOUT,
        "CLUSTER SLOTS",
        url,
    )
    .await?;
    let redis::Value::Array(ranges) = v else {
        bail!(
            "CLUSTER SLOTS on {} did not answer an array",
            redact::url(url)
        );
    };
    // Each range: [first, last, primary, replica…].
    Ok(ranges
        .iter()
        .map(|r| match r {
            redis::Value::Array(items) => items.len().saturating_sub(3),
            _ => 0,
        })
        .min()
        .unwrap_or(0))
}

/// The `myself` line of a view.
fn myself<'a>(view: &'a [ClusterNode], url: &str) -> Result<&'a ClusterNode> {
    view.iter()
        .find(|n| n.myself)
        .with_context(|| format!("CLUSTER NODES of {} has no myself line", redact::url(url)))
}

/// A planned failover: CLUSTER FAILOVER on the replica at `replica_url`, then wait until it
/// says it is a primary and its cluster state is ok. Returns how long that took.
pub async fn failover(replica_url: &str, tls: &RedisTls, timeout: Duration) -> Result<Duration> {
    let view = cluster_nodes(replica_url, tls).await?;
    let me = myself(&view, replica_url)?;
    if me.role != Role::Replica {
        bail!(
            "CLUSTER FAILOVER needs a replica, and {} is a {:?}",
            me.addr,
            me.role
        );
    }
    let started = Instant::now();
    let mut con = connect(replica_url, tls).await?;
    let _: () = call(
        &mut con,
        &cluster_cmd("FAILOVER"),
        CALL_TIMEOUT,
        "CLUSTER FAILOVER",
        replica_url,
    )
    .await?;
    let mut last = String::from("no answer yet");
    while started.elapsed() < timeout {
        match (
            cluster_nodes(replica_url, tls).await,
            cluster_state(replica_url, tls).await,
        ) {
            (Ok(view), Ok(state)) => {
                let me = myself(&view, replica_url)?;
                if me.role == Role::Primary && state.ok {
                    return Ok(started.elapsed());
                }
                last = format!("role {:?}, cluster state ok: {}", me.role, state.ok);
            }
            (Err(e), _) | (_, Err(e)) => last = format!("{e:#}"),
        }
        tokio::time::sleep(POLL).await;
    }
    bail!(
        "after CLUSTER FAILOVER, {} was not a primary of an ok cluster within {timeout:?} (last: {last})",
        me.addr
    )
}

/// What a promotion after a primary's death came to.
#[derive(Debug, Clone)]
pub struct Promotion {
    /// From the call until the cluster, seen from the node asked, was ok with the dead
    /// primary's slots on another node: call it right after the kill.
    pub took: Duration,
    /// The node now serving the dead primary's slots (its former replica).
    pub primary: ClusterNode,
}

/// After the primary `killed` (as listed before its death) died: wait until, seen from the
/// live node at `url`, another healthy primary serves its slots and the cluster state is ok.
pub async fn wait_promotion(
    url: &str,
    tls: &RedisTls,
    killed: &ClusterNode,
    timeout: Duration,
) -> Result<Promotion> {
    let Some(&(probe, _)) = killed.slots.first() else {
        bail!(
            "{} ({}) served no slots, so no replica of it will be promoted",
            killed.addr,
            killed.id
        );
    };
    let started = Instant::now();
    let mut last = String::from("no answer yet");
    while started.elapsed() < timeout {
        match (cluster_nodes(url, tls).await, cluster_state(url, tls).await) {
            (Ok(view), Ok(state)) => {
                let owner = view.iter().find(|n| {
                    n.id != killed.id && n.role == Role::Primary && n.healthy() && n.serves(probe)
                });
                match owner {
                    Some(owner) if state.ok => {
                        return Ok(Promotion {
                            took: started.elapsed(),
                            primary: owner.clone(),
                        });
                    }
                    Some(owner) => {
                        last = format!("{} took slot {probe}, cluster state not ok yet", owner.addr)
                    }
                    None => {
                        last = format!(
                            "slot {probe} not yet on another primary, cluster state ok: {}",
                            state.ok
                        )
                    }
                }
            }
            (Err(e), _) | (_, Err(e)) => last = format!("{e:#}"),
        }
        tokio::time::sleep(POLL).await;
    }
    bail!(
        "no replica took over {}'s slots within {timeout:?} (seen from {}; last: {last})",
        killed.addr,
        redact::url(url)
    )
}

/// How a slot migration goes.
#[derive(Debug, Clone, Copy)]
pub struct MigrateOptions {
    /// Keys per `MIGRATE` (and per CLUSTER GETKEYSINSLOT).
    pub batch: usize,
    /// A pause after each batch: stretches the migration of a small slot so that requests
    /// meet it half done (ASK redirects). Zero moves as fast as the nodes go.
    pub step_pause: Duration,
    /// MIGRATE's own timeout for one batch.
    pub migrate_timeout: Duration,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        MigrateOptions {
            batch: 100,
            step_pause: Duration::ZERO,
            migrate_timeout: Duration::from_secs(5),
        }
    }
}

/// What a slot migration moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrateReport {
    pub slot: u16,
    /// Keys moved by MIGRATE.
    pub keys: u64,
    /// MIGRATE calls.
    pub batches: u64,
    /// From the first SETSLOT to the last.
    pub took: Duration,
}

/// The keys of `slot` moved from the source to `to` (host, port) in batches with MIGRATE,
/// logging in to the target as `login` (user, password); the keys and batches moved.
async fn move_keys(
    src: &mut MultiplexedConnection,
    slot: u16,
    to: (&str, &str),
    login: (Option<&str>, Option<&str>),
    options: &MigrateOptions,
    source_url: &str,
) -> Result<(u64, u64)> {
    let (mut keys_moved, mut batches) = (0u64, 0u64);
    let migrate_ms = u64::try_from(options.migrate_timeout.as_millis()).unwrap_or(u64::MAX);
    loop {
        let mut get = cluster_cmd("GETKEYSINSLOT");
        get.arg(slot).arg(options.batch.max(1));
        let keys: Vec<Vec<u8>> =
            call(src, &get, CALL_TIMEOUT, "CLUSTER GETKEYSINSLOT", source_url).await?;
        if keys.is_empty() {
            break;
        }
        let mut migrate = redis::cmd("MIGRATE");
        migrate.arg(to.0).arg(to.1).arg("").arg(0).arg(migrate_ms);
        // REPLACE: a batch retried after an answer was lost would otherwise stop on
        // BUSYKEY; the source's copy is the one clients were served until now.
        migrate.arg("REPLACE");
        match login {
            (Some(u), Some(p)) => {
                migrate.arg("AUTH2").arg(u).arg(p);
            }
            (None, Some(p)) => {
                migrate.arg("AUTH").arg(p);
            }
            _ => {}
        }
        migrate.arg("KEYS");
        for k in &keys {
            migrate.arg(k.as_slice());
        }
        let _: redis::Value = call(
            src,
            &migrate,
            options.migrate_timeout + CALL_TIMEOUT,
            "MIGRATE",
            source_url,
        )
        .await?;
        keys_moved += keys.len() as u64;
        batches += 1;
        if !options.step_pause.is_zero() {
            tokio::time::sleep(options.step_pause).await;
        }
    }

    Ok((keys_moved, batches))
}

/// Move `slot` from the primary at `source_url` to the primary at `target_url`, as
/// `redis-cli --cluster reshard` does: the target IMPORTING, the source MIGRATING, the keys
/// moved in batches with MIGRATE (clients meanwhile get ASK for the keys already moved),
/// then SETSLOT NODE on the target, the source and the other primaries. On an error the slot
/// is left half moved, as redis-cli leaves it (`redis-cli --cluster fix` settles it); a
/// managed cluster is thrown away after the run anyway.
pub async fn migrate_slot(
    slot: u16,
    source_url: &str,
    target_url: &str,
    tls: &RedisTls,
    options: MigrateOptions,
) -> Result<MigrateReport> {
    if slot >= SLOTS {
        bail!("slot {slot} does not exist: slots are 0 to {}", SLOTS - 1);
    }
    let view = cluster_nodes(source_url, tls).await?;
    let source = myself(&view, source_url)?.clone();
    let target_view = cluster_nodes(target_url, tls).await?;
    let target = myself(&target_view, target_url)?.clone();
    if source.role != Role::Primary || !source.serves(slot) {
        bail!(
            "{} does not serve slot {slot}: nothing to migrate from it",
            source.addr
        );
    }
    if target.role != Role::Primary || target.id == source.id {
        bail!(
            "{} cannot take slot {slot}: give another primary",
            target.addr
        );
    }
    let (host, port) = target
        .addr
        .rsplit_once(':')
        .with_context(|| format!("target node address {:?} has no port", target.addr))?;
    // MIGRATE logs in to the target with the source's credentials: a cluster's nodes share
    // their users.
    let client = redis_client(source_url, tls)?;
    let settings = client.get_connection_info().redis_settings();
    let (user, password) = (
        settings.username().map(str::to_owned),
        settings.password().map(str::to_owned),
    );

    let started = Instant::now();
    let mut src = connect(source_url, tls).await?;
    let mut dst = connect(target_url, tls).await?;
    let setslot = |state: &str, id: &str| {
        let mut c = cluster_cmd("SETSLOT");
        c.arg(slot).arg(state).arg(id);
        c
    };
    let _: () = call(
        &mut dst,
        &setslot("IMPORTING", &source.id),
        CALL_TIMEOUT,
        "CLUSTER SETSLOT IMPORTING",
        target_url,
    )
    .await?;
    let _: () = call(
        &mut src,
        &setslot("MIGRATING", &target.id),
        CALL_TIMEOUT,
        "CLUSTER SETSLOT MIGRATING",
        source_url,
    )
    .await?;

    let login = (user.as_deref(), password.as_deref());
    let (keys_moved, batches) =
        move_keys(&mut src, slot, (host, port), login, &options, source_url).await?;

    // The target first: once it owns the slot it answers for it; then the source, which
    // then sends MOVED instead of ASK; then everyone else, who would learn it by gossip too.
    let node = setslot("NODE", &target.id);
    let _: () = call(
        &mut dst,
        &node,
        CALL_TIMEOUT,
        "CLUSTER SETSLOT NODE",
        target_url,
    )
    .await?;
    let _: () = call(
        &mut src,
        &node,
        CALL_TIMEOUT,
        "CLUSTER SETSLOT NODE",
        source_url,
    )
    .await?;
    for other in view.iter().filter(|n| {
        n.role == Role::Primary && n.healthy() && n.id != source.id && n.id != target.id
    }) {
        let url = node_url(source_url, &other.addr);
        // Best effort: the new owner's higher epoch reaches them by gossip anyway.
        if let Ok(mut con) = connect(&url, tls).await {
            let _: Result<()> =
                call(&mut con, &node, CALL_TIMEOUT, "CLUSTER SETSLOT NODE", &url).await;
        }
    }
    Ok(MigrateReport {
        slot,
        keys: keys_moved,
        batches,
        took: started.elapsed(),
    })
}
