//! The in-process tier's figures (`--l1`): how many requests it answered, what it evicted,
//! the invalidations it heard, and what it served stale.

use serde::{Deserialize, Serialize};

/// What the instances' in-process tiers did in the measured window (absent without `--l1`).
/// The latency of a request served by the tier is `latency_by_outcome_ms["l1-hit"]`, of one
/// served by Redis `latency_by_outcome_ms["hit"]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct L1Figures {
    /// Requests answered from an instance's tier (outcome `l1-hit`), Redis not asked.
    pub hits: u64,
    /// `hits` / completed requests; null when none completed. The run's `hit_rate` is this
    /// plus `redis_hit_rate`.
    pub hit_rate: Option<f64>,
    /// Requests answered from Redis (outcomes `hit` and `stale`) / completed requests.
    pub redis_hit_rate: Option<f64>,
    /// Entries evicted to make room, least recently used first (over every instance).
    pub evictions: u64,
    /// Invalidations received, one per key: pub/sub messages (a write through any instance,
    /// its own included) or tracking pushes (any change of an entry key in Redis, fills'
    /// write-backs included). Always 0 under `ttl`.
    pub invalidations_received: u64,
    /// Whole-tier flushes: the tracking connection dropped, and the tier was bypassed until
    /// tracking was on again.
    pub flushes: u64,
    /// Values not cached in the tier because an invalidation of their key (or a flush)
    /// arrived while they were being read or loaded (the race client-side caches guard).
    pub spoiled: u64,
    /// Of the run's stale reads (`consistency.stale_reads`), those the tier served.
    pub stale_reads: u64,
}
