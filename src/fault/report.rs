//! What a fault did, as the results file writes it (`faults[]`): when it struck, how long the
//! server was gone, what the requests got meanwhile and how the run recovered, and on a Redis
//! Cluster what the cluster did. Measured by [`super::chaos`] and the run's timeline.

use serde::{Deserialize, Serialize};

use super::FaultKind;

/// One injected fault: when it struck, how long the server was gone, and how the run
/// recovered. Times are ms since the measured window started; "restart" is the moment the
/// server answered the tool again (a new Redis answering PING, a paused Redis answering PING
/// once the pause ended, Postgres accepting a connection after crash recovery).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FaultReport {
    /// What happened: `kill-redis` (a crash of Redis, which comes back empty), `pause-redis`
    /// (Redis stalls: connections stay open, commands hang), `kill-postgres` (a crash of
    /// Postgres, which comes back through crash recovery), and the shocks: `drop-cache` (a
    /// share of the entries removed at once), `slow-db` (loads cost `factor` times more),
    /// `spike` (the rate offered `factor` times). For a shock, `down_ms` is how long it lasted
    /// (0 for a drop) and the recovery figures count from its end.
    pub kind: FaultKind,
    /// When the server was killed (or paused), ms since the measured window started (as done,
    /// not as planned).
    pub at_ms: u64,
    /// From the kill (or pause) until the server answered again, ms (`down_for` plus the
    /// restart itself).
    pub down_ms: u64,
    /// From the restart until a request first got through to the server again, ms: a Redis
    /// command for the Redis faults, a load that got its answer for `kill-postgres`. Null when
    /// none did before the next fault of that server or the end of the run.
    pub recovered_ms: Option<u64>,
    /// From the restart until the end of the first timeline bucket whose hit rate was back to
    /// at least 90% of `hit_rate_before`, ms. Null when it never got there, or when there was
    /// no hit rate to get back to.
    pub hit_rate_recovered_ms: Option<u64>,
    /// Hit rate ((hit + stale) / requests) over the timeline buckets of the last second before
    /// the kill; null when no bucket ended before it.
    pub hit_rate_before: Option<f64>,
    /// DB calls started during the outage (kill to restart).
    pub db_calls_during: u64,
    /// Redis commands that failed or missed their deadline during the outage.
    pub redis_errors_during: u64,
    /// Loads that failed in the database during the outage: statements that ended in an error
    /// (cut off by the crash, or timed out), connections that could not be opened, waits for
    /// a pooled connection that ran out.
    #[serde(default)]
    pub db_errors_during: u64,
    /// What requests completed during the outage got: the timeline buckets that ended in it
    /// (the first may have begun up to one `--interval` before it).
    #[serde(default)]
    pub served_during: Served,
    /// DB calls started in the first second after the restart: the recovery stampede of a
    /// cold cache. Fewer than 1000 ms are covered when the run or the next fault came first.
    pub recovery_stampede: u64,
    /// Of `recovery_stampede`, loads started while another load of the same key was in flight
    /// (the herd a coordination is meant to prevent).
    #[serde(default)]
    pub recovery_redundant: u64,
    /// How many ms after the restart `recovery_stampede` covers (1000 unless cut short).
    pub recovery_window_ms: u64,
    /// drop-cache: the entries it removed (those asked for that were cached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<u64>,
    /// Shocks: loads the requests asked for (queued ones included, not only the DB calls
    /// sent) in the `recovery_window_ms` after it ended: the demand the shock made.
    #[serde(default)]
    pub loads_after: u64,
    /// slow-db: how many times its cost a load cost; spike: how many times the rate was offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// What went wrong with the fault itself (a refused SHUTDOWN, a failed restart command),
    /// or, for a drop-cache, what it removed.
    pub note: Option<String>,
    /// A fault on a Redis Cluster: the node struck, the promotion or the migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterFault>,
    /// holder-crash: the instance that died, the keys its locks blocked and who waited on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<HolderCrash>,
    /// A network fault (partition, reset, latency, bandwidth, slow-close): whose network, which instances,
    /// and what tells it from a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetFault>,
}

