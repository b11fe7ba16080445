//! Settings that belong to an optional part of a run: given while the part is off, each is
//! refused with what turns it on (a `--breaker-*` setting without a breaker would silently do
//! nothing); and the settings a trace replay decides itself, refused beside `--trace`.

use crate::cli::RunFlags;
use crate::error::Problems;
use crate::strategy::StrategySpec;

/// An optional part, whether a run has it, and its own settings' keys.
struct Part {
    /// What is said after the setting's flag.
    says: &'static str,
    on: fn(&RunFlags) -> bool,
    /// The keys, space-separated.
    keys: &'static str,
}

const PARTS: &[Part] = &[
    Part {
        says: "is a setting of the circuit breaker, which is off: add --breaker (scenario file: breaker = true)",
        on: |m| m.protect.breaker == Some(true),
        keys: "breaker_error_rate breaker_latency breaker_window breaker_cooldown breaker_probes breaker_min_loads",
    },
    Part {
        says: "is a setting of the rate limit, which is off: add --db-rate R (scenario file: db_rate)",
        on: |m| m.protect.db_rate.is_some(),
        keys: "db_burst db_rate_scope",
    },
    Part {
        says: "is a setting of the in-process tier, which is off: add --l1 N (scenario file: l1)",
        on: |m| m.cache.l1.is_some(),
        keys: "l1_ttl l1_invalidate",
    },
    Part {
        says: "is a setting of the re-warm job, which is off: add --rewarm-every D (scenario file: rewarm_every)",
        on: |m| m.cache.rewarm_every.is_some(),
        keys: "rewarm_top",
    },
    Part {
        says: "is a setting of the fail-safe, which is off: add --fail-safe D (scenario file: fail_safe), the time entries are kept past expiry to be served when a load fails",
        on: |m| {
            let preset = StrategySpec::parse(m.cache.strategy.as_deref().unwrap_or_default());
            m.cache.fail_safe.is_some()
                || preset.is_ok_and(|s| {
                    s.library_defaults()
                        .is_some_and(|l| l.fail_safe_ttls.is_some())
                })
        },
        keys: "fail_safe_throttle soft_timeout",
    },
    Part {
        says: "is a setting of the writes, and there are none: add --write-rps (scenario file: write_rps)",
        on: |m| {
            m.writes.write_rps.is_some_and(|r| r.0 > 0.0)
                || m.traces.trace_ops == Some(crate::trace::replay::TraceOps::All)
        },
        keys: "write_zipf invalidate writers_per_key write_gap",
    },
    Part {
        says: "is a setting of the client's retries, and there are none: add --retries N (scenario file: retries)",
        on: |m| m.client.resolved().retries() > 0,
        keys: "retry_backoff retry_jitter",
    },
    Part {
        says: "is a setting of an external Redis (--redis-url): the managed Redis is restarted by stampede itself",
        on: |m| m.servers.redis_url.is_some(),
        keys: "redis_restart_cmd",
    },
    Part {
        says: "is a setting of an external Postgres (--pg-url): the managed Postgres is killed and restarted by stampede itself",
        on: |m| m.servers.pg_url.is_some(),
        keys: "pg_kill_cmd pg_restart_cmd",
    },
    Part {
        says: "is a setting of --db-sql (your query on your database), which is not given: add --db-sql",
        on: |m| m.db.db_sql.is_some(),
        keys: "keys_sql keys_file",
    },
    Part {
        says: "is for a Redis Cluster: add --redis-cluster (managed) or --redis-url redis+cluster://…",
        on: on_cluster,
        keys: "read_from_replicas redis_node slot",
    },
    Part {
        says: "is a setting of a trace replay, and there is none: add --trace FILE",
        on: |m| m.traces.trace.is_some(),
        keys: "trace_format trace_columns trace_ops speed trace_spread trace_skip",
    },
];

/// A part that decides settings itself, or gives them no meaning: its flag, whether a run has
/// it, and each such key with why.
type NotWith = (
    &'static str,
    fn(&RunFlags) -> bool,
    &'static [(&'static str, &'static str)],
);

const OWN_ITEMS: &str = "the trace's keys are seeded as the tool's own items";
const OWN_LOAD: &str =
    "it shapes stampede's own load, and with --db-sql a load is your query on your keys";

const YOUR_REDIS: &str = "it sets the memory limit of the Redis stampede starts, and stampede never changes its configuration (its maxmemory, policy and samples are read and reported in the result). Set them on the server yourself (CONFIG SET maxmemory …), or drop --redis-url to run on a managed Redis";

/// Whether the run is on a Redis Cluster, managed or the user's.
pub(super) fn on_cluster(m: &RunFlags) -> bool {
    m.cluster.redis_cluster.is_some()
        || m.servers
            .redis_url
            .as_deref()
            .is_some_and(crate::cache::is_cluster)
}

const NOT_WITH: &[NotWith] = &[
    (
        "--trace",
        |m| m.traces.trace.is_some(),
        &[
            (
                "clients",
                "a trace is replayed at its own times (open loop)",
            ),
            ("keys", "the trace's distinct keys are the items"),
            ("zipf", "the popularity is the trace's own"),
            ("arrival", "requests go out at the trace's timestamps"),
            ("missing_ratio", "every trace key is an item"),
            (
                "value_size_dist",
                "each item has the trace's value size for it (--value-size for a key the trace gives none)",
            ),
            (
                "warm",
                "item ids follow first appearance, not popularity; use --start steady (the default) or cold",
            ),
            ("db_sql", OWN_ITEMS),
            ("keys_sql", OWN_ITEMS),
            ("keys_file", OWN_ITEMS),
        ],
    ),
    (
        "--redis-url",
        |m| m.servers.redis_url.is_some(),
        &[
            ("maxmemory", YOUR_REDIS),
            ("maxmemory_policy", YOUR_REDIS),
            ("maxmemory_samples", YOUR_REDIS),
        ],
    ),
    (
        "--db-sql",
        |m| m.db.db_sql.is_some(),
        &[
            ("db_query", OWN_LOAD),
            ("db_cost", OWN_LOAD),
            ("value_size", OWN_LOAD),
            (
                "check_values",
                "it compares each value with the payload stampede seeds, and with --db-sql the rows are your own",
            ),
        ],
    ),
];

/// Every setting given without the part it belongs to, and every one a trace decides.
pub(super) fn check(m: &RunFlags, p: &mut Problems) {
    let given = m.given();
    let flag = |k: &str| format!("--{}", k.replace('_', "-"));
    for part in PARTS.iter().filter(|part| !(part.on)(m)) {
        for k in part.keys.split(' ').filter(|k| given.contains(k)) {
            p.push(format!("{} {}", flag(k), part.says));
        }
    }
    for (part, _, keys) in NOT_WITH.iter().filter(|(_, on, _)| on(m)) {
        for (k, why) in keys.iter().filter(|(k, _)| given.contains(k)) {
            p.push(format!("{} does not go with {part}: {why}", flag(k)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_named_here_is_a_setting() {
        let all = RunFlags::rows();
        let keys = PARTS.iter().flat_map(|p| p.keys.split(' ')).chain(
            NOT_WITH
                .iter()
                .flat_map(|(_, _, k)| k.iter().map(|(k, _)| *k)),
        );
        for k in keys {
            assert!(all.iter().any(|r| r.key == k), "{k} is not a setting");
        }
    }
}
