//! What a run's Redis did with its memory (`redis.memory` in the result): the limit it ran
//! under, what it evicted, its peak, what it held at the end and what a key cost.

use serde::{Deserialize, Serialize};

/// Redis's memory over the run, read from the server (CONFIG GET, INFO, MEMORY USAGE) on the
/// tool's own connection. Absent in results written before memory was measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryFigures {
    /// `maxmemory` the server ran with, bytes (0: no limit), as CONFIG GET read it after the
    /// run's limit was set: on a managed Redis the run's `--maxmemory`, on an external one the
    /// server's own (never changed by the tool). Null when CONFIG GET was refused.
    pub maxmemory: Option<u64>,
    /// `maxmemory-policy`, as Redis names it (null when CONFIG GET was refused).
    pub policy: Option<String>,
    /// `maxmemory-samples` (null when CONFIG GET was refused).
    pub samples: Option<u32>,
    /// Whether the tool set the limit (a managed Redis) rather than only read it.
    pub set_by_tool: bool,
    /// INFO's `used_memory_peak` at the end of the run: the most memory the server had
    /// allocated since it started, bytes. On a managed Redis started for this run, the run's
    /// own peak, warming included; in a comparison or a sweep the servers are shared, so it
    /// may be an earlier run's; on an external Redis, every client's since it started.
    pub used_memory_peak: Option<u64>,
    /// INFO's `used_memory` at the end of the run, bytes.
    pub used_memory_end: Option<u64>,
    /// Keys in the server's db 0 at the end (INFO keyspace): this run's entries and its own
    /// keys (heartbeat, locks, lease tokens, version markers), and any other client's.
    pub keys_at_end: Option<u64>,
    /// This run's item entries still in Redis at the end (EXISTS over every item id).
    pub entries_at_end: Option<u64>,
    /// Mean MEMORY USAGE (exact, SAMPLES 0) of this run's entries that were present among a
    /// sample of ids (the 500 most popular and up to 500 spread over the rest), bytes: what
    /// one entry costs, its key, value, TTL and the allocator's rounding included.
    pub bytes_per_key_sampled: Option<f64>,
    /// How many entries `bytes_per_key_sampled` is the mean of.
    pub sampled_keys: u64,
    /// `used_memory_end / keys_at_end`, bytes: what a key costs on average counting the
    /// server's fixed overhead (about 0.9 MB for an empty Redis 7) and the hash tables' own
    /// size.
    pub used_memory_per_key: Option<f64>,
    /// Why a figure is null or what it includes.
    pub note: Option<String>,
}
