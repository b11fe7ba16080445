//! Shocks, the client's timeouts and retries, and the recovery verdict, on real servers the
//! tool (or the test) starts: a cache drop removes what it says and nothing else, a slow
//! database really is slower by the server's own clock, a spike keeps the schedule exact, the
//! attempts add up, and the verdict tells a run that comes back from one that cannot.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{BIN, cleanup, cpu_turn, run, run_ok};
use common::{Servers, redis_keys};

/// The entry keys (`<prefix>{<id>}`) and the others of the run's namespace.
fn split_keys(keys: &[String]) -> (usize, Vec<String>) {
    let mut entries = 0;
    let mut other = Vec::new();
    for k in keys {
        let last = k.rsplit(':').next().unwrap_or_default();
        let id = last
            .strip_prefix('{')
            .and_then(|l| l.strip_suffix('}'))
            .unwrap_or_default();
        let id_only =
            k.matches(':').count() == 2 && !id.is_empty() && id.chars().all(|c| c.is_ascii_digit());
        if id_only {
            entries += 1;
        } else {
            other.push(k.clone());
        }
    }
    (entries, other)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_drop_removes_the_entries_and_leaves_the_rest_alone() {
    crate::common::waiting_turns();
    let servers = Servers::start(None).await;
    let (redis_url, pg_url) = servers.urls();
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    // Every key cached with a TTL far past the run; a trickle of requests, so what the drop
    // removed is still missing when it is looked at. The lock key of mutex lives meanwhile.
    let mut child = std::process::Command::new(BIN)
        .args([
            "run",
            "--strategy",
            "mutex",
            "--rps",
            "20",
            "--keys",
            "200",
            "--start",
            "synchronized",
            "--ttl",
            "60s",
            "--duration",
            "4s",
            "--drop-cache-at",
            "1500ms",
            "--redis-url",
            &redis_url,
            "--pg-url",
            &pg_url,
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Before the drop: every entry is there.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let all = redis_keys(&redis_url, "stampede:*").await;
    let (before, _) = split_keys(&all);
    // After it: at most the few refilled since, and the heartbeat still there.
    while started.elapsed() < Duration::from_millis(2300) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let keys = redis_keys(&redis_url, "stampede:*").await;
    let (after, other) = split_keys(&keys);
    // A cleanup during the run finds the run alive and removes nothing of it.
    let (code, said) = cleanup(&["--redis-url", &redis_url, "--pg-url", &pg_url]);
    let kept = redis_keys(&redis_url, "stampede:*").await;
    let status = child.wait().unwrap();
    assert!(status.success(), "the run failed");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let f = &json["faults"][0];
    assert_eq!(f["kind"], "drop-cache");
    let removed = f["removed"].as_u64().unwrap();
    println!("entries before {before}, removed {removed}, after {after}; others {other:?}");
    assert_eq!(before, 200, "synchronized start: every key cached");
    // Each request of the 0.5 s between the last look and the drop may have refilled none
    // (all were cached): the drop found all 200.
    assert_eq!(removed, 200, "{f}");
    assert!(
        after <= 20,
        "at most the ~16 requests since refilled entries: {after}"
    );
    assert!(
        other.iter().any(|k| k.ends_with("heartbeat")),
        "the heartbeat survives the drop: {other:?}"
    );
    assert_eq!(code, 0, "{said}");
    assert!(
        kept.iter().any(|k| k.ends_with("heartbeat")),
        "cleanup left the live run's heartbeat: {said}"
    );
    assert!(
        json["recovery"]["verdict"] == "not-judged",
        "2.5 s after the drop is less than --observe 10s: {}",
        json["recovery"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_database_is_slower_by_the_servers_clock() {
    crate::common::waiting_turns();
    let servers = Servers::start(None).await;
    let (redis_url, pg_url) = servers.urls();
    let pg = common::pg(&pg_url).await;
    // The loads' mean time in pg_stat_statements over one run, reset before it.
    let mean_ms = |args: Vec<&'static str>| {
        let (redis_url, pg_url, pg) = (redis_url.clone(), pg_url.clone(), &pg);
        async move {
            pg.execute("SELECT pg_stat_statements_reset()", &[])
                .await
                .unwrap();
            let mut a = vec![
                "--rps",
                "100",
                "--keys",
                "100000",
                "--start",
                "cold",
                "--db-cost",
                "5ms",
                "--duration",
                "2s",
                "--redis-url",
                &redis_url,
                "--pg-url",
                &pg_url,
            ];
            a.extend(args);
            let r = run_ok(&a);
            let row = pg
                .query_one(
                    "SELECT (sum(total_exec_time) / sum(calls))::float8, sum(calls)::int8 FROM pg_stat_statements WHERE query LIKE '%stampede_load_version%' AND query NOT LIKE '%stampede_unmeasured%'",
                    &[],
                )
                .await
                .unwrap();
            let (server, calls): (f64, i64) = (row.get(0), row.get(1));
            (server, calls, r.f("/db/statement_ms_mean"))
        }
    };
    let (plain, plain_calls, plain_tool) = mean_ms(vec![]).await;
    let (slow, slow_calls, slow_tool) = mean_ms(vec![
        "--slow-db-at",
        "0s",
        "--slow-db-for",
        "2s",
        "--slow-db-factor",
        "4",
    ])
    .await;
    println!(
        "server mean {plain:.2} ms over {plain_calls} calls, slowed {slow:.2} ms over {slow_calls}; the tool's {plain_tool:.2} / {slow_tool:.2} ms"
    );
    assert!((4.5..8.0).contains(&plain), "pg_sleep(5 ms): {plain}");
    assert!(
        (19.0..26.0).contains(&slow),
        "×4 of 5 ms by the server's clock: {slow}"
    );
    assert!(
        slow_tool >= 19.0,
        "the tool's statement time agrees: {slow_tool}"
    );
}

#[test]
fn a_spike_multiplies_the_schedule_exactly() {
    crate::common::light_turns();
    // 200/s for 3 s, ×3 from 1 s for 1 s: 600 + 2 × 200 more requests, exactly.
    let r = run_ok(&[
        "--rps",
        "200",
        "--keys",
        "200",
        "--duration",
        "3s",
        "--spike-at",
        "1s",
        "--spike-for",
        "1s",
        "--spike-factor",
        "3",
    ]);
    assert_eq!(r.u("/requests/scheduled"), 1000);
    r.assert_counts_add_up();
    // No retries: one attempt per request, an amplification of exactly 1 when none was shed.
    if r.u("/requests/shed") + r.u("/requests/unsent") == 0 {
        assert_eq!(
            r.json["requests"]["amplification"], 1.0,
            "{}",
            r.json["requests"]
        );
    }
    // By scheduled time, the spike's buckets hold three times the goodput.
    let t = r.json["timeline"].as_array().unwrap();
    let due = |from: u64, to: u64| -> u64 {
        t.iter()
            .filter(|b| {
                // A bucket ends a ms or two after its tick: the tick is its slot.
                let ms = (b["t_ms"].as_u64().unwrap() + 50) / 100 * 100;
                ms > from && ms <= to
            })
            .map(|b| b["goodput"].as_u64().unwrap())
            .sum()
    };
    let (before, during) = (due(0, 1000), due(1000, 2000));
    assert!((180..=200).contains(&before), "{before}");
    assert!((560..=600).contains(&during), "{during}");
    assert_eq!(r.json["faults"][0]["factor"], 3.0);
    let e = run(&[
        "--clients",
        "4",
        "--duration",
        "2s",
        "--spike-at",
        "1s",
        "--spike-for",
        "1s",
    ]);
    assert_eq!(
        e.code(),
        2,
        "a spike in a closed loop is a usage error: {}",
        e.stderr()
    );
    assert!(e.stderr().contains("closed loop"), "{}", e.stderr());
}

#[test]
fn timeouts_retries_and_goodput_add_up() {
    // 100 ms loads, a client that gives up at 20 ms and retries twice (after 10 and 20 ms):
    // a cold key's three attempts all time out, and later requests
    // find the value the first attempt's load wrote back.
    let r = run_ok(&[
        "--rps",
        "300",
        "--keys",
        "300",
        "--start",
        "cold",
        "--db-cost",
        "100ms",
        "--duration",
        "2s",
        "--request-timeout",
        "20ms",
        "--retries",
        "2",
        "--retry-backoff",
        "10ms",
    ]);
    let q = |k: &str| r.u(&format!("/requests/{k}"));
    assert_eq!(q("completed") + q("shed"), q("scheduled"));
    let outcomes: u64 = [
        "hit",
        "miss",
        "stale",
        "waited",
        "fallback",
        "error",
        "rejected",
        "ok",
        "timed_out",
    ]
    .iter()
    .map(|o| r.u(&format!("/outcomes/{o}")))
    .sum();
    assert_eq!(
        outcomes,
        q("completed"),
        "one outcome a request, retries or not"
    );
    assert_eq!(q("timed_out"), r.u("/outcomes/timed_out"));
    let t = r.json["timeline"].as_array().unwrap();
    let sum = |k: &str| t.iter().map(|b| b[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("retries"), q("retries"), "every retry counted once");
    assert_eq!(sum("goodput"), q("goodput"));
    assert!(
        q("retries") > 0 && q("timed_out") > 0,
        "{}",
        r.json["requests"]
    );
    // Attempts are first attempts plus retries; per scheduled request, more than one.
    assert_eq!(q("attempts"), q("completed") + q("retries"));
    let amp = r.json["requests"]["amplification"].as_f64().unwrap();
    assert!(amp > 1.0 && amp <= 3.0, "{}", r.json["requests"]);
    // A request that timed out in the end did so three times: two retries each.
    assert!(q("retries") >= 2 * q("timed_out"), "{}", r.json["requests"]);
    // Goodput: answered with a value within the 20 ms timeout, so never a timed-out one.
    assert!(q("goodput") <= q("completed") - q("timed_out") - q("errors"));
    // The loads cut off from their clients still ran and wrote back: later requests hit,
    // and the database saw fewer statements than the client sent attempts.
    assert!(r.u("/outcomes/hit") > 0, "{}", r.json["outcomes"]);
    assert!(
        r.u("/db/calls") < q("scheduled") + q("retries"),
        "{}",
        r.json["db"]
    );
}

#[test]
fn the_verdict_tells_a_run_that_comes_back_from_one_that_cannot() {
    crate::common::waiting_turns();
    // A warm cache dropped at 2 s: the database (4 connections, 5 ms loads: ~800/s) refills
    // 300 keys in well under a second.
    let back = run_ok(&[
        "--strategy",
        "mutex",
        "--rps",
        "500",
        "--keys",
        "300",
        "--duration",
        "6s",
        "--drop-cache-at",
        "2s",
        "--observe",
        "2s",
        "--settle",
        "1s",
        "--db-cost",
        "5ms",
        "--db-pool",
        "2",
    ]);
    let rc = &back.json["recovery"];
    println!("{rc}");
    assert_eq!(rc["verdict"], "recovered", "{rc}");
    assert!(rc["back_ms"].as_u64().unwrap() <= 2000, "{rc}");
    assert!(
        rc["criterion"].as_str().unwrap().contains("goodput"),
        "{rc}"
    );
    assert!(back.stdout().is_empty() || !back.stdout().contains("NOT"));
    // Every request loads (no id exists, nothing is cached) at about 70% of what the database
    // serves; a retry storm after a spike keeps demand above it once the spike is gone: each
    // timed-out request comes back four times, while its abandoned load still holds a
    // connection. No strategy can help: nothing is ever cached.
    let stuck = run(&[
        "--rps",
        "250",
        "--keys",
        "300",
        "--missing-ratio",
        "100%",
        "--duration",
        "7s",
        "--db-cost",
        "5ms",
        "--db-pool",
        "2",
        "--instances",
        "1",
        "--spike-at",
        "2s",
        "--spike-for",
        "1s",
        "--spike-factor",
        "3",
        "--request-timeout",
        "50ms",
        "--retries",
        "3",
        "--retry-backoff",
        "10ms",
        "--observe",
        "2s",
        "--settle",
        "1s",
        "--threshold",
        "recovery_back_ms_max=5000",
    ]);
    let rc = &stuck.json["recovery"];
    println!("{rc}");
    assert_eq!(rc["verdict"], "not-recovered", "{rc}");
    assert!(rc["back_ms"].is_null());
    // The storm: each timed-out request came back up to three times.
    let amp = stuck.json["requests"]["amplification"].as_f64().unwrap();
    assert!(amp > 1.5, "{}", stuck.json["requests"]);
    assert_eq!(
        stuck.code(),
        1,
        "the recovery threshold breaks: {}",
        stuck.stderr()
    );
    // A verdict that needs more time than the window leaves is a usage error up front.
    let e = run(&[
        "--rps",
        "100",
        "--duration",
        "5s",
        "--drop-cache-at",
        "3s",
        "--threshold",
        "recovery_back_ms_max=1000",
    ]);
    assert_eq!(e.code(), 2, "{}", e.stderr());
    assert!(e.stderr().contains("--observe"), "{}", e.stderr());
}
