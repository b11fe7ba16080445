//! The commands of the memory feature ([`crate::memory`]) on the tool's own connection: the
//! limit set on the managed server by CONFIG SET, the configuration read back from any server
//! (an external one is never changed), INFO's memory and eviction counts, what a key costs.

use std::time::Duration;

use anyhow::{Context, Result};

use super::{Admin, KeyBuf, info_field};
use crate::memory::{DEFAULT_SAMPLES, MemoryConfig, MemoryLimit, MemoryStats};

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
