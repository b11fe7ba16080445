//! Every figure counts what its name says, on real servers: the measured window only (no
//! warm-up leak, exactly at the boundary), DB calls that reached Postgres and match its own
//! count, statements apart from loads queued for a connection, a lock-timeout policy that does
//! what it says, and every request counted exactly once however the run ends.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::Value;

fn sum(r: &Run, field: &str) -> u64 {
    r.json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[field].as_u64().unwrap())
        .sum()
}

/// The server's count and the tool's agree for the same window: every statement the tool sent
/// in it either completed (pg_stat_statements) or ended in an error the tool counted.
fn assert_db_calls_refereed(r: &Run) {
    assert_eq!(
        r.u("/db/calls"),
        r.u("/db/calls_server") + r.u("/db/statement_errors"),
        "db: {}",
        r.json["db"]
    );
}

#[test]
fn a_warm_up_leaks_into_no_figure_and_the_timeline_adds_up() {
    crate::common::waiting_turns();
    // The reproduction: with a 60 s TTL every key is loaded during the warm-up, so the
    // measured window has no load at all, and nothing of the warm-up's herd may show.
    let r = run_ok_shared(&[
        "--warmup",
        "2s",
        "--duration",
        "2s",
        "--ttl",
        "60s",
        "--keys",
        "50",
        "--db-pool",
        "4",
        "--rps",
        "2000",
        "--start",
        "cold",
        "--instances",
        "1",
    ]);
    assert_eq!(r.u("/db/calls"), 0, "{}", r.json["db"]);
    assert_eq!(r.u("/db/redundant_loads"), 0, "{}", r.json["db"]);
    assert_eq!(r.u("/db/peak_key_herd"), 0);
    assert_eq!(r.u("/db/peak_concurrent"), 0);
    assert!(r.u("/db/warmup_calls") >= 50, "{}", r.json["db"]);
    assert_db_calls_refereed(&r);
    // Requests at the warm-up boundary are in the timeline, not lost between two clocks.
    assert_eq!(sum(&r, "requests"), r.u("/requests/completed"));
    assert_eq!(r.u("/requests/completed"), 4000);
    assert_eq!(sum(&r, "db_calls"), r.u("/db/calls"));
}

#[test]
fn a_warm_up_with_loads_on_both_sides_keeps_them_apart() {
    crate::common::light_turns();
    // Loads on both sides of the boundary: each side counted by the tool and, under its own
    // statement text, by Postgres; the timeline adds up to the window's totals.
    let r = run_ok_shared(&[
        "--warmup",
        "1s",
        "--duration",
        "2s",
        "--ttl",
        "300ms",
        "--keys",
        "200",
        "--rps",
        "1500",
        "--db-cost",
        "2ms",
        "--start",
        "cold",
    ]);
    assert!(
        r.u("/db/calls") > 0 && r.u("/db/warmup_calls") > 0,
        "{}",
        r.json["db"]
    );
    assert_db_calls_refereed(&r);
    assert_eq!(sum(&r, "requests"), r.u("/requests/completed"));
    assert_eq!(sum(&r, "db_calls"), r.u("/db/calls"));
    assert!(r.u("/db/redundant_loads") <= r.u("/db/calls"));
}

#[test]
fn loads_that_never_got_a_connection_are_not_db_calls() {
    crate::common::light_turns();
    // The reproduction: 2 connections, a 30 ms pool wait, 10 ms loads at 2000 misses/s.
    let r = run_ok_shared(&[
        "--db-pool",
        "2",
        "--db-timeout",
        "30ms",
        "--rps",
        "2000",
        "--duration",
        "2s",
        "--keys",
        "100000",
        "--db-cost",
        "10ms",
        "--start",
        "cold",
        "--instances",
        "1",
    ]);
    assert!(r.u("/db/pool_timeouts") > 0, "{}", r.json["db"]);
    assert_db_calls_refereed(&r);
    // A statement runs on a held connection: never more at once than the pool holds.
    assert!(r.u("/db/peak_concurrent") <= 2, "{}", r.json["db"]);
    assert!(r.u("/db/peak_in_flight") > 2, "{}", r.json["db"]);
    assert_eq!(
        r.u("/requests/errors"),
        r.u("/outcomes/error"),
        "{}",
        r.json["requests"]
    );
}

