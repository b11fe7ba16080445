//! A recorded trace replayed through the real stack (`run --trace`): the schedule is the
//! trace's (per 100 ms, by scheduled time), every request of the slice is sent once, the keys
//! are the trace's, and what cannot be replayed is an error that names the line.

use crate::common;

use std::path::{Path, PathBuf};

use common::{run, run_ok_shared, stampede};

/// Requests per whole second of the test trace: uneven on purpose (a constant rate would
/// pass even if the timestamps were ignored).
const PER_SECOND: [usize; 4] = [300, 700, 200, 500];

/// A csv trace over 400 keys, Zipf-like, stamped in whole seconds, with a value size per key
/// and a few SETs (skipped under `--trace-ops reads`).
fn csv_trace(dir: &Path) -> PathBuf {
    let p = dir.join("trace.csv");
    let mut body = String::from("timestamp,key,value_size,op\n");
    let mut x: u64 = 7;
    for (sec, n) in PER_SECOND.iter().enumerate() {
        for i in 0..*n {
            // A small LCG: deterministic keys, skewed towards low numbers.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 33) as f64 / (1u64 << 31) as f64;
            let k = (400f64.powf(u) as u64).min(399);
            body.push_str(&format!(
                "{},item{k},{},get\n",
                1_600_000_000 + sec,
                100 + k
            ));
            if i % 100 == 0 {
                body.push_str(&format!(
                    "{},item{k},{},set\n",
                    1_600_000_000 + sec,
                    100 + k
                ));
            }
        }
    }
    std::fs::write(&p, body).expect("writing the trace");
    p
}

fn distinct_keys(p: &Path) -> usize {
    let body = std::fs::read_to_string(p).expect("reading the trace");
    let keys: std::collections::HashSet<&str> = body
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(1))
        .collect();
    keys.len()
}

#[test]
fn a_csv_trace_replays_at_its_own_times_every_request_once() {
    crate::common::light_turns();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = csv_trace(dir.path());
    let r = run_ok_shared(&[
        "--trace",
        trace.to_str().expect("utf-8 path"),
        "--interval",
        "100ms",
    ]);
    r.assert_counts_add_up();
    let total: usize = PER_SECOND.iter().sum();
    assert_eq!(r.u("/requests/scheduled"), total as u64);
    assert_eq!(r.u("/requests/shed"), 0);
    // Every distinct key of the trace is one item, and the SETs were counted, not sent.
    assert_eq!(r.u("/scenario/keys"), distinct_keys(&trace) as u64);
    assert_eq!(r.u("/scenario/trace/found/skipped"), (total / 100) as u64);
    assert_eq!(
        r.json["scenario"]["duration"], "4s",
        "the trace decides the duration"
    );
    // The schedule per 100 ms is the trace's: each second's requests spread evenly, so a
    // tenth of that second's count in each bucket (within one request).
    let timeline = r.json["timeline"].as_array().expect("timeline");
    for (slot, b) in timeline.iter().take(40).enumerate() {
        let want = PER_SECOND[slot / 10] as i64 / 10;
        let got = b["goodput"].as_i64().expect("goodput");
        assert!(
            (got - want).abs() <= 1,
            "bucket {slot}: {got} requests due, the trace has {want}"
        );
    }
    // The database answered every miss, as Postgres counted.
    assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"));
    // Each item has its key's value size from the trace (100 + k bytes for item k), as
    // Postgres counts the seeded payloads.
    let body = std::fs::read_to_string(&trace).expect("reading the trace");
    let keys: std::collections::HashSet<u64> = body
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(1)?.strip_prefix("item")?.parse().ok())
        .collect();
    let want: u64 = keys.iter().map(|k| 100 + k).sum();
    assert_eq!(r.u("/scenario/trace/found/value_bytes"), want);
    assert_eq!(r.u("/db/seeded_bytes"), want, "as Postgres counted");
}

