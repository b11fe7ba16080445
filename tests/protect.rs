//! Protecting the database on real servers: `--db-limit` holds the statements Postgres runs at
//! once at the limit (read from pg_stat_activity by the test, not only from the tool's own
//! count), refused loads are counted as `rejected`, never as errors; the breaker opens on
//! failing loads and closes once the database recovers, with its transitions in the JSON and
//! on the timeline.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use common::*;
use serde_json::Value;

async fn pg(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connecting to the test's Postgres");
    tokio::spawn(conn);
    client
}

/// Loader statements running right now, as the server sees them (the sampler's own query,
/// which names the marker too, left out).
const ACTIVE_LOADS: &str = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
     AND query LIKE '%stampede_load_version%' AND pid <> pg_backend_pid()";

/// Samples [`ACTIVE_LOADS`] every 2 ms until stopped; the most seen at once.
struct Sampler {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<u64>,
}

impl Sampler {
    async fn start(url: &str) -> Sampler {
        let client = pg(url).await;
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicI64::new(0));
        let (s, m) = (stop.clone(), max.clone());
        let task = tokio::spawn(async move {
            let mut samples = 0;
            while !s.load(Ordering::Relaxed) {
                if let Ok(row) = client.query_one(ACTIVE_LOADS, &[]).await {
                    m.fetch_max(row.get::<_, i64>(0), Ordering::Relaxed);
                    samples += 1;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            samples
        });
        Sampler { stop, max, task }
    }

    /// Stop; the most loader statements seen running at once, and how many samples were taken.
    async fn finish(self) -> (i64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.task.await.expect("sampler");
        (self.max.load(Ordering::Relaxed), samples)
    }
}

/// Every completed request has exactly one outcome, `rejected` included, and the timeline's
/// buckets add up to the totals.
fn assert_outcomes_add_up(r: &Run) {
    let outcomes: u64 = [
        "hit", "miss", "stale", "waited", "fallback", "error", "rejected",
    ]
    .iter()
    .map(|o| r.u(&format!("/outcomes/{o}")))
    .sum();
    assert_eq!(
        outcomes,
        r.u("/requests/completed"),
        "{}",
        r.json["outcomes"]
    );
    assert_eq!(
        r.u("/requests/completed") + r.u("/requests/shed"),
        r.u("/requests/scheduled")
    );
    let in_buckets: u64 = timeline(r)
        .iter()
        .map(|b| b["rejected"].as_u64().expect("bucket.rejected"))
        .sum();
    assert_eq!(in_buckets, r.u("/outcomes/rejected"));
}

fn timeline(r: &Run) -> Vec<Value> {
    r.json["timeline"].as_array().cloned().unwrap_or_default()
}

/// A cold start at 4000 req/s over 5000 keys with 20 ms loads: about 80 loads want to run at
/// once, on 2 instances × 16 connections.
const HERD: [&str; 14] = [
    "--rps",
    "4000",
    "--duration",
    "2s",
    "--keys",
    "5000",
    "--start",
    "cold",
    "--db-cost",
    "20ms",
    "--instances",
    "2",
    "--db-pool",
    "16",
];

#[tokio::test(flavor = "multi_thread")]
async fn db_limit_holds_the_server_side_concurrency_at_the_limit_and_rejects_the_rest() {
    let Servers { redis, pg: pgs } = Servers::start(None).await;
    let (ru, pu) = (redis.url(), pgs.url());
    let external = move |extra: &[&str]| {
        let mut args: Vec<String> = ["--redis-url", &ru, "--pg-url", &pu]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(HERD.iter().map(|s| s.to_string()));
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };

    // Without the limit the herd fills the pools: the sampler sees more than the limit allows.
    let sampler = Sampler::start(&pgs.url()).await;
    let args = external(&[]);
    let free = spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        run_ok(&a)
    })
    .await
    .unwrap();
    let (free_max, samples) = sampler.finish().await;
    assert!(samples > 50, "the sampler ran {samples} times");
    assert!(
        free_max > 6,
        "without --db-limit the herd runs more than 6 statements at once (saw {free_max})"
    );
    assert_eq!(free.u("/outcomes/rejected"), 0);

    let sampler = Sampler::start(&pgs.url()).await;
    let args = external(&["--db-limit", "3", "--threshold", "rejected_rate_max=100%"]);
    let r = spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        run_ok(&a)
    })
    .await
    .unwrap();
    let (max, samples) = sampler.finish().await;
    eprintln!("loader statements running at once: {free_max} without the limit, {max} with it");
    assert!(samples > 50, "the sampler ran {samples} times");
    // 2 instances × 3: what Postgres ran at once, as it says itself.
    assert!(max <= 6, "pg_stat_activity saw {max} loads at once");
    assert!(
        max >= 3,
        "the limited herd still kept the database busy (saw {max})"
    );
    assert!(r.u("/db/peak_concurrent") <= 6, "{}", r.json["db"]);
    assert!(
        r.u("/db/peak_in_flight") <= 6,
        "no load queues past the limit"
    );

    // The loads over the limit were refused and their requests rejected, not failed.
    assert_outcomes_add_up(&r);
    let rejected = r.u("/outcomes/rejected");
    assert!(rejected > 100, "{}", r.json["outcomes"]);
    assert_eq!(r.u("/requests/errors"), 0, "{}", r.json["requests"]);
    assert!(r.u("/db/limit_refusals") >= rejected, "{}", r.json["db"]);
    assert_eq!(r.u("/db/breaker_refusals"), 0);
    assert!(r.u("/db/calls") < free.u("/db/calls"));
    // Refused loads never reached the server: its count matches the statements sent.
    assert_eq!(
        Some(r.u("/db/calls")),
        r.json["db"]["calls_server"].as_u64()
    );
    let t = &r.json["thresholds"][0];
    assert_eq!(t["name"], "rejected_rate_max");
    let rate = t["measured"].as_f64().unwrap();
    let expected = rejected as f64 / r.u("/requests/completed") as f64;
    assert!((rate - expected).abs() < 1e-9, "{t}");
    assert_eq!(r.json["scenario"]["db_limit"], 3);
}

