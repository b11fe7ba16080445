//! `stampede advise` on workloads whose answer is known by construction, on real servers:
//! small windows and few candidates, each search bounded by --time.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// `stampede advise ARGS --out DIR`: exit code, advise.json, stdout, and how long it took.
fn advise(args: &[&str], dir: &Path) -> (i32, Value, String, Duration) {
    let _turn = cpu_turn();
    let t = Instant::now();
    let o = stampede()
        .arg("advise")
        .args(args)
        .arg("--out")
        .arg(dir)
        .arg("--quiet")
        .output()
        .expect("running stampede advise");
    let took = t.elapsed();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!(
        "advise {args:?} ({:.0} s):\n{out}{}",
        took.as_secs_f64(),
        String::from_utf8_lossy(&o.stderr)
    );
    let json = read_json(&dir.join("advise.json")).unwrap_or(Value::Null);
    (o.status.code().unwrap_or(-1), json, out, took)
}

fn recommended(v: &Value) -> String {
    v["recommended"]["strategy"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// One hot key from a cold start, no stale answer allowed, DB calls minimised: a coordination
/// (the herd is all cache-aside adds), never a stale-serving strategy. In Laravel's terms, a
/// lock around remember().
#[test]
fn a_hot_key_without_stale_answers_gets_a_coordination() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v, out, _) = advise(
        &[
            "--scenario",
            "scenarios/hot-key.toml",
            "--duration",
            "3s",
            "--strategies",
            "cache-aside,mutex,single-flight,swr",
            "--minimize",
            "db_calls",
            "--threshold",
            "stale_ratio_max=0",
            "--time",
            "50s",
            "--for",
            "laravel",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}");
    let s = recommended(&v);
    assert!(
        ["mutex", "single-flight"].contains(&s.as_str()),
        "a coordination, not {s}: {v}"
    );
    assert!(["recommended", "tie"].contains(&v["verdict"].as_str().unwrap()));
    // The baseline is cache-aside at the team's settings, with its own interval.
    assert_eq!(v["baseline"]["strategy"], "cache-aside");
    let base = v["baseline"]["objective"]["median"].as_f64().unwrap();
    let rec = v["recommended"]["objective"]["median"].as_f64().unwrap();
    assert!(
        rec < base,
        "the coordination saves DB calls: {rec} vs {base}"
    );
    let t = &v["recommended"]["thresholds"][0];
    assert_eq!(t["name"], "stale_ratio_max");
    assert_eq!(t["passed"], true);
    assert!(t["interval"]["hi"].as_f64().is_some());
    let adopt = v["adoption"].as_str().unwrap();
    assert!(
        adopt.contains("Cache::lock") || adopt.contains("cannot express"),
        "{adopt}"
    );
    assert!(
        out.starts_with("verdict   "),
        "the answer comes first: {out}"
    );
    assert!(dir.path().join("advise.md").is_file());
    assert!(dir.path().join("final/summary.json").is_file());
}

/// A distributed mutex recommended for Symfony, whose LockRegistry is an flock on one host: the
/// answer renders Symfony's call and says what it will do instead across the run's 2
/// instances, and the nearest strategy it can express, not a per-host lock passed off as the
/// mutex.
#[test]
fn for_symfony_a_distributed_mutex_says_what_symfony_does_instead() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v, out, _) = advise(
        &[
            "--scenario",
            "scenarios/hot-key.toml",
            "--duration",
            "2s",
            "--strategies",
            "mutex",
            "--minimize",
            "db_calls",
            "--time",
            "40s",
            "--for",
            "symfony",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(recommended(&v), "mutex", "{v}");
    let adopt = v["adoption"].as_str().unwrap();
    for part in [
        "$cache->get('key'",
        "across instances: mutex lets one load of a key through across instances, and Symfony cannot: its LockRegistry is an flock, local to one host",
        "Symfony will let one load per key per host through instead: expect one load per host per miss and expiry, 2 here (the run's instances), so up to 2 loads of a key at once",
        "Nearest Symfony can express: single-flight",
    ] {
        assert!(adopt.contains(part), "{part}\nnot in: {adopt}");
    }
    assert!(out.contains(adopt), "the terminal prints the same: {out}");
}

/// Keys each asked about five times a second (200 keys, near-uniform, 1000 req/s) with a 1 s
/// TTL and 50 ms loads: about one read in six comes after its key expired, so whoever loads in
/// the request has a p95 on the 50 ms miss path; only a strategy that serves the stale value
/// while it refreshes answers those reads at once, and its stale share (~1 in 5) stays under
/// 30%. The candidates are the coordinations and XFetch (whose early recompute runs in the
/// request), and swr: nothing but swr can bring p95 below a load.
#[test]
fn keys_asked_a_few_times_a_second_get_a_stale_serving_strategy_for_p95() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v, out, _) = advise(
        &[
            "--strategies",
            "mutex,single-flight,xfetch,swr",
            "--keys",
            "200",
            "--zipf",
            "0.01",
            "--rps",
            "1000",
            "--ttl",
            "1s",
            "--db-cost",
            "50ms",
            "--duration",
            "2s",
            "--minimize",
            "p95",
            "--threshold",
            "stale_ratio_max=30%",
            "--time",
            "50s",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}");
    assert!(recommended(&v).contains("swr"), "{v}");
    let p95 = v["recommended"]["objective"]["hi"].as_f64().unwrap();
    let base = v["baseline"]["objective"]["lo"].as_f64().unwrap();
    assert!(
        p95 < 10.0 && base > 40.0,
        "p95 {p95} vs cache-aside's {base}"
    );
}

