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
    assert_output_has_no_nan_or_inf(&format!("stampede advise {args:?}"), &o);
    for md in ["advise.md"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(md)) {
            assert_no_nan_or_inf(md, &text);
        }
    }
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!(
        "advise {args:?} ({:.0} s):\n{out}{}",
        took.as_secs_f64(),
        String::from_utf8_lossy(&o.stderr)
    );
    let json = read_json(&dir.join("advise.json")).unwrap_or(Value::Null);
    (o.status.code().unwrap_or(-1), json, out, took)
}

/// `text` with every run of whitespace read as one space: the verdict paragraph is wrapped
/// at 100 columns, so where a phrase breaks moves with the width of the figures before it
/// ("redundant_loads 78 [78, 78]" or "2 [2, 3]").
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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
            "35s",
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

/// Keys each asked about five times a second (200 keys, near-uniform, 1000 req/s) with a 1 s
/// TTL and 50 ms loads: about one read in six comes after its key expired, so whoever loads in
/// the request has a p95 on the 50 ms miss path; only a strategy that serves the stale value
/// while it refreshes answers those reads at once, and its stale share (~1 in 5) stays under
/// 30%. The candidates are the coordinations and XFetch (whose early recompute runs in the
/// request), and swr: nothing but swr can bring p95 below a load.
#[test]
fn keys_asked_a_few_times_a_second_get_a_stale_serving_strategy_for_p95() {
    crate::common::light_turns();
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
            "35s",
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
            "40s",
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
        flat(&out).contains("None meets the budgets") && out.contains(": the closest is"),
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
        // Round 0's three named strategies and 3 final trials at 1 s windows need 29 s.
        "--time",
        "30s",
        "--ci-out",
        ci_s.as_str(),
    ];
    let (code, v, out, took) = advise(&args, dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(
        took <= Duration::from_secs(32),
        "took {took:?} for --time 30s"
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

/// The search, five strategies named on the metastable scenario with a drop and a
/// recovery budget: a --time that cannot run each of them once and then 3 final trials is
/// refused before a server starts (exit 2) with the time it needs; a --time that can plans
/// every named strategy into round 0 (the plan, printed by --plan-only, not a run).
#[test]
fn every_named_strategy_is_planned_into_round_0_or_the_time_it_needs_is_refused() {
    let args = |time: &'static str| {
        [
            "advise",
            "--scenario",
            "scenarios/metastable.toml",
            "--strategies",
            "cache-aside,jitter,xfetch,mutex,swr+mutex",
            "--minimize",
            "p99",
            "--fault",
            "drop-cache@4s,fraction=100%",
            "--threshold",
            "recovery_back_ms_max=8000",
            "--time",
            time,
        ]
    };
    let short = stampede().args(args("2m")).output().unwrap();
    assert_output_has_no_nan_or_inf("advise --time 2m", &short);
    let err = String::from_utf8_lossy(&short.stderr);
    assert_eq!(short.status.code(), Some(2), "{err}");
    assert!(
        err.contains("too short to measure every named strategy") && err.contains("needs 4m 31s"),
        "{err}"
    );
    let planned = stampede()
        .args(args("6m"))
        .arg("--plan-only")
        .output()
        .unwrap();
    assert_output_has_no_nan_or_inf("advise --plan-only", &planned);
    let plan = String::from_utf8_lossy(&planned.stdout);
    assert_eq!(planned.status.code(), Some(0), "{plan}");
    let round0 = plan
        .lines()
        .find(|l| l.trim_start().starts_with("round 0:"))
        .unwrap_or_else(|| panic!("no round 0 in {plan}"));
    assert!(
        round0.contains("every named strategy (cache-aside, jitter, xfetch, mutex, swr+mutex)"),
        "{round0}"
    );
    let n: usize = round0
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(n >= 5, "{round0}");
    // The reserve shrank to fewer trials (never below 3) rather than cut a named strategy.
    assert!(plan.contains("× 4 trials of 15.0 s"), "{plan}");
}

/// Only the coordinations come back after a full drop on the metastable scenario (the windows
/// shortened: a drop at 2 s, 4 s observed after it): with a recovery budget and a --time the
/// plan says is enough for cache-aside and mutex, the answer is the coordination, and the
/// settings variants that did not fit are named as never measured.
#[test]
fn a_recovery_budget_is_met_by_the_coordination_that_comes_back() {
    crate::common::waiting_turns();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--scenario",
        "scenarios/metastable.toml",
        "--strategies",
        "cache-aside,mutex",
        "--minimize",
        "p99",
        "--fault",
        "drop-cache@2s,fraction=100%",
        "--duration",
        "7s",
        "--observe",
        "4s",
        "--settle",
        "1s",
        "--threshold",
        "recovery_back_ms_max=4000",
        "--time",
        "115s",
    ];
    let plan = stampede()
        .arg("advise")
        .args(args)
        .arg("--plan-only")
        .output()
        .unwrap();
    assert_eq!(
        plan.status.code(),
        Some(0),
        "the plan fits: {}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let (code, v, out, _) = advise(&args, dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(
        ["recommended", "tie"].contains(&v["verdict"].as_str().unwrap_or("")),
        "{v}"
    );
    assert!(recommended(&v).contains("mutex"), "{v}");
    let never = v["evidence"]["never_measured"].as_array().unwrap();
    assert!(!never.is_empty(), "the variants that did not fit: {v}");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains(&format!("Never measured ({} of", never.len())),
        "{v}"
    );
    // cache-aside stays down: its recovery is unknown, with the reason, never a number.
    let base = &v["baseline"]["thresholds"][0];
    assert_eq!(base["passed"], false, "{base}");
}

