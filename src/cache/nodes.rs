//! What the admin connection does on every node of a Redis Cluster rather than on the node
//! that owns a key: find the nodes, read each one's INFO (the per-node figures and the sums the
//! single-server figures become), PING and pause them all, scan them all for the run's keys,
//! and check on every primary that the user may run what the strategy needs.

use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::StreamExt;
use redis::aio::ConnectionManager;

use super::{Admin, Conn, KeyBuf, connect, info_field};
use crate::cluster::client as cluster;
use crate::cluster::figures::NodeReading;
use crate::cluster::{ClusterNode, Role, key_slot, parse_cluster_nodes, parse_node_stats};
use crate::error::EnvError;
use crate::tls::RedisTls;

/// How long one node's admin command may take.
const DEADLINE: Duration = Duration::from_secs(5);

/// One node of a cluster and the admin's own connection to it.
#[derive(Clone)]
pub struct Node {
    /// The cluster's node id (CLUSTER NODES).
    pub id: String,
    /// `host:port`.
    pub addr: String,
    conn: ConnectionManager,
}

/// The nodes of the cluster `conn` is connected to, as CLUSTER NODES lists them, each with a
/// connection of its own; nodes the cluster marks failed are left out.
pub(super) async fn discover(
    url: &str,
    tls: &RedisTls,
    conn: &redis::cluster_async::ClusterConnection,
) -> Result<Vec<Node>> {
    let lines = topology_of(conn).await?;
    let mut nodes = Vec::with_capacity(lines.len());
    for l in lines.into_iter().filter(|l| !l.fail && !l.addr.is_empty()) {
        let node_url = cluster::node_url(url, &l.addr)?;
        let conn = connect(&node_url, tls, Duration::from_secs(2))
            .await
            .with_context(|| format!("connecting to the cluster's node {}", l.addr))?;
        nodes.push(Node {
            id: l.id,
            addr: l.addr,
            conn,
        });
    }
    if nodes.is_empty() {
        return Err(
            EnvError("the Redis Cluster lists no live node in CLUSTER NODES".to_string()).into(),
        );
    }
    Ok(nodes)
}

/// CLUSTER NODES as seen by one of the cluster's nodes.
async fn topology_of(conn: &redis::cluster_async::ClusterConnection) -> Result<Vec<ClusterNode>> {
    let mut c = conn.clone();
    let text: String = tokio::time::timeout(
        DEADLINE,
        redis::cmd("CLUSTER").arg("NODES").query_async(&mut c),
    )
    .await
    .context("CLUSTER NODES got no answer within 5 s")?
    .context("CLUSTER NODES (the user needs +cluster|nodes)")?;
    parse_cluster_nodes(&text).map_err(|e| anyhow::anyhow!("reading CLUSTER NODES: {e}"))
}

/// Parse one node's `INFO server stats memory replication errorstats`.
fn parse_node_info(id: &str, addr: &str, info: &str) -> Result<NodeReading> {
    let n = parse_node_stats(info).map_err(|e| anyhow::anyhow!("node {addr}: {e}"))?;
    Ok(NodeReading {
        id: id.to_string(),
        addr: addr.to_string(),
        primary: info_field(info, "role") == Some("master"),
        run_id: info_field(info, "run_id").unwrap_or_default().to_string(),
        commands: n.total_commands_processed,
        keyspace_hits: n.keyspace_hits,
        keyspace_misses: n.keyspace_misses,
        evicted_keys: info_field(info, "evicted_keys")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        used_memory: n.used_memory,
        moved: n.moved,
        ask: n.ask,
    })
}