/// Almost every request misses whatever the strategy (50 000 keys near-uniform at 2000 req/s
/// with a 200 ms TTL: keys ≫ rate × TTL), and loads are as cheap as Postgres answers: every
/// cached request pays the GET, the load and the SET against a bare load, so no-cache has the
/// lowest median latency (p50: the p99 of 1-second windows on a loaded 2-core machine is too
/// noisy for 5 trials to separate them).
#[test]
fn a_hit_rate_near_zero_with_cheap_loads_gets_no_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v, out, _) = advise(
        &[
            "--strategies",
            "cache-aside,no-cache,mutex",
            "--keys",
            "50000",
            "--zipf",
            "0.01",
            "--ttl",
            "200ms",
            "--db-cost",
            "0s",
            "--rps",
            "2000",
            "--duration",
            "2s",
            "--minimize",
            "p50",
            "--time",
            "60s",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(recommended(&v), "no-cache", "{v}");
}

/// A budget nothing can meet: none-meets, exit 1, the closest candidate and the budget it
/// breaks named, by how much.
#[test]
fn a_budget_nothing_meets_is_none_meets_with_the_closest() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v, out, _) = advise(
        &[
            "--strategies",
            "cache-aside,mutex",
            "--duration",
            "1s",
            "--minimize",
            "db_calls",
            "--threshold",
            "p99_ms_max=0.001",
            "--time",
            "30s",
        ],
        dir.path(),
    );
    assert_eq!(code, 1, "{out}");
    assert_eq!(v["verdict"], "none-meets");
    assert!(v["recommended"].is_null());
    let c = &v["closest"];
    assert_eq!(c["budget"], "p99_ms_max");
    assert!(c["by"].as_f64().unwrap() > 1.0, "{c}");
    assert!(
        out.contains("None meets the budgets: the closest is"),
        "{out}"
    );
}

/// The search stops within --time (server start included), and --resume reads back every run
/// it finished instead of running it again; its CI scenario runs.
#[test]
fn the_search_stays_within_its_time_and_resumes_without_rerunning() {
    let dir = tempfile::tempdir().unwrap();
    let ci = dir.path().join("ci.toml");
    let ci_s = ci.display().to_string();
    let args = [
        "--strategies",
        "cache-aside,mutex,swr",
        "--duration",
        "2s",
        "--minimize",
        "db_calls",
        "--time",
        "25s",
        "--ci-out",
        ci_s.as_str(),
    ];
    let (code, v, out, took) = advise(&args, dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(
        took <= Duration::from_secs(27),
        "took {took:?} for --time 25s"
    );
    let runs = v["evidence"]["runs"].as_u64().unwrap();
    assert!(runs >= 5, "{v}");
    assert_eq!(v["evidence"]["read_back"], 0);
    let mut again = args.to_vec();
    again.push("--resume");
    let (code, w, out, took) = advise(&again, dir.path());
    assert_eq!(code, 0, "{out}");
    // Every run the first search finished is read back, none run again.
    assert_eq!(w["evidence"]["read_back"].as_u64(), Some(runs), "{w}");
    if v["interrupted"] == false {
        assert_eq!(w["evidence"]["runs"].as_u64().unwrap(), runs);
        assert_eq!(w["recommended"], v["recommended"], "the same answer");
        assert!(
            took < Duration::from_secs(10),
            "nothing ran again: {took:?}"
        );
    } else {
        // On a loaded machine --time can cut the first search's final trials short: the
        // resumed search runs only what is missing, and finishes.
        assert!(w["evidence"]["runs"].as_u64().unwrap() > runs, "{w}");
        assert_eq!(w["interrupted"], false, "{w}");
    }
    // The CI scenario is a scenario `run` takes, with thresholds around the recommendation.
    let text = std::fs::read_to_string(&ci).unwrap();
    assert!(
        text.contains("[thresholds]") && text.contains("db_calls_max"),
        "{text}"
    );
    let r = run_ok(&["--scenario", &ci_s, "--duration", "1s"]);
    assert!(
        r.json["thresholds"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
}
