//! Redis Cluster, in one room: a run's cluster settings (which cluster, where reads go, which
//! node a fault strikes and which slot a migration moves), the managed cluster the tool forms
//! and tears down, the commands that read and change any cluster (its topology, failover,
//! slot migration), the client the instances talk through (one connection type for a single
//! server and a cluster: client.rs), and the per-node figures of a run. Resolving the flags is
//! `scenario/cluster.rs` (all resolution lives in `scenario/`), the admin connection's reach
//! to every node `cache/nodes.rs` (it extends the cache's admin connection, which the cache
//! owns), the faults that strike a node `fault/chaos/primaries.rs` (the fault lanes live in
//! the fault room), and the rendering `report/cluster.rs`.

pub mod client;
pub mod figures;
mod managed;
pub mod ops;
mod strike;
pub mod topology;

use serde::{Deserialize, Serialize};

pub use managed::{ClusterShape, ManagedCluster};
pub use ops::{
    MigrateOptions, MigrateReport, Promotion, cluster_nodes, cluster_state, failover, migrate_slot,
    node_stats, replica_link_up, wait_promotion,
};
pub use strike::{NodeChoice, SlotChoice};
pub use topology::{
    ClusterNode, ClusterState, NodeStats, Role, SLOTS, key_slot, node_url, parse_cluster_nodes,
    parse_node_stats,
};

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
