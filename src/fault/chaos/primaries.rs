//! The Redis faults on a cluster: kill one primary (`kill-redis`, a managed cluster only) and
//! wait for its replica's promotion, hand a primary over to its replica (`failover`), move a
//! slot to another primary under traffic (`migrate-slot`). Which primary is struck is
//! `--redis-node`; what each did goes into the fault's `cluster` figures.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rand::SeedableRng;
use rand::seq::IndexedRandom;

use crate::cluster::{self as ops, ClusterNode, ManagedCluster, MigrateOptions, NodeChoice, Role};
use crate::fault::FaultKind;
use crate::fault::report::ClusterFault;
use crate::tls::RedisTls;

/// How long a promotion after a kill may take before the fault says no replica took over:
/// well past `cluster-node-timeout` (1 s on a managed cluster) plus an election.
const PROMOTION_LIMIT: Duration = Duration::from_secs(20);
/// How long a planned failover may take.
const FAILOVER_LIMIT: Duration = Duration::from_secs(15);
/// How long a restarted node may take to rejoin.
const REJOIN_LIMIT: Duration = Duration::from_secs(30);
/// A migration moves one key per MIGRATE and waits this long after each, so requests for a
/// key already moved meet ASK redirects while the slot is half moved (a hot slot holds a
/// handful of keys: at full speed it would move in a millisecond).
const MIGRATE_STEP: Duration = Duration::from_millis(300);

/// How the faults of a cluster are struck.
pub struct ClusterSide {
    /// The cluster the tool started: its nodes can be killed and restarted. None for the
    /// user's cluster (failover and migrate-slot only: they are cluster commands).
    pub managed: Option<ManagedCluster>,
    /// The cluster's URL (`redis+cluster://…`), for the nodes' URLs.
    pub url: String,
    pub tls: RedisTls,
    /// `--redis-node`.
    pub node: NodeChoice,
    /// `--slot`, else the slot of the run's hottest key.
    pub slot: u16,
    /// The slot of the run's hottest key (`--redis-node hottest`).
    pub hottest_slot: u16,
    pub seed: u64,
    /// The primary a kill struck, until it is started again.
    struck: Option<ClusterNode>,
    /// What the last fault did, for its record.
    pub last: Option<ClusterFault>,
}

impl ClusterSide {
    pub fn new(
        managed: Option<ManagedCluster>,
        url: String,
        tls: RedisTls,
        node: NodeChoice,
        slot: Option<u16>,
        hottest_slot: u16,
        seed: u64,
    ) -> ClusterSide {
        ClusterSide {
            managed,
            url,
            tls,
            node,
            slot: slot.unwrap_or(hottest_slot),
            hottest_slot,
            seed,
            struck: None,
            last: None,
        }
    }

    fn node_url(&self, addr: &str) -> Result<String> {
        crate::cluster::client::node_url(&self.url, addr)
    }

    /// The cluster as one of its live nodes sees it (the seeds first, then every node a
    /// seed listed).
    async fn topology(&self) -> Result<Vec<ClusterNode>> {
        let mut last = anyhow!("the cluster URL has no seed");
        for seed in crate::cluster::client::seed_urls(&self.url)? {
            match ops::cluster_nodes(&seed, &self.tls).await {
                Ok(v) => return Ok(v),
                Err(e) => last = e,
            }
        }
        if let Some(m) = &self.managed {
            for u in m.node_urls() {
                if let Ok(v) = ops::cluster_nodes(&u, &self.tls).await {
                    return Ok(v);
                }
            }
        }
        Err(last.context("no node of the cluster answered CLUSTER NODES"))
    }

    /// The URL of a live node other than `not` (to watch the cluster from).
    async fn live_url(&self, not: &str) -> Result<String> {
        for n in self.topology().await? {
            if n.addr != not && n.healthy() {
                return self.node_url(&n.addr);
            }
        }
        bail!("no live node of the cluster besides {not}")
    }

