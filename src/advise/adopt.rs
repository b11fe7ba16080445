//! The recommendation in a team's own terms: a library's configuration (`--for`), or what
//! the library cannot express, and what it does instead where its locks reach less far across
//! instances than the recommendation's; and a scenario with thresholds around it for CI
//! (`--ci-out`).

use std::fmt::Write as _;

use serde_json::Value;

use super::judge::Pick;
use super::space::Candidate;
use crate::metric::{DEFS, Metric};
use crate::results::RunResult;
use crate::scenario::{Compared, Scenario};
use crate::strategy::adopt::{Reach, Terms};
use crate::strategy::lock::LockWaiters;
use crate::strategy::{Coordination, Freshness, Library, StrategySpec};
use crate::values::{Dur, LockTtl};

/// The recommended configuration in `lib`'s terms (its row of the libraries' declarations),
/// from the run's resolved scenario (its TTL, stale window, β, lock settings); Err says what
/// the library cannot express. Either way, when the recommendation needs a coordination wider
/// across instances than the library's locks, what the library does instead and what that
/// costs in the run's figures are said after it, with the nearest strategy the library can
/// express (its measured figures when `measured`, the final trials, ran it).
pub fn adopt(
    lib: Library,
    p: &Pick,
    r: &RunResult,
    measured: &[&(Candidate, Vec<RunResult>)],
) -> Result<String, String> {
    let spec = StrategySpec::parse(&p.strategy)?;
    let note = across(lib, &spec, p, r, measured);
    let add = |s: String| match &note {
        Some(n) => format!("{s}  — across instances: {n}"),
        None => s,
    };
    rendered(lib, &spec, p, r).map(add).map_err(add)
}

