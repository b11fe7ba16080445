//! A sharded run's own part of a result: which shard wrote it, the instant every shard started
//! at, and on shard 0 the figures read once for the whole run (every shard) after the end
//! barrier; and, on a merged result, which shards it was merged from.

use serde::{Deserialize, Serialize};

/// One shard's place in a sharded run (`run --shard I/N`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardFigures {
    /// This shard's index, from 0.
    pub index: u32,
    /// How many shards the run has.
    pub count: u32,
    /// The run every shard joined (its Redis keys `stampede:<id>:`, its schema `stampede_<id>`).
    pub run_id: String,
    /// The Unix ms at which every shard started its traffic (warm-up, then the window).
    pub start_at_ms: u64,
    /// Whether this shard seeded the database and warmed the cache (false when another shard
    /// or `stampede prepare` did).
    pub set_up: bool,
    /// Whether this shard executed the run's faults (shard 0); the others record the schedule.
    pub executed_faults: bool,
    /// On shard 0: the figures read once for the whole run after every shard was done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_run: Option<WholeRun>,
}

/// What shard 0 reads of the servers once every shard is done: the server counters of the
/// whole window, counted for all shards together.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WholeRun {
    /// The shards that reached the end barrier before shard 0 read (all of them unless one
    /// failed or ran out of `--end-timeout`).
    pub shards_done: Vec<u32>,
    /// Executions of the measured loader statement that Postgres completed, all shards.
    pub calls_server: Option<u64>,
    /// Why `calls_server` is null, when it is.
    pub calls_server_note: Option<String>,
    /// INFO keyspace_hits, change from shard 0's start to the end barrier (every client of
    /// the server, all shards).
    pub keyspace_hits: Option<u64>,
    /// INFO keyspace_misses, same window.
    pub keyspace_misses: Option<u64>,
    /// Herds over every shard's loads, from the load ledger (the server's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<LedgerFigures>,
}

/// Herd figures computed over the loads Postgres recorded, on its own clock.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LedgerFigures {
    /// Loads recorded in the measured window (all shards).
    pub loads: u64,
    /// Distinct keys loaded.
    pub keys: u64,
    /// Most loads of one key running at once.
    pub peak_herd: u64,
    /// Loads that started while another load of the same key was running.
    pub redundant: u64,
}

/// Which shards a merged result (`stampede merge`) was made from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Merged {
    pub run_id: String,
    /// How many shards the run had.
    pub count: u32,
    /// The shards merged, by index.
    pub shards: Vec<u32>,
    /// The shards that were missing (only with `--allow-missing`).
    pub missing: Vec<u32>,
    /// True when shards were missing: the figures cover only part of the run.
    pub partial: bool,
    /// How figures that cannot simply be added were merged.
    pub notes: Vec<String>,
}
