//! The recommendation in a team's own terms: a library's configuration (`--for`), or what
//! the library cannot express; and a scenario with thresholds around it for CI (`--ci-out`).

use std::fmt::Write as _;

use serde_json::Value;

use super::judge::Pick;
use crate::cli::Library;
use crate::metric::{DEFS, Metric};
use crate::results::RunResult;
use crate::strategy::{Coordination, Freshness, StrategySpec};

/// A duration of the scenario as seconds (`"10s"`, `"250ms"` → 10, 0.25).
fn secs(v: &Value) -> Option<f64> {
    let s = v.as_str()?;
    let d: crate::values::Dur = s.parse().ok()?;
    Some(d.0.as_secs_f64())
}

fn fmt_s(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

/// What every library's rendering reads: the recommended strategy and the settings the final
/// run resolved (seconds for durations).
struct Ctx<'a> {
    pick: &'a Pick,
    f: Freshness,
    c: Coordination,
    jitter_preset: bool,
    ttl: f64,
    stale: f64,
    lock_ttl: f64,
    lock_wait: f64,
    beta: f64,
    /// " (add ±J random jitter …)" for the jitter preset, else empty.
    jitter_note: String,
}

/// What a library renders: its configuration, or the reason it cannot express the pick.
type Rendered = Result<String, String>;

impl Ctx<'_> {
    fn no(&self, lib: Library, what: &str) -> Rendered {
        Err(format!(
            "{} cannot express {}: {what}",
            name(lib),
            self.pick.label
        ))
    }
}

