//! The merge proved over the result type: N copies of one shard merged, every leaf of the
//! JSON checked against the rule its field merges by, and every field of the results schema
//! required to have a rule here, so a new field without one fails.

use std::collections::BTreeSet;

use serde_json::Value;

use super::merge;
use crate::results::shard::{LedgerFigures, ShardFigures, WholeRun};
use crate::results::{BreakerEvent, DispatchLag, RunResult, decode_histogram};

/// What merging N copies of a shard does to a field (and everything under it).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// N times the copy's.
    Sum,
    /// The copy's: equal in every shard (or the first's, or the largest, smallest, a mean,
    /// any or all of equal values, a bucket placed on the same slot).
    Same,
    /// The copies' lists one after the other: N times as many entries.
    Concat,
    /// A histogram of N times the copy's count.
    Histogram,
    /// Null, with a reason.
    Unknown,
    /// Derived again after the fold, or read once for the whole run by shard 0: not a
    /// function of the copy's own value.
    Recomputed,
    /// Not in the merged result.
    Dropped,
}
use Rule::*;

/// Every field of a result, by path (`[]` an array's entries, `*` a map's values), with the
/// rule it merges by; an entry covers everything under its path.
const RULES: &[(&str, Rule)] = &[
    ("schema", Same),
    ("tool_version", Same),
    ("strategy", Same),
    ("started_at_ms", Same), // min
    ("interrupted", Same),   // any
    ("scenario", Same),
    ("start", Same), // the shard's that set up
    ("requests.scheduled", Sum),
    ("requests.completed", Sum),
    ("requests.shed", Sum),
    ("requests.unsent", Sum),
    ("requests.errors", Sum),
    ("requests.abandoned", Sum),
    ("requests.warmup", Sum),
    ("requests.timed_out", Sum),
    ("requests.goodput", Sum),
    ("requests.retries", Sum),
    ("requests.attempts", Sum),
    ("requests.amplification", Recomputed),
    ("requests.retry_after_waits", Sum),
    ("requests.retry_after_wait_ms_min", Same), // min
    ("outcomes", Sum),
    ("hit_rate", Recomputed),
    ("db.calls", Sum),
    ("db.calls_server", Recomputed),
    ("db.calls_server_note", Recomputed),
    ("db.calls_server_read", Recomputed),
    ("db.statement_errors", Sum),
    ("db.statement_timeouts", Sum),
    ("db.pool_timeouts", Sum),
    ("db.connect_errors", Sum),
    ("db.limit_refusals", Sum),
    ("db.breaker_refusals", Sum),
    ("db.rate_refusals", Sum),
    ("db.rate_fallback_ms", Same), // max
    ("db.rewarm_calls", Sum),
    ("db.rewarm_runs", Same), // max
    ("db.warmup_calls", Sum),
    ("db.peak_concurrent", Sum),
    ("db.peak_in_flight", Sum),
    ("db.peak_active_sampled", Same),
    ("db.peak_key_herd", Unknown),
    ("db.redundant_loads", Unknown),
    ("db.by_cause", Sum),
    ("db.herd_model", Dropped),
    ("db.ledger_peak_key_herd", Recomputed),
    ("db.ledger_redundant_loads", Recomputed),
    ("db.statement_ms_mean", Same),
    ("db.pool_wait_ms_mean", Same),
    ("db.pool_busy", Same),
    ("db.background_refreshes", Sum),
    ("db.refreshes_skipped", Sum),
    ("db.early_recomputes", Sum),
    ("db.early_lead_ms_mean", Same),
    ("db.fail_safe", Sum),
    ("db.fail_safe_throttled", Sum),
    ("db.soft_timeouts", Sum),
    ("db.soft_timeout_write_backs", Sum),
    ("db.eager_refreshes", Sum),
    ("db.race_pushes", Sum),
    ("db.heavy_query_ms", Same),
    ("db.seeded_bytes", Same),
    ("db.writes", Sum),
    ("db.writes_server", Sum),
    ("db.write_errors", Sum),
    ("db.write_latency_ms", Same),
    ("cost.redis_read_ms", Same),
    ("cost.load_ms", Same),
    ("cost.write_back_ms", Same),
    ("cost.break_even_hit_rate", Same),
    ("cost.load_ms_from", Same),
    ("cost.run_load_ms", Same),
    ("cost.redis_reads", Sum),
    ("cost.loads", Sum),
    ("cost.write_backs", Sum),
    ("cost.undisturbed", Same),
    ("cost.hit_rate", Same),
    ("l1.hits", Sum),
    ("l1.hit_rate", Recomputed),
    ("l1.redis_hit_rate", Recomputed),
    ("l1.evictions", Sum),
    ("l1.invalidations_received", Sum),
    ("l1.flushes", Sum),
    ("l1.spoiled", Sum),
    ("l1.stale_reads", Sum),
    ("redis.keyspace_hits", Recomputed),
    ("redis.keyspace_misses", Recomputed),
    ("redis.keyspace_hit_rate", Recomputed),
    ("redis.note", Recomputed),
    ("redis.errors", Sum),
    ("redis.timeouts", Sum),
    ("redis.cold_misses", Sum),
    ("redis.negative_hits", Sum),
    ("redis.expiries", Sum),
    ("redis.oom_errors", Sum),
    ("redis.value_mismatches", Sum),
    ("redis.evicted_keys", Same),
    ("redis.memory", Same),
    ("redis.nodes", Same),
    ("redis.hottest_node_share", Same),
    ("redis.moved", Same),
    ("redis.ask", Same),
    ("lock", Sum),
    ("latency_ms", Recomputed),
    ("service_ms", Recomputed),
    ("latency_by_outcome_ms", Recomputed),
    ("histograms.encoding", Same),
    ("histograms.latency_us", Histogram),
    ("histograms.service_us", Histogram),
    ("histograms.by_outcome_us.*", Histogram),
    ("timeline[].t_ms", Same), // placed on the same slot
    ("timeline[].requests", Sum),
    ("timeline[].db_calls", Sum),
    ("timeline[].pool_wait_ms", Same),
    ("timeline[].hits", Sum),
    ("timeline[].stale", Sum),
    ("timeline[].errors", Sum),
    ("timeline[].rejected", Sum),
    ("timeline[].p99_ms", Same), // max
    ("timeline[].redis_up", Same),
    ("timeline[].postgres_up", Same),
    ("timeline[].breaker_open", Same),
    ("timeline[].stale_reads", Sum),
    ("timeline[].writes", Sum),
    ("timeline[].goodput", Sum),
    ("timeline[].retries", Sum),
    ("timeline[].partial", Same),
    ("timeline[].cost", Sum),
    ("faults", Same), // the shard's that executed them
    ("recovery", Recomputed),
    ("breaker", Concat),
    ("instances", Concat),
    ("servers", Same),
    ("generator.max_dispatch_lag_ms", Same),
    ("generator.dispatch_lag_ms", Same),
    ("generator.instances", Sum),
    ("generator.key_digest", Same),
    ("generator.key_digest_draws", Same),
    ("generator.cpu_seconds", Sum),
    ("generator.cpu_per_request_us", Recomputed),
    ("generator.cpu_utilization", Same),
    ("generator.cores", Sum),
    ("generator.peak_rss_mib", Same),
    ("thresholds", Recomputed),
    ("diagnoses", Recomputed),
    ("consistency.stale_reads", Sum),
    ("consistency.stale_read_ratio", Recomputed),
    ("consistency.staleness_ms", Same),
    ("consistency.keys_written", Sum),
    ("consistency.divergent_keys", Sum),
    ("consistency.writes_probed", Sum),
    ("consistency.writes_left_wrong", Sum),
    ("consistency.writes_left_wrong_ratio", Recomputed),
    ("consistency.writes_unprobed", Sum),
    ("consistency.divergent_ms", Sum),
    ("consistency.stale_sets_refused", Sum),
    ("consistency.invalidation_failures", Sum),
    ("consistency.note", Same),
    ("http", Same),
    ("app", Same),
    ("shard", Dropped),
    ("merged", Recomputed),
    ("unknown", Recomputed), // the reasons of the unknown figures, checked with them
];

