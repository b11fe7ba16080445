//! A managed Redis Cluster: P primaries with R replicas each, every node a [`ManagedRedis`]
//! (its own free port, bus port, temp dir, log and watchdog), formed by the tool itself and
//! awaited until every node agrees it is whole; kill, restart and stop per node for the
//! faults. The [`super::ops`] functions read and change any cluster, managed or external.
//!
//! Why the tool forms the cluster itself (CLUSTER ADDSLOTSRANGE, SET-CONFIG-EPOCH, MEET,
//! REPLICATE) instead of `redis-cli --cluster create`: the layout is ours to choose (replica
//! `j` of primary `j mod P`, as the tests and the faults expect), no fixed one-second sleeps
//! (redis-cli polls the join that way), TLS goes through the same client code as everything
//! else, and a failure is reported with the nodes' own logs. redis-cli is not needed.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::ops::{cluster_nodes, cluster_state, replica_link_up};
use super::topology::{ClusterNode, Role, SLOTS};
use super::{ops, topology};
use crate::error::UsageError;
use crate::servers::reaper::REDIS_DIR_PREFIX;
use crate::servers::redis::{Certs, NodeOptions};
use crate::servers::watchdog::Watchdog;
use crate::servers::{ManagedRedis, ServerError, log_tail, server_dir};
use crate::tls::{RedisTls, RunCerts};

/// `cluster-node-timeout` of the managed nodes: how long a primary may be unreachable
/// before it is suspected, and so the floor of a promotion. Redis's default is 15 s; 1 s
/// keeps a kill-redis fault inside a short run while staying far above loopback latency.
const NODE_TIMEOUT: Duration = Duration::from_millis(1000);
/// How long forming the cluster may take (a 3:1 cluster forms in well under 2 s here).
const FORM_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the formation is checked.
const FORM_POLL: Duration = Duration::from_millis(100);
/// The most nodes a managed cluster may have: each is a process with its own memory and
/// connections, and gossip grows with the square of the count; 30 is far past what two
/// cores measure meaningfully.
const MAX_NODES: u32 = 30;

/// The shape of a managed cluster: `--redis-cluster P[:R]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClusterShape {
    /// Primaries, each serving an equal share of the 16384 slots (3 or more).
    pub primaries: u16,
    /// Replicas per primary.
    pub replicas: u16,
}

impl Default for ClusterShape {
    fn default() -> Self {
        ClusterShape {
            primaries: 3,
            replicas: 1,
        }
    }
}

impl ClusterShape {
    /// Every node: primaries and their replicas.
    pub fn nodes(&self) -> usize {
        usize::from(self.primaries) * (1 + usize::from(self.replicas))
    }
}

impl FromStr for ClusterShape {
    type Err = UsageError;

    fn from_str(s: &str) -> Result<Self, UsageError> {
        let bad = |why: &str| {
            UsageError::new(format!(
                "--redis-cluster {s:?}: {why}; give P or P:R, P primaries (3 or more: a \
                 failover needs a majority of primaries) with R replicas each (0 or more, \
                 default 1), at most {MAX_NODES} nodes in all, e.g. 3 or 3:1"
            ))
        };
        let (p, r) = match s.trim().split_once(':') {
            Some((p, r)) => (p, Some(r)),
            None => (s.trim(), None),
        };
        let primaries: u16 = p
            .trim()
            .parse()
            .map_err(|_| bad("P is not a whole number"))?;
        let replicas: u16 = match r {
            Some(r) => r
                .trim()
                .parse()
                .map_err(|_| bad("R is not a whole number"))?,
            None => 1,
        };
        if primaries < 3 {
            return Err(bad("Redis Cluster needs at least 3 primaries"));
        }
        if u32::from(primaries) * (1 + u32::from(replicas)) > MAX_NODES {
            return Err(bad("too many nodes"));
        }
        Ok(ClusterShape {
            primaries,
            replicas,
        })
    }
}