/// The recommended configuration in `lib`'s terms, from the run's resolved scenario (its TTL,
/// stale window, β, lock settings); Err says what the library cannot express.
pub fn adopt(lib: Library, p: &Pick, r: &RunResult) -> Result<String, String> {
    let spec = StrategySpec::parse(&p.strategy)?;
    let sc = serde_json::to_value(&r.scenario).map_err(|e| e.to_string())?;
    let get = |k: &str| sc.get(k).and_then(secs).unwrap_or(0.0);
    let jitter = sc.get("jitter").and_then(Value::as_str).unwrap_or("0%");
    let cx = Ctx {
        pick: p,
        f: spec.freshness,
        c: spec.coordination,
        jitter_preset: spec.jitter_preset,
        ttl: get("ttl"),
        stale: get("stale"),
        // An auto lease is written as the longest one the run gave.
        lock_ttl: match r.lock.lease_ms_max {
            Some(ms) if sc.get("lock_ttl").and_then(Value::as_str) == Some("auto") => {
                ms as f64 / 1000.0
            }
            _ => get("lock_ttl"),
        },
        lock_wait: get("lock_wait"),
        beta: sc.get("beta").and_then(Value::as_f64).unwrap_or(1.0),
        jitter_note: if spec.jitter_preset {
            format!(" (add ±{jitter} random jitter to the TTL yourself)")
        } else {
            String::new()
        },
    };
    if cx.f == Freshness::NoCache {
        return Ok(format!(
            "{}: no cache at all — read the database directly (the cache costs more than it saves on this workload)",
            name(lib)
        ));
    }
    if cx.f == Freshness::XfetchSwr {
        return Err(format!(
            "{} has no probabilistic early expiry (XFetch) combined with a stale window; nearest: its stale-while-revalidate, if it has one",
            name(lib)
        ));
    }
    let rendered = match lib {
        Library::Laravel => laravel(&cx),
        Library::Rails => rails(&cx),
        Library::Symfony => symfony(&cx),
        Library::Caffeine => caffeine(&cx),
        Library::Spring => spring(&cx),
        Library::Fusioncache => fusioncache(&cx),
    };
    // The lock's own settings no library call above spells: said beside it.
    let mut also = Vec::new();
    if spec.coordination.mutex() {
        if sc.get("lock_ttl").and_then(Value::as_str) == Some("auto") {
            also.push(
                "size the lock TTL at 3× your load's p99 (the run's longest auto lease is written)",
            );
        }
        if sc.get("lock_extend") == Some(&Value::Bool(true)) {
            also.push(
                "extend the lock every third of its TTL while loading (Redisson's watchdog does)",
            );
        }
        if sc.get("lock_waiters").and_then(Value::as_str) == Some("reread") {
            also.push("waiters only re-read the cache, never take the lock over");
        }
        if sc.get("fallback_writeback") == Some(&Value::Bool(false)) {
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

fn laravel(cx: &Ctx) -> Rendered {
    let (ttl, stale, lock_ttl, lock_wait) = (cx.ttl, cx.stale, cx.lock_ttl, cx.lock_wait);
    let jitter_note = &cx.jitter_note;
    Ok(match (cx.f, cx.c) {
        (Freshness::Swr, c) => format!(
            "Cache::flexible('key', [{}, {}], fn () => load());  // fresh {}s, then served stale up to {}s while one request refreshes it{}",
            fmt_s(ttl),
            fmt_s(ttl + stale),
            fmt_s(ttl),
            fmt_s(ttl + stale),
            if c.mutex() {
                "; flexible() already takes a lock for the refresh"
            } else {
                ""
            }
        ),
        (Freshness::Expire, Coordination::Mutex | Coordination::MutexSingleFlight) => format!(
            "Cache::lock('key:lock', {})->block({}, fn () => Cache::remember('key', {}, fn () => load()));  // lock TTL {}s, wait up to {}s{jitter_note}",
            fmt_s(lock_ttl),
            fmt_s(lock_wait),
            fmt_s(ttl),
            fmt_s(lock_ttl),
            fmt_s(lock_wait)
        ),
        (Freshness::Expire, Coordination::None) => format!(
            "Cache::remember('key', {}, fn () => load());{jitter_note}",
            fmt_s(ttl)
        ),
        (Freshness::Xfetch, _) => {
            return cx.no(
                Library::Laravel,
                "it has no probabilistic early expiry (XFetch); Cache::flexible is its stale-while-revalidate",
            );
        }
        _ => {
            return cx.no(
                Library::Laravel,
                "PHP workers share no memory, so there is no in-process single-flight; Cache::lock is its distributed lock",
            );
        }
    })
}

fn rails(cx: &Ctx) -> Rendered {
    let (ttl, stale) = (cx.ttl, cx.stale);
    let jitter_note = &cx.jitter_note;
    Ok(match (cx.f, cx.c) {
        (Freshness::Swr, _) => format!(
            "Rails.cache.fetch(key, expires_in: {}.seconds, race_condition_ttl: {}.seconds) {{ load }}  # the first reader past expiry pushes it back {}s and recomputes; the others get the old value",
            fmt_s(ttl),
            fmt_s(stale),
            fmt_s(stale)
        ),
        (Freshness::Expire, Coordination::None) => format!(
            "Rails.cache.fetch(key, expires_in: {}.seconds) {{ load }}{jitter_note}",
            fmt_s(ttl)
        ),
        _ => {
            return cx.no(
                Library::Rails,
                "Rails.cache has no lock, single-flight or probabilistic early expiry; race_condition_ttl is its only stampede protection",
            );
        }
    })
}

fn symfony(cx: &Ctx) -> Rendered {
    let (ttl, beta) = (cx.ttl, cx.beta);
    Ok(match cx.f {
        Freshness::Xfetch => format!(
            "$cache->get('key', function (ItemInterface $item) {{ $item->expiresAfter({}); return load(); }}, {beta});  // beta {beta}: probabilistic early expiration; Symfony's lock also lets one process compute",
            fmt_s(ttl)
        ),
        Freshness::Expire => format!(
            "$cache->get('key', function (ItemInterface $item) {{ $item->expiresAfter({}); return load(); }}, 0);  // beta 0: no early expiration; its LockRegistry lets one process per host compute",
            fmt_s(ttl)
        ),
        _ => {
            return cx.no(
                Library::Symfony,
                "Symfony Cache has no stale-while-revalidate",
            );
        }
    })
}

fn caffeine(cx: &Ctx) -> Rendered {
    let (ttl, stale) = (cx.ttl, cx.stale);
    Ok(match (cx.f, cx.c) {
        (Freshness::Swr, _) => format!(
            "Caffeine.newBuilder().refreshAfterWrite(Duration.ofMillis({:.0})).expireAfterWrite(Duration.ofMillis({:.0})).build(key -> load(key));  // serves the old value while one refresh runs",
            ttl * 1000.0,
            (ttl + stale) * 1000.0
        ),
        (Freshness::Expire, Coordination::None | Coordination::SingleFlight) => format!(
            "Caffeine.newBuilder().expireAfterWrite(Duration.ofMillis({:.0})).build(key -> load(key));  // a LoadingCache computes a key once per JVM: single-flight",
            ttl * 1000.0
        ),
        _ => {
            return cx.no(
                Library::Caffeine,
                "Caffeine is in-process only: no distributed lock or lease across instances, and no probabilistic early expiry",
            );
        }
    })
}

fn spring(cx: &Ctx) -> Rendered {
    let ttl = cx.ttl;
    Ok(match (cx.f, cx.c) {
        (Freshness::Expire, c @ (Coordination::SingleFlight | Coordination::None)) => format!(
            "@Cacheable(cacheNames = \"items\", sync = {})  // with the cache's TTL set to {}s in its CacheManager (e.g. RedisCacheConfiguration.entryTtl(Duration.ofSeconds({})))",
            c == Coordination::SingleFlight,
            fmt_s(ttl),
            fmt_s(ttl)
        ),
        _ => {
            return cx.no(
                Library::Spring,
                "@Cacheable has sync (one loader per JVM) and a TTL, nothing else",
            );
        }
    })
}

fn fusioncache(cx: &Ctx) -> Rendered {
    let (ttl, stale) = (cx.ttl, cx.stale);
    if cx.f == Freshness::Xfetch {
        return cx.no(
            Library::Fusioncache,
            "FusionCache's eager refresh is a fixed threshold, not XFetch's probabilistic one (try --eager-refresh)",
        );
    }
    let mut o = String::new();
    let _ = write!(
        o,
        "new FusionCacheEntryOptions {{ Duration = TimeSpan.FromSeconds({})",
        fmt_s(ttl)
    );
    if cx.f == Freshness::Swr {
        let _ = write!(
            o,
            ", IsFailSafeEnabled = true, FailSafeMaxDuration = TimeSpan.FromSeconds({}), FactorySoftTimeout = TimeSpan.FromMilliseconds(100)",
            fmt_s(ttl + stale)
        );
    }
    if let Some(e) = cx.pick.settings.get("eager-refresh") {
        let share = e.trim_end_matches('%').parse::<f64>().unwrap_or(0.0) / 100.0;
        let _ = write!(o, ", EagerRefreshThreshold = {share:.2}f");
    }
    if cx.jitter_preset {
        let _ = write!(
            o,
            ", JitterMaxDuration = TimeSpan.FromSeconds({})",
            fmt_s(ttl * 0.1)
        );
    }
    o.push_str(" }  // its cache stampede protection (one factory per key per node) is always on");
    if cx.c.redis_token() {
        o.push_str(
            "; across nodes it has no distributed lock of its own: add one around the factory",
        );
    }
    Ok(o)
}

fn name(lib: Library) -> &'static str {
    match lib {
        Library::Laravel => "Laravel",
        Library::Rails => "Rails",
        Library::Symfony => "Symfony",
        Library::Caffeine => "Caffeine",
        Library::Spring => "Spring",
        Library::Fusioncache => "FusionCache",
    }
}

/// Scenario keys copied from the run into the CI scenario when set: the workload and the
/// strategy's settings.
const KEYS: [&str; 32] = [
    "keys",
    "zipf",
    "ttl",
    "db_cost",
    "db_pool",
    "instances",
    "value_size",
    "duration",
    "warmup",
    "start",
    "warm",
    "missing_ratio",
    "seed",
    "interval",
    "stale",
    "beta",
    "jitter",
    "lock_ttl",
    "lock_ttl_factor",
    "lock_extend",
    "lock_wait",
    "lock_poll",
    "lock_timeout_policy",
    "lock_waiters",
    "fallback_writeback",
    "l1",
    "eager_refresh",
    "fail_safe",
    "lease_ttl",
    "redis_timeout",
    "max_inflight",
    "negative_ttl",
];

fn toml_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(format!("{s:?}")),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A scenario for `run`/`check` in CI: the workload and the recommended configuration as the
/// final run had them, and thresholds as wide as check's tolerances around the medians of
/// the objective and the budgets.
pub fn ci_scenario(
    p: &Pick,
    r: &RunResult,
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
    for k in KEYS {
        let v = match (k, sc.get(k)) {
            // Resolved as a bool, written in the file as the flag's on|off.
            ("fallback_writeback", Some(Value::Bool(b))) => {
                Some(format!("{:?}", if *b { "on" } else { "off" }))
            }
            (_, v) => v.and_then(toml_value),
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