fn rule(path: &str) -> Option<Rule> {
    RULES.iter().find(|(p, _)| *p == path).map(|(_, r)| *r)
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Every leaf path of the results schema that no rule covers (`seen` gathers every path the
/// walk reached, to catch rules naming no field).
fn uncovered(s: &Value, defs: &Value, path: &str, seen: &mut BTreeSet<String>) -> Vec<String> {
    seen.insert(path.to_string());
    if rule(path).is_some() {
        return vec![];
    }
    let mut out = vec![];
    let mut inner = false;
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/definitions/");
        out.extend(uncovered(&defs[name], defs, path, seen));
        inner = true;
    }
    for k in ["anyOf", "oneOf", "allOf"] {
        for alt in s.get(k).and_then(Value::as_array).into_iter().flatten() {
            out.extend(uncovered(alt, defs, path, seen));
            inner = true;
        }
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            out.extend(uncovered(v, defs, &child(path, k), seen));
        }
        inner = true;
    }
    if let Some(v) = s.get("additionalProperties").filter(|v| v.is_object()) {
        out.extend(uncovered(v, defs, &child(path, "*"), seen));
        inner = true;
    }
    if let Some(v) = s.get("items").filter(|v| v.is_object()) {
        out.extend(uncovered(v, defs, &format!("{path}[]"), seen));
        inner = true;
    }
    let null = s.get("type").is_some_and(|t| t == "null");
    if !inner && !null && !path.is_empty() {
        out.push(path.to_string());
    }
    out
}

