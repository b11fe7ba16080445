//! Faults on real servers: Redis killed and restarted mid-run (managed and external), fail-open
//! with deadlines, the outage and recovery in the report, and a saturated database turned into
//! counted errors by `--db-timeout`. Bounds are generous: they catch hangs, not slowness.

use crate::common;

use std::path::{Path, PathBuf};

use common::{alive, assert_servers_gone, run_ok, stampede};
use serde_json::Value;

fn faults(r: &common::Run) -> Vec<Value> {
    r.json["faults"].as_array().cloned().unwrap_or_default()
}

fn timeline(r: &common::Run) -> Vec<Value> {
    r.json["timeline"].as_array().cloned().unwrap_or_default()
}

/// No request lost: everything scheduled either completed or was shed (and counted).
fn assert_nothing_lost(r: &common::Run) {
    assert_eq!(
        r.u("/requests/completed") + r.u("/requests/shed"),
        r.u("/requests/scheduled"),
        "requests lost: {}",
        r.json["requests"]
    );
    assert_eq!(r.u("/requests/abandoned"), 0, "requests never finished");
}

/// Every redis-server the run started (restarts included) and its Postgres are gone.
fn assert_every_server_gone(r: &common::Run, expected_redis: usize) {
    let pids: Vec<u64> = r.json["servers"]["redis_pids"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    assert_eq!(pids.len(), expected_redis, "redis_pids: {pids:?}");
    let unique: std::collections::BTreeSet<_> = pids.iter().collect();
    assert_eq!(
        unique.len(),
        pids.len(),
        "a restart must start a new process"
    );
    for pid in pids {
        assert!(
            !alive(pid as u32),
            "redis-server {pid} still alive after the run"
        );
    }
    assert_servers_gone(&r.json);
}

#[test]
fn outage_fails_open_within_the_deadlines_and_hits_return() {
    crate::common::light_turns();
    let r = run_ok(&[
        "--rps",
        "2000",
        "--duration",
        "6s",
        "--keys",
        "200",
        "--start",
        "cold",
        "--warm",
        "200",
        "--ttl",
        "60s",
        "--db-cost",
        "1ms",
        "--db-pool",
        "32",
        "--redis-timeout",
        "50ms",
        "--kill-redis-at",
        "2s",
        "--redis-down-for",
        "2s",
    ]);
    assert_nothing_lost(&r);
    // Fail open: Redis being down never fails a request, it sends it to the database.
    assert_eq!(r.u("/outcomes/error"), 0);
    // Per request at most a few 50 ms deadlines plus a 1 ms load; 1.5 s is slack for a busy
    // machine, and far below what a hang (no deadline) would produce.
    let max = r.f("/latency_ms/max");
    assert!(max < 1500.0, "max latency {max} ms during a Redis outage");
    assert!(
        r.u("/redis/errors") + r.u("/redis/timeouts") > 0,
        "the outage must show as Redis errors or timeouts"
    );

    let f = faults(&r);
    assert_eq!(f.len(), 1, "{f:?}");
    let f = &f[0];
    assert_eq!(f["kind"], "kill-redis");
    let at = f["at_ms"].as_u64().expect("at_ms");
    let down = f["down_ms"].as_u64().expect("down_ms");
    assert!((2000..2500).contains(&at), "killed at {at} ms");
    assert!(down >= 2000, "down for {down} ms");
    assert!(f["note"].is_null(), "{f}");
    assert!(f["db_calls_during"].as_u64().unwrap() > 0, "{f}");
    assert!(f["redis_errors_during"].as_u64().unwrap() > 0, "{f}");
    assert!(
        f["recovered_ms"].as_u64().is_some(),
        "never reconnected: {f}"
    );
    assert!(f["recovery_stampede"].as_u64().unwrap() > 0, "{f}");

    // The timeline shows the outage, and hits after the restart.
    let tl = timeline(&r);
    let down_buckets = tl.iter().filter(|b| b["redis_up"] == false).count();
    assert!(
        down_buckets >= 15,
        "{down_buckets} buckets marked down for a 2 s outage"
    );
    let back = at + down;
    let hits_after: u64 = tl
        .iter()
        .filter(|b| b["t_ms"].as_u64().unwrap() > back + 200)
        .map(|b| b["hits"].as_u64().unwrap())
        .sum();
    assert!(hits_after > 0, "no hits after the restart");
    let hits_during: u64 = tl
        .iter()
        .filter(|b| {
            let t = b["t_ms"].as_u64().unwrap();
            t > at + 200 && t + 100 < back
        })
        .map(|b| b["hits"].as_u64().unwrap())
        .sum();
    assert_eq!(hits_during, 0, "hits while Redis was down");
    assert_every_server_gone(&r, 2);
}

#[test]
fn two_faults_both_reported_with_recovery_and_printed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("r.json");
    let began = std::time::Instant::now();
    let output = stampede()
        .args([
            "run",
            "--rps",
            "500",
            "--duration",
            "7s",
            "--keys",
            "100",
            "--start",
            "cold",
            "--warm",
            "100",
            "--ttl",
            "60s",
            "--db-cost",
            "1ms",
        ])
        .args(["--kill-redis-at", "1s", "--redis-down-for", "1s"])
        .args(["--kill-redis-at", "4s", "--redis-down-for", "1s"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("running stampede");
    let took = began.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let r = common::Run {
        json: common::read_json(&out).expect("results file"),
        output,
        dir,
        took,
    };
    assert_nothing_lost(&r);
    let f = faults(&r);
    assert_eq!(f.len(), 2, "{f:?}");
    let at: Vec<u64> = f.iter().map(|x| x["at_ms"].as_u64().unwrap()).collect();
    assert!(
        at[0] >= 1000 && at[0] < 1500 && at[1] >= 4000 && at[1] < 4500,
        "{at:?}"
    );
    for x in &f {
        assert!(x["recovered_ms"].as_u64().is_some(), "{x}");
        assert!(x["hit_rate_recovered_ms"].as_u64().is_some(), "{x}");
        assert!(x["down_ms"].as_u64().unwrap() >= 1000, "{x}");
    }
    // The summary shows each outage window and its recovery.
    assert_eq!(
        stdout.matches("fault     kill-redis").count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("db calls during it"), "{stdout}");
    assert!(stdout.contains("recovery: stampede"), "{stdout}");
    assert_every_server_gone(&r, 3);
}

#[test]
fn fault_usage_errors_exit_2_before_any_server_starts() {
    for (args, needle) in [
        (
            &[
                "--redis-url",
                "redis://127.0.0.1:1/",
                "--kill-redis-at",
                "1s",
                "--redis-down-for",
                "1s",
            ][..],
            "--redis-restart-cmd",
        ),
        // SHUTDOWN NOSAVE loses every tenant's unsaved data: only with consent, even with a
        // way to bring the server back.
        (
            &[
                "--redis-url",
                "redis://127.0.0.1:1/",
                "--redis-restart-cmd",
                "true",
                "--kill-redis-at",
                "1s",
                "--redis-down-for",
                "1s",
            ][..],
            "--allow-kill-external",
        ),
        (&["--kill-redis-at", "1s"][..], "--redis-down-for"),
        (
            &["--kill-redis-at", "8s", "--redis-down-for", "5s"][..],
            "still be down when the run ends",
        ),
        (&["--redis-restart-cmd", "true"][..], "external Redis"),
    ] {
        // Not --quiet: a run that got as far as starting servers would say so on stderr.
        let out = stampede()
            .arg("run")
            .args(args)
            .output()
            .expect("run stampede");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("managed servers up"),
            "{args:?}: a server was started: {stderr}"
        );
    }
}

/// A restarted external redis-server is the user's (daemonized by their command): the test
/// stops it by the pid file its command wrote, whatever the test's outcome.
struct Daemon(PathBuf);

impl Drop for Daemon {
    fn drop(&mut self) {
        let Ok(text) = std::fs::read_to_string(&self.0) else {
            return;
        };
        if let Ok(pid) = text.trim().parse::<i32>() {
            // SAFETY: kill(2) on a pid we started through the restart command.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn restart_cmd(port: u16, dir: &Path) -> String {
    format!(
        "redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir {d} --pidfile {d}/restarted.pid --logfile {d}/restarted.log",
        d = dir.display()
    )
}

#[test]
fn external_redis_fault_shuts_it_down_and_runs_the_restart_command() {
    crate::common::light_turns();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // The "user's" Redis: started by the test, so the run treats it as external.
    let redis = rt
        .block_on(stampede::servers::ManagedRedis::start())
        .expect("redis-server starts");
    let port = redis.port();
    let dir = tempfile::tempdir().expect("temp dir");
    let _daemon = Daemon(dir.path().join("restarted.pid"));
    let cmd = restart_cmd(port, dir.path());
    let r = run_ok(&[
        "--redis-url",
        &redis.url(),
        "--redis-restart-cmd",
        &cmd,
        "--allow-kill-external",
        "--rps",
        "300",
        "--duration",
        "4s",
        "--keys",
        "100",
        "--start",
        "cold",
        "--warm",
        "100",
        "--db-cost",
        "1ms",
        "--kill-redis-at",
        "1s",
        "--redis-down-for",
        "1s",
    ]);
    assert_nothing_lost(&r);
    let f = faults(&r);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0]["note"].is_null(), "{}", f[0]);
    assert!(f[0]["down_ms"].as_u64().unwrap() >= 1000, "{}", f[0]);
    assert!(f[0]["recovered_ms"].as_u64().is_some(), "{}", f[0]);
    assert!(r.u("/redis/errors") + r.u("/redis/timeouts") > 0);
    // The user's Redis is back (a new process) and holds none of the run's keys.
    assert_eq!(redis_cli(port, &["PING"]), "PONG");
    assert_eq!(
        redis_cli(port, &["DBSIZE"]),
        "0",
        "the run's keys were left behind"
    );
    assert_servers_gone(&r.json);
    drop(redis);
}

#[test]
fn db_timeout_turns_a_saturated_database_into_counted_errors() {
    // Every request misses (a cold, wide key space) and each load is a heavy aggregate; two
    // pooled connections cannot keep up, so the pool wait and the statement time out.
    let r = run_ok(&[
        "--db-query",
        "heavy",
        "--db-timeout",
        "30ms",
        "--db-pool",
        "2",
        "--rps",
        "400",
        "--duration",
        "3s",
        "--keys",
        "100000",
        "--zipf",
        "0.5",
        "--start",
        "cold",
        "--instances",
        "1",
    ]);
    assert_nothing_lost(&r);
    let timeouts = r.u("/db/statement_timeouts") + r.u("/db/pool_timeouts");
    assert!(
        timeouts > 0,
        "a saturated DB produced no timeouts: {}",
        r.json["db"]
    );
    assert!(r.u("/outcomes/error") >= timeouts, "{}", r.json["outcomes"]);
    assert_eq!(r.u("/requests/errors"), r.u("/outcomes/error"));
    assert!(r.f("/db/heavy_query_ms") > 0.0);
    // Bounded: each request waits at most 30 ms for a connection and 30 ms for the statement
    // (plus its Redis deadlines); seconds would mean a hang.
    let max = r.f("/latency_ms/max");
    assert!(max < 3000.0, "max latency {max} ms with --db-timeout 30ms");
    // A statement the server cancelled is not counted by pg_stat_statements; a load that
    // never got a connection is no DB call at all. A statement that timed out for the tool
    // may still have finished on the server in the same instant (seen on a loaded machine:
    // 175 sent, 140 + 39 timed out), so the server's count lies between the calls less the
    // errors and the calls.
    let (calls, server, errors) = (
        r.u("/db/calls"),
        r.u("/db/calls_server"),
        r.u("/db/statement_errors"),
    );
    assert!(
        server <= calls && calls <= server + errors,
        "calls {calls}, server {server}, errors {errors}: {}",
        r.json["db"]
    );
    assert!(r.u("/db/calls_server") > 0);
    assert_servers_gone(&r.json);
}
