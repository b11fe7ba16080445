//! Live metrics scraped by a real Prometheus (Debian's `prometheus`, installed by
//! `scripts/install-deps --for-tests`): two shards serve /metrics on loopback, Prometheus
//! scrapes both, and at the end PromQL's `sum(stampede_db_calls_total)` equals the merged
//! result's DB calls.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// One instant PromQL query's scalar value (the first sample), None when it has none yet.
fn promql(port: u16, query: &str) -> Option<f64> {
    let enc: String = query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = http_get(port, &format!("/api/v1/query?query={enc}"))?;
    let v: Value = serde_json::from_str(&body).ok()?;
    v.pointer("/data/result/0/value/1")?.as_str()?.parse().ok()
}

fn prometheus(dir: &Path, port: u16, targets: &[u16]) -> Child {
    let config = dir.join("prometheus.yml");
    let targets: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: stampede\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )
    .unwrap();
    Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus must be installed: scripts/install-deps --for-tests")
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_scrapes_two_shards_and_sums_their_db_calls() {
    // Waiting: 0.32 busy cores in a CI run (the shards wait out their start delay and
    // linger), and it asserts sums, with bounds of a minute on the waits.
    crate::common::waiting_turns();
    let servers = Servers::start(Some(60)).await;
    let (redis, pg) = (&servers.redis, &servers.pg);
    let (ru, pu) = (redis.url(), pg.url());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let merged = spawn_blocking(move || {
        let _turn = cpu_turn();
        let metrics = [free_port(), free_port()];
        let prom_port = free_port();
        let mut procs = Children(vec![prometheus(&d, prom_port, &metrics)]);
        let t = Instant::now();
        while http_get(prom_port, "/-/ready").is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "prometheus never got ready"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        for (i, port) in metrics.iter().enumerate() {
            procs.0.push(
                stampede()
                    .args(["run", "--shard", &format!("{i}/2"), "--run-id", "prom"])
                    .args([
                        "--rps",
                        "1000",
                        "--duration",
                        "3s",
                        "--keys",
                        "500",
                        "--ttl",
                        "1s",
                    ])
                    .args(["--redis-url", &ru, "--pg-url", &pu, "--quiet"])
                    .args(["--start-delay", "3s", "--metrics-linger", "6s"])
                    .arg("--metrics-listen")
                    .arg(format!("127.0.0.1:{port}"))
                    .arg("--out")
                    .arg(d.join(format!("shard-{i}.json")))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
        // The results are written before the final values are served for --metrics-linger:
        // once both exist, two scrapes later Prometheus holds the final values.
        let files = [d.join("shard-0.json"), d.join("shard-1.json")];
        let t = Instant::now();
        while !files.iter().all(|f| read_json(f).is_some()) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the shards never finished"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = d.join("merged.json");
        let o = stampede()
            .arg("merge")
            .args(&files)
            .arg("--out")
            .arg(&out)
            .arg("--quiet")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let merged = read_json(&out).unwrap();
        let calls = merged["db"]["calls"].as_u64().unwrap();
        // Poll until both shards' final values are in (a scrape every 500 ms). The DB calls
        // alone can reach their final sum one bucket early (no load in the last bucket), so
        // wait for every figure: the final totals replace the bucket sums all at once.
        let completed = merged["requests"]["completed"].as_f64();
        let t = Instant::now();
        let (mut seen, mut requests, mut histogram);
        loop {
            seen = promql(prom_port, "sum(stampede_db_calls_total)");
            requests = promql(prom_port, "sum(stampede_requests_total)");
            histogram = promql(prom_port, "sum(stampede_request_duration_seconds_count)");
            let all_in =
                seen == Some(calls as f64) && requests == completed && histogram == completed;
            if all_in || t.elapsed() > Duration::from_secs(4) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let shards = promql(prom_port, "count(stampede_db_calls_total)");
        (merged, calls, seen, requests, histogram, shards)
    })
    .await
    .unwrap();
    let (m, calls, seen, requests, histogram, shards) = merged;
    assert!(calls > 0);
    assert_eq!(shards, Some(2.0), "one series per shard");
    assert_eq!(
        seen,
        Some(calls as f64),
        "PromQL sum(stampede_db_calls_total) must equal the merged DB calls"
    );
    let completed = m["requests"]["completed"].as_u64().unwrap() as f64;
    assert_eq!(requests, Some(completed));
    assert_eq!(histogram, Some(completed));
}
