//! Redis's memory: the limit a run sets on the managed server (`--maxmemory`,
//! `--maxmemory-policy`, `--maxmemory-samples`, by CONFIG SET), the configuration read back
//! from any server (an external one is never changed), and the figures of the run's memory:
//! evictions, the peak, keys at the end and what a key costs.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::{Admin, KeyBuf, info_field};
use crate::values::Size;

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

/// How long one of these admin commands may take.
const DEADLINE: Duration = Duration::from_secs(5);

impl Admin {
    /// The server's `maxmemory`, `maxmemory-policy` and `maxmemory-samples` (CONFIG GET).
    pub async fn memory_config(&self) -> Result<MemoryConfig> {
        let mut c = self.conn.clone();
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg("maxmemory*");
        let pairs: Vec<String> = tokio::time::timeout(DEADLINE, cmd.query_async(&mut c))
            .await
            .context("CONFIG GET maxmemory* got no answer within 5 s")?
            .context("CONFIG GET maxmemory* (the user needs +config|get)")?;
        let get = |name: &str| {
            pairs
                .chunks(2)
                .find(|p| p.first().is_some_and(|k| k == name))
                .and_then(|p| p.get(1).cloned())
        };
        Ok(MemoryConfig {
            maxmemory: get("maxmemory").and_then(|v| v.parse().ok()).unwrap_or(0),
            policy: get("maxmemory-policy").unwrap_or_else(|| "unknown".into()),
            samples: get("maxmemory-samples")
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_SAMPLES),
        })
    }

    /// Set the limit (CONFIG SET, all three at once). Only ever sent to a managed Redis.
    pub async fn set_memory_limit(&self, m: &MemoryLimit) -> Result<()> {
        let mut c = self.conn.clone();
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET")
            .arg("maxmemory")
            .arg(m.maxmemory.0)
            .arg("maxmemory-policy")
            .arg(m.policy.name())
            .arg("maxmemory-samples")
            .arg(m.samples);
        tokio::time::timeout(DEADLINE, cmd.query_async::<()>(&mut c))
            .await
            .context("CONFIG SET maxmemory got no answer within 5 s")?
            .with_context(|| {
                format!(
                    "CONFIG SET maxmemory {} maxmemory-policy {} maxmemory-samples {}",
                    m.maxmemory.0, m.policy, m.samples
                )
            })
    }

    /// INFO's memory figures, evictions and keys now.
    pub async fn memory_stats(&self) -> Result<MemoryStats> {
        let memory = self.info("memory").await?;
        let stats = self.info("stats").await?;
        let keyspace = self.info("keyspace").await?;
        let num = |info: &str, k: &str| {
            info_field(info, k)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        // `db0:keys=123,expires=120,avg_ttl=…`
        let keys = info_field(&keyspace, "db0")
            .and_then(|v| v.split(',').find_map(|p| p.strip_prefix("keys=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok(MemoryStats {
            used_memory: num(&memory, "used_memory"),
            used_memory_peak: num(&memory, "used_memory_peak"),
            evicted_keys: num(&stats, "evicted_keys"),
            keys,
        })
    }

    /// This run's entries among items 1..=keys still in Redis, counted with EXISTS, 1000
    /// keys a command (EXISTS does not touch the keyspace hit and miss counters).
    pub async fn entries_present(&self, keys: u64) -> Result<u64> {
        let mut c = self.conn.clone();
        let mut present = 0u64;
        let mut id = 1u64;
        while id <= keys {
            let to = (id + 999).min(keys);
            let mut cmd = redis::cmd("EXISTS");
            for i in id..=to {
                cmd.arg(KeyBuf::new(&self.prefix, "", i).as_bytes());
            }
            let n: u64 = tokio::time::timeout(DEADLINE, cmd.query_async(&mut c))
                .await
                .context("EXISTS over the run's keys got no answer within 5 s")?
                .context("EXISTS over the run's keys")?;
            present += n;
            id = to + 1;
        }
        Ok(present)
    }

    /// MEMORY USAGE (`SAMPLES 0`: exact) of this run's entries among `ids`: the mean bytes
    /// of those present and how many were, pipelined. None when no id was present.
    pub async fn memory_usage(&self, ids: &[u64]) -> Result<Option<(f64, u64)>> {
        let mut c = self.conn.clone();
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("MEMORY")
                .arg("USAGE")
                .arg(KeyBuf::new(&self.prefix, "", *id).as_bytes())
                .arg("SAMPLES")
                .arg(0);
        }
        let got: Vec<Option<u64>> = tokio::time::timeout(DEADLINE, pipe.query_async(&mut c))
            .await
            .context("MEMORY USAGE got no answer within 5 s")?
            .context("MEMORY USAGE (the user needs +memory)")?;
        let present: Vec<u64> = got.into_iter().flatten().collect();
        Ok((!present.is_empty()).then(|| {
            (
                present.iter().sum::<u64>() as f64 / present.len() as f64,
                present.len() as u64,
            )
        }))
    }
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
