//! `no-cache` and the break-even hit rate on real Redis and Postgres: without a cache every
//! request is one DB call and Redis sees none of the traffic; and the break-even predicts on
//! which side of no-cache cache-aside's mean latency lands, well below it and well above it.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

#[test]
fn no_cache_sends_every_request_to_the_database_and_none_to_redis() {
    crate::common::light_turns();
    let r = run_ok_shared(&[
        "--scenario",
        "scenarios/break-even.toml",
        "--strategy",
        "no-cache",
        "--duration",
        "3s",
    ]);
    r.assert_counts_add_up();
    let completed = r.u("/requests/completed");
    assert!(completed > 1000, "{completed} requests");
    assert_eq!(r.u("/requests/shed"), 0);
    assert_eq!(r.u("/db/calls"), completed, "one DB call per request");
    assert_eq!(r.u("/outcomes/miss"), completed);
    assert_eq!(r.json["strategy"], "no-cache");
    assert_eq!(
        r.u("/redis/keyspace_hits") + r.u("/redis/keyspace_misses"),
        0,
        "no request read Redis"
    );
    assert_eq!(r.u("/start/keys_cached"), 0);
    assert_eq!(r.u("/cost/redis_reads") + r.u("/cost/write_backs"), 0);
    assert_eq!(r.u("/cost/loads"), completed);
    assert!(r.f("/cost/load_ms") > 0.0);
    assert!(r.json["cost"]["break_even_hit_rate"].is_null());
    assert_eq!(r.json["cost"]["load_ms_from"], "this run");
    let codes: Vec<&str> = r.json["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["code"].as_str())
        .collect();
    assert!(
        !codes.contains(&"no-expiry") && !codes.contains(&"mechanism-idle"),
        "nothing to expire without a cache: {codes:?}"
    );
}

#[test]
fn no_cache_composes_with_nothing() {
    for s in ["no-cache+mutex", "cache-aside+no-cache", "no-cache+jitter"] {
        let o = stampede()
            .args(["run", "--quiet", "--strategy", s])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{s}: {err}");
        assert!(err.contains("no-cache composes with nothing"), "{s}: {err}");
    }
    let o = stampede()
        .args([
            "compare",
            "--quiet",
            "--strategies",
            "no-cache,swr+no-cache",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Median of some numbers.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn trials(dir: &Path, strategy: &str) -> Vec<Value> {
    (1..=TRIALS)
        .map(|t| {
            let p = dir.join(strategy).join(format!("trial-{t}.json"));
            read_json(&p).unwrap_or_else(|| panic!("{} missing", p.display()))
        })
        .collect()
}

const TRIALS: usize = 3;

/// One comparison of no-cache and cache-aside: cache-aside's median hit rate, its median
/// break-even (L from the same trial's no-cache run), and both median mean latencies.
fn compare(extra: &[&str]) -> (f64, f64, f64, f64) {
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let trials_arg = TRIALS.to_string();
    let mut args = vec![
        "compare",
        "--quiet",
        "--strategies",
        "no-cache,cache-aside",
        "--scenario",
        "scenarios/break-even.toml",
        "--duration",
        "2s",
        "--repeat",
        trials_arg.as_str(),
        "--out",
    ];
    let out_s = out.display().to_string();
    args.push(&out_s);
    args.extend_from_slice(extra);
    let o = stampede().args(&args).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ca = trials(&out, "cache-aside");
    let nc = trials(&out, "no-cache");
    for r in &ca {
        assert_eq!(r["cost"]["load_ms_from"], "no-cache", "{}", r["cost"]);
    }
    for r in &nc {
        assert_eq!(
            r["db"]["calls"].as_u64(),
            r["requests"]["completed"].as_u64()
        );
    }
    let f = |rs: &[Value], p: &str| -> Vec<f64> {
        rs.iter()
            .map(|r| {
                r.pointer(p)
                    .and_then(Value::as_f64)
                    .unwrap_or_else(|| panic!("{p} in {r}"))
            })
            .collect()
    };
    (
        median(f(&ca, "/hit_rate")),
        median(f(&ca, "/cost/break_even_hit_rate")),
        median(f(&ca, "/latency_ms/mean")),
        median(f(&nc, "/latency_ms/mean")),
    )
}

#[test]
fn the_break_even_says_which_side_of_no_cache_cache_aside_lands() {
    // Well below: nearly uniform requests over many keys with a short TTL, hits are rare; and
    // loads as cheap as Postgres answers (no sleep), so that h* = (G + S) / (L + S) stays far
    // above the hit rate however fast the machine's Redis is. (With a 1 ms pg_sleep, whose
    // real floor is ~2 ms here, a quiet machine's h* was 4.6%: no setting is 10 points below.)
    let (hit, h, ca, nc) = compare(&[
        "--keys",
        "50000",
        "--zipf",
        "0.01",
        "--ttl",
        "200ms",
        "--db-cost",
        "0s",
    ]);
    eprintln!("low: hit rate {hit:.3}, break-even {h:.3}, mean {ca:.3} ms vs no-cache {nc:.3} ms");
    assert!(
        hit <= h - 0.10,
        "the setting is not 10 points below the break-even: hit rate {hit:.3}, h* {h:.3}"
    );
    assert!(
        ca > nc,
        "below the break-even cache-aside is slower: {ca:.3} ms vs no-cache {nc:.3} ms (hit rate {hit:.3}, h* {h:.3})"
    );
    // Well above: a hundred keys that stay cached for the whole run, and loads with a 1 ms
    // pg_sleep, so that h* stays far below the hit rate however slow the machine's Redis is
    // (with loads of no cost a loaded machine's h* passed 100%).
    let (hit, h, ca, nc) = compare(&["--keys", "100", "--ttl", "60s", "--db-cost", "1ms"]);
    eprintln!("high: hit rate {hit:.3}, break-even {h:.3}, mean {ca:.3} ms vs no-cache {nc:.3} ms");
    assert!(
        hit >= h + 0.10,
        "the setting is not 10 points above the break-even: hit rate {hit:.3}, h* {h:.3}"
    );
    assert!(
        ca < nc,
        "above the break-even cache-aside is faster: {ca:.3} ms vs no-cache {nc:.3} ms (hit rate {hit:.3}, h* {h:.3})"
    );
}
