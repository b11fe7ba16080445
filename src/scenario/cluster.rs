//! A run on a Redis Cluster: the managed cluster's shape (`--redis-cluster P[:R]`), where reads
//! go (`--read-from-replicas`), which primary a fault strikes (`--redis-node`) and which slot
//! a migration moves (`--slot`), resolved from the flags and checked against what a cluster
//! run cannot do.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::cli::RunFlags;
use crate::error::UsageError;

/// The managed cluster: P primaries with R replicas each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterShape {
    pub primaries: u16,
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

impl FromStr for ClusterShape {
    type Err = String;

    /// `P` or `P:R`; P ≥ 3 (a cluster needs a majority of primaries to promote a replica),
    /// at most 30 nodes in all.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("--redis-cluster takes P or P:R, e.g. 3:1 (got {s:?})");
        let (p, r) = match s.split_once(':') {
            Some((p, r)) => (p, Some(r)),
            None => (s, None),
        };
        let primaries: u16 = p.trim().parse().map_err(|_| bad())?;
        let replicas: u16 = match r {
            Some(r) => r.trim().parse().map_err(|_| bad())?,
            None => 1,
        };
        if primaries < 3 {
            return Err(format!(
                "--redis-cluster needs at least 3 primaries (got {primaries}): Redis Cluster promotes a replica only with a majority of primaries"
            ));
        }
        if u32::from(primaries) * (1 + u32::from(replicas)) > 30 {
            return Err(format!(
                "--redis-cluster {primaries}:{replicas} is {} nodes: at most 30 on one machine",
                u32::from(primaries) * (1 + u32::from(replicas))
            ));
        }
        Ok(ClusterShape {
            primaries,
            replicas,
        })
    }
}

impl std::fmt::Display for ClusterShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.primaries, self.replicas)
    }
}

/// Which primary a cluster fault strikes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NodeChoice {
    /// The primary that served the most commands so far in the run.
    #[default]
    Hottest,
    /// A primary drawn with the run's seed.
    Random,
    /// The node with this id (CLUSTER NODES), or `host:port`.
    Id(String),
}

impl FromStr for NodeChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim() {
            "hottest" => NodeChoice::Hottest,
            "random" => NodeChoice::Random,
            "" => return Err("--redis-node is empty: give hottest, random or a node id".into()),
            id => NodeChoice::Id(id.to_string()),
        })
    }
}

/// A run's cluster settings; all default on a single server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterSettings {
    /// `--redis-cluster`: the tool starts and stops a cluster of this shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<ClusterShape>,
    /// `--read-from-replicas`: GETs go to a replica of the key's primary.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_from_replicas: bool,
    /// `--redis-node`: the primary kill-redis and failover strike.
    #[serde(default)]
    pub node: NodeChoice,
    /// `--slot`: the slot a migration moves; None: the hottest key's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u16>,
}

impl ClusterSettings {
    pub fn is_default(&self) -> bool {
        *self == ClusterSettings::default()
    }
}

/// The cluster flags, checked against where Redis is and what a cluster run cannot do.
pub(super) fn cluster_settings(m: &RunFlags) -> Result<ClusterSettings, UsageError> {
    let managed = m
        .redis_cluster
        .as_deref()
        .map(ClusterShape::from_str)
        .transpose()
        .map_err(UsageError::new)?;
    let external = m.redis_url.as_deref().is_some_and(crate::cache::is_cluster);
    if managed.is_some() && m.redis_url.is_some() {
        return Err(UsageError::new(
            "--redis-cluster starts a managed cluster, and --redis-url gives a Redis: drop one (an external cluster is --redis-url redis+cluster://host:port,…)",
        ));
    }
    let on_cluster = managed.is_some() || external;
    let node = match &m.redis_node {
        Some(n) => NodeChoice::from_str(n).map_err(UsageError::new)?,
        None => NodeChoice::default(),
    };
    for (set, flag) in [
        (
            m.read_from_replicas.unwrap_or(false),
            "--read-from-replicas",
        ),
        (m.redis_node.is_some(), "--redis-node"),
        (m.slot.is_some(), "--slot"),
    ] {
        if set && !on_cluster {
            return Err(UsageError::new(format!(
                "{flag} is for a Redis Cluster: add --redis-cluster (managed) or --redis-url redis+cluster://…"
            )));
        }
    }
    if let Some(s) = m.slot
        && s >= 16384
    {
        return Err(UsageError::new(format!(
            "--slot {s} is not a slot: Redis Cluster has slots 0 to 16383"
        )));
    }
    if on_cluster && m.maxmemory.is_some() {
        return Err(UsageError::new(
            "--maxmemory is not supported on a Redis Cluster yet (each node would need its own share of the budget): drop it, or run on one server",
        ));
    }
    Ok(ClusterSettings {
        managed,
        read_from_replicas: m.read_from_replicas.unwrap_or(false),
        node,
        slot: m.slot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(
            "3:1".parse::<ClusterShape>(),
            Ok(ClusterShape {
                primaries: 3,
                replicas: 1
            })
        );
        assert_eq!(
            "4".parse::<ClusterShape>(),
            Ok(ClusterShape {
                primaries: 4,
                replicas: 1
            })
        );
        assert_eq!("3:0".parse::<ClusterShape>().map(|s| s.replicas), Ok(0));
        assert!(
            "2:1"
                .parse::<ClusterShape>()
                .unwrap_err()
                .contains("at least 3")
        );
        assert!("10:2".parse::<ClusterShape>().unwrap_err().contains("30"));
        assert!("x".parse::<ClusterShape>().is_err());
        assert_eq!("hottest".parse(), Ok(NodeChoice::Hottest));
        assert_eq!("abc".parse(), Ok(NodeChoice::Id("abc".into())));
    }
}
