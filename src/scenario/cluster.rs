//! A run on a Redis Cluster: the managed cluster's shape (`--redis-cluster P[:R]`), where reads
//! go (`--read-from-replicas`), which primary a fault strikes (`--redis-node`) and which slot
//! a migration moves (`--slot`), resolved from the flags and checked against what a cluster
//! run cannot do.

use std::str::FromStr;

use crate::cli::RunFlags;
use crate::cluster::{ClusterSettings, ClusterShape, NodeChoice};
use crate::error::{Problems, UsageError};
use crate::fault::FaultKind;

/// The cluster flags, checked against where Redis is and what a cluster run cannot do.
pub(super) fn cluster_settings(m: &RunFlags) -> Result<ClusterSettings, UsageError> {
    let managed = m
        .cluster
        .redis_cluster
        .as_deref()
        .map(ClusterShape::from_str)
        .transpose()?;
    let external = m
        .servers
        .redis_url
        .as_deref()
        .is_some_and(crate::cache::is_cluster);
    let on_cluster = managed.is_some() || external;
    let node = match &m.cluster.redis_node {
        Some(n) => NodeChoice::from_str(n).map_err(UsageError::new)?,
        None => NodeChoice::default(),
    };
    let mut p = Problems::default();
    if let Some(f) = m.faults.fault.iter().find(|f| f.kind.needs_cluster())
        && !on_cluster
    {
        p.push(format!(
            "a {} fault is for a Redis Cluster: add --redis-cluster (managed) or --redis-url redis+cluster://…",
            f.kind
        ));
    }
    let tracking = m.cache.l1_invalidate == Some(crate::l1::L1Invalidate::Tracking);
    p.refuse([
        (
            managed.is_some() && m.servers.redis_url.is_some(),
            "--redis-cluster starts a managed cluster, and --redis-url gives a Redis: drop one (an external cluster is --redis-url redis+cluster://host:port,…)",
        ),
        (
            on_cluster && m.cache.l1.is_some() && tracking,
            "--l1-invalidate tracking is not supported on a Redis Cluster: broadcast tracking on one connection hears only that node's keys; use --l1-invalidate pubsub (a cluster carries PUBLISH to every node) or ttl",
        ),
        (
            external && FaultKind::KillRedis.among(&m.faults.fault),
            "kill-redis on an external Redis Cluster is not supported: stampede kills a primary only of a cluster it starts (--redis-cluster); on yours use --failover-at (a planned CLUSTER FAILOVER) or --migrate-slot-at",
        ),
        (
            FaultKind::Failover.among(&m.faults.fault) && managed.is_some_and(|s| s.replicas == 0),
            "a failover hands a primary over to its replica, and --redis-cluster P:0 has none: give replicas (e.g. --redis-cluster 3:1)",
        ),
        (
            on_cluster && m.memory.maxmemory.is_some(),
            "--maxmemory is not supported on a Redis Cluster yet (each node would need its own share of the budget): drop it, or run on one server",
        ),
    ]);
    p.into_result()?;
    Ok(ClusterSettings {
        managed,
        read_from_replicas: m.cluster.read_from_replicas.unwrap_or(false),
        node,
        slot: migrated_slot(m)?,
    })
}

/// The slot the run's migrations move: `--slot` (the file's `slot`) or the migrate-slot
/// faults' own `slot` key; a run moves one slot, so they must agree.
fn migrated_slot(m: &RunFlags) -> Result<Option<u16>, UsageError> {
    let mut chosen: Option<(Option<u16>, String)> =
        m.cluster.slot.map(|s| (Some(s), format!("--slot {s}")));
    for f in &m.faults.fault {
        let Some(c) = f.slot.filter(|_| f.kind == FaultKind::MigrateSlot) else {
            continue;
        };
        let this = format!("{} slot={c}", f.kind);
        match &chosen {
            Some((n, first)) if *n != c.number() => {
                return Err(UsageError::new(format!(
                    "{first} and {this} name different slots: the run's migrations move one slot, so give it once"
                )));
            }
            Some(_) => {}
            None => chosen = Some((c.number(), this)),
        }
    }
    Ok(chosen.and_then(|(n, _)| n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_choices() {
        assert_eq!("hottest".parse(), Ok(NodeChoice::Hottest));
        assert_eq!("abc".parse(), Ok(NodeChoice::Id("abc".into())));
    }
}
