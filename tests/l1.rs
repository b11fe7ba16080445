//! The in-process tier (`--l1`) on real Redis and Postgres: the seed's experiment (two
//! instances, writes through one, reads through both: `ttl` serves the old value until the
//! tier's TTL, `pubsub` and `tracking` within milliseconds), tracking's flush when its
//! invalidation connection is killed, and what each mode serves while Redis is down. Counts
//! and bounds, never timings; the staleness distributions and the hit latency by tier are
//! printed (`-- --nocapture`).

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// One run of the seed's experiment under `mode`: 2 instances, writes spread over them,
/// versioned invalidation (so Redis itself never keeps an old version and every stale read
/// left is the tier's), tier TTL 1 s.
fn experiment(mode: &str) -> Run {
    let r = run_ok(&[
        "--instances",
        "2",
        "--rps",
        "1000",
        "--keys",
        "500",
        "--duration",
        "5s",
        "--warmup",
        "1s",
        "--ttl",
        "10s",
        "--write-rps",
        "40",
        "--invalidate",
        "versioned",
        "--l1",
        "10000",
        "--l1-ttl",
        "1s",
        "--l1-invalidate",
        mode,
    ]);
    r.assert_counts_add_up();
    let st = &r.json["consistency"]["staleness_ms"];
    println!(
        "{mode:>8}: l1 hits {} of {} requests, l1 stale reads {}, invalidations received {}, \
         not cached (invalidated in flight) {}; staleness ms p50 {} p99 {} max {}; \
         writes left wrong {} of {}; hit p50 ms in-process {} vs Redis {}",
        r.u("/l1/hits"),
        r.u("/requests/completed"),
        r.u("/l1/stale_reads"),
        r.u("/l1/invalidations_received"),
        r.u("/l1/spoiled"),
        st["p50"],
        st["p99"],
        st["max"],
        r.u("/consistency/writes_left_wrong"),
        r.u("/consistency/writes_probed"),
        r.json["latency_by_outcome_ms"]["l1-hit"]["p50"],
        r.json["latency_by_outcome_ms"]["hit"]["p50"],
    );
    r
}

#[test]
fn ttl_serves_the_old_value_until_its_ttl_pubsub_and_tracking_do_not() {
    crate::common::waiting_turns();
    let ttl = experiment("ttl");
    let pubsub = experiment("pubsub");
    let tracking = experiment("tracking");
    for r in [&ttl, &pubsub, &tracking] {
        assert!(r.u("/l1/hits") > 0, "{}", r.json["l1"]);
        assert_eq!(r.u("/l1/evictions"), 0, "500 keys fit in 10 000 entries");
        assert_eq!(r.u("/l1/flushes"), 0, "no connection dropped");
        // Versioned invalidation: what is stale is the tier's.
        assert_eq!(
            r.u("/l1/stale_reads"),
            r.u("/consistency/stale_reads"),
            "{}",
            r.json["consistency"]
        );
        assert_eq!(
            r.u("/l1/hits") + r.u("/outcomes/hit"),
            (r.f("/hit_rate") * r.f("/requests/completed")).round() as u64,
            "the hit rate splits by tier"
        );
    }
    // ttl: nothing tells B; it serves the old version, and writes are left wrong in its tier.
    assert_eq!(ttl.u("/l1/invalidations_received"), 0);
    let ttl_stale = ttl.u("/l1/stale_reads");
    assert!(ttl_stale >= 50, "ttl: {}", ttl.json["consistency"]);
    assert!(
        ttl.u("/consistency/writes_left_wrong") * 4 >= ttl.u("/consistency/writes_probed"),
        "ttl: a write through one instance leaves the other's copy wrong: {}",
        ttl.json["consistency"]
    );
    // Never past the tier's TTL (1 s): an entry is served at most that long after it was
    // cached, and it was cached before the commit or one round trip after it (slack for a
    // starved round trip on 2 cores).
    assert!(
        ttl.f("/consistency/staleness_ms/max") <= 1_500.0,
        "{}",
        ttl.json["consistency"]["staleness_ms"]
    );
    // pubsub and tracking: every instance hears of the write; what is left is the delivery
    // of one message, a handful of reads at most.
    for (mode, r) in [("pubsub", &pubsub), ("tracking", &tracking)] {
        assert!(r.u("/l1/invalidations_received") > 0, "{mode}");
        assert!(
            r.u("/l1/stale_reads") * 10 <= ttl_stale,
            "{mode}: {} stale reads, ttl {ttl_stale}",
            r.u("/l1/stale_reads")
        );
        assert!(
            r.u("/consistency/writes_left_wrong") * 100 <= r.u("/consistency/writes_probed"),
            "{mode}: {}",
            r.json["consistency"]
        );
    }
}

/// The tool's tracking connections in a Redis's CLIENT LIST (flag `t`): their ids.
fn tracking_clients(c: &mut redis::Connection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(c)
        .unwrap_or_default();
    list.lines()
        .filter(|l| {
            l.split(' ')
                .any(|f| f.strip_prefix("flags=").is_some_and(|v| v.contains('t')))
        })
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .map(str::to_string)
        .collect()
}

