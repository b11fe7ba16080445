//! The recommendation in a team's own terms: a library's configuration (`--for`), or what
//! the library cannot express; and a scenario with thresholds around it for CI (`--ci-out`).

use std::fmt::Write as _;

use serde_json::Value;

use super::judge::Pick;
use crate::metric::{DEFS, Metric};
use crate::results::RunResult;
use crate::scenario::{Compared, Scenario};
use crate::strategy::adopt::Terms;
use crate::strategy::lock::LockWaiters;
use crate::strategy::{Freshness, Library, StrategySpec};
use crate::values::{Dur, LockTtl};

/// The recommended configuration in `lib`'s terms (its row of the libraries' declarations),
/// from the run's resolved scenario (its TTL, stale window, β, lock settings); Err says what
/// the library cannot express.
pub fn adopt(lib: Library, p: &Pick, r: &RunResult) -> Result<String, String> {
    let spec = StrategySpec::parse(&p.strategy)?;
    let (sc, decl) = (&r.scenario, lib.decl());
    let lock = &sc.lock;
    let secs = |d: Dur| d.0.as_secs_f64();
    let terms = Terms {
        label: &p.label,
        spec,
        ttl: secs(sc.ttl),
        stale: secs(sc.stale),
        // An auto lease is written as the longest one the run gave.
        lock_ttl: match (lock.lock_ttl, r.lock.lease_ms_max) {
            (LockTtl::Fixed(d), _) => secs(d),
            (LockTtl::Auto, Some(ms)) => ms as f64 / 1000.0,
            (LockTtl::Auto, None) => 0.0,
        },
        lock_wait: secs(lock.lock_wait),
        beta: sc.beta,
        eager_refresh: sc.eager_refresh.map(|e| e.0),
        jitter_note: if spec.jitter_preset {
            format!(" (add ±{} random jitter to the TTL yourself)", sc.jitter)
        } else {
            String::new()
        },
    };
    if spec.freshness == Freshness::NoCache {
        return Ok(format!(
            "{}: no cache at all — read the database directly (the cache costs more than it saves on this workload)",
            decl.title
        ));
    }
    if spec.freshness == Freshness::XfetchSwr {
        return Err(format!(
            "{} has no probabilistic early expiry (XFetch) combined with a stale window; nearest: its stale-while-revalidate, if it has one",
            decl.title
        ));
    }
    let rendered = (decl.render)(&terms);
    // The lock's own settings no library call above spells: said beside it.
    let mut also = Vec::new();
    if spec.coordination.mutex() {
        if lock.lock_ttl == LockTtl::Auto {
            also.push(
                "size the lock TTL at 3× your load's p99 (the run's longest auto lease is written)",
            );
        }
        if lock.lock_extend {
            also.push(
                "extend the lock every third of its TTL while loading (Redisson's watchdog does)",
            );
        }
        if lock.lock_waiters == LockWaiters::Reread {
            also.push("waiters only re-read the cache, never take the lock over");
        }
        if !lock.fallback_writeback {
            also.push("a load after the wait ran out is returned, not cached");
        }
    }
    rendered.map(|s| {
        if also.is_empty() {
            s
        } else {
            format!("{s}  // and: {}", also.join("; "))
        }
    })
}

fn toml_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(format!("{s:?}")),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// How `run` reads a scenario file's settings, for writing one: its keys, and whether a key
/// takes a value as written (`set(key, value)` is `run`'s own typed setter, Err when not).
pub struct FileSettings {
    pub keys: Vec<String>,
    pub set: fn(&str, &str) -> Result<(), String>,
}

