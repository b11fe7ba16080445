//! `stampede run` end to end on real Redis and Postgres that the tool starts itself: the
//! figures add up and agree with the servers' own counters, the herd shows, the open loop does
//! not hide its queue, and nothing the run started outlives it.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn cache_aside_counts_agree_with_the_servers() {
    let r = run_ok(&[
        "--strategy",
        "cache-aside",
        "--rps",
        "1000",
        "--duration",
        "3s",
        "--keys",
        "500",
        "--db-cost",
        "2ms",
    ]);
    let j = &r.json;
    assert_eq!(j["schema"], 5);
    assert_eq!(j["strategy"], "cache-aside");
    assert_eq!(j["interrupted"], false);
    // Constant arrivals: exactly rate x duration requests are scheduled.
    assert_eq!(r.u("/requests/scheduled"), 3000);
    r.assert_counts_add_up();
    assert_eq!(r.u("/outcomes/error"), 0);
    // Every load the tool made was executed by Postgres, no more, no less.
    assert_eq!(
        r.u("/db/calls"),
        r.u("/db/calls_server"),
        "tool vs pg_stat_statements"
    );
    assert_eq!(
        r.u("/db/calls"),
        r.u("/outcomes/miss"),
        "cache-aside loads once per miss"
    );
    // Every GET the requests sent is in Redis' own counters, and nothing else is.
    assert_eq!(r.u("/redis/keyspace_hits"), r.u("/outcomes/hit"));
    assert_eq!(r.u("/redis/keyspace_misses"), r.u("/outcomes/miss"));
    assert!(
        r.u("/outcomes/hit") > 1500,
        "a Zipf workload mostly hits: {}",
        j["outcomes"]
    );
    // The figures the issue names exist.
    for p in [
        "/latency_ms/p50",
        "/latency_ms/p95",
        "/latency_ms/p99",
        "/latency_ms/p999",
        "/latency_ms/max",
        "/latency_ms/mean",
        "/db/peak_concurrent",
        "/db/peak_key_herd",
        "/db/redundant_loads",
        "/redis/errors",
        "/redis/timeouts",
        "/hit_rate",
    ] {
        assert!(j.pointer(p).is_some(), "{p} missing");
    }
    assert!(
        j["servers"]["redis_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty())
    );
    assert!(
        j["servers"]["postgres_version"]
            .as_str()
            .is_some_and(|v| v.starts_with(char::is_numeric))
    );
    let tl = j["timeline"].as_array().expect("timeline");
    assert!(
        // 30 buckets, and one more when requests in flight at the end finished in the drain.
        (30..=31).contains(&tl.len()),
        "3 s in 100 ms buckets: {}",
        tl.len()
    );
    let tl_requests: u64 = tl.iter().map(|b| b["requests"].as_u64().unwrap()).sum();
    assert_eq!(tl_requests, r.u("/requests/completed"));
    for k in ["t_ms", "requests", "db_calls", "hits", "errors", "p99_ms"] {
        assert!(tl[0].get(k).is_some(), "timeline[].{k} missing");
    }
    assert_servers_gone(j);
    assert_dirs_gone(j);
}

#[test]
fn hot_key_shows_the_herd() {
    let r = run_ok(&["--scenario", "scenarios/hot-key.toml", "--duration", "4s"]);
    // TTL 2 s over 4 s: the cold start and about two expiries, each refilled once if coordinated.
    let refills = 3;
    let calls = r.u("/db/calls");
    assert!(
        calls >= 5 * refills,
        "60 clients stampede each refill: {calls} DB calls"
    );
    assert!(
        r.u("/db/peak_key_herd") > 1,
        "herd {}",
        r.u("/db/peak_key_herd")
    );
    assert!(r.u("/db/redundant_loads") > 0);
    assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"));
    assert_eq!(r.json["scenario"]["instances"], 2);
}