impl fmt::Display for ClusterShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.primaries, self.replicas)
    }
}

impl TryFrom<String> for ClusterShape {
    type Error = UsageError;
    fn try_from(s: String) -> Result<Self, UsageError> {
        s.parse()
    }
}

impl From<ClusterShape> for String {
    fn from(s: ClusterShape) -> String {
        s.to_string()
    }
}

impl schemars::JsonSchema for ClusterShape {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ClusterShape".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A managed Redis Cluster: \"P\" or \"P:R\", P primaries (3 or more) with R replicas each (default 1), at most 30 nodes.",
            "type": "string",
            "pattern": "^[0-9]+(:[0-9]+)?$",
        })
    }
}

/// A running Redis Cluster of managed nodes. Dropping it stops every node and removes
/// every dir; if the tool dies instead, each node's watchdog does that for its node.
#[derive(Debug)]
pub struct ManagedCluster {
    shape: ClusterShape,
    /// In creation order: the primaries first, then replica `j` of primary `j mod P`.
    /// Roles change with failovers; ask [`cluster_nodes`] for the current ones.
    nodes: Vec<ManagedRedis>,
    /// For the tool's own connections: the CA with TLS, else empty.
    tls: RedisTls,
    certs: Option<RunCerts>,
    /// Holds the certificates every node shares; declared after `nodes` so it goes after
    /// them. Empty without TLS.
    dir: TempDir,
    /// Removes `dir` if the tool dies (it watches no process: the nodes have their own).
    _watchdog: Watchdog,
}

impl ManagedCluster {
    /// Start `shape.nodes()` redis-server nodes on free loopback ports, form the cluster and
    /// wait (up to 30 s) until every node says `cluster_state:ok`, sees every node healthy,
    /// every slot served and every replica attached, agrees with the others on all of it,
    /// and every replica's link to its primary is up. With `tls`, the nodes speak TLS only,
    /// between each other too, with one CA.
    pub async fn start(shape: ClusterShape, tls: bool) -> Result<Self, ServerError> {
        let (dir, watchdog) = server_dir(REDIS_DIR_PREFIX, "a Redis Cluster").await?;
        let certs = if tls {
            Some(
                crate::tls::generate_run_certs(dir.path())
                    .map_err(|e| ServerError::setup("writing certificates for the cluster", e))?,
            )
        } else {
            None
        };
        let timeout_ms = NODE_TIMEOUT.as_millis().to_string();
        let mut base_args: Vec<String> = [
            "--cluster-enabled",
            "yes",
            // Relative to the node's dir (Redis works in `--dir`), so a restart finds it.
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &timeout_ms,
            // A replica syncs at once instead of waiting 5 s for others to share a transfer:
            // formation and a killed node's rejoin take that much less.
            "--repl-diskless-sync-delay",
            "0",
            // A primary pings its replicas every second (default 10 s), so an idle new
            // cluster's replication offsets leave 0 at once: until then the nodes leave a
            // replica out of CLUSTER SLOTS, where clients learn where they may read.
            "--repl-ping-replica-period",
            "1",
            // Stop without waiting for lagging replicas (up to 10 s by default): the
            // cluster is thrown away.
            "--shutdown-on-sigterm",
            "now",
        ]
        .map(str::to_owned)
        .to_vec();
        if tls {
            base_args
                .extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(str::to_owned));
        }
        let options = NodeOptions {
            certs: certs.clone().map_or(Certs::None, Certs::Shared),
            base_args,
            cluster_bus: true,
        };
        let nodes = futures_util::future::try_join_all(
            (0..shape.nodes()).map(|_| ManagedRedis::start_node(options.clone())),
        )
        .await?;
        let cluster = ManagedCluster {
            shape,
            nodes,
            tls: RedisTls {
                ca: certs.as_ref().map(|c| c.ca.clone()),
                ..RedisTls::default()
            },
            certs,
            dir,
            _watchdog: watchdog,
        };
        cluster.form().await?;
        Ok(cluster)
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,…/` (`rediss+cluster://` with TLS): every
    /// node, as seeds for a cluster client.
    pub fn url(&self) -> String {
        let scheme = if self.certs.is_some() {
            "rediss+cluster"
        } else {
            "redis+cluster"
        };
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("{scheme}://{}/", seeds.join(","))
    }

