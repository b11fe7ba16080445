//! `stampede compare` and thresholds, end to end against the managed servers: every file is
//! written, every strategy draws the same keys, and a broken or misspelled threshold decides
//! the exit code.

use crate::common;

use std::path::Path;

use common::{assert_servers_gone, cpu_turn, read_json, stampede};
use serde_json::Value;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(p: &Path) -> Value {
    read_json(p).unwrap_or_else(|| panic!("{} missing or not JSON", p.display()))
}

#[test]
fn broken_threshold_exits_1_and_names_it() {
    crate::common::light_turns();
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    // A cold cache over 50 keys needs at least 50 loads: 10 cannot hold. The p99 limit is
    // generous and must pass, so the failure message is about db_calls_max alone.
    std::fs::write(
        &scenario,
        "rps = 200\nkeys = 50\nduration = \"1s\"\n[thresholds]\ndb_calls_max = 10\np99_ms_max = 60000\n",
    )
    .unwrap();
    let out = dir.path().join("r.json");
    let o = stampede()
        .args(["run", "--quiet", "--scenario"])
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr:\n{err}");
    assert!(
        err.contains("db_calls_max") && err.contains("measured"),
        "{err}"
    );
    assert!(
        !err.contains("p99_ms_max"),
        "a passing threshold reported: {err}"
    );
    let r = json(&out);
    let ts = r["thresholds"]
        .as_array()
        .expect("thresholds[] in the JSON");
    assert_eq!(ts.len(), 2);
    let calls = r["db"]["calls"].as_f64().unwrap();
    let t = ts.iter().find(|t| t["name"] == "db_calls_max").unwrap();
    assert_eq!(t["limit"], 10.0);
    assert_eq!(t["measured"].as_f64(), Some(calls));
    assert_eq!(t["passed"], false);
    let t = ts.iter().find(|t| t["name"] == "p99_ms_max").unwrap();
    assert_eq!(t["passed"], true);
    assert_servers_gone(&r);

    // The command line adds to (and overrides) the file: a loose db_calls_max passes.
    let o = stampede()
        .args([
            "run",
            "--quiet",
            "--threshold",
            "db_calls_max=1000000",
            "--scenario",
        ])
        .arg(&scenario)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn unknown_threshold_exits_2_and_lists_the_valid_ones() {
    let o = stampede()
        .args(["run", "--threshold", "p99_max=5"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("p99_max"), "{err}");
    for valid in [
        "db_calls_max",
        "p99_ms_max",
        "hit_rate_min",
        "stale_ratio_max",
    ] {
        assert!(err.contains(valid), "{valid} not listed: {err}");
    }

    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("typo.toml");
    std::fs::write(
        &scenario,
        "rps = 10\n[thresholds]\nhit_rate_minimum = 0.9\n",
    )
    .unwrap();
    let o = stampede()
        .args(["compare", "--strategies", "all", "--scenario"])
        .arg(&scenario)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("typo.toml")
            && err.contains("hit_rate_minimum")
            && err.contains("hit_rate_min,"),
        "{err}"
    );

    // A limit outside what the metric can be is refused too, naming the threshold.
    let o = stampede()
        .args(["run", "--threshold", "hit_rate_min=120%"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("hit_rate_min"));
}

#[test]
fn compare_writes_every_file_and_runs_every_strategy_on_the_same_keys() {
    crate::common::light_turns();
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let strategies = ["cache-aside", "mutex", "swr"];
    // Open loop: 1000 req/s for 1.5 s schedules exactly 1500 requests, whatever the strategy.
    let o = stampede()
        .args([
            "compare",
            "--strategies",
            &strategies.join(","),
            "--rps",
            "1000",
            "--duration",
            "1500ms",
            "--keys",
            "300",
            "--instances",
            "2",
            "--ttl",
            "500ms",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );

    let results: Vec<Value> = strategies
        .iter()
        .map(|s| json(&out.join(format!("{s}.json"))))
        .collect();
    for (s, r) in strategies.iter().zip(&results) {
        assert_eq!(r["strategy"], *s);
        assert_eq!(r["requests"]["scheduled"], 1500, "{s}");
        assert_eq!(r["interrupted"], false);
    }
    // The same key draws: one digest for all, covering the first 1000 ids drawn.
    let digest = &results[0]["generator"]["key_digest"];
    assert!(digest.as_str().is_some_and(|d| d.len() == 16), "{digest}");
    for r in &results {
        assert_eq!(&r["generator"]["key_digest"], digest, "{}", r["strategy"]);
        assert_eq!(r["generator"]["key_digest_draws"], 1000);
    }
    // Servers started once and stopped at the end: every strategy ran on the same ones.
    let redis_pid = &results[0]["servers"]["redis_pid"];
    assert!(redis_pid.is_u64());
    for r in &results {
        assert_eq!(&r["servers"]["redis_pid"], redis_pid);
        assert_eq!(
            r["servers"]["postgres_pid"],
            results[0]["servers"]["postgres_pid"]
        );
        assert_servers_gone(r);
        // Fresh DB counters per strategy: the server's count matches the tool's, not the sum.
        let sent = r["db"]["calls"].as_u64().unwrap() + r["db"]["warmup_calls"].as_u64().unwrap();
        assert_eq!(
            r["db"]["calls_server"].as_u64(),
            Some(sent),
            "{}",
            r["strategy"]
        );
    }

    // The summary: every strategy, ranked by DB calls, relative to the best.
    let summary = json(&out.join("summary.json"));
    let ranking = summary["ranking"].as_array().unwrap();
    assert_eq!(ranking.len(), strategies.len());
    let calls: Vec<u64> = ranking
        .iter()
        .map(|r| r["figures"]["db_calls"].as_f64().unwrap() as u64)
        .collect();
    assert!(
        calls.windows(2).all(|w| w[0] <= w[1]),
        "not ranked: {calls:?}"
    );
    assert_eq!(ranking[0]["rank"], 1);
    assert_eq!(ranking[0]["db_calls_vs_best"], 1.0);
    for row in ranking {
        let file = json(&out.join(format!("{}.json", row["strategy"].as_str().unwrap())));
        assert_eq!(
            row["figures"]["db_calls"].as_f64().unwrap() as u64,
            file["db"]["calls"].as_u64().unwrap()
        );
    }
    assert_eq!(summary["interrupted"], false);
    assert_eq!(summary["not_run"].as_array().map(Vec::len), Some(0));

    // summary.md is a table with a row per strategy; the terminal shows the same ranking.
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    // The ranking is the first table (the trade-offs table follows it).
    let rows: Vec<&str> = md
        .lines()
        .skip_while(|l| !l.starts_with("| "))
        .take_while(|l| l.starts_with("| "))
        .collect();
    assert_eq!(rows.len(), 2 + strategies.len(), "{md}");
    for s in strategies {
        assert!(md.contains(&format!("`{s}`")), "{md}");
        assert!(stdout.contains(s), "{stdout}");
    }
    assert!(
        stdout.contains("db calls") && stdout.contains("vs best"),
        "{stdout}"
    );
}

#[test]
fn compare_fails_on_the_strategy_that_breaks_a_threshold() {
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    // One hot key, 20 clients over 2 instances, a slow load: without coordination the cold
    // start alone sends many loads of the key at once; the mutex lets one through.
    let o = stampede()
        .args([
            "compare",
            "--strategies",
            "cache-aside,mutex",
            "--start",
            "cold",
            "--clients",
            "20",
            "--instances",
            "2",
            "--keys",
            "1",
            "--db-cost",
            "100ms",
            "--duration",
            "1s",
            "--threshold",
            "peak_key_herd_max=1",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("threshold broken (cache-aside): peak_key_herd_max"),
        "{err}"
    );
    assert!(!err.contains("(mutex)"), "{err}");
    let summary = json(&out.join("summary.json"));
    for row in summary["ranking"].as_array().unwrap() {
        let broken = row["thresholds_broken"].as_array().unwrap();
        match row["strategy"].as_str().unwrap() {
            "mutex" => assert!(broken.is_empty(), "{row}"),
            _ => assert_eq!(broken.len(), 1, "{row}"),
        }
    }
}

#[test]
fn compare_refuses_bad_lists_before_starting_anything() {
    for (args, needle) in [
        (&["--strategies", "mutex,mutex"][..], "twice"),
        (&["--strategies", "magic"][..], "magic"),
        (
            &["--strategies", "all", "--strategy", "mutex"][..],
            "--strategies",
        ),
    ] {
        let o = stampede().arg("compare").args(args).output().unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn ctrl_c_during_compare_keeps_what_finished_and_marks_the_rest() {
    crate::common::light_turns();
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let mut child = stampede()
        .args([
            "compare",
            "--strategies",
            "cache-aside,mutex,swr",
            "--rps",
            "300",
            "--keys",
            "100",
            "--duration",
            "3s",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the first strategy's file is written: the second is then running (or
    // about to start), the third has not started.
    let first = out.join("cache-aside.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !first.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "cache-aside.json never appeared"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("compare ended early: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");

    let first = json(&first);
    assert_eq!(first["interrupted"], false);
    assert_servers_gone(&first);
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["interrupted"], true, "{summary}");
    let not_run: Vec<&str> = summary["not_run"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(not_run.contains(&"swr"), "{summary}");
    assert!(!out.join("swr.json").exists());
    // The strategy cut short, if it got as far as running, says so.
    if out.join("mutex.json").exists() {
        assert_eq!(json(&out.join("mutex.json"))["interrupted"], true);
        assert!(!not_run.contains(&"mutex"));
    } else {
        assert!(not_run.contains(&"mutex"), "{summary}");
    }
    let rows = summary["ranking"].as_array().unwrap().len();
    assert_eq!(rows + not_run.len(), 3, "{summary}");
}

#[test]
fn with_writes_a_pair_that_leaves_keys_wrong_is_marked_and_dominates_nothing() {
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    // Every key cached at the start for longer than the run: a write that does not invalidate
    // leaves its key wrong, one that deletes does not. `none` saves the misses `delete` pays.
    let o = stampede()
        .args([
            "compare",
            "--strategies",
            "cache-aside",
            "--invalidate",
            "delete,none",
            "--write-rps",
            "200",
            "--rps",
            "500",
            "--keys",
            "50",
            "--ttl",
            "60s",
            "--start",
            "synchronized",
            "--duration",
            "1500ms",
            "--redis-timeout",
            "1s",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let summary = json(&out.join("summary.json"));
    let names: Vec<&str> = summary["objectives"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        names.contains(&"stale_read_ratio") && names.contains(&"divergent_keys"),
        "{names:?}"
    );
    assert_eq!(summary["min_trials_to_decide"], 6);
    let rows = summary["ranking"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let front = summary["pareto"].as_array().unwrap();
    for row in rows {
        let label = row["strategy"].as_str().unwrap();
        // Null when the written keys could not be read back: then it marks nothing.
        let divergent = row["samples"]["divergent_keys"][0].as_f64().unwrap_or(0.0);
        assert_eq!(row["leaves_keys_wrong"], divergent > 0.0, "{row}");
        // One trial decides nothing: never "dominated", so skipping invalidation cannot push
        // deleting off the front on the misses it saves.
        assert!(row["dominated_by"].is_null(), "{row}");
        assert!(front.iter().any(|f| f == label), "{summary}");
        // The mark is in the ranking's row and the front's line whatever the rank.
        let ranking_line = stdout
            .lines()
            .find(|l| {
                let mut w = l.split_whitespace();
                w.next().is_some_and(|rank| rank.parse::<u32>().is_ok()) && w.next() == Some(label)
            })
            .unwrap_or_else(|| panic!("{label} not in the ranking:\n{stdout}"));
        assert_eq!(
            ranking_line.contains("(leaves keys wrong)"),
            divergent > 0.0,
            "{ranking_line}"
        );
    }
    let none = rows
        .iter()
        .find(|r| r["strategy"] == "cache-aside/none")
        .unwrap();
    assert!(
        none["figures"]["divergent_keys"].as_f64() > Some(0.0),
        "writes without invalidation over a cache that outlives the run: {none}"
    );
    let front_line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Pareto front:"))
        .unwrap_or_else(|| panic!("no front line:\n{stdout}"));
    assert!(
        front_line.contains("cache-aside/none (") && front_line.contains("leaves keys wrong"),
        "{front_line}"
    );
    // The trade-offs show the consistency objectives.
    assert!(
        stdout.contains("stale read %") && stdout.contains("divergent"),
        "{stdout}"
    );
}