#[test]
fn open_loop_latency_counts_the_queue_not_just_the_service() {
    // One worker and one DB connection, 30 ms per load, 60 requests/s of all-distinct keys
    // with a 1 ms TTL: the app can serve ~30/s, so a queue builds for the whole run.
    let r = run_ok(&[
        "--rps",
        "60",
        "--duration",
        "3s",
        "--max-inflight",
        "1",
        "--backlog",
        "100000",
        "--db-pool",
        "1",
        "--db-cost",
        "30ms",
        "--ttl",
        "1ms",
        "--keys",
        "1000000",
        "--zipf",
        "0.3",
        "--instances",
        "1",
        "--start",
        "cold",
    ]);
    assert_eq!(r.u("/requests/shed"), 0);
    assert_eq!(r.u("/requests/completed"), r.u("/requests/scheduled"));
    let tl = r.json["timeline"].as_array().unwrap();
    let first = tl
        .iter()
        .find(|b| b["requests"].as_u64().unwrap() > 0)
        .unwrap()["p99_ms"]
        .as_f64()
        .unwrap();
    let last = tl
        .iter()
        .rev()
        .find(|b| b["requests"].as_u64().unwrap() > 0)
        .unwrap()["p99_ms"]
        .as_f64()
        .unwrap();
    assert!(
        last > 5.0 * first,
        "latency from the schedule must grow with the queue: first {first} ms, last {last} ms"
    );
    // Service time (from when a worker took the request) stays near the DB cost.
    let service_p99 = r.f("/service_ms/p99");
    assert!(service_p99 < 150.0, "service p99 {service_p99} ms");
    assert!(r.f("/latency_ms/p99") > 10.0 * r.f("/service_ms/p50"));
}

#[test]
fn closed_loop_and_warm_keys() {
    let r = run_ok(&[
        "--clients",
        "8",
        "--instances",
        "2",
        "--duration",
        "2s",
        "--keys",
        "200",
        "--warm",
        "200",
        "--start",
        "cold",
        "--ttl",
        "30s",
        "--db-cost",
        "1ms",
    ]);
    assert_eq!(r.u("/start/keys_cached"), 200);
    // Every key was warm and nothing expired: all traffic hits; warming read Postgres in bulk,
    // which is not a DB call.
    assert_eq!(r.u("/outcomes/miss"), 0);
    assert_eq!(r.u("/db/calls"), 0);
    assert_eq!(r.u("/db/calls_server"), 0);
    assert_eq!(r.u("/redis/keyspace_misses"), 0);
    assert_eq!(r.u("/requests/shed"), 0);
    assert!(r.u("/requests/completed") > 100);
}

#[test]
fn sigint_writes_interrupted_results_and_stops_everything() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut child = stampede()
        .args([
            "run",
            "--rps",
            "500",
            "--duration",
            "60s",
            "--keys",
            "1000",
            "--db-cost",
            "1ms",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn stampede");
    // Let the servers come up and traffic start (start-up takes about a second here).
    std::thread::sleep(Duration::from_secs(5));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("stampede did not stop within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(130));
    let j = read_json(&out).expect("results written on SIGINT");
    assert_eq!(j["interrupted"], true);
    let sched = j["requests"]["scheduled"].as_u64().unwrap();
    assert!(
        sched > 0 && sched < 30_000,
        "stopped early: {sched} scheduled"
    );
    assert_eq!(
        j["requests"]["completed"].as_u64().unwrap() + j["requests"]["shed"].as_u64().unwrap(),
        sched
    );
    assert_servers_gone(&j);
    assert_dirs_gone(&j);
}

fn assert_dirs_gone(j: &serde_json::Value) {
    for key in ["redis_dir", "postgres_dir"] {
        let d = j["servers"][key]
            .as_str()
            .unwrap_or_else(|| panic!("servers.{key} missing"));
        assert!(!Path::new(d).exists(), "{key} {d} left behind");
    }
}