    /// Each node's own URL (`redis://127.0.0.1:PORT/`, `rediss://` with TLS), in creation order.
    pub fn node_urls(&self) -> Vec<String> {
        self.nodes.iter().map(ManagedRedis::url).collect()
    }

    /// Each node's port, in creation order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(ManagedRedis::port).collect()
    }

    /// The certificates every node uses, with TLS.
    pub fn certs(&self) -> Option<&RunCerts> {
        self.certs.as_ref()
    }

    /// TLS settings for the tool's connections to the nodes (the run's CA), for the
    /// [`ops`] functions; empty without TLS.
    pub fn redis_tls(&self) -> &RedisTls {
        &self.tls
    }

    /// The pids of the running nodes.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(ManagedRedis::pid).collect()
    }

    /// Every node's temp dir.
    pub fn dirs(&self) -> Vec<std::path::PathBuf> {
        let mut dirs: Vec<_> = self.nodes.iter().map(|n| n.dir().to_owned()).collect();
        dirs.push(self.dir.path().to_owned());
        dirs
    }

    /// The nodes' `cluster-node-timeout`.
    pub fn node_timeout() -> Duration {
        NODE_TIMEOUT
    }

    pub fn shape(&self) -> ClusterShape {
        self.shape
    }

    fn node_mut(&mut self, port: u16) -> Result<&mut ManagedRedis, ServerError> {
        let ports = self.ports();
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .ok_or_else(|| ServerError::Cluster {
                what: format!(
                    "no node of the managed cluster listens on port {port} (its nodes: {ports:?})"
                ),
                tail: String::new(),
            })
    }

    /// SIGKILL the node on `port`, as in a crash. Idempotent.
    pub fn kill(&mut self, port: u16) -> Result<(), ServerError> {
        self.node_mut(port)?.kill();
        Ok(())
    }

    /// Start the node on `port` again (killing it first if it runs), on the same ports with
    /// its nodes.conf, and wait until it answers PING. It comes back empty (no persistence)
    /// and rejoins: as a replica of its replica if that was promoted meanwhile, else as the
    /// primary of its slots (empty: its replicas then resync from it and are emptied too).
    /// [`ManagedCluster::wait_joined`] waits for the rejoin.
    pub async fn restart(&mut self, port: u16) -> Result<(), ServerError> {
        self.node_mut(port)?.restart().await
    }

    /// Wait until the node on `port` sees the cluster ok and, as a replica, has its link to
    /// its primary up; returns its own line of CLUSTER NODES.
    pub async fn wait_joined(
        &self,
        port: u16,
        timeout: Duration,
    ) -> Result<ClusterNode, ServerError> {
        let url = self
            .nodes
            .iter()
            .find(|n| n.port() == port)
            .map(ManagedRedis::url)
            .ok_or_else(|| ServerError::Cluster {
                what: format!("no node of the managed cluster listens on port {port}"),
                tail: String::new(),
            })?;
        let started = Instant::now();
        let mut last = String::from("no answer yet");
        while started.elapsed() < timeout {
            match joined(&url, &self.tls).await {
                Ok(Ok(me)) => return Ok(me),
                Ok(Err(why)) => last = why,
                Err(e) => last = format!("{e:#}"),
            }
            tokio::time::sleep(FORM_POLL).await;
        }
        Err(ServerError::Cluster {
            what: format!(
                "the node on 127.0.0.1:{port} did not rejoin the cluster within {timeout:?} ({last})"
            ),
            tail: self.tail(),
        })
    }

    /// Arguments (`--maxmemory`, `8388608`, …) every node's later restarts get: the
    /// configuration a run set on the nodes, as [`ManagedRedis::keep_config`] does for one.
    pub fn keep_config(&mut self, args: Vec<String>) {
        for n in &mut self.nodes {
            n.keep_config(args.clone());
        }
    }

    /// Stop every node (SIGTERM, then SIGKILL after 2 s). Idempotent.
    pub fn stop(&mut self) {
        for n in &mut self.nodes {
            n.stop();
        }
    }

    /// Every node's log tail, for an error message.
    fn tail(&self) -> String {
        let logs: Vec<std::path::PathBuf> = self
            .nodes
            .iter()
            .map(|n| n.dir().join("redis.log"))
            .collect();
        let refs: Vec<&std::path::Path> = logs.iter().map(|p| p.as_path()).collect();
        // Each tail is headed by the file name only, which is the same for all: say which
        // node is which by order.
        format!(
            "(nodes in order: ports {:?})\n{}",
            self.ports(),
            log_tail(&refs)
        )
    }

    /// Form the cluster from the fresh nodes and wait until it is whole.
    async fn form(&self) -> Result<(), ServerError> {
        let err = |what: String| ServerError::Cluster {
            what,
            tail: self.tail(),
        };
        let urls = self.node_urls();
        let p = usize::from(self.shape.primaries);
        let mut ids = Vec::with_capacity(urls.len());
        for (i, url) in urls.iter().enumerate() {
            let id = setup::prepare(url, &self.tls, i, p)
                .await
                .map_err(|e| err(format!("setting up node {} of the cluster: {e:#}", i + 1)))?;
            ids.push(id);
        }
        let first = &self.nodes[0];
        let bus = first.bus_port().unwrap_or(0);
        for (i, url) in urls.iter().enumerate().skip(1) {
            setup::meet(url, &self.tls, first.port(), bus)
                .await
                .map_err(|e| err(format!("CLUSTER MEET from node {}: {e:#}", i + 1)))?;
        }
        let started = Instant::now();
        // A replica can be told whom to follow only once it knows that node.
        for (j, url) in urls.iter().enumerate().skip(p) {
            let primary = &ids[(j - p) % p];
            loop {
                match setup::replicate(url, &self.tls, primary).await {
                    Ok(()) => break,
                    Err(e) if started.elapsed() > FORM_TIMEOUT => {
                        return Err(err(format!(
                            "node {} could not become a replica within {FORM_TIMEOUT:?}: {e:#}",
                            j + 1
                        )));
                    }
                    Err(_) => tokio::time::sleep(FORM_POLL).await,
                }
            }
        }
        let mut last = String::from("no answer yet");
        while started.elapsed() < FORM_TIMEOUT {
            match setup::formed(&urls, &self.tls, self.shape).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(why)) => last = why,
                Err(e) => last = format!("{e:#}"),
            }
            tokio::time::sleep(FORM_POLL).await;
        }
        Err(err(format!(
            "the Redis Cluster ({} nodes) did not form within {FORM_TIMEOUT:?}: {last}",
            urls.len()
        )))
    }
}