#[test]
fn every_field_of_a_result_has_a_merge_rule() {
    let schema = crate::results::schema::results();
    let mut seen = BTreeSet::new();
    let missing = uncovered(&schema, &schema["definitions"], "", &mut seen);
    assert!(
        missing.is_empty(),
        "fields without a merge rule in results/merge/tests.rs (say how they merge, in their Merge impl and here): {missing:?}"
    );
    let stale: Vec<&str> = RULES
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| !seen.contains(*p))
        .collect();
    assert!(stale.is_empty(), "rules for no field: {stale:?}");
}

/// A shard of an N-shard run, from the CI baseline with the parts it lacks filled in.
fn shard(i: u32, n: u32) -> RunResult {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/results/baseline-ci/mutex.json"
    );
    let mut r: RunResult = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    r.shard = Some(ShardFigures {
        index: i,
        count: n,
        run_id: "r1".into(),
        start_at_ms: r.started_at_ms,
        set_up: i == 0,
        executed_faults: i == 0,
        whole_run: (i == 0).then(|| WholeRun {
            shards_done: (0..n).collect(),
            calls_server: Some(100),
            calls_server_note: None,
            keyspace_hits: Some(10),
            keyspace_misses: Some(5),
            ledger: Some(LedgerFigures {
                loads: 30,
                keys: 20,
                peak_herd: 3,
                redundant: 4,
            }),
        }),
    });
    r.l1 = Some(crate::results::l1::L1Figures {
        hits: 7,
        evictions: 3,
        invalidations_received: 2,
        flushes: 1,
        spoiled: 1,
        stale_reads: 1,
        ..Default::default()
    });
    r.cost = Some(crate::results::cost::CostFigures::measured(
        (4_000, 10),
        (20_000, 4),
        (300, 3),
    ));
    r.db.peak_in_flight = crate::results::Known::Value(7);
    r.db.writes_server = Some(0);
    r.generator.dispatch_lag_ms = Some(DispatchLag {
        p50: 0.1,
        p99: 0.5,
        max: r.generator.max_dispatch_lag_ms,
    });
    r.breaker = vec![BreakerEvent {
        at_ms: 5,
        instance: 0,
        from: crate::protect::breaker::State::Closed,
        to: crate::protect::breaker::State::Open,
        reason: "test".into(),
    }];
    r.instances = vec![crate::results::InstanceFigures {
        instance: 1,
        requests: 10,
        hits: 8,
        stale: 1,
        errors: 1,
        timed_out: 1,
        p50_ms: Some(0.2),
        p99_ms: Some(3.0),
    }];
    // No zero figure, so that a sum and a copy differ wherever a rule is wrong.
    let mut v = serde_json::to_value(&r).unwrap();
    for part in [
        "requests",
        "outcomes",
        "db",
        "redis",
        "lock",
        "timeline",
        "consistency",
    ] {
        no_zeros(&mut v[part]);
    }
    serde_json::from_value(v).unwrap()
}

