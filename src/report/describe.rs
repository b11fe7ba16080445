//! A scenario's workload in words, strategy left out, as parts a renderer joins (the same for
//! every strategy of a comparison).

use crate::origin::DbQuery;
use crate::scenario::{LoadShape, Scenario};
use crate::values::Rate;

/// The workload in words, strategy left out, as parts a renderer joins (the same for every
/// strategy of a comparison).
pub fn describe(sc: &Scenario) -> Vec<String> {
    let plural = |n: u64, one: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    let mut parts = vec![
        match sc.load {
            _ if sc.trace.is_some() => format!(
                "trace replay, mean {} req/s",
                // The trace's own mean, which is no round figure.
                Rate(match sc.load {
                    LoadShape::Open { rps, .. } => rps.round(),
                    LoadShape::Closed { .. } => 0.0,
                })
            ),
            LoadShape::Closed { clients } => format!("closed loop, {clients} clients"),
            LoadShape::Open { rps, arrival } => format!(
                "open loop {} req/s ({})",
                Rate(rps),
                serde_json::to_value(arrival)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
        },
        format!("{} measured", sc.duration),
        if sc.keys == 1 {
            "1 key".to_string()
        } else if sc.trace.is_some() {
            format!("{} trace keys", sc.keys)
        } else {
            format!("{} keys (zipf {})", sc.keys, sc.zipf)
        },
        format!("ttl {}", sc.ttl),
        match (sc.own_load.is_some(), sc.db_query) {
            (true, _) => "your query (--db-sql)".to_string(),
            (false, DbQuery::Heavy) => "db-query heavy".to_string(),
            (false, DbQuery::Sleep) => format!("db-cost {}", sc.db_cost),
        },
    ];
    // An app under test has its own pools and processes: the built-in app's are not used.
    if sc.target.is_none() {
        parts.push(format!("db-pool {}", sc.db_pool));
        parts.push(plural(u64::from(sc.instances), "instance"));
    }
    network(sc, &mut parts);
    if let Some(d) = &sc.value_size_dist {
        parts.push(format!("value sizes {d}"));
    }
    if let Some(l) = sc.memory_limit() {
        parts.push(format!("maxmemory {} {}", l.maxmemory, l.policy));
    }
    if sc.warm > 0 {
        parts.push(format!("{} keys warmed", sc.warm));
    }
    if !sc.warmup.0.is_zero() {
        parts.push(format!("warm-up {}", sc.warmup));
    }
    parts.push(format!("seed {}", sc.seed));
    // The protections apply to every strategy of a comparison alike.
    if let Some(n) = sc.db_limit {
        parts.push(format!("db-limit {n} per instance"));
    }
    if let Some(b) = &sc.breaker {
        parts.push(b.describe());
    }
    if let Some(r) = &sc.db_rate {
        parts.push(r.describe(sc.instances));
    }
    if let Some(r) = sc.rewarm {
        parts.push(format!("re-warm top {} every {}", r.top, r.every));
    }
    if let Some(l) = sc.l1 {
        parts.push(match l.ttl {
            Some(t) => format!("l1 {} per instance ({}, ttl {t})", l.entries, l.invalidate),
            None => format!("l1 {} per instance ({})", l.entries, l.invalidate),
        });
    }
    if let Some(f) = sc.fail_safe {
        let soft = f
            .soft_timeout
            .map_or(String::new(), |d| format!(", soft timeout {d}"));
        parts.push(format!(
            "fail-safe {} (throttle {}{soft})",
            f.max, f.throttle
        ));
    }
    if let Some(p) = sc.eager_refresh {
        parts.push(format!("eager refresh at {p} of the TTL"));
    }
    if let Some(w) = sc.writes {
        parts.push(if (w.zipf - sc.zipf).abs() < f64::EPSILON {
            format!("writes {} /s", Rate(w.rps))
        } else {
            format!("writes {} /s (zipf {})", Rate(w.rps), w.zipf)
        });
    }
    parts
}

/// The app's Redis client when another library's, and the network its requests cross
/// (through the tool's proxy) when not loopback.
fn network(sc: &Scenario, parts: &mut Vec<String>) {
    if let Some(c) = sc.redis_client {
        let m = c.model();
        parts.push(format!(
            "redis client {} (command timeout {}, {} while disconnected)",
            c.name(),
            if sc.redis_timeout.0 >= crate::cache::client_model::NO_TIMEOUT {
                "none".to_string()
            } else {
                sc.redis_timeout.to_string()
            },
            match m.while_down {
                crate::cache::WhileDown::Fail => "fail".to_string(),
                crate::cache::WhileDown::Reconnect => "wait for the reconnect".to_string(),
                crate::cache::WhileDown::Queue => "queued".to_string(),
                crate::cache::WhileDown::Retry(n) => format!("retried {n}×"),
            }
        ));
    }
    match (sc.redis_rtt, sc.pg_rtt) {
        (Some(r), Some(p)) if r == p => parts.push(format!("rtt {r} to both servers (proxied)")),
        (r, p) => {
            if let Some(r) = r {
                parts.push(format!("redis rtt {r} (proxied)"));
            }
            if let Some(p) = p {
                parts.push(format!("pg rtt {p} (proxied)"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::RunFlags;

    #[test]
    fn the_writes_are_in_the_words() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let s = crate::scenario::resolve(Some(&dir.join("invalidation.toml")), RunFlags::default())
            .unwrap();
        let words = describe(&s);
        assert!(words.iter().any(|p| p == "writes 100 /s"), "{words:?}");
    }
}