/// What a network fault did (`faults[].net`); `down_ms` is how long it lasted and
/// `recovered_ms` runs from its end until a reply from the server first reached a struck
/// instance through the proxy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NetFault {
    /// `redis`, `postgres` or `both`.
    pub server: String,
    /// The instances struck (from 0); every instance of the run when the fault named none.
    pub instances: Vec<usize>,
    /// Redis commands that waited their whole deadline (`--redis-timeout`) from the fault's
    /// start until it ended: what a partition costs and a crash (refused at once) does not.
    pub redis_deadlines_waited: u64,
    /// Loads that ended in a database error or timeout (`--db-timeout`) meanwhile.
    pub db_errors: u64,
    /// Connections the proxy reset (RST) meanwhile: a reset's figure.
    pub resets: u64,
    /// Connections the struck instances opened through the proxy from the fault's start until
    /// one second after its end: their clients' reconnects.
    pub reconnects: u64,
    /// latency: the round trip added, ms; bandwidth: the bytes a second each way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_rtt_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bytes_per_sec: Option<u64>,
    /// slow-close: how long a close was held, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_delay_ms: Option<u64>,
}

/// What a holder-crash did (`faults[].holder`): `down_ms` is how long the instance was gone
/// (0 and a note when it did not come back in the run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HolderCrash {
    /// The instance that died (from 0): the one holding the most locks (or leases).
    pub instance: usize,
    /// From AT until an instance held a lock, ms: the fault waits up to 2 s for one.
    pub waited_for_holder_ms: u64,
    /// The locks and leases it held when it died.
    pub locks_held: u64,
    /// Of those, the keys whose lock or lease Redis still held under its token right after the
    /// crash (GET and PTTL on the tool's own connection): blocked until their lease ran out.
    pub keys_blocked: u64,
    /// The longest lease those keys had left right after the crash, ms (Redis's PTTL): how long
    /// the last of them stayed blocked.
    pub blocked_ms_max: u64,
    /// From the crash until another loader took a blocked key's lock (or lease) again, the
    /// longest over the keys, ms: the block as the other instances saw it end (the lease left,
    /// plus up to one poll). Null when none was taken again before the fault's watch ended.
    pub retaken_ms_max: Option<u64>,
    /// Requests in flight on (or queued to) the instance when it died: cut off, counted as
    /// errors, as a reset connection is to its client.
    pub requests_cut: u64,
    /// Requests of the other instances that waited for a blocked key's lock while it was
    /// blocked.
    pub waiters: u64,
    /// The longest of those waits, ms: until the value appeared, the lock was taken over or
    /// the wait ran out (a load that followed is not in it).
    pub waited_ms_max: u64,
    /// What those waiters got, by outcome (`waited`: the value appeared; `miss`: they took the
    /// lock over and loaded; `fallback`, `error`, `stale`, `retry-after`: the wait ran out).
    pub waiters_got: std::collections::BTreeMap<String, u64>,
}

/// Requests of some timeline buckets by what they got.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Served {
    /// Requests completed.
    pub requests: u64,
    /// Served from a fresh cache entry.
    pub hits: u64,
    /// Served a stale entry (swr).
    pub stale: u64,
    /// Failed (outcome error).
    pub errors: u64,
}

/// What a fault on a Redis Cluster did to the cluster (`faults[].cluster`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterFault {
    /// The node struck, `host:port`: the killed primary (kill-redis), the primary whose replica
    /// took over (failover), the slot's source (migrate-slot).
    pub node: String,
    /// The node serving the struck primary's slots afterwards: the promoted replica
    /// (kill-redis, failover) or the slot's new primary (migrate-slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now_served_by: Option<String>,
    /// kill-redis: ms from the kill until another node served the killed primary's slots and
    /// the cluster said ok (the failure detection of `cluster-node-timeout` plus the
    /// election). Null when no replica took over (see the fault's note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_ms: Option<u64>,
    /// kill-redis: Redis commands that failed or missed their deadline from the kill until the
    /// promotion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors_until_promotion: Option<u64>,
    /// kill-redis: DB calls started in the first second after the promotion (fewer ms when the
    /// node came back or the run ended first): the stampede onto the promoted replica, whose
    /// cache is what replication had delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_stampede: Option<u64>,
    /// The managed cluster's `cluster-node-timeout`, ms (null on an external cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_timeout_ms: Option<u64>,
    /// migrate-slot: the slot moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u16>,
    /// migrate-slot: the keys MIGRATE moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_moved: Option<u64>,
    /// failover: from CLUSTER FAILOVER until the replica was a primary of an ok cluster, ms;
    /// migrate-slot: from the first SETSLOT to the last, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<u64>,
}