/// A scenario for `run`/`check` in CI: the workload and the recommended configuration as the
/// final run had them (every setting of the workload or the strategy, as declared with the
/// `Scenario`'s fields, that a scenario file can say), and thresholds as wide as check's
/// tolerances around the medians of the objective and the budgets.
pub fn ci_scenario(
    p: &Pick,
    r: &RunResult,
    file: &FileSettings,
    objective: Metric,
    budgets: &[(Metric, f64)],
) -> String {
    let sc = serde_json::to_value(&r.scenario).unwrap_or(Value::Null);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Written by `stampede advise`: {} as recommended, on the workload it was chosen for.\n# Thresholds: the medians measured in its final trials, widened by check's tolerances (docs/ci.md).",
        p.label
    );
    let _ = writeln!(o, "strategy = {:?}", p.strategy);
    for (k, class) in Scenario::compared() {
        // The sampling interval compares neither way, but recovery figures are read at it.
        let written = class != Compared::Neither || k == "interval";
        if !written || k == "strategy" || !file.keys.contains(&k) {
            continue;
        }
        let v = match sc.get(&k) {
            // A switch the file writes as on|off is resolved as a bool.
            Some(Value::Bool(b)) if (file.set)(&k, &b.to_string()).is_err() => {
                Some(format!("{:?}", if *b { "on" } else { "off" }))
            }
            v => v.and_then(toml_value),
        };
        if let Some(v) = v {
            let _ = writeln!(o, "{k} = {v}");
        }
    }
    match sc.get("load") {
        Some(l) if l.get("mode").and_then(Value::as_str) == Some("open") => {
            if let Some(v) = l.get("rps").and_then(toml_value) {
                let _ = writeln!(o, "rps = {v}");
            }
        }
        Some(l) => {
            if let Some(v) = l.get("clients").and_then(toml_value) {
                let _ = writeln!(o, "clients = {v}");
            }
        }
        None => {}
    }
    let _ = writeln!(o, "\n[thresholds]");
    let mut set: Vec<(String, f64)> = budgets
        .iter()
        .filter_map(|&(m, v)| Some((m.threshold_name()?, v)))
        .collect();
    let around = |m: Metric, median: f64| -> Option<(String, f64)> {
        let tol = DEFS.iter().find(|d| d.metric == m)?.tolerance?;
        let name = m.threshold_name()?;
        let limit = match m.def().better {
            crate::metric::Better::Lower => median + tol.allowed(median),
            crate::metric::Better::Higher => (median - tol.allowed(median)).max(0.0),
        };
        Some((name, limit))
    };
    if let Some(med) = p.objective.median
        && let Some((n, l)) = around(objective, med)
        && !set.iter().any(|(s, _)| *s == n)
    {
        set.push((n, l));
    }
    for (n, l) in set {
        let _ = writeln!(o, "{n} = {}", crate::values::points::trim(l));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result of the committed CI baseline (ttl 1s, stale 10s, lock TTL and wait 2s).
    fn run(strategy: &str) -> RunResult {
        let p = format!(
            "{}/results/baseline-ci/{strategy}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    fn lib(name: &str) -> Library {
        Library::for_name(name).unwrap()
    }

    fn pick(strategy: &str) -> Pick {
        Pick {
            label: strategy.into(),
            strategy: strategy.into(),
            settings: Default::default(),
            trials: 1,
            objective: Default::default(),
            thresholds: Vec::new(),
        }
    }

    #[test]
    fn each_library_renders_the_settings_its_run_resolved() {
        // Laravel's window is [ttl, ttl + stale], Caffeine's the same in milliseconds.
        let swr = adopt(lib("laravel"), &pick("swr"), &run("swr")).unwrap();
        assert!(swr.starts_with("Cache::flexible('key', [1, 11]"), "{swr}");
        let c = adopt(lib("caffeine"), &pick("swr"), &run("swr")).unwrap();
        assert!(
            c.contains("refreshAfterWrite(Duration.ofMillis(1000)).expireAfterWrite(Duration.ofMillis(11000))"),
            "{c}"
        );
        let m = adopt(lib("laravel"), &pick("mutex"), &run("mutex")).unwrap();
        assert!(m.contains("Cache::lock('key:lock', 2)->block(2, "), "{m}");
        let no = adopt(lib("rails"), &pick("mutex"), &run("mutex")).unwrap_err();
        assert!(no.starts_with("Rails cannot express mutex: "), "{no}");
        for l in Library::all() {
            let d = l.decl();
            let r = adopt(l, &pick("cache-aside"), &run("cache-aside"));
            assert!(
                r.as_ref().is_ok_and(|s| s.contains('1')),
                "{}: {r:?}",
                d.title
            );
        }
    }
}