    /// The primary `--redis-node` names, among the healthy primaries of `view`.
    fn choose(&self, view: &[ClusterNode]) -> Result<ClusterNode> {
        let mut primaries: Vec<&ClusterNode> = view
            .iter()
            .filter(|n| n.role == Role::Primary && n.healthy() && n.slot_count() > 0)
            .collect();
        primaries.sort_by(|a, b| a.addr.cmp(&b.addr));
        let found = match &self.node {
            NodeChoice::Hottest => primaries.iter().find(|n| n.serves(self.hottest_slot)),
            NodeChoice::Random => {
                let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
                primaries.choose(&mut rng)
            }
            NodeChoice::Id(id) => primaries.iter().find(|n| n.id == *id || n.addr == *id),
        };
        found.map(|n| (*n).clone()).ok_or_else(|| match &self.node {
            NodeChoice::Id(id) => anyhow!(
                "--redis-node {id} is no healthy primary of the cluster (its primaries: {})",
                primaries
                    .iter()
                    .map(|n| format!("{} {}", n.id, n.addr))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => anyhow!("the cluster has no healthy primary with slots"),
        })
    }

    /// Strike: kill a primary, hand one over, or move a slot. A kill is over when the node is
    /// dead (the promotion is awaited by [`ClusterSide::await_promotion`]); a failover and a
    /// migration are over when done.
    pub async fn down(&mut self, kind: FaultKind) -> Result<()> {
        let view = self.topology().await?;
        match kind {
            FaultKind::KillRedis => {
                let victim = self.choose(&view)?;
                let port = victim
                    .port()
                    .with_context(|| format!("the node {:?} has no port", victim.addr))?;
                let Some(mut m) = self.managed.take() else {
                    bail!(
                        "kill-redis on an external Redis Cluster: stampede kills a primary only of a cluster it started (--redis-cluster); use --failover-at for a planned hand-over on yours"
                    );
                };
                // SIGKILL and reap: a short blocking wait, kept off the async workers.
                let (m, killed) = tokio::task::spawn_blocking(move || {
                    let r = m.kill(port);
                    (m, r)
                })
                .await
                .map_err(|e| anyhow!("killing the node failed: {e}"))?;
                self.managed = Some(m);
                killed.map_err(|e| anyhow!("{e}"))?;
                self.last = Some(ClusterFault {
                    node: victim.addr.clone(),
                    node_timeout_ms: Some(ManagedCluster::node_timeout().as_millis() as u64),
                    ..ClusterFault::default()
                });
                self.struck = Some(victim);
                Ok(())
            }
            FaultKind::Failover => {
                let primary = self.choose(&view)?;
                let replica = view
                    .iter()
                    .find(|n| {
                        n.role == Role::Replica
                            && n.healthy()
                            && n.primary_id.as_deref() == Some(&primary.id)
                    })
                    .with_context(|| {
                        format!(
                            "the primary {} has no healthy replica to fail over to (--redis-cluster P:R with R ≥ 1)",
                            primary.addr
                        )
                    })?;
                let took = ops::failover(&self.node_url(&replica.addr)?, &self.tls, FAILOVER_LIMIT)
                    .await?;
                self.last = Some(ClusterFault {
                    node: primary.addr.clone(),
                    now_served_by: Some(replica.addr.clone()),
                    took_ms: Some(took.as_millis() as u64),
                    node_timeout_ms: self
                        .managed
                        .as_ref()
                        .map(|_| ManagedCluster::node_timeout().as_millis() as u64),
                    ..ClusterFault::default()
                });
                Ok(())
            }
            FaultKind::MigrateSlot => {
                let slot = self.slot;
                let mut primaries: Vec<&ClusterNode> = view
                    .iter()
                    .filter(|n| n.role == Role::Primary && n.healthy())
                    .collect();
                primaries.sort_by(|a, b| a.addr.cmp(&b.addr));
                let source = primaries
                    .iter()
                    .position(|n| n.serves(slot))
                    .with_context(|| format!("no healthy primary serves slot {slot}"))?;
                // The next primary in address order takes it.
                let target = primaries
                    .get((source + 1) % primaries.len())
                    .filter(|t| t.id != primaries[source].id)
                    .with_context(|| format!("slot {slot} has no other primary to move to"))?;
                let report = ops::migrate_slot(
                    slot,
                    &self.node_url(&primaries[source].addr)?,
                    &self.node_url(&target.addr)?,
                    &self.tls,
                    MigrateOptions {
                        batch: 1,
                        step_pause: MIGRATE_STEP,
                        ..MigrateOptions::default()
                    },
                )
                .await?;
                self.last = Some(ClusterFault {
                    node: primaries[source].addr.clone(),
                    now_served_by: Some(target.addr.clone()),
                    slot: Some(slot),
                    keys_moved: Some(report.keys),
                    took_ms: Some(report.took.as_millis() as u64),
                    ..ClusterFault::default()
                });
                Ok(())
            }
            other => bail!("{other} is not a cluster fault"),
        }
    }

    /// After a kill: wait until another node serves the killed primary's slots. Returns when
    /// that happened, and who serves them.
    pub async fn await_promotion(&self) -> Result<(Instant, String)> {
        let victim = self
            .struck
            .as_ref()
            .context("no killed primary to wait for")?;
        let watch = self.live_url(&victim.addr).await?;
        let p = ops::wait_promotion(&watch, &self.tls, victim, PROMOTION_LIMIT).await?;
        Ok((Instant::now(), p.primary.addr))
    }

    /// Bring the killed node back: it starts on its ports with its nodes.conf, empty, and
    /// rejoins (as a replica of the promoted one). Returns its new pid.
    pub async fn up(&mut self) -> Result<Option<u32>> {
        let Some(victim) = self.struck.take() else {
            return Ok(None);
        };
        let port = victim
            .port()
            .with_context(|| format!("the node {:?} has no port", victim.addr))?;
        let m = self
            .managed
            .as_mut()
            .context("the managed cluster is gone")?;
        let before = m.pids();
        m.restart(port).await.map_err(|e| anyhow!("{e}"))?;
        m.wait_joined(port, REJOIN_LIMIT)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        Ok(m.pids().into_iter().find(|p| !before.contains(p)))
    }
}
