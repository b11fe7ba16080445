//! Redis's memory, end to end against real servers: a limit the workload outgrows refuses
//! writes under noeviction (every request still answered, the mutex's lock unavailable as in
//! an outage) and evicts under allkeys-lru (fewer hits than without a limit); an external
//! Redis's configuration is reported and never changed, and the limit's flags are refused
//! there; `--value-size-dist` seeds each item with its own size; a sweep along maxmemory
//! gives one cell per size.

use crate::common;

use common::*;
use serde_json::Value;

/// A workload that outgrows 3 MB: 20 000 keys of 1000 bytes, a TTL longer than the run so
/// nothing but the limit removes an entry, a cold start so every entry is written by the
/// traffic.
const OUTGROWN: &[&str] = &[
    "--keys",
    "20000",
    "--value-size",
    "1000",
    "--ttl",
    "1h",
    "--start",
    "cold",
    "--rps",
    "2000",
    "--duration",
    "3s",
    "--db-cost",
    "1ms",
];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    OUTGROWN.iter().chain(extra).copied().collect()
}

/// Every scheduled request was answered with a value: none failed, none was shed.
fn every_request_answered(r: &Run) {
    r.assert_counts_add_up();
    assert_eq!(r.u("/requests/errors"), 0, "{}", r.stderr());
    assert_eq!(r.u("/requests/shed"), 0);
    assert_eq!(r.u("/requests/completed"), r.u("/requests/scheduled"));
}

/// The heartbeat kept going under the limit (renewed by PEXPIRE when its SET is refused).
fn heartbeat_kept(r: &Run) {
    assert!(
        !r.stderr()
            .contains("could not renew this run's heartbeat in Redis"),
        "{}",
        r.stderr()
    );
    assert_eq!(r.u("/servers/heartbeat/failed_renewals"), 0, "{}", r.json);
}

#[test]
fn noeviction_at_a_limit_the_workload_exceeds_refuses_writes_and_answers_every_request() {
    let r = run_ok(&with(&["--maxmemory", "3mb"]));
    every_request_answered(&r);
    heartbeat_kept(&r);
    let oom = r.u("/redis/oom_errors");
    assert!(oom > 0, "{}", r.json["redis"]);
    // A refused write-back is a failed Redis command, and the request was served all the same.
    assert!(r.u("/redis/errors") >= oom);
    assert_eq!(r.u("/redis/evicted_keys"), 0);
    let m = &r.json["redis"]["memory"];
    assert_eq!(m["maxmemory"], 3 << 20);
    assert_eq!(m["policy"], "noeviction");
    assert_eq!(m["set_by_tool"], true);
    assert!(
        m["used_memory_peak"].as_u64().unwrap() <= (3 << 20) + (256 << 10),
        "{m}"
    );
    assert!(m["bytes_per_key_sampled"].as_f64().unwrap() > 1000.0, "{m}");
    assert!(m["entries_at_end"].as_u64().unwrap() < 20_000, "{m}");
}

#[test]
fn mutex_under_noeviction_oom_takes_the_lock_as_unavailable_and_answers_every_request() {
    // 512 KB: under Redis's own used_memory before any entry (1.1 MiB for 7.0), so every
    // SET is refused from the first request, the locks' SET NX included. A limit the cache
    // grows into is no test of the lock: once the cache stops just under it, a 1 KB
    // write-back (its query buffer counted) is refused while a lock's 20-byte SET NX still
    // fits. A CI run at 2 MB took all 2 660 of its locks that way (0 unavailable) while its
    // write-backs were refused; 3 MB did the same earlier.
    let r = run_ok(&with(&["--maxmemory", "512kb", "--strategy", "mutex"]));
    every_request_answered(&r);
    heartbeat_kept(&r);
    assert!(r.u("/redis/oom_errors") > 0);
    // The lock's SET NX is refused too: as during an outage, the request loads itself.
    assert!(
        r.u("/lock/unavailable") > 0,
        "{} {}",
        r.json["lock"],
        r.json["redis"]
    );
}

#[test]
fn allkeys_lru_at_the_same_limit_evicts_and_hits_less_than_without_a_limit() {
    crate::common::light_turns();
    let lru = run_ok(&with(&[
        "--maxmemory",
        "3mb",
        "--maxmemory-policy",
        "allkeys-lru",
    ]));
    every_request_answered(&lru);
    assert!(lru.u("/redis/evicted_keys") > 0, "{}", lru.json["redis"]);
    assert_eq!(lru.u("/redis/oom_errors"), 0);
    assert_eq!(lru.json["redis"]["memory"]["policy"], "allkeys-lru");
    let free = run_ok(OUTGROWN);
    every_request_answered(&free);
    assert_eq!(free.u("/redis/evicted_keys"), 0);
    assert_eq!(free.json["redis"]["memory"]["maxmemory"], 0);
    let (h_lru, h_free) = (lru.f("/hit_rate"), free.f("/hit_rate"));
    assert!(h_lru < h_free, "allkeys-lru {h_lru} vs unlimited {h_free}");
}

