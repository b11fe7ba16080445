//! Redis's memory, one room for the feature: the limit a run sets on the managed server
//! (`--maxmemory`, `--maxmemory-policy`, `--maxmemory-samples`), the configuration and the
//! counts read back, and the figures of the run ([`figures`]: evictions, the peak, keys at the
//! end, what a key costs). The commands are the cache's (`cache/memory_commands.rs`), the
//! resolution of the flags `scenario/memory.rs`, the steps of a run `session/memory.rs`, the
//! summary lines `report/memory.rs`.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::values::Size;

pub mod figures;

/// What Redis does when a write would take it past `maxmemory`: Redis's own names.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum EvictionPolicy {
    /// Refuse the write with an OOM error (Redis's default).
    Noeviction,
    /// Evict the least recently used key, any key.
    AllkeysLru,
    /// Evict the least frequently used key, any key.
    AllkeysLfu,
    /// Evict a random key.
    AllkeysRandom,
    /// Evict the least recently used key among those with a TTL.
    VolatileLru,
    /// Evict the least frequently used key among those with a TTL.
    VolatileLfu,
    /// Evict a random key among those with a TTL.
    VolatileRandom,
    /// Evict the key with a TTL nearest its expiry.
    VolatileTtl,
}

impl EvictionPolicy {
    /// The name Redis knows it by (`maxmemory-policy`).
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::Noeviction => "noeviction",
            EvictionPolicy::AllkeysLru => "allkeys-lru",
            EvictionPolicy::AllkeysLfu => "allkeys-lfu",
            EvictionPolicy::AllkeysRandom => "allkeys-random",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    /// Whether Redis evicts at the limit instead of refusing writes.
    pub fn evicts(self) -> bool {
        self != EvictionPolicy::Noeviction
    }
}

impl std::fmt::Display for EvictionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Redis's `maxmemory-samples` when none is given.
pub const DEFAULT_SAMPLES: u32 = 5;

/// The memory limit of a run's Redis (`--maxmemory` and its policy). A `maxmemory` of 0 is
/// no limit, as in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryLimit {
    /// `maxmemory`, bytes (0: no limit).
    pub maxmemory: Size,
    /// `maxmemory-policy`.
    pub policy: EvictionPolicy,
    /// `maxmemory-samples`: keys sampled per eviction by the approximate LRU, LFU and TTL.
    pub samples: u32,
}

impl MemoryLimit {
    /// Redis's defaults: no limit, noeviction, 5 samples. What a managed Redis is given for a
    /// run without a limit, so that a limit set by an earlier run of a comparison or sweep
    /// does not carry over.
    pub const UNLIMITED: MemoryLimit = MemoryLimit {
        maxmemory: Size(0),
        policy: EvictionPolicy::Noeviction,
        samples: DEFAULT_SAMPLES,
    };

    /// The limit as redis-server arguments (`--maxmemory N …`), for a restarted server.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--maxmemory".into(),
            self.maxmemory.0.to_string(),
            "--maxmemory-policy".into(),
            self.policy.name().into(),
            "--maxmemory-samples".into(),
            self.samples.to_string(),
        ]
    }
}

/// The memory configuration of a server as read back (CONFIG GET): an external server's is
/// reported, never changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryConfig {
    /// `maxmemory`, bytes (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory-policy`, as Redis names it.
    pub policy: String,
    /// `maxmemory-samples`.
    pub samples: u32,
}

/// What INFO says of the server's memory and evictions at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// `used_memory`: bytes allocated by Redis.
    pub used_memory: u64,
    /// `used_memory_peak`: the most `used_memory` has been since the server started or its
    /// statistics were last reset (CONFIG RESETSTAT).
    pub used_memory_peak: u64,
    /// `evicted_keys` (INFO stats) since the server started.
    pub evicted_keys: u64,
    /// Keys in db 0 (INFO keyspace), every client's.
    pub keys: u64,
}

/// Whether a Redis error is an OOM refusal (`-OOM command not allowed when used memory >
/// 'maxmemory'`): a write under noeviction at the limit.
pub fn is_oom(e: &redis::RedisError) -> bool {
    e.code() == Some("OOM")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_are_named_as_redis_names_them() {
        for p in EvictionPolicy::value_variants() {
            let v = p.to_possible_value().unwrap();
            assert_eq!(v.get_name(), p.name());
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
        assert_eq!(EvictionPolicy::value_variants().len(), 8);
    }
}