const TARGET: &str = "http://127.0.0.1:{port}/items/{key}";

/// `advise --target` on the example app's own settings: one key asked by 40 clients, a 500 ms
/// TTL and 50 ms loads, redundant loads minimised. The app's single-flight makes the requests
/// that miss one key wait for one load, where its default (cache-aside) loads once per request
/// that misses: the answer moves APP_STRATEGY to single-flight, whatever the pool (a second
/// setting, crossed with the first when it beat the defaults in round 0), and the simplest of
/// equals is the one with the fewest settings moved.
#[test]
fn advise_on_an_apps_own_settings_picks_what_its_mechanism_predicts() {
    let cmd = format!("exec {}", example_app());
    let dir = tempfile::tempdir().unwrap();
    let (code, v, out, _) = advise(
        &[
            "--target",
            TARGET,
            "--app-cmd",
            &cmd,
            "--app-setting",
            "APP_STRATEGY=cache-aside,single-flight",
            "--app-setting",
            "APP_DB_POOL=4,16",
            "--keys",
            "1",
            "--clients",
            "40",
            "--ttl",
            "500ms",
            "--db-cost",
            "50ms",
            "--duration",
            "1s",
            "--minimize",
            "redundant_loads",
            "--time",
            "100s",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        ["recommended", "tie"].contains(&v["verdict"].as_str().unwrap_or("")),
        "{v}"
    );
    let rec = &v["recommended"];
    assert_eq!(rec["strategy"], "app", "{v}");
    assert_eq!(rec["settings"]["APP_STRATEGY"], "single-flight", "{v}");
    if v["verdict"] == "tie" {
        // The simplest of those the trials cannot tell apart: one setting moved.
        assert_eq!(rec["settings"].as_object().map(|m| m.len()), Some(1), "{v}");
    }
    // The baseline is the app at its defaults (cache-aside), which herds.
    assert_eq!(v["baseline"]["strategy"], "app");
    assert_eq!(v["baseline"]["settings"], serde_json::json!({}));
    let base = v["baseline"]["objective"]["median"].as_f64().unwrap_or(0.0);
    let best = rec["objective"]["median"].as_f64().unwrap_or(f64::MAX);
    assert!(best < base && base > 0.0, "{best} vs the defaults' {base}");
    assert!(
        flat(&out).contains("Doing nothing (the app at its defaults)"),
        "{out}"
    );
    // Round 0 ran the defaults and every setting alone.
    let round0 = &v["evidence"]["rounds"][0];
    for c in [
        "app",
        "app APP_STRATEGY=single-flight",
        "app APP_STRATEGY=cache-aside",
        "app APP_DB_POOL=4",
        "app APP_DB_POOL=16",
    ] {
        assert!(
            round0["ran"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x == c)),
            "{c} not run in round 0: {round0}"
        );
    }
}

/// What an app under test cannot measure is refused before anything starts.
#[test]
fn advise_on_an_app_refuses_what_it_cannot_measure() {
    for (extra, why) in [
        (
            vec!["--minimize", "stale_ratio"],
            "--minimize stale_ratio: with --target it is never measured",
        ),
        (
            vec!["--minimize", "waited"],
            "--minimize waited: with --target it is never measured",
        ),
        (
            vec!["--minimize", "db_calls", "--threshold", "hit_rate_min=0.5"],
            "hit_rate_min: with --target",
        ),
        (
            vec!["--minimize", "db_calls", "--strategies", "mutex"],
            "--strategies are the built-in app's",
        ),
    ] {
        let o = stampede()
            .args(["advise", "--target", TARGET, "--app-cmd", "exit 1"])
            .args(["--app-setting", "APP_STRATEGY=lock"])
            .args(&extra)
            .output()
            .expect("running stampede advise");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(why), "{extra:?}: {err}");
        assert!(!err.contains("managed servers up"), "{err}");
    }
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
            "30s",
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