#[test]
fn tracking_flushes_the_tier_when_its_invalidation_connection_drops() {
    crate::common::waiting_turns();
    let redis_node = OwnRedis::start(&[], false);
    let url = format!("redis://127.0.0.1:{}", redis_node.port);
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let child = stampede()
        .args([
            "run",
            "--redis-url",
            &url,
            "--instances",
            "2",
            "--rps",
            "1000",
            "--keys",
            "1000",
            "--duration",
            "6s",
            "--warmup",
            "0s",
            "--ttl",
            "10s",
            "--l1",
            "50",
            "--l1-invalidate",
            "tracking",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running stampede");
    let children = Children(vec![child]);
    let mut c = redis::Client::open(url.as_str())
        .and_then(|cl| cl.get_connection())
        .expect("a connection to the test's Redis");
    let ids = wait_for(
        "both instances' tracking connections",
        Duration::from_secs(30),
        || Some(tracking_clients(&mut c)).filter(|v| v.len() == 2),
    );
    // Into the measured window, then kill both.
    std::thread::sleep(Duration::from_secs(2));
    for id in &ids {
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query(&mut c)
            .expect("CLIENT KILL");
        assert_eq!(killed, 1, "client {id}");
    }
    // Each instance opens another and turns tracking on again.
    let again = wait_for(
        "the tracking connections to come back",
        Duration::from_secs(10),
        || Some(tracking_clients(&mut c)).filter(|v| v.len() == 2),
    );
    assert!(
        again.iter().all(|id| !ids.contains(id)),
        "{ids:?} {again:?}"
    );
    let done = children.wait();
    assert_eq!(done[0].0, 0, "{}", done[0].1);
    let r: Value = read_json(&out).expect("results");
    let l1 = &r["l1"];
    println!("tracking, connections killed: {l1}");
    let n = |k: &str| l1[k].as_u64().unwrap_or_else(|| panic!("{k} in {l1}"));
    assert!(n("flushes") >= 2, "one flush per killed connection: {l1}");
    assert!(n("hits") > 0);
    assert!(n("evictions") > 0, "1000 keys through 50 entries: {l1}");
}

/// The tier's hits in the timeline buckets Redis was down for all of (those between the
/// first and the last bucket marked down).
fn hits_while_down(r: &Run) -> (u64, usize) {
    let tl = r.json["timeline"].as_array().expect("timeline");
    let down: Vec<usize> = (0..tl.len())
        .filter(|&i| tl[i]["redis_up"] == Value::Bool(false))
        .collect();
    let (Some(&first), Some(&last)) = (down.first(), down.last()) else {
        panic!("no bucket with Redis down: {tl:?}");
    };
    let inner = &tl[first + 1..last];
    (
        inner.iter().map(|b| b["hits"].as_u64().unwrap_or(0)).sum(),
        inner.len(),
    )
}

#[test]
fn during_a_redis_outage_ttl_and_pubsub_keep_serving_tracking_does_not() {
    crate::common::light_turns();
    let mut seen = Vec::new();
    for mode in ["ttl", "pubsub", "tracking"] {
        let r = run_ok(&[
            "--instances",
            "2",
            "--rps",
            "500",
            "--keys",
            "200",
            "--duration",
            "7s",
            "--warmup",
            "1s",
            "--ttl",
            "20s",
            "--kill-redis-at",
            "2s",
            "--redis-down-for",
            "3s",
            "--l1",
            "1000",
            "--l1-invalidate",
            mode,
        ]);
        let (hits, buckets) = hits_while_down(&r);
        println!(
            "{mode:>8}: hits in the {buckets} buckets Redis was down for {hits}; l1 {}",
            r.json["l1"]
        );
        assert!(buckets >= 1, "{mode}: a whole bucket down");
        seen.push((mode, hits, r.u("/l1/flushes")));
    }
    for (mode, hits, flushes) in seen {
        if mode == "tracking" {
            assert_eq!(hits, 0, "tracking: flushed, nothing served while down");
            assert!(flushes >= 2, "one flush per instance: {flushes}");
        } else {
            assert!(hits > 0, "{mode}: the tier keeps serving what it holds");
            assert_eq!(flushes, 0, "{mode}");
        }
    }
}

#[test]
fn the_tiers_settings_are_checked() {
    for (args, says) in [
        (vec!["--l1-ttl", "1s"], "add --l1 N"),
        (vec!["--l1-invalidate", "pubsub"], "add --l1 N"),
        (vec!["--l1", "0"], "--l1"),
        (
            vec!["--l1", "100", "--strategy", "no-cache"],
            "--strategy no-cache",
        ),
        (vec!["--l1", "100", "--l1-ttl", "0s"], "--l1-ttl"),
    ] {
        let out = stampede()
            .arg("run")
            .args(&args)
            .output()
            .expect("running stampede");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