impl Drop for ManagedCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `Ok(Ok(myself))` when the node at `url` sees the cluster ok and, as a replica, its link
/// is up; `Ok(Err(why))` when not yet.
async fn joined(url: &str, tls: &RedisTls) -> anyhow::Result<Result<ClusterNode, String>> {
    let state = cluster_state(url, tls).await?;
    let view = cluster_nodes(url, tls).await?;
    let Some(me) = view.into_iter().find(|n| n.myself) else {
        return Ok(Err("no myself line in CLUSTER NODES".to_owned()));
    };
    if !state.ok {
        return Ok(Err("its cluster state is not ok".to_owned()));
    }
    if me.role == Role::Replica && !replica_link_up(url, tls).await? {
        return Ok(Err("its link to its primary is not up".to_owned()));
    }
    Ok(Ok(me))
}

/// The commands that form a cluster, one node at a time.
mod setup {
    use super::*;
    use anyhow::{Context, Result};

    async fn con(url: &str, tls: &RedisTls) -> Result<redis::aio::MultiplexedConnection> {
        let client = crate::tls::redis_client(url, tls)?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(2)));
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .with_context(|| format!("connecting to {url}"))
    }

    async fn run<T: redis::FromRedisValue>(
        url: &str,
        tls: &RedisTls,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        let mut c = con(url, tls).await?;
        Ok(cmd.query_async(&mut c).await?)
    }

    /// Node `i`: a distinct config epoch (as redis-cli gives them: no epoch collisions to
    /// settle) and, for a primary, its equal share of the slots. Returns the node's id.
    pub(super) async fn prepare(
        url: &str,
        tls: &RedisTls,
        i: usize,
        primaries: usize,
    ) -> Result<String> {
        let mut epoch = redis::cmd("CLUSTER");
        epoch.arg("SET-CONFIG-EPOCH").arg(i + 1);
        let _: () = run(url, tls, &epoch)
            .await
            .context("CLUSTER SET-CONFIG-EPOCH")?;
        if i < primaries {
            let slots = usize::from(SLOTS);
            let (lo, hi) = (i * slots / primaries, (i + 1) * slots / primaries - 1);
            let mut add = redis::cmd("CLUSTER");
            add.arg("ADDSLOTSRANGE").arg(lo).arg(hi);
            let _: () = run(url, tls, &add).await.context("CLUSTER ADDSLOTSRANGE")?;
        }
        let id: String = run(url, tls, redis::cmd("CLUSTER").arg("MYID"))
            .await
            .context("CLUSTER MYID")?;
        Ok(id)
    }

    pub(super) async fn meet(url: &str, tls: &RedisTls, port: u16, bus: u16) -> Result<()> {
        let mut meet = redis::cmd("CLUSTER");
        meet.arg("MEET").arg("127.0.0.1").arg(port).arg(bus);
        run(url, tls, &meet).await
    }

    pub(super) async fn replicate(url: &str, tls: &RedisTls, primary: &str) -> Result<()> {
        run(
            url,
            tls,
            redis::cmd("CLUSTER").arg("REPLICATE").arg(primary),
        )
        .await
    }

    /// Every node's view, checked together; then every replica's link.
    pub(super) async fn formed(
        urls: &[String],
        tls: &RedisTls,
        shape: ClusterShape,
    ) -> Result<Result<(), String>> {
        let mut views = Vec::with_capacity(urls.len());
        for url in urls {
            views.push((
                cluster_nodes(url, tls).await?,
                cluster_state(url, tls).await?,
            ));
        }
        if let Err(why) = topology::check_formed(
            &views,
            usize::from(shape.primaries),
            usize::from(shape.replicas),
        ) {
            return Ok(Err(why));
        }
        for (url, (view, _)) in urls.iter().zip(&views) {
            let me = view.iter().find(|n| n.myself);
            if me.is_some_and(|n| n.role == Role::Replica) && !replica_link_up(url, tls).await? {
                return Ok(Err(format!(
                    "the replica {url} has no live link to its primary yet"
                )));
            }
        }
        // A client reads the replicas it may route reads to from CLUSTER SLOTS, once, when
        // it connects (then only on a redirect): a run that starts before every node lists
        // them there would send every read to the primaries under --read-from-replicas.
        for url in urls {
            let listed = ops::slots_replicas(url, tls).await?;
            if listed < usize::from(shape.replicas) {
                return Ok(Err(format!(
                    "{url} lists {listed} of {} replicas per slot range in CLUSTER SLOTS yet",
                    shape.replicas
                )));
            }
        }
        Ok(Ok(()))
    }
}

#[cfg(test)]
#[path = "managed_tests.rs"]
mod tests;