/// Waits until the run's loads have started (the server completed some of them: its setup,
/// which prepares the loader on every connection, is over), then holds an exclusive lock on
/// its items table for `hold`: every load blocks on it until `--db-timeout` cancels it.
async fn block_loads_for(url: &str, hold: Duration) -> Result<(), String> {
    let mut admin = pg(url).await;
    // Generous: the run may wait for another test's run to finish first (cpu_turn).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let schema = loop {
        let row = admin
            .query_opt(
                "SELECT (SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'stampede_%' LIMIT 1) \
                 FROM pg_stat_statements WHERE query LIKE '%stampede_load_version%' \
                 GROUP BY 1 HAVING sum(calls) >= 20",
                &[],
            )
            .await
            .map_err(|e| format!("looking for the run's loads: {e}"))?;
        if let Some(name) = row.and_then(|r| r.get::<_, Option<String>>(0)) {
            break name;
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the run's loads never started".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let tx = admin
        .transaction()
        .await
        .map_err(|e| format!("beginning: {e}"))?;
    tx.batch_execute(&format!(
        "LOCK TABLE {schema}.items IN ACCESS EXCLUSIVE MODE"
    ))
    .await
    .map_err(|e| format!("locking {schema}.items: {e}"))?;
    tokio::time::sleep(hold).await;
    tx.commit().await.map_err(|e| format!("committing: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_breaker_opens_on_failing_loads_and_closes_when_the_database_recovers() {
    let Servers { redis, pg: pgs } = Servers::start(None).await;
    let (ru, pu) = (redis.url(), pgs.url());
    let run = spawn_blocking(move || {
        run_ok(&[
            "--redis-url",
            &ru,
            "--pg-url",
            &pu,
            "--rps",
            "2000",
            "--duration",
            "5s",
            "--keys",
            "20000",
            "--start",
            "cold",
            "--db-cost",
            "2ms",
            "--db-timeout",
            "100ms",
            "--breaker",
            "--breaker-min-loads",
            "10",
            "--breaker-cooldown",
            "300ms",
            "--breaker-probes",
            "2",
        ])
    });
    // The database stops answering for 1.5 s, shortly after the traffic starts.
    block_loads_for(&pgs.url(), Duration::from_millis(1500))
        .await
        .expect("blocking the loads");
    let r = run.await.unwrap();
    assert_outcomes_add_up(&r);

    let events = r.json["breaker"].as_array().cloned().unwrap_or_default();
    assert!(!events.is_empty(), "no breaker event: {}", r.stdout());
    for e in &events {
        for k in ["at_ms", "instance", "from", "to", "reason"] {
            assert!(!e[k].is_null(), "{k} missing in {e}");
        }
    }
    let mut at = i64::MIN;
    for e in &events {
        let t = e["at_ms"].as_i64().unwrap();
        assert!(t >= at, "events in order: {events:?}");
        at = t;
    }
    for i in 0..2u64 {
        let mine: Vec<&Value> = events.iter().filter(|e| e["instance"] == i).collect();
        assert!(!mine.is_empty(), "instance {i} never opened: {events:?}");
        let first = mine[0];
        assert_eq!(
            (first["from"].as_str(), first["to"].as_str()),
            (Some("closed"), Some("open"))
        );
        let reason = first["reason"].as_str().unwrap();
        assert!(reason.contains("loads failed"), "{reason}");
        // Open → half-open → … → closed once the lock is gone, and closed at the end.
        assert!(
            mine.iter()
                .any(|e| e["from"] == "open" && e["to"] == "half-open"),
            "{mine:?}"
        );
        let last = mine.last().unwrap();
        assert_eq!(
            (last["from"].as_str(), last["to"].as_str()),
            (Some("half-open"), Some("closed")),
            "instance {i} did not close again: {mine:?}"
        );
        assert!(last["reason"].as_str().unwrap().contains("probe"), "{last}");
    }

    // While open, loads were refused without reaching Postgres and their requests rejected.
    assert!(r.u("/db/breaker_refusals") > 0, "{}", r.json["db"]);
    assert!(r.u("/outcomes/rejected") > 0, "{}", r.json["outcomes"]);
    assert!(r.u("/db/statement_timeouts") + r.u("/db/pool_timeouts") > 0);

    // Marked on the timeline: open in some buckets, closed again at the end.
    let tl = timeline(&r);
    assert!(tl.iter().any(|b| b["breaker_open"] == true));
    let tail = &tl[tl.len().saturating_sub(5)..];
    assert!(
        tail.iter().all(|b| b["breaker_open"] == false),
        "closed at the end: {tail:?}"
    );
    let text = {
        let o = stampede()
            .args(["report"])
            .arg(r.dir.path().join("r.json"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    eprintln!("{text}");
    assert!(text.contains("breaker   opened"), "{text}");
    assert!(text.contains("closed -> open"), "{text}");
}

#[test]
fn breaker_settings_without_the_breaker_are_refused() {
    let o = stampede()
        .args(["run", "--breaker-latency", "2s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--breaker-latency") && err.contains("add --breaker"),
        "{err}"
    );
    let o = stampede()
        .args(["run", "--db-limit", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn mutex_coordinates_within_each_instance_while_redis_is_down() {
    let r = run_ok(&[
        "--strategy",
        "mutex",
        "--rps",
        "2000",
        "--duration",
        "4s",
        "--keys",
        "200",
        "--start",
        "cold",
        "--warm",
        "200",
        "--ttl",
        "60s",
        "--db-cost",
        "5ms",
        "--redis-timeout",
        "50ms",
        "--kill-redis-at",
        "1s",
        "--redis-down-for",
        "2s",
    ]);
    assert_outcomes_add_up(&r);
    assert!(r.u("/lock/unavailable") > 0, "{}", r.json["lock"]);
    // No lock to be had, yet each instance let one request per key load and the others wait.
    assert!(r.u("/outcomes/waited") > 100, "{}", r.json["outcomes"]);
    let during = r.json["faults"][0]["db_calls_during"].as_u64().unwrap();
    let requests_during: u64 = timeline(&r)
        .iter()
        .filter(|b| b["redis_up"] == false)
        .map(|b| b["requests"].as_u64().unwrap())
        .sum();
    assert!(
        (during as f64) < 0.8 * requests_during as f64,
        "{during} DB calls for {requests_during} requests during the outage"
    );
    assert_eq!(r.u("/requests/errors"), 0);
}