#[test]
fn speed_skip_slice_and_retiming_select_what_is_sent() {
    crate::common::waiting_turns();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = csv_trace(dir.path());
    let t = trace.to_str().expect("utf-8 path");
    // Seconds 1 and 2 of the trace (700 + 200 requests), twice as fast: one second of run.
    let r = run_ok_shared(&[
        "--trace",
        t,
        "--trace-skip",
        "1s",
        "--duration",
        "2s",
        "--speed",
        "2",
        "--trace-spread",
        "random",
    ]);
    assert_eq!(r.u("/requests/scheduled"), 900);
    assert_eq!(r.json["scenario"]["duration"], "1s");
    // Re-timed at a constant rate, keeping the order: 1700 requests at 1000/s.
    let r = run_ok_shared(&["--trace", t, "--rps", "1000"]);
    assert_eq!(r.u("/requests/scheduled"), 1700);
    assert_eq!(r.json["scenario"]["duration"], "1s 700ms");
}

#[test]
fn every_op_replays_the_sets_as_writes() {
    crate::common::waiting_turns();
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = csv_trace(dir.path());
    let r = run_ok_shared(&[
        "--trace",
        trace.to_str().expect("utf-8 path"),
        "--trace-ops",
        "all",
        "--invalidate",
        "set",
    ]);
    let total: u64 = PER_SECOND.iter().sum::<usize>() as u64;
    // Reads are the requests; the SETs are the writes, each committed once.
    assert_eq!(r.u("/requests/scheduled"), total);
    assert_eq!(r.u("/db/writes"), total / 100);
    assert_eq!(r.u("/db/write_errors"), 0);
    assert_eq!(r.u("/db/writes_server"), total / 100, "as Postgres counted");
}

#[test]
fn what_cannot_be_replayed_is_refused_before_any_server_starts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "timestamp,key,value_size\n1,a,10\n1,b,ten\n").expect("write");
    let out = stampede()
        .args(["run", "--trace", bad.to_str().expect("utf-8")])
        .output()
        .expect("running stampede");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.csv") && err.contains("line 3") && err.contains("value_size"),
        "the error names the file, the line and the field: {err}"
    );
    let good = csv_trace(dir.path());
    let g = good.to_str().expect("utf-8");
    for (args, says) in [
        (vec!["--keys", "10"], "--keys does not go with --trace"),
        (vec!["--clients", "4"], "--clients does not go with --trace"),
        (
            vec!["--trace-ops", "all", "--write-rps", "10"],
            "drop --write-rps",
        ),
        (vec!["--speed", "2", "--rps", "100"], "choose one"),
    ] {
        let out = stampede()
            .args(["run", "--trace", g])
            .args(&args)
            .output()
            .expect("running stampede");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = stampede()
        .args(["run", "--speed", "2"])
        .output()
        .expect("running stampede");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_refuses_to_compare_runs_of_different_traces() {
    crate::common::light_turns();
    let dir = tempfile::tempdir().expect("temp dir");
    let a = csv_trace(dir.path());
    let other = dir.path().join("other.csv");
    let body = std::fs::read_to_string(&a).expect("read");
    std::fs::write(&other, body.replace("item1,", "item9999,")).expect("write");
    let ra = run(&["--trace", a.to_str().expect("utf-8"), "--duration", "1s"]);
    let rb = run(&[
        "--trace",
        other.to_str().expect("utf-8"),
        "--duration",
        "1s",
    ]);
    let out = stampede()
        .arg("check")
        .arg(rb.dir.path().join("r.json"))
        .arg("--baseline")
        .arg(ra.dir.path().join("r.json"))
        .output()
        .expect("running stampede check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("trace"), "{text}");
}

/// The same 600 requests (200 a second for 3 s over 50 keys, plus SETs and an op the replay
/// skips) in each format: each replays exactly its reads, `op_count` expanded.
#[test]
fn every_format_replays_its_reads_once() {
    crate::common::waiting_turns();
    let dir = tempfile::tempdir().expect("temp dir");
    let reqs: Vec<(u64, u64)> = (0..600u64).map(|i| (i / 200, (i * 7) % 50)).collect();
    let t0 = 1_700_000_000u64;
    let mut twitter = String::new();
    let mut meta = String::from("op_time,key,key_size,op,op_count,size,cache_hits,ttl\n");
    let mut jsonl = String::new();
    let mut monitor = String::from("OK\n");
    for (n, &(s, k)) in reqs.iter().enumerate() {
        twitter.push_str(&format!("{},key{k},5,{},1,get,0\n", t0 + s, 100 + k));
        jsonl.push_str(&format!(
            "{{\"timestamp\": {}, \"key\": \"key{k}\", \"value_size\": {}}}\n",
            t0 + s,
            100 + k
        ));
        monitor.push_str(&format!(
            "{}.{:06} [0 127.0.0.1:6000] \"GET\" \"key{k}\"\n",
            t0 + s,
            (n % 200) * 5000 + 1
        ));
        // Meta: every other line stands for two requests (op_count 2).
        if n % 2 == 0 {
            meta.push_str(&format!("{},key{k},5,GET,2,{},0,0\n", t0 + s, 100 + k));
        }
        if n % 50 == 0 {
            twitter.push_str(&format!("{},key{k},5,{},1,set,60\n", t0 + s, 100 + k));
            meta.push_str(&format!("{},key{k},5,SET,1,{},0,60\n", t0 + s, 100 + k));
            monitor.push_str(&format!(
                "{}.{:06} [0 127.0.0.1:6000] \"INFO\"\n",
                t0 + s,
                (n % 200) * 5000 + 2
            ));
        }
    }
    // Meta's lines are every other request's (key (7n) mod 50 for even n: 25 keys).
    for (name, body, format, keys) in [
        ("t.twitter", twitter, "twitter", 50),
        ("t.meta", meta, "meta", 25),
        ("t.jsonl", jsonl, "jsonl", 50),
        ("t.monitor", monitor, "monitor", 50),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, body).expect("writing the trace");
        let r = run_ok_shared(&[
            "--trace",
            p.to_str().expect("utf-8"),
            "--trace-format",
            format,
        ]);
        r.assert_counts_add_up();
        assert_eq!(r.u("/requests/scheduled"), 600, "{format}");
        assert_eq!(r.u("/scenario/keys"), keys, "{format}");
        assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"), "{format}");
    }
}

#[test]
fn a_compressed_trace_streams_and_a_truncated_one_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = csv_trace(dir.path());
    let raw = std::fs::read(&csv).expect("read");
    let zst = dir.path().join("trace.csv.zst");
    std::fs::write(&zst, zstd::encode_all(&raw[..], 3).expect("zstd")).expect("write");
    let r = run_ok_shared(&["--trace", zst.to_str().expect("utf-8"), "--duration", "1s"]);
    assert_eq!(r.u("/requests/scheduled"), PER_SECOND[0] as u64);
    let whole = std::fs::read(&zst).expect("read");
    let cut = dir.path().join("cut.csv.zst");
    std::fs::write(&cut, &whole[..whole.len() / 2]).expect("write");
    let out = stampede()
        .args(["run", "--trace", cut.to_str().expect("utf-8")])
        .output()
        .expect("running stampede");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a truncated trace is an error: {err}"
    );
    assert!(err.contains("cut.csv.zst"), "{err}");
}