fn no_zeros(v: &mut Value) {
    match v {
        Value::Number(x) if x.as_f64() == Some(0.0) => {
            *v = if x.is_f64() { 0.5.into() } else { 2.into() }
        }
        Value::Object(o) => o.values_mut().for_each(no_zeros),
        Value::Array(a) => a.iter_mut().for_each(no_zeros),
        _ => {}
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Check the merged `m` against one copy `c` under the rules; `path` as in [`RULES`].
fn check(c: &Value, m: Option<&Value>, n: u64, path: &str, bad: &mut Vec<String>) {
    let Some(r) = rule(path) else {
        match (c, m) {
            (Value::Object(co), Some(Value::Object(mo))) => {
                for (k, v) in co {
                    check(v, mo.get(k), n, &child(path, k), bad);
                }
            }
            (Value::Array(ca), Some(Value::Array(ma))) if ca.len() == ma.len() => {
                for (v, w) in ca.iter().zip(ma) {
                    check(v, Some(w), n, &format!("{path}[]"), bad);
                }
            }
            (Value::Null, _) => {}
            _ => bad.push(format!("{path}: no merge rule (copy {c}, merged {m:?})")),
        }
        return;
    };
    let ok = match r {
        Sum => sum_of(c, m, n),
        Same => {
            m == Some(c)
                || matches!((c, m), (Value::Number(a), Some(Value::Number(b))) if close(a.as_f64().unwrap(), b.as_f64().unwrap()))
        }
        Concat => m
            .and_then(Value::as_array)
            .zip(c.as_array())
            .is_some_and(|(m, c)| m.len() as u64 == n * c.len() as u64),
        Histogram => {
            let count = |v: &Value| {
                v.as_str()
                    .and_then(|s| decode_histogram(s).ok())
                    .map(|h| h.len())
            };
            c.is_null() || count(c).map(|k| k * n) == m.and_then(count)
        }
        Unknown => m.is_none_or(Value::is_null) && reason(path),
        Recomputed => true,
        Dropped => m.is_none(),
    };
    if !ok {
        bad.push(format!("{path} ({r:?}): copy {c}, merged {m:?}"));
    }
}

/// Whether `m` is `n` times `c`, leaf by leaf (null stays null).
fn sum_of(c: &Value, m: Option<&Value>, n: u64) -> bool {
    match (c, m) {
        (Value::Null, m) => m.is_none_or(Value::is_null),
        (Value::Number(a), Some(Value::Number(b))) => match (a.as_u64(), b.as_u64()) {
            (Some(a), Some(b)) => a * n == b,
            _ => close(a.as_f64().unwrap() * n as f64, b.as_f64().unwrap()),
        },
        (Value::Object(co), Some(Value::Object(mo))) => {
            co.iter().all(|(k, v)| sum_of(v, mo.get(k), n))
        }
        _ => false,
    }
}

thread_local! {
    /// The merged result's `unknown` map, for the check of an unknown figure's reason.
    static REASONS: std::cell::RefCell<Value> = const { std::cell::RefCell::new(Value::Null) };
}

fn reason(path: &str) -> bool {
    REASONS.with(|r| r.borrow()[path].as_str().is_some_and(|s| !s.is_empty()))
}

#[test]
fn merging_n_copies_of_a_shard_follows_every_field_s_rule() {
    const N: u32 = 3;
    let copy = serde_json::to_value(shard(1, N)).unwrap();
    let shards = (0..N).map(|i| (format!("s{i}"), shard(i, N))).collect();
    let merged = serde_json::to_value(merge(shards, false).unwrap()).unwrap();
    REASONS.with(|r| *r.borrow_mut() = merged["unknown"].clone());
    let mut bad = vec![];
    check(&copy, Some(&merged), u64::from(N), "", &mut bad);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