/// The library's own rendering of `spec` with the run's settings, and the lock settings no
/// library call spells.
fn rendered(lib: Library, spec: &StrategySpec, p: &Pick, r: &RunResult) -> Result<String, String> {
    let spec = *spec;
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

/// The strategy nearest to `spec` that coordinates no wider than `reach`: its freshness and
/// jitter, with an in-process flight where it had a lock or a lease (a per-host lock is one
/// per instance here, as single-flight is), and nothing where the library has no lock.
fn within(spec: &StrategySpec, reach: Reach) -> StrategySpec {
    let c = match reach {
        Reach::Distributed => spec.coordination,
        Reach::None => Coordination::None,
        Reach::Process | Reach::Host if Reach::needed(spec) > Reach::None => {
            Coordination::SingleFlight
        }
        Reach::Process | Reach::Host => Coordination::None,
    };
    StrategySpec::of(spec.freshness, c, spec.jitter_preset)
}

/// Medians over a candidate's trials: DB calls and the peak herd (None where unknown).
fn medians(trials: &[RunResult]) -> (Option<f64>, Option<f64>) {
    let of = |f: fn(&RunResult) -> Option<u64>| {
        let v: Vec<f64> = trials.iter().filter_map(f).map(|x| x as f64).collect();
        crate::stats::median(&v)
    };
    (
        of(|r| r.db.calls.value()),
        of(|r| r.db.peak_key_herd.value()),
    )
}

/// "1128", "1128.5": a median of counts.
fn count(x: f64) -> String {
    crate::values::points::trim(x)
}

/// When the recommendation needs a coordination across instances wider than the library's
/// locks reach: what the library does instead, what that costs in the run's figures (its
/// instances, DB calls and peak herd), and the nearest strategy it can express, with its
/// measured figures when the final trials ran it at the recommendation's settings.
fn across(
    lib: Library,
    spec: &StrategySpec,
    p: &Pick,
    r: &RunResult,
    measured: &[&(Candidate, Vec<RunResult>)],
) -> Option<String> {
    let (decl, need) = (lib.decl(), Reach::needed(spec));
    let has = decl.across;
    if has.reach >= need {
        return None;
    }
    let title = decl.title;
    let n = r.scenario.instances;
    let trials = measured
        .iter()
        .find(|(c, _)| c.label() == p.label)
        .map(|(_, t)| t.as_slice())
        .filter(|t| !t.is_empty())
        .unwrap_or(std::slice::from_ref(r));
    let (calls, herd) = medians(trials);
    let mut o = format!(
        "{} lets one load of a key through {}, and {title} cannot: {}. ",
        p.strategy,
        if need == Reach::Distributed {
            "across instances"
        } else {
            "per process"
        },
        has.how
    );
    match has.reach {
        Reach::None => o.push_str(&format!(
            "{title} will let every request that misses load instead: expect a herd as large as the requests in flight for a key at each miss and expiry, where {}'s peak herd was {} here.",
            p.strategy,
            herd.map_or("unknown".into(), count)
        )),
        _ => {
            let unit = if has.reach == Reach::Host { "host" } else { "process" };
            o.push_str(&format!(
                "{title} will let one load per key per {unit} through instead: expect one load per {unit} per miss and expiry, {n} here (the run's instances)"
            ));
            if n > 1 {
                o.push_str(&format!(
                    ", so up to {n} loads of a key at once where {}'s peak herd was {}, and up to {} DB calls where it made {}.",
                    p.strategy,
                    herd.map_or("unknown".into(), count),
                    calls.map_or("unknown".into(), |c| count(c * f64::from(n))),
                    calls.map_or("unknown".into(), count)
                ));
            } else {
                o.push_str(": with one instance this run cannot show the difference; a fleet of N pays up to N times the loads.");
            }
        }
    }
    let nearest = within(spec, has.reach).to_string();
    let ran = measured.iter().find(|(c, t)| {
        c.strategy == nearest
            && !t.is_empty()
            && c.settings
                .iter()
                .cloned()
                .collect::<std::collections::BTreeMap<_, _>>()
                == p.settings
    });
    o.push_str(&format!(" Nearest {title} can express: {nearest}"));
    match ran {
        Some((_, t)) => {
            let (c, h) = medians(t);
            o.push_str(&format!(
                " (measured in the final trials: {} DB calls, peak herd {}).",
                c.map_or("unknown".into(), count),
                h.map_or("unknown".into(), count)
            ));
        }
        None => o.push_str(
            " (not among the final trials: run it with `stampede compare` to measure it).",
        ),
    }
    Some(o)
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
        let swr = adopt(lib("laravel"), &pick("swr"), &run("swr"), &[]).unwrap();
        assert!(swr.starts_with("Cache::flexible('key', [1, 11]"), "{swr}");
        let c = adopt(lib("caffeine"), &pick("swr"), &run("swr"), &[]).unwrap();
        assert!(
            c.contains("refreshAfterWrite(Duration.ofMillis(1000)).expireAfterWrite(Duration.ofMillis(11000))"),
            "{c}"
        );
        let m = adopt(lib("laravel"), &pick("mutex"), &run("mutex"), &[]).unwrap();
        assert!(m.contains("Cache::lock('key:lock', 2)->block(2, "), "{m}");
        let no = adopt(lib("rails"), &pick("mutex"), &run("mutex"), &[]).unwrap_err();
        assert!(no.starts_with("Rails cannot express mutex: "), "{no}");
        for l in Library::all() {
            let d = l.decl();
            let r = adopt(l, &pick("cache-aside"), &run("cache-aside"), &[]);
            assert!(
                r.as_ref().is_ok_and(|s| s.contains('1')),
                "{}: {r:?}",
                d.title
            );
        }
    }

    /// A candidate of the final trials, with its committed baseline run as its one trial.
    fn ran(strategy: &str) -> (Candidate, Vec<RunResult>) {
        let c = Candidate {
            strategy: strategy.into(),
            settings: Vec::new(),
        };
        (c, vec![run(strategy)])
    }

    #[test]
    fn symfony_on_a_distributed_mutex_says_what_it_does_instead() {
        // The baseline's mutex: 2 instances, 1128 DB calls, peak herd 1.
        let s = adopt(lib("symfony"), &pick("mutex"), &run("mutex"), &[]).unwrap();
        assert!(s.starts_with("$cache->get('key'"), "{s}");
        for part in [
            "across instances: mutex lets one load of a key through across instances, and Symfony cannot: its LockRegistry is an flock, local to one host",
            "Symfony will let one load per key per host through instead: expect one load per host per miss and expiry, 2 here (the run's instances)",
            "up to 2 loads of a key at once where mutex's peak herd was 1, and up to 2256 DB calls where it made 1128",
            "Nearest Symfony can express: single-flight (not among the final trials",
        ] {
            assert!(s.contains(part), "{part}\nnot in: {s}");
        }
        // When the final trials ran the nearest, its measured figures are said.
        let (sf, mx) = (ran("single-flight"), ran("mutex"));
        let s = adopt(lib("symfony"), &pick("mutex"), &run("mutex"), &[&mx, &sf]).unwrap();
        assert!(
            s.contains("Nearest Symfony can express: single-flight (measured in the final trials: 1204 DB calls, peak herd 2)"),
            "{s}"
        );
        // A lease needs the same reach; a per-process flight is within Symfony's.
        let l = adopt(lib("symfony"), &pick("lease"), &run("mutex"), &[]).unwrap();
        assert!(
            l.contains("lease lets one load of a key through across instances"),
            "{l}"
        );
        let sf = adopt(
            lib("symfony"),
            &pick("single-flight"),
            &run("single-flight"),
            &[],
        );
        assert!(!sf.unwrap().contains("across instances"));
    }

    #[test]
    fn a_library_without_the_lock_says_what_it_does_instead_even_when_it_cannot_express_it() {
        let base = ran("cache-aside");
        let no = adopt(lib("rails"), &pick("mutex"), &run("mutex"), &[&base]).unwrap_err();
        assert!(no.starts_with("Rails cannot express mutex: "), "{no}");
        assert!(
            no.contains("Rails will let every request that misses load instead")
                && no.contains("where mutex's peak herd was 1")
                && no.contains("Nearest Rails can express: cache-aside (measured in the final trials: 1406 DB calls, peak herd 24)"),
            "{no}"
        );
        // Rails renders swr+mutex's window as its race TTL: the lock is not dropped silently.
        let r = adopt(lib("rails"), &pick("swr+mutex"), &run("swr"), &[]).unwrap();
        assert!(
            r.contains("race_condition_ttl") && r.contains("Nearest Rails can express: swr"),
            "{r}"
        );
        // Caffeine's refreshAfterWrite for swr+mutex: in-process, said so.
        let c = adopt(lib("caffeine"), &pick("swr+mutex"), &run("swr"), &[]).unwrap();
        assert!(
            c.contains("refreshAfterWrite")
                && c.contains("Caffeine will let one load per key per process through instead")
                && c.contains("Nearest Caffeine can express: swr+single-flight"),
            "{c}"
        );
    }

    #[test]
    fn every_library_expresses_its_own_preset_with_nothing_missing() {
        for l in Library::all() {
            let d = l.decl();
            let r = adopt(l, &pick(d.preset), &run("swr"), &[]);
            assert!(
                r.as_ref().is_ok_and(|s| !s.contains("across instances")),
                "{}: {r:?}",
                d.title
            );
        }
    }

    #[test]
    fn bentocache_and_dogpile_render_the_run_settings() {
        // ttl 1s, stale 10s: bentocache's grace is the entry's whole life.
        let b = adopt(lib("bentocache"), &pick("swr"), &run("swr"), &[]).unwrap();
        assert!(
            b.starts_with("await bento.getOrSet({ key, factory: () => load(key), ttl: 1000, grace: 11000, timeout: 0 })"),
            "{b}"
        );
        let b = adopt(lib("bentocache"), &pick("swr+mutex"), &run("swr"), &[]).unwrap();
        assert!(
            b.contains("bentocache will let one load per key per process through instead")
                && b.contains("its getOrSet lock is in memory"),
            "{b}"
        );
        let x = adopt(lib("bentocache"), &pick("xfetch"), &run("xfetch"), &[]).unwrap_err();
        assert!(x.starts_with("bentocache cannot express xfetch: "), "{x}");

        let d = adopt(lib("dogpile"), &pick("swr+mutex"), &run("swr"), &[]).unwrap();
        assert!(
            d.starts_with("region.configure(\"dogpile.cache.redis\", arguments={\"url\": REDIS_URL, \"redis_expiration_time\": 11, \"distributed_lock\": True, \"lock_timeout\": 2}); region.get_or_create(key, lambda: load(key), expiration_time=1)"),
            "{d}"
        );
        assert!(
            !d.contains("across instances"),
            "a Redis lock reaches every instance: {d}"
        );
        let m = adopt(lib("dogpile"), &pick("mutex"), &run("mutex"), &[]).unwrap();
        assert!(
            m.contains("\"redis_expiration_time\": 1, \"distributed_lock\": True")
                && m.contains("its waiters wait for the lock without limit, where the recommendation's give up after 2s"),
            "{m}"
        );
        let p = adopt(lib("dogpile"), &pick("swr"), &run("swr"), &[]).unwrap();
        assert!(p.contains("\"distributed_lock\": False"), "{p}");
        let x = adopt(lib("dogpile"), &pick("xfetch"), &run("xfetch"), &[]).unwrap_err();
        assert!(
            x.starts_with("dogpile.cache cannot express xfetch: "),
            "{x}"
        );
    }

    #[test]
    fn an_eager_refresh_is_rendered_or_said_never_dropped() {
        // caffeine-refresh as its run resolved it: refreshAfterWrite at 80% of a 1 s TTL.
        let mut r = run("swr");
        r.scenario.eager_refresh = Some(crate::values::Percent(0.8));
        let c = adopt(lib("caffeine"), &pick("caffeine-refresh"), &r, &[]).unwrap();
        assert!(
            c.starts_with("Caffeine.newBuilder().refreshAfterWrite(Duration.ofMillis(800)).expireAfterWrite(Duration.ofMillis(1000))"),
            "{c}"
        );
        // A library with no refresh before the expiry says so instead of rendering without it.
        for (l, name) in [
            ("rails", "Rails"),
            ("laravel", "Laravel"),
            ("spring", "Spring"),
        ] {
            let e = adopt(lib(l), &pick("cache-aside"), &r, &[]).unwrap_err();
            assert!(
                e.starts_with(&format!("{name} cannot express cache-aside: "))
                    && e.contains("--eager-refresh"),
                "{e}"
            );
        }
    }
}