#[test]
fn workload_from_takes_a_traces_shape_without_the_trace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = csv_trace(dir.path());
    let out = stampede()
        .args(["trace-stats", trace.to_str().expect("utf-8"), "--json"])
        .output()
        .expect("running trace-stats");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shape = dir.path().join("shape.json");
    std::fs::write(&shape, &out.stdout).expect("write");
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let r = run_ok_shared(&[
        "--workload-from",
        shape.to_str().expect("utf-8"),
        "--duration",
        "2s",
    ]);
    // The synthetic workload has the trace's keys, exponent and mean rate (reads, and its
    // SETs' share as writes).
    assert_eq!(
        r.u("/scenario/keys"),
        stats["distinct_keys"].as_u64().expect("keys")
    );
    let z = stats["zipf_exponent"].as_f64().expect("zipf");
    assert!((r.f("/scenario/zipf") - z).abs() < 0.001);
    let rate = stats["rate_per_s"]["mean"].as_f64().expect("rate");
    let reads = stats["ops"]["read_share"].as_f64().expect("share");
    assert_eq!(r.f("/scenario/load/rps"), (rate * reads).round());
    assert!(
        r.json["scenario"]["writes"]["rps"]
            .as_f64()
            .expect("writes")
            >= 1.0
    );
    assert!(r.json["scenario"]["value_size_dist"].is_string() || r.u("/scenario/value_size") > 0);
    let out = stampede()
        .args([
            "run",
            "--workload-from",
            shape.to_str().expect("utf-8"),
            "--trace",
        ])
        .arg(&trace)
        .output()
        .expect("running stampede");
    assert_eq!(out.status.code(), Some(2));
}
