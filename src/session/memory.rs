//! Redis's memory in a run: the limit set on a managed Redis before the start state is
//! written (the defaults when the run has none, so that a comparison's or a sweep's earlier
//! limit does not carry over; and kept for the server a kill-redis fault brings back), the
//! configuration of an external one read and never changed, and the figures read at the end.

use anyhow::Result;

use super::env::Env;
use crate::cache::Admin;
use crate::memory::figures::MemoryFigures;
use crate::memory::{MemoryConfig, MemoryLimit};
use crate::scenario::Scenario;

/// Ids MEMORY USAGE is asked about: this many of the most popular, and as many again spread
/// over the rest.
const SAMPLE_HALF: u64 = 500;

/// Set the run's limit on the managed Redis (CONFIG SET, and the arguments of any restart)
/// and read back what the server runs with; on an external Redis only read it. A refused
/// CONFIG GET (an ACL) leaves the configuration unknown rather than failing the run; a
/// refused CONFIG SET on the tool's own server fails it.
pub(crate) async fn configure(
    sc: &Scenario,
    env: &mut Env,
    admin: &Admin,
) -> Result<Option<MemoryConfig>> {
    if sc.redis_url.is_none() {
        let limit = sc.memory.unwrap_or(MemoryLimit::UNLIMITED);
        admin.set_memory_limit(&limit).await?;
        if let Some(r) = env.redis.as_mut() {
            r.keep_config(limit.args());
        }
    }
    Ok(admin.memory_config().await.ok())
}

/// The memory figures at the end of the run. `restarted`: Redis restarted during it (the
/// peak is then the last server's).
pub(crate) async fn figures(
    sc: &Scenario,
    admin: &Admin,
    config: Option<&MemoryConfig>,
    restarted: bool,
) -> MemoryFigures {
    let mut notes = Vec::new();
    if config.is_none() {
        notes.push("CONFIG GET maxmemory* was refused or failed: the limit is unknown".to_string());
    }
    let stats = match admin.memory_stats().await {
        Ok(s) => Some(s),
        Err(e) => {
            notes.push(format!("INFO memory could not be read: {e:#}"));
            None
        }
    };
    let entries = match admin.entries_present(sc.keys).await {
        Ok(n) => Some(n),
        Err(e) => {
            notes.push(format!("the run's entries could not be counted: {e:#}"));
            None
        }
    };
    let ids: Vec<u64> = sample_ids(sc.keys);
    let usage = match admin.memory_usage(&ids).await {
        Ok(u) => u,
        Err(e) => {
            notes.push(format!("MEMORY USAGE could not be read: {e:#}"));
            None
        }
    };
    if sc.redis_url.is_some() {
        notes.push("an external Redis: the peak and the keys are every client's".to_string());
    }
    if restarted {
        notes
            .push("Redis restarted during the run: the peak is the restarted server's".to_string());
    }
    MemoryFigures {
        maxmemory: config.map(|c| c.maxmemory),
        policy: config.map(|c| c.policy.clone()),
        samples: config.map(|c| c.samples),
        set_by_tool: sc.redis_url.is_none(),
        used_memory_peak: stats.map(|s| s.used_memory_peak),
        used_memory_end: stats.map(|s| s.used_memory),
        keys_at_end: stats.map(|s| s.keys),
        entries_at_end: entries,
        bytes_per_key_sampled: usage.map(|(mean, _)| mean),
        sampled_keys: usage.map_or(0, |(_, n)| n),
        used_memory_per_key: stats
            .filter(|s| s.keys > 0)
            .map(|s| s.used_memory as f64 / s.keys as f64),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

/// The ids MEMORY USAGE samples: the most popular (those a limit keeps), then ids spread
/// evenly over the rest.
fn sample_ids(keys: u64) -> Vec<u64> {
    let top = keys.min(SAMPLE_HALF);
    let rest = keys - top;
    let step = rest.div_ceil(SAMPLE_HALF).max(1);
    (1..=top)
        .chain((top + 1..=keys).step_by(step as usize))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_takes_the_head_and_spreads_over_the_tail() {
        assert_eq!(sample_ids(3), vec![1, 2, 3]);
        let ids = sample_ids(100_000);
        assert!(ids.len() <= 1000 && ids.len() > 900, "{}", ids.len());
        assert_eq!(ids[..500], (1..=500).collect::<Vec<_>>()[..]);
        assert!(ids.iter().all(|&i| (1..=100_000).contains(&i)));
    }
}