#[test]
fn peak_concurrency_counts_statements_and_in_flight_counts_queued_loads() {
    crate::common::light_turns();
    // The reproduction: 4 connections, 300 requests allowed in flight.
    let r = run_ok_shared(&[
        "--db-pool",
        "4",
        "--max-inflight",
        "300",
        "--rps",
        "2000",
        "--duration",
        "2s",
        "--keys",
        "100000",
        "--db-cost",
        "10ms",
        "--start",
        "cold",
        "--instances",
        "1",
    ]);
    let db = &r.json["db"];
    assert!(r.u("/db/peak_concurrent") <= 4, "{db}");
    assert!(r.u("/db/peak_in_flight") > 4, "{db}");
    assert!(
        r.f("/db/pool_busy") > 0.5,
        "four connections kept busy: {db}"
    );
    assert_db_calls_refereed(&r);
}

#[test]
fn the_stale_lock_timeout_policy_serves_the_value_it_saw() {
    // One hot key, warm at the start, under swr+mutex whose refresh (a 400 ms load) outlasts
    // the stale window (100 ms): requests past it wait on the refresher's lock, and after
    // --lock-wait serve the value kept past its expiry (policy stale) or load it themselves
    // (policy load).
    let common = [
        "--strategy",
        "swr+mutex",
        "--keys",
        "1",
        "--clients",
        "8",
        "--instances",
        "2",
        "--duration",
        "3s",
        "--ttl",
        "200ms",
        "--stale",
        "100ms",
        "--db-cost",
        "400ms",
        "--lock-wait",
        "50ms",
        "--lock-ttl",
        "5s",
        "--redis-timeout",
        "1s",
        "--start",
        "cold",
        "--warm",
        "1",
    ];
    let stale = run_ok_shared(&[&common[..], &["--lock-timeout-policy", "stale"]].concat());
    assert!(stale.u("/lock/timeouts") > 0, "{}", stale.json["lock"]);
    assert_eq!(
        stale.u("/outcomes/fallback"),
        0,
        "stale policy: {}",
        stale.json["outcomes"]
    );
    let load = run_ok_shared(&[&common[..], &["--lock-timeout-policy", "load"]].concat());
    assert!(load.u("/lock/timeouts") > 0, "{}", load.json["lock"]);
    assert!(
        load.u("/outcomes/fallback") > 0,
        "load policy: {}",
        load.json["outcomes"]
    );
    assert!(
        stale.u("/db/calls") < load.u("/db/calls"),
        "serving stale spares the loads: stale {} vs load {}",
        stale.u("/db/calls"),
        load.u("/db/calls")
    );
}

