//! Which settings make two results comparable: those of the workload (two results that differ
//! in one measured different things), those of the strategy under test, and the rest; and the
//! settings in which two scenarios differ, as the results files write them.

use crate::scenario::Scenario;

/// Settings that shape what the workload asks of the servers: two results that differ in one
/// of them measured different things, whatever their strategies.
pub const WORKLOAD_SETTINGS: [&str; 31] = [
    "load",
    "duration",
    "warmup",
    "keys",
    "zipf",
    "seed",
    "value_size",
    "value_size_dist",
    "memory",
    "ttl",
    "db_cost",
    "db_pool",
    "db_timeout",
    "db_query",
    "instances",
    "redis_conns",
    "max_inflight",
    "backlog",
    "start",
    "warm",
    "redis_timeout",
    "redis_client",
    "redis_rtt",
    "pg_rtt",
    "missing_ratio",
    "missing_ids",
    "faults",
    "writes",
    "own_load",
    "client",
    "trace",
];

/// Settings of the strategy under test (its parameters, which differ between strategies of one
/// comparison by design, such as the jitter preset's own ±10%), and the protections in front
/// of its loads (`--db-limit`, `--breaker`, `--db-rate`), the re-warm job, the fail-safe and
/// eager refresh, and the in-process tier (`--l1`): what the app does, not what is asked of it.
pub const STRATEGY_SETTINGS: [&str; 23] = [
    "strategy",
    "jitter",
    "beta",
    "stale",
    "lock_ttl",
    "lock_ttl_factor",
    "lock_extend",
    "lock_poll",
    "lock_wait",
    "lock_timeout_policy",
    "lock_waiters",
    "retry_after",
    "fallback_writeback",
    "negative_ttl",
    "db_limit",
    "breaker",
    "db_rate",
    "rewarm",
    "l1",
    "fail_safe",
    "eager_refresh",
    "invalidate",
    "lease_ttl",
];

/// Settings that change neither the workload nor the strategy: where the servers are, how the
/// timeline is cut, what the run is judged by.
#[cfg(test)]
const OTHER_SETTINGS: [&str; 16] = [
    "scenario_file",
    "check_values",
    "redis_url",
    "pg_url",
    "redis_restart_cmd",
    "allow_pause_external",
    "allow_kill_external",
    "pg_kill_cmd",
    "pg_restart_cmd",
    "interval",
    "thresholds",
    "tls",
    "redis_tls",
    "cluster",
    "goodput_within",
    "recovery",
];

/// The settings among `keys` in which `self` and `other` differ, as "key: a, b" with the
/// values as the results file writes them.
pub fn differences(a: &Scenario, b: &Scenario, keys: &[&str]) -> Vec<(String, String, String)> {
    let (mut a, mut b) = (
        serde_json::to_value(a).unwrap_or_default(),
        serde_json::to_value(b).unwrap_or_default(),
    );
    // A trace is the same trace wherever it lies: its bytes (the digest) and the slice and
    // pacing chosen decide, not its path.
    for v in [&mut a, &mut b] {
        if let Some(t) = v.get_mut("trace").and_then(|t| t.as_object_mut()) {
            t.remove("path");
        }
    }
    let show = |v: Option<&serde_json::Value>| match v {
        None | Some(serde_json::Value::Null) => "unset".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    keys.iter()
        .filter(|k| a.get(**k) != b.get(**k))
        .map(|k| (k.to_string(), show(a.get(*k)), show(b.get(*k))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::RunFlags;
    use crate::values::{Percent, Rate};

    #[test]
    fn every_setting_is_the_workload_s_the_strategy_s_or_neither() {
        // With writes, a lease, a memory limit and a size distribution, so that every
        // optional setting is written.
        let s = crate::scenario::resolve(None, {
            let mut f: RunFlags = Default::default();
            f.cache.strategy = Some("lease".into());
            f.writes.write_rps = Some(Rate(10.0));
            f.memory.maxmemory = Some(crate::values::Size(8 << 20));
            f.data.value_size_dist = Some("100..10k".parse().unwrap());
            f.servers.net_rtt = Some("1ms".parse().unwrap());
            f.servers.redis_client = Some(crate::cache::RedisClient::Ioredis);
            f.servers.check_values = Some(true);
            f
        })
        .unwrap();
        let v = serde_json::to_value(&s).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        for k in &keys {
            let n = [&WORKLOAD_SETTINGS[..], &STRATEGY_SETTINGS, &OTHER_SETTINGS]
                .iter()
                .filter(|l| l.contains(&k.as_str()))
                .count();
            assert_eq!(n, 1, "setting {k} must be in exactly one list");
        }
        // `trace` is written only by a replay (which refuses a size distribution): a workload
        // setting, and the one key this scenario cannot have.
        assert!(v.get("trace").is_none() && WORKLOAD_SETTINGS.contains(&"trace"));
        // `cluster` is written only for a run on a Redis Cluster.
        assert!(v.get("cluster").is_none() && OTHER_SETTINGS.contains(&"cluster"));
        // `retry_after` is written only when set.
        assert!(v.get("retry_after").is_none() && STRATEGY_SETTINGS.contains(&"retry_after"));
        assert_eq!(
            keys.len() + 3,
            WORKLOAD_SETTINGS.len() + STRATEGY_SETTINGS.len() + OTHER_SETTINGS.len()
        );
    }

    #[test]
    fn a_typed_scenario_reads_back_what_it_wrote() {
        let s = crate::scenario::resolve(None, {
            let mut f: RunFlags = Default::default();
            f.cache.strategy = Some("jitter+mutex".into());
            f
        })
        .unwrap();
        let text = serde_json::to_string(&s).unwrap();
        let back: Scenario = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert!(differences(&s, &back, &WORKLOAD_SETTINGS).is_empty());
        let mut other = back.clone();
        other.jitter = Percent(0.2);
        other.keys += 1;
        assert_eq!(differences(&s, &other, &WORKLOAD_SETTINGS).len(), 1);
        assert_eq!(differences(&s, &other, &STRATEGY_SETTINGS).len(), 1);
    }
}
