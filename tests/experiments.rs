//! Experiments that can be trusted, on real servers: the steady-state start (read back from
//! Redis with PTTL), a default run that shows its strategy at work with no diagnosis, each
//! diagnosis when its cause is there, and repeated trials with intervals, ties and the Pareto
//! front. The statistics themselves are unit-tested against known values in src/stats.rs.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// The id → PTTL (ms) of every cached item of a running stampede in this Redis.
async fn cached(url: &str) -> Vec<(u64, i64)> {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("stampede:*")
        .query_async(&mut c)
        .await
        .unwrap();
    let mut v = Vec::new();
    for k in keys {
        // An entry's key is `stampede:<run>:{<id>}` (its id is its Redis Cluster hash tag).
        let Some(id) = k
            .rsplit(':')
            .next()
            .and_then(|s| s.strip_prefix('{')?.strip_suffix('}')?.parse::<u64>().ok())
        else {
            continue;
        };
        if k.contains(":lock:") {
            continue;
        }
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&k)
            .query_async(&mut c)
            .await
            .unwrap();
        v.push((id, ttl));
    }
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn the_steady_start_holds_what_the_rates_and_ttl_imply() {
    let Servers { redis, pg: pgs } = Servers::start(None).await;
    // 1 req/s against a 1 h TTL: the traffic changes a handful of keys while the test reads
    // the rest, and with 10 000 keys (Zipf 1.0) the expected presence T·λ/(T·λ+1) runs from
    // ~1 at the top through ~0.5 near rank 370 to ~0.1 near rank 3500.
    let (keys, ttl_ms, rps) = (10_000u64, 3_600_000f64, 1.0f64);
    let mut child = stampede()
        .args([
            "run",
            "--rps",
            "1",
            "--duration",
            "30s",
            "--ttl",
            "1h",
            "--keys",
            "10000",
        ])
        .args([
            "--start",
            "steady",
            "--redis-url",
            &redis.url(),
            "--pg-url",
            &pgs.url(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            // SAFETY: signalling the child this test started; it cleans up on SIGINT.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stderr = child.stderr.take().unwrap();
    let child = Stop(child);
    let line = spawn_blocking(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.starts_with("start steady"))
    })
    .await
    .unwrap()
    .expect("the run reports its start");
    let found = cached(&redis.url()).await;
    drop(child);
    assert!(line.contains("keys cached"), "{line}");

    let norm: f64 = (1..=keys).map(|k| 1.0 / k as f64).sum();
    let expected = |k: u64| {
        let tl = ttl_ms / 1000.0 * rps / (k as f64 * norm);
        tl / (tl + 1.0)
    };
    let present: std::collections::HashMap<u64, i64> = found.into_iter().collect();
    for (lo, hi) in [(1u64, 10u64), (300, 450), (3000, 4500)] {
        let n = (hi - lo + 1) as f64;
        let want: f64 = (lo..=hi).map(expected).sum::<f64>() / n;
        let got = (lo..=hi).filter(|k| present.contains_key(k)).count() as f64 / n;
        // Three standard errors of a share over the band, at least 2 points.
        let tol = (3.0 * (want * (1.0 - want) / n).sqrt()).max(0.02);
        assert!(
            (got - want).abs() <= tol,
            "ranks {lo}..={hi}: {got:.3} present, {want:.3} expected (±{tol:.3})"
        );
    }
    // Remaining TTLs are spread uniformly over (0, TTL]: mean near half, a quarter below TTL/4.
    let left: Vec<f64> = present.values().map(|&t| t as f64 / ttl_ms).collect();
    assert!(left.len() > 1000, "{} keys present", left.len());
    assert!(left.iter().all(|&x| x > 0.0 && x <= 1.0));
    let mean = left.iter().sum::<f64>() / left.len() as f64;
    let low = left.iter().filter(|&&x| x < 0.25).count() as f64 / left.len() as f64;
    assert!(
        (mean - 0.5).abs() < 0.05,
        "mean remaining {mean:.3} of the TTL"
    );
    assert!(
        (low - 0.25).abs() < 0.05,
        "{low:.3} below a quarter of the TTL"
    );
}

#[test]
fn the_default_run_shows_its_strategy_at_work_from_its_first_second() {
    // The defaults (10k req/s, 10 s, TTL 3 s, 10 ms loads, 2 instances, steady start), shorter:
    // 4 s, past the TTL, so the last whole second is one in which keys loaded in the run
    // expire again.
    let runs: Vec<(&str, Run)> = ["cache-aside", "mutex", "single-flight", "xfetch", "swr"]
        .into_iter()
        .map(|s| (s, run_ok_shared(&["--strategy", s, "--duration", "4s"])))
        .collect();
    for (s, r) in &runs {
        let j = &r.json;
        assert_eq!(r.u("/requests/shed"), 0, "{s}: {}", j["requests"]);
        assert_eq!(r.u("/requests/completed"), r.u("/requests/scheduled"));
        assert!(r.u("/redis/expiries") > 0, "{s}: {}", j["redis"]);
        assert!(r.f("/db/pool_busy") < 0.6, "{s}: {}", j["db"]);
        assert_eq!(
            r.u("/db/calls"),
            r.u("/db/calls_server"),
            "{s}: {}",
            j["db"]
        );
        // Steady from the start: the first second's hit rate is the last second's, give or take.
        let tl = j["timeline"].as_array().unwrap();
        let rate = |bs: &[Value]| {
            let (h, s, n) = bs.iter().fold((0, 0, 0), |a, b| {
                (
                    a.0 + b["hits"].as_u64().unwrap(),
                    a.1 + b["stale"].as_u64().unwrap(),
                    a.2 + b["requests"].as_u64().unwrap(),
                )
            });
            (h + s) as f64 / n.max(1) as f64
        };
        let (first, last) = (rate(&tl[..10]), rate(&tl[tl.len() - 11..tl.len() - 1]));
        eprintln!(
            "{s}: hit rate first second {first:.3}, last {last:.3}; peak herd {}, expiries {}",
            r.u("/db/peak_key_herd"),
            r.u("/redis/expiries")
        );
        assert!(
            (first - last).abs() < 0.05,
            "{s}: first second {first:.3}, last {last:.3}"
        );
        // A machine busy with other work may add a generator diagnosis; nothing else may show.
        let codes: Vec<&str> = j["diagnoses"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["code"].as_str())
            .filter(|c| *c != "generator-behind")
            .collect();
        assert!(codes.is_empty(), "{s}: {}", j["diagnoses"]);
    }
    let get = |s: &str| &runs.iter().find(|(n, _)| *n == s).unwrap().1;
    assert!(get("cache-aside").u("/db/peak_key_herd") >= 5);
    assert_eq!(get("mutex").u("/db/peak_key_herd"), 1);
    assert!(get("single-flight").u("/db/peak_key_herd") <= 2);
    assert!(get("mutex").u("/lock/contended") > 0);
    assert!(get("single-flight").u("/outcomes/waited") > 0);
    assert!(get("xfetch").u("/db/early_recomputes") > 0);
    assert!(get("swr").u("/outcomes/stale") > 0);
}

fn codes(r: &Run) -> Vec<String> {
    r.json["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["code"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn each_diagnosis_appears_when_its_cause_is_there() {
    // Light: 0.49 and 0.46 busy cores in a CI run, and a slower neighbour only adds to the
    // causes it asserts (shedding, a saturated database).
    crate::common::light_turns();
    // The old default: a cold start, a TTL longer than the run, a small pool: no key expires,
    // xfetch never acts, and the cold start sheds at the pool.
    let r = run_ok_shared(&[
        "--strategy",
        "xfetch",
        "--start",
        "cold",
        "--ttl",
        "30s",
        "--duration",
        "4s",
        "--db-cost",
        "20ms",
        "--instances",
        "1",
        "--max-inflight",
        "256",
    ]);
    let c = codes(&r);
    for want in ["no-expiry", "mechanism-idle", "shed", "db-saturated"] {
        assert!(
            c.iter().any(|x| x == want),
            "{want} missing: {}",
            r.json["diagnoses"]
        );
    }
    let shed = r.json["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "shed")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        shed.contains("loads/s") && shed.contains("cold start"),
        "the bottleneck is named: {shed}"
    );
    // The in-flight cap alone: a tiny cap, a fast database.
    let r = run_ok_shared(&[
        "--rps",
        "2000",
        "--duration",
        "2s",
        "--max-inflight",
        "1",
        "--db-cost",
        "5ms",
        "--start",
        "cold",
        "--keys",
        "100000",
        "--instances",
        "1",
    ]);
    let d = r.json["diagnoses"].to_string();
    assert!(codes(&r).iter().any(|c| c == "shed"), "{d}");
    // Diagnoses never change the exit code: run_ok asserted exit 0 for both.
}

#[test]
fn repeated_trials_give_intervals_ties_and_a_pareto_front() {
    crate::common::light_turns();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let _turn = cpu_turn();
    let o = stampede()
        .args([
            "compare",
            "--strategies",
            "cache-aside,mutex",
            "--repeat",
            "5",
            "--rps",
            "2000",
            "--duration",
            "2s",
            "--keys",
            "2000",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for s in ["cache-aside", "mutex"] {
        for t in 1..=5 {
            let p = out.join(s).join(format!("trial-{t}.json"));
            let j = read_json(&p).unwrap_or_else(|| panic!("{} missing", p.display()));
            // Trial k draws with seed + k - 1.
            assert_eq!(j["scenario"]["seed"], 42 + t - 1);
        }
    }
    let summary = read_json(&out.join("summary.json")).unwrap();
    let rows = summary["ranking"].as_array().unwrap();
    for row in rows {
        assert_eq!(row["trials"], 5);
        assert_eq!(row["samples"]["db_calls"].as_array().unwrap().len(), 5);
        // At 5 trials the interval is (min, max), named by its coverage, 93.75%.
        let ci = &row["ci"];
        assert_eq!(ci["coverage"], 0.9375, "{row}");
        assert_eq!(ci["ranks"], serde_json::json!([1, 5]), "{row}");
        let samples: Vec<f64> = row["samples"]["db_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let [lo, hi] = [0, 1].map(|i| ci["bounds"]["db_calls"][i].as_f64().unwrap());
        assert_eq!(lo, samples.iter().copied().fold(f64::INFINITY, f64::min));
        assert_eq!(
            hi,
            samples.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        );
        let med = row["figures"]["db_calls"].as_f64().unwrap();
        assert!(lo <= med && med <= hi, "{row}");
    }
    assert!(rows[0]["same_as_next"].is_boolean(), "{}", rows[0]);
    assert!(rows[1]["same_as_next"].is_null());
    // Five objectives without writes: complete separation of 5 trials can decide.
    assert_eq!(summary["objectives"].as_array().map(Vec::len), Some(5));
    assert_eq!(summary["min_trials_to_decide"], 5);
    let front = summary["pareto"].as_array().unwrap();
    assert!(!front.is_empty());
    for row in rows {
        let in_front = front.contains(&row["strategy"]);
        assert_eq!(in_front, row["dominated_by"].is_null(), "{row}");
        // Undecided strategies stay on the front, naming who looks better and what would
        // decide it (more trials than ran, or null when out of reach).
        if row["undecided"] == true {
            assert!(in_front, "{row}");
            assert!(row["undecided_vs"].is_string(), "{row}");
            assert!(
                row["trials_to_decide"].is_null() || row["trials_to_decide"].as_u64() > Some(5),
                "{row}"
            );
        } else {
            assert!(row["undecided_vs"].is_null(), "{row}");
        }
        // Of two strategies, the one that dominates is on the front.
        if let Some(by) = row["dominated_by"].as_str() {
            assert_ne!(by, row["strategy"].as_str().unwrap());
            assert!(front.iter().any(|f| f == by), "{summary}");
        }
    }
    // check reads the trials: the comparison against itself shows no regression.
    let o = stampede()
        .args(["check"])
        .arg(&out)
        .arg("--baseline")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("5 vs 5 trials"), "{text}");
    assert!(text.contains("no change"), "{text}");
}