#[test]
fn an_interrupted_run_counts_every_request_once_and_abandons_with_a_latency() {
    crate::common::light_turns();
    // Loads of 30 s cannot finish: at Ctrl-C the drain gives them 5 s, then they are dropped
    // (abandoned), each counted once, as an error with the time it was given up.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let _turn = cpu_turn();
    let mut child = stampede()
        .args([
            "run",
            "--rps",
            "200",
            "--duration",
            "20s",
            "--keys",
            "100000",
            "--db-cost",
            "30s",
            "--db-pool",
            "4",
            "--start",
            "cold",
            "--instances",
            "1",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = child.id();
    // Into the window, whatever the set-up took on a busy machine: the status line that
    // ends the warm-up is printed as the window starts.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(n > 0, "the run ended before its window:\n{said}");
        said.push_str(&line);
        if line.contains("keys cached in") {
            break;
        }
    }
    // Drained meanwhile, so the status lines never fill the pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _guard = Kill(child);
    assert_eq!(status.code(), Some(130));
    let j: Value = read_json(&out).expect("results written");
    let u = |p: &str| j.pointer(p).and_then(Value::as_u64).unwrap();
    let abandoned = u("/requests/abandoned");
    assert!(abandoned > 0, "{}", j["requests"]);
    assert_eq!(
        u("/requests/completed") + u("/requests/shed"),
        u("/requests/scheduled"),
        "{}",
        j["requests"]
    );
    assert!(u("/requests/errors") >= abandoned);
    // Abandoned requests are in the latency distribution, at seconds, not dropped from it.
    assert_eq!(u("/latency_ms/count"), u("/requests/completed"));
    assert!(j["latency_ms"]["max"].as_f64().unwrap() > 2000.0);
    let tl: u64 = j["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(tl, u("/requests/completed"));
    assert_servers_gone(&j);
}

#[test]
fn single_flight_followers_wait_no_longer_than_lock_wait() {
    // A 3 s load with no --db-timeout: the leader waits it out, its followers give up at the
    // coordination's bound (--lock-wait) and apply the policy (error here).
    let r = run_ok_shared(&[
        "--strategy",
        "single-flight",
        "--keys",
        "1",
        "--clients",
        "6",
        "--instances",
        "1",
        "--duration",
        "2s",
        "--db-cost",
        "3s",
        "--lock-wait",
        "200ms",
        "--lock-timeout-policy",
        "error",
        "--start",
        "cold",
    ]);
    assert!(r.u("/lock/timeouts") > 0, "{}", r.json["lock"]);
    assert!(r.u("/outcomes/error") > 0, "{}", r.json["outcomes"]);
    let errors = &r.json["latency_by_outcome_ms"]["error"];
    assert!(
        errors["p50"].as_f64().unwrap() < 1000.0,
        "followers gave up at ~200 ms: {errors}"
    );
}

/// The DB calls by cause on a case whose split is known by construction: one key from a cold
/// start, a TTL much shorter than the window. The first load is `first`, each reload after
/// the key expired is `expiry`, and every load begun while another was in flight is `herd`
/// (so herd is exactly the redundant loads here: every load got a connection); nothing else.
/// Under a mutex the same workload has no herd. A drop-cache shock's reloads are
/// `after_fault`.
#[test]
fn db_calls_by_cause_are_the_known_split_of_one_hot_key() {
    crate::common::waiting_turns();
    let base = [
        "--keys",
        "1",
        "--start",
        "cold",
        "--duration",
        "3s",
        "--rps",
        "200",
        "--db-cost",
        "20ms",
    ];
    let with = |more: &[&'static str]| {
        let mut a = base.to_vec();
        a.extend(more);
        a
    };
    let r = run_ok_shared(&with(&["--ttl", "500ms"]));
    let c = |r: &Run, k: &str| r.u(&format!("/db/by_cause/{k}"));
    eprintln!("cache-aside: {}", r.json["db"]["by_cause"]);
    assert_eq!(c(&r, "first"), 1, "one key, loaded first once");
    assert_eq!(c(&r, "herd"), r.u("/db/redundant_loads"));
    assert!(c(&r, "herd") > 0, "200 req/s on a 20 ms load herds");
    // One reload per expiry: at most one per TTL plus its load over the 3 s window.
    let expiry = c(&r, "expiry");
    assert!((3..=6).contains(&expiry), "expiries {expiry}");
    for k in [
        "eviction",
        "invalidation",
        "refresh",
        "after_fault",
        "other",
    ] {
        assert_eq!(c(&r, k), 0, "{k}");
    }
    assert_eq!(
        c(&r, "first") + expiry + c(&r, "herd"),
        r.u("/db/calls"),
        "the split adds up"
    );
    // The model for the one (hottest) key: 200/s over a miss-to-write-back of ~20 ms.
    let m = &r.json["db"]["herd_model"];
    assert_eq!(m["key"], 1);
    let predicted = m["predicted_mean"].as_f64().unwrap();
    assert!((3.0..=15.0).contains(&predicted), "model {m}");

    let r = run_ok_shared(&with(&["--ttl", "500ms", "--strategy", "mutex"]));
    eprintln!("mutex: {}", r.json["db"]["by_cause"]);
    assert_eq!(c(&r, "herd"), 0, "the lock holds the herd back");
    assert_eq!(c(&r, "first"), 1);

    let r = run_ok_shared(&with(&["--ttl", "60s", "--drop-cache-at", "1500ms"]));
    eprintln!("drop-cache: {}", r.json["db"]["by_cause"]);
    assert_eq!(c(&r, "first"), 1);
    assert_eq!(c(&r, "expiry"), 0, "a 60 s TTL does not expire in 3 s");
    assert_eq!(c(&r, "after_fault"), 1, "the one reload after the drop");
}