/// CONFIG GET maxmemory* of the server at `url`, as name/value pairs.
async fn memory_config(url: &str) -> Vec<String> {
    let mut c = redis_conn(url).await;
    redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory*")
        .query_async(&mut c)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_redis_is_reported_never_reconfigured_and_the_flags_are_refused_there() {
    let own = OwnRedis::start(
        &["--maxmemory", "50mb", "--maxmemory-policy", "allkeys-lfu"],
        false,
    );
    let url = format!("redis://127.0.0.1:{}/", own.port);
    let before = memory_config(&url).await;
    for flags in [
        &["--maxmemory", "8mb"][..],
        &["--maxmemory-policy", "allkeys-lru"][..],
        &["--maxmemory-samples", "10"][..],
    ] {
        let o = stampede()
            .arg("run")
            .args(["--redis-url", &url])
            .args(flags)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains("never changes its configuration"), "{err}");
    }
    assert_eq!(memory_config(&url).await, before);
    // Without the flags the run goes, and reports the server's own limit.
    let u = url.clone();
    let r = spawn_blocking(move || {
        run_ok(&[
            "--redis-url",
            &u,
            "--keys",
            "200",
            "--rps",
            "200",
            "--duration",
            "1s",
        ])
    })
    .await
    .unwrap();
    let m = &r.json["redis"]["memory"];
    assert_eq!(m["maxmemory"], 50 << 20, "{m}");
    assert_eq!(m["policy"], "allkeys-lfu");
    assert_eq!(m["set_by_tool"], false);
    assert_eq!(memory_config(&url).await, before);
}

#[tokio::test(flavor = "multi_thread")]
async fn value_size_dist_seeds_each_item_with_a_size_in_its_range() {
    let servers = Servers::start(None).await;
    let (ru, pu) = servers.urls();
    let (r2, p2) = (ru.clone(), pu.clone());
    let o = spawn_blocking(move || {
        let _turn = cpu_turn();
        stampede()
            .arg("prepare")
            .args(["--redis-url", &r2, "--pg-url", &p2])
            .args([
                "--keys",
                "3000",
                "--value-size-dist",
                "100..3k",
                "--seed",
                "7",
            ])
            .args(["--shards", "1", "--run-id", "vsd", "--start-delay", "2s"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let admin = pg(&pu).await;
    let row = admin
        .query_one(
            "SELECT count(*), min(length(payload)), max(length(payload)), count(DISTINCT length(payload)) FROM stampede_vsd.items",
            &[],
        )
        .await
        .unwrap();
    let (n, min, max, distinct): (i64, i32, i32, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(n, 3000);
    assert!(
        (100..=3000).contains(&min) && (100..=3000).contains(&max),
        "{min}..{max}"
    );
    assert!(
        distinct > 500,
        "each item its own size: {distinct} distinct"
    );
    // Payloads still differ item by item (nothing compresses away).
    let same: i64 = admin
        .query_one(
            "SELECT count(*) - count(DISTINCT payload) FROM stampede_vsd.items",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(same, 0);
    // The run's leftovers go with the servers, dropped at the end of the test.
    drop(servers);
}

#[test]
fn a_sweep_along_maxmemory_gives_one_cell_per_size_with_its_own_hit_rate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let o = {
        let _turn = cpu_turn();
        stampede()
            .args(["sweep", "--strategies", "cache-aside"])
            .args(["--axis", "maxmemory=0,2mb,16mb"])
            .args(["--maxmemory-policy", "allkeys-lru"])
            .args(OUTGROWN)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc = read_json(&out.join("sweep.json")).expect("sweep.json");
    let axis = &doc["axes"][0];
    assert_eq!(axis["name"], "maxmemory");
    assert_eq!(axis["unit"], "bytes");
    assert_eq!(axis["values"], serde_json::json!([0, 2 << 20, 16 << 20]));
    let cells = doc["cells"].as_array().expect("cells[]");
    assert_eq!(cells.len(), 3, "{doc}");
    let hit = |c: &Value| c["figures"]["hit_rate"].as_f64().expect("hit rate");
    let lru = |c: &Value| {
        c["figures"]["lru_hit_rate"]
            .as_f64()
            .expect("exact LRU hit rate")
    };
    let at = |m: u64| {
        cells
            .iter()
            .find(|c| c["params"]["maxmemory"] == m)
            .expect("a cell at each size")
    };
    let (unlimited, small, large) = (at(0), at(2 << 20), at(16 << 20));
    assert!(hit(small) < hit(large), "{} vs {}", hit(small), hit(large));
    // Without a limit nothing is evicted (the TTL outlives the run): Redis's hit rate is an
    // infinite LRU's on the same measured requests, but for a cold key's concurrent misses.
    assert!(
        (hit(unlimited) - lru(unlimited)).abs() < 0.01,
        "unlimited: measured {} vs exact LRU {}",
        hit(unlimited),
        lru(unlimited)
    );
    // Under a limit the exact LRU holds as many entries as the budget at the measured bytes
    // per key; Redis's sampled LRU lands near it.
    assert!(small["figures"]["lru_objects"].as_f64().expect("entries") > 0.0);
    assert!((hit(small) - lru(small)).abs() < 0.1, "{small}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("| 2mb |")
            && summary.contains("hit rate")
            && summary.contains("exact LRU"),
        "{summary}"
    );
    // The report draws the measured points over the exact LRU curve, in bytes, with the gap.
    let curve = doc["lru_curve"].as_array().expect("lru_curve[]");
    assert!(curve.len() > 10, "{doc}");
    let page = dir.path().join("sweep.html");
    let o = stampede()
        .arg("report")
        .arg(&out)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&page).unwrap();
    assert!(
        page.contains("<h2>Hit rate against maxmemory</h2>"),
        "{page}"
    );
    let row = format!(
        "<td>allkeys-lru</td><td>2mb</td><td>{:.0}</td><td>{:.1}%</td><td>{:.1}%</td>",
        small["figures"]["lru_objects"].as_f64().unwrap(),
        hit(small) * 100.0,
        lru(small) * 100.0
    );
    assert!(page.contains(&row), "{row} not in {page}");
    // Two budgets, each measured and computed: four markers.
    assert_eq!(page.matches("<circle").count(), 4, "{page}");
    for c in cells {
        let r = read_json(&out.join(c["result"].as_str().unwrap())).unwrap();
        assert_servers_gone(&r);
    }
}