impl Admin {
    /// The cluster's nodes (empty for a single server).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    async fn node_info(node: &Node, section: &str) -> Result<String> {
        let mut c = node.conn.clone();
        let mut cmd = redis::cmd("INFO");
        for s in section.split(' ') {
            cmd.arg(s);
        }
        tokio::time::timeout(DEADLINE, cmd.query_async::<String>(&mut c))
            .await
            .with_context(|| format!("INFO on the cluster's node {} timed out", node.addr))?
            .with_context(|| format!("INFO on the cluster's node {}", node.addr))
    }

    /// INFO `section` of the first node that answers.
    pub(super) async fn any_node_info(&self, section: &str) -> Result<String> {
        let mut last = None;
        for n in self.nodes.iter() {
            match Self::node_info(n, section).await {
                Ok(i) => return Ok(i),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("the cluster has no node to ask")))
    }

    async fn read_node(n: Node) -> Result<NodeReading> {
        let info = Self::node_info(&n, "server stats memory replication errorstats").await?;
        parse_node_info(&n.id, &n.addr, &info)
    }

    /// Every node's figures now, read in parallel; an error when a node does not answer.
    pub async fn node_stats(&self) -> Result<Vec<NodeReading>> {
        let reads: Vec<_> = self.nodes.iter().cloned().map(Self::read_node).collect();
        futures_util::future::join_all(reads)
            .await
            .into_iter()
            .collect()
    }

    /// Every node's figures that answer now (a killed node is left out).
    pub async fn live_node_stats(&self) -> Vec<NodeReading> {
        let reads: Vec<_> = self.nodes.iter().cloned().map(Self::read_node).collect();
        futures_util::future::join_all(reads)
            .await
            .into_iter()
            .filter_map(Result::ok)
            .collect()
    }

    pub(super) async fn every_node_pings(&self) -> bool {
        let pings: Vec<_> = self
            .nodes
            .iter()
            .map(|n| {
                let mut c = n.conn.clone();
                async move {
                    let cmd = redis::cmd("PING");
                    let ping = cmd.query_async::<String>(&mut c);
                    matches!(
                        tokio::time::timeout(Duration::from_millis(500), ping).await,
                        Ok(Ok(_))
                    )
                }
            })
            .collect();
        futures_util::future::join_all(pings)
            .await
            .into_iter()
            .all(|ok| ok)
    }

    /// CLIENT PAUSE on every node: the whole cluster stops answering for `d`.
    pub(super) async fn pause_every_node(&self, d: Duration) -> Result<()> {
        for n in self.nodes.iter() {
            let mut c = n.conn.clone();
            let mut cmd = redis::cmd("CLIENT");
            cmd.arg("PAUSE")
                .arg(d.as_millis().clamp(1, u128::from(u64::MAX)) as u64)
                .arg("ALL");
            tokio::time::timeout(DEADLINE, cmd.query_async::<()>(&mut c))
                .await
                .with_context(|| format!("CLIENT PAUSE on {} got no answer within 5 s", n.addr))?
                .with_context(|| format!("CLIENT PAUSE on the cluster's node {}", n.addr))?;
        }
        Ok(())
    }

    /// The connections a walk of the keyspace goes over: every node of a cluster (SCAN is per
    /// node), or the one server.
    pub(super) fn scan_conns(&self) -> Vec<Conn> {
        if self.nodes.is_empty() {
            return vec![self.conn.clone()];
        }
        self.nodes
            .iter()
            .map(|n| Conn::Single(n.conn.clone()))
            .collect()
    }

    /// The cluster's preflight: its state is `ok` on every node, and on every primary the
    /// run's commands are allowed (each primary is reached through a key of a slot it serves).
    pub(super) async fn check_cluster_access(
        &self,
        url: &str,
        lock: bool,
        strategy: &str,
    ) -> Result<()> {
        for n in self.nodes.iter() {
            let mut c = n.conn.clone();
            let info: String = tokio::time::timeout(
                DEADLINE,
                redis::cmd("CLUSTER").arg("INFO").query_async(&mut c),
            )
            .await
            .with_context(|| format!("CLUSTER INFO on {} got no answer within 5 s", n.addr))?
            .with_context(|| format!("CLUSTER INFO on the cluster's node {}", n.addr))?;
            let state = info_field(&info, "cluster_state").unwrap_or("unknown");
            if state != "ok" {
                return Err(EnvError(format!(
                    "the Redis Cluster's node {} says cluster_state:{state}: every slot must be served before a run (check CLUSTER INFO and CLUSTER NODES)",
                    n.addr
                ))
                .into());
            }
        }
        let Conn::Cluster(conn) = &self.conn else {
            return Ok(());
        };
        for p in topology_of(conn)
            .await?
            .iter()
            .filter(|l| l.role == Role::Primary && l.healthy())
        {
            // A hash tag that lands in a slot this primary serves.
            let Some(n) = (0u64..100_000).find(|n| {
                p.serves(key_slot(
                    KeyBuf::new(&self.prefix, "preflight:", *n).as_bytes(),
                ))
            }) else {
                continue;
            };
            self.check_key_access(url, lock, strategy, &format!("preflight:{{{n}}}"))
                .await
                .with_context(|| format!("on the cluster's primary {}", p.addr))?;
        }
        Ok(())
    }

    /// Warm entries on a cluster: one SET each, 64 at a time, each sent to its key's node (a
    /// pipeline must stay in one slot there).
    pub(super) async fn set_many_on_cluster(&self, entries: &[(u64, Vec<u8>, u64)]) -> Result<()> {
        let sets: Vec<_> = entries
            .iter()
            .map(|(id, value, px)| {
                let mut c = self.conn.clone();
                let k = KeyBuf::new(&self.prefix, "", *id);
                let mut cmd = redis::cmd("SET");
                cmd.arg(k.as_bytes())
                    .arg(value.as_slice())
                    .arg("PX")
                    .arg(*px);
                async move { cmd.query_async::<()>(&mut c).await }
            })
            .collect();
        let sets = futures_util::stream::iter(sets)
            .buffer_unordered(64)
            .collect::<Vec<_>>();
        let done = tokio::time::timeout(Duration::from_secs(30), sets)
            .await
            .context("writing warmed entries timed out")?;
        done.into_iter()
            .collect::<redis::RedisResult<Vec<()>>>()
            .context("writing warmed entries")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_info() {
        let info = "# Server\r\nrun_id:ab12\r\n# Stats\r\ntotal_commands_processed:120\r\nkeyspace_hits:7\r\nkeyspace_misses:3\r\nevicted_keys:0\r\n# Memory\r\nused_memory:1048576\r\n# Replication\r\nrole:master\r\n# Errorstats\r\nerrorstat_ASK:count=4\r\nerrorstat_MOVED:count=11\r\n";
        let n = parse_node_info("abc", "127.0.0.1:1", info).unwrap();
        assert_eq!(
            n,
            NodeReading {
                id: "abc".into(),
                addr: "127.0.0.1:1".into(),
                primary: true,
                run_id: "ab12".into(),
                commands: 120,
                keyspace_hits: 7,
                keyspace_misses: 3,
                evicted_keys: 0,
                used_memory: 1_048_576,
                moved: 11,
                ask: 4,
            }
        );
        assert!(parse_node_info("d", "h:2", "role:slave\r\n").is_err());
    }
}
