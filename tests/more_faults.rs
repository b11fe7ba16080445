//! More faults on the real servers: Postgres crashed (SIGKILL of its process group) and
//! restarted through crash recovery, Redis stalled with CLIENT PAUSE, the two combined, and
//! the combinations refused before any server starts. Bounds are stated where they are
//! asserted: they catch hangs, not slowness.

use crate::common;

use common::{alive, assert_servers_gone, run_ok, stampede};
use serde_json::Value;

fn faults(r: &common::Run) -> Vec<Value> {
    r.json["faults"].as_array().cloned().unwrap_or_default()
}

fn timeline(r: &common::Run) -> Vec<Value> {
    r.json["timeline"].as_array().cloned().unwrap_or_default()
}

fn n(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing or not a count in {v}"))
}

/// No request lost: everything scheduled either completed or was shed, and none was left
/// hanging until the drain gave up on it.
fn assert_nothing_lost(r: &common::Run) {
    r.assert_counts_add_up();
    assert_eq!(r.u("/requests/abandoned"), 0, "requests never finished");
}

/// Whether any process is left in process group `pgid` (a postmaster's backends included).
fn group_alive(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            // After the command name in parentheses: state, ppid, pgrp.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.first().is_some_and(|s| *s != "Z")
                && fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
        })
}

/// Buckets whose end lies in `(from, to]` ms.
fn buckets_between(tl: &[Value], from: u64, to: u64) -> Vec<&Value> {
    tl.iter()
        .filter(|b| {
            let t = n(b, "t_ms");
            t > from && t <= to
        })
        .collect()
}

#[test]
fn postgres_crash_fails_loads_fast_and_they_succeed_after_the_restart() {
    // Short TTLs over many keys: misses, so loads, all along; cache hits on the keys still
    // cached. No --db-timeout: the Postgres fault sets the default deadline (1 s).
    let r = run_ok(&[
        "--rps",
        "1000",
        "--duration",
        "5s",
        "--keys",
        "5000",
        "--ttl",
        "1s",
        "--start",
        "cold",
        "--db-cost",
        "1ms",
        "--kill-postgres-at",
        "1500ms",
        "--postgres-down-for",
        "1500ms",
    ]);
    assert_nothing_lost(&r);
    assert_eq!(
        r.json["scenario"]["db_timeout"], "1s",
        "the default deadline"
    );

    // Bounded: a request pays at most two Redis deadlines (2 × 100 ms), the wait for a pooled
    // connection (1 s), opening a new one (1 s) and a statement (1 s + 100 ms of grace):
    // 3.3 s. A hang would last until the drain gives up (30 s).
    let max = r.f("/latency_ms/max");
    assert!(max < 3300.0, "max latency {max} ms with a Postgres crash");
    // And a crash refuses connections at once: failing loads do not even wait for a deadline.
    let error_max = r.f("/latency_by_outcome_ms/error/max");
    assert!(
        error_max < 1000.0,
        "failed requests took up to {error_max} ms"
    );

    // Loads fail during the outage, and are counted.
    let errors = r.u("/outcomes/error");
    assert!(errors > 0, "no load failed during the crash");
    assert_eq!(r.u("/requests/errors"), errors);
    let db = &r.json["db"];
    assert!(
        n(db, "connect_errors") + n(db, "statement_errors") > 0,
        "{db}"
    );

    let f = faults(&r);
    assert_eq!(f.len(), 1, "{f:?}");
    let f = &f[0];
    assert_eq!(f["kind"], "kill-postgres");
    assert!(f["note"].is_null(), "{f}");
    let (at, down) = (n(f, "at_ms"), n(f, "down_ms"));
    assert!((1500..2000).contains(&at), "killed at {at} ms");
    assert!((1500..5000).contains(&down), "down for {down} ms");
    assert!(n(f, "db_errors_during") > 0, "{f}");
    assert!(
        f["recovered_ms"].as_u64().is_some(),
        "no load succeeded: {f}"
    );
    // What was served meanwhile: the cache kept answering, the loads failed.
    let served = &f["served_during"];
    assert!(n(served, "hits") > 0, "no cache hits during the crash: {f}");
    assert!(n(served, "errors") > 0, "{f}");

    // The timeline shows the outage, and DB calls again after the restart.
    let tl = timeline(&r);
    let down_buckets = tl.iter().filter(|b| b["postgres_up"] == false).count();
    assert!(
        down_buckets >= 10,
        "{down_buckets} buckets marked down for a 1.5 s outage"
    );
    let back = at + down;
    let calls_after: u64 = buckets_between(&tl, back + 100, u64::MAX)
        .iter()
        .map(|b| n(b, "db_calls"))
        .sum();
    assert!(calls_after > 0, "no DB call succeeded after the restart");
    let errors_after: u64 = buckets_between(&tl, back + 1000, u64::MAX)
        .iter()
        .map(|b| n(b, "errors"))
        .sum();
    assert_eq!(errors_after, 0, "loads still failing 1 s after the restart");

    // The server's count survives the crash as a sum: what pg_stat_statements had counted
    // just before the kill plus what it counted after. Statements that completed between
    // that reading and the kill are missing: at most those running then (2 × 16 pool slots).
    assert!(
        db["calls_server_read"]
            .as_str()
            .is_some_and(|s| s.contains("erased by the crash")),
        "{db}"
    );
    let (calls, server, stmt_errors) = (
        n(db, "calls"),
        n(db, "calls_server"),
        n(db, "statement_errors"),
    );
    assert!(server + stmt_errors <= calls, "{db}");
    assert!(server + stmt_errors + 2 * 32 >= calls, "{db}");

    // Every postmaster of the run (the first and the restarted one) is gone, backends too.
    let pids: Vec<u64> = r.json["servers"]["postgres_pids"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    assert_eq!(pids.len(), 2, "postgres_pids: {pids:?}");
    assert_ne!(pids[0], pids[1], "a restart starts a new postmaster");
    for pid in pids {
        assert!(!alive(pid as u32), "postmaster {pid} still alive");
        assert!(!group_alive(pid as u32), "a backend of {pid} still alive");
    }
    assert_servers_gone(&r.json);
}

#[test]
fn redis_pause_ends_every_command_at_its_deadline() {
    crate::common::light_turns();
    // Every key cached with a long TTL: before and after the pause every request is a hit.
    let r = run_ok(&[
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
        "1ms",
        "--db-pool",
        "32",
        "--redis-timeout",
        "50ms",
        "--pause-redis-at",
        "1s",
        "--pause-for",
        "2s",
    ]);
    assert_nothing_lost(&r);
    // Fail open: a stalled Redis never fails a request, it sends it to the database.
    assert_eq!(r.u("/outcomes/error"), 0);
    // Bounded: a request pays at most three 50 ms deadlines (GET, and the write-back; a lock
    // under mutex) plus a 1 ms load: ~150 ms. 1000 ms is slack for a busy 2-core machine, and
    // half of what a command waiting for the 2 s pause to end would take.
    let max = r.f("/latency_ms/max");
    assert!(
        max < 1000.0,
        "max latency {max} ms during a 2 s Redis pause"
    );
    assert!(
        r.u("/redis/timeouts") > 0,
        "the pause must show as timeouts"
    );

    let f = faults(&r);
    assert_eq!(f.len(), 1, "{f:?}");
    let f = &f[0];
    assert_eq!(f["kind"], "pause-redis");
    assert!(f["note"].is_null(), "{f}");
    let (at, down) = (n(f, "at_ms"), n(f, "down_ms"));
    assert!((1000..1500).contains(&at), "paused at {at} ms");
    assert!((2000..3000).contains(&down), "paused for {down} ms");
    assert!(n(f, "redis_errors_during") > 0, "{f}");
    assert!(n(f, "db_calls_during") > 0, "the app loaded instead: {f}");
    assert!(f["recovered_ms"].as_u64().is_some(), "{f}");
    // Not a crash: the keys are still there, so hits come back at once.
    assert!(
        f["hit_rate_recovered_ms"]
            .as_u64()
            .is_some_and(|ms| ms <= 1000),
        "{f}"
    );
    let pids = r.json["servers"]["redis_pids"].as_array().map(Vec::len);
    assert_eq!(pids, Some(1), "a pause restarts nothing");
    assert!(
        r.json["redis"]["note"]
            .as_str()
            .is_some_and(|s| s.contains("paused")),
        "{}",
        r.json["redis"]
    );

    let tl = timeline(&r);
    let down_buckets = tl.iter().filter(|b| b["redis_up"] == false).count();
    assert!(
        down_buckets >= 15,
        "{down_buckets} buckets marked down for a 2 s pause"
    );
    let hits_during: u64 = buckets_between(&tl, at + 200, at + down - 100)
        .iter()
        .map(|b| n(b, "hits"))
        .sum();
    assert_eq!(hits_during, 0, "hits while Redis was paused");
    assert_servers_gone(&r.json);
}

#[test]
fn a_postgres_crash_and_a_redis_pause_at_once() {
    crate::common::light_turns();
    // Different servers may be down at the same time: the pause falls inside the crash.
    let r = run_ok(&[
        "--rps",
        "1000",
        "--duration",
        "4s",
        "--keys",
        "2000",
        "--ttl",
        "1s",
        "--start",
        "cold",
        "--db-cost",
        "1ms",
        "--redis-timeout",
        "50ms",
        "--kill-postgres-at",
        "1s",
        "--postgres-down-for",
        "1500ms",
        "--pause-redis-at",
        "1500ms",
        "--pause-for",
        "500ms",
    ]);
    assert_nothing_lost(&r);
    let f = faults(&r);
    let kinds: Vec<&str> = f.iter().filter_map(|x| x["kind"].as_str()).collect();
    assert_eq!(kinds, ["kill-postgres", "pause-redis"], "{f:?}");
    for x in &f {
        assert!(x["note"].is_null(), "{x}");
        assert!(x["recovered_ms"].as_u64().is_some(), "{x}");
    }
    // Requests during both outages are bounded too: see the single-fault tests.
    let max = r.f("/latency_ms/max");
    assert!(max < 3300.0, "max latency {max} ms");
    assert!(r.u("/outcomes/error") > 0 && r.u("/redis/timeouts") > 0);
    assert_servers_gone(&r.json);
}

#[test]
fn bad_fault_combinations_exit_2_before_any_server_starts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("overlap.toml");
    std::fs::write(
        &file,
        "[[fault]]\nkind = \"kill-redis\"\nat = \"1s\"\ndown_for = \"2s\"\n\
         [[fault]]\nkind = \"pause-redis\"\nat = \"2s\"\ndown_for = \"1s\"\n",
    )
    .expect("write scenario");
    let file = file.display().to_string();
    for (args, needles) in [
        // One server, two outages at once: a pause during a crash of Redis.
        (
            &[
                "--kill-redis-at",
                "1s",
                "--redis-down-for",
                "2s",
                "--pause-redis-at",
                "2s",
                "--pause-for",
                "1s",
            ][..],
            &["--pause-redis-at 2s --pause-for 1s", "must not overlap"][..],
        ),
        (
            &[
                "--kill-postgres-at",
                "1s",
                "--postgres-down-for",
                "2s",
                "--kill-postgres-at",
                "2s",
                "--postgres-down-for",
                "1s",
            ][..],
            &["Postgres is still down", "must not overlap"][..],
        ),
        (
            &["--scenario", &file][..],
            &["[[fault]] #2 (kind = \"pause-redis\")", "must not overlap"][..],
        ),
        // A pause stalls every client of an external Redis: only with consent.
        (
            &[
                "--redis-url",
                "redis://127.0.0.1:1/",
                "--pause-redis-at",
                "1s",
                "--pause-for",
                "1s",
            ][..],
            &["--allow-pause-external"][..],
        ),
        // An external Postgres is crashed only by the user's commands.
        (
            &[
                "--pg-url",
                "postgres://u@127.0.0.1:1/db",
                "--kill-postgres-at",
                "1s",
                "--postgres-down-for",
                "1s",
            ][..],
            &["--pg-kill-cmd and --pg-restart-cmd"][..],
        ),
        (&["--pause-redis-at", "1s"][..], &["--pause-for"][..]),
        (
            &["--kill-postgres-at", "8s", "--postgres-down-for", "5s"][..],
            &["Postgres would still be down when the run ends"][..],
        ),
    ] {
        // Not --quiet: a run that got as far as starting servers would say so on stderr.
        let out = stampede()
            .arg("run")
            .args(args)
            .output()
            .expect("run stampede");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for needle in needles {
            assert!(stderr.contains(needle), "{args:?}: {stderr}");
        }
        assert!(
            !stderr.contains("managed servers up"),
            "{args:?}: a server was started: {stderr}"
        );
    }
}

/// The holder of the fault's entry, with the counts every holder-crash must satisfy: its
/// requests cut off are errors, each held lock was a request in flight (mutex, no refresh), and
/// the waiters' outcomes add up to the waiters.
fn holder_of(r: &common::Run) -> Value {
    let f = faults(r);
    assert_eq!(f.len(), 1, "one fault: {f:?}");
    assert_eq!(f[0]["kind"], "holder-crash");
    let h = f[0]["holder"].clone();
    assert!(h.is_object(), "the fault's holder figures: {}", f[0]);
    assert!(n(&h, "keys_blocked") >= 1, "{h}");
    assert!(n(&h, "keys_blocked") <= n(&h, "locks_held"), "{h}");
    assert!(n(&h, "requests_cut") >= n(&h, "keys_blocked"), "{h}");
    assert!(r.u("/outcomes/error") >= n(&h, "requests_cut"), "{h}");
    let got: u64 = h["waiters_got"]
        .as_object()
        .expect("waiters_got")
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(got, n(&h, "waiters"), "{h}");
    assert_nothing_lost(r);
    h
}

/// A lock holder dies mid-load: with a fixed 1 s lease its keys stay blocked until the lease
/// runs out (Redis's PTTL says so) and the requests that waited on them waited the lease, ± a
/// poll; with `--lock-ttl auto` the block is bounded by the auto lease. Both runs share one
/// Redis and one Postgres; a holder-crash on a strategy that takes no lock is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_lock_holder_blocks_its_keys_for_the_lease_and_no_longer() {
    let servers = common::Servers::start(None).await;
    let (ru, pu) = servers.urls();
    let run = move |extra: &'static [&'static str]| {
        let (ru, pu) = (ru.clone(), pu.clone());
        crate::common::spawn_blocking(move || {
            let mut args = vec![
                "--redis-url",
                &ru,
                "--pg-url",
                &pu,
                "--strategy",
                "mutex",
                "--keys",
                "10",
                "--rps",
                "400",
                "--ttl",
                "500ms",
                "--db-cost",
                "100ms",
                "--lock-wait",
                "3s",
                "--duration",
                "4s",
                "--fault",
                "holder-crash@1s+1s",
            ];
            args.extend_from_slice(extra);
            run_ok(&args)
        })
    };
    // Polls come every 50 ms ± 50%; loads take 100 ms; 150 ms more for a loaded machine.
    let (poll, load, slack) = (75, 100, 150);
    // Fixed lease: blocked for the lease, less what the load had run when it died (Redis's
    // PTTL), and taken again by a waiter within a poll of the lease running out.
    let r = run(&["--lock-ttl", "1s"]).await.expect("run");
    let h = holder_of(&r);
    let (blocked, retaken) = (n(&h, "blocked_ms_max"), n(&h, "retaken_ms_max"));
    assert!(
        (1000 - load - 100..=1000).contains(&blocked),
        "blocked {blocked} ms: {h}"
    );
    assert!(
        retaken + 20 >= blocked && retaken <= blocked + poll + slack,
        "taken again after {retaken} ms, blocked {blocked} ms: {h}"
    );
    assert!(n(&h, "waiters") >= 1, "{h}");
    // A wait ends when the value appears: the lease, a poll, the load of the one that took over.
    let waited = n(&h, "waited_ms_max");
    assert!(
        waited <= 1000 + poll + load + slack,
        "waited {waited} ms: {h}"
    );
    let f = &faults(&r)[0];
    assert!(
        (900..=1300).contains(&n(f, "down_ms")),
        "the fresh instance came back after FOR: {f}"
    );
    // Auto lease: 3 × the loads' p99 (~300 ms), never the 1 s of --lock-ttl.
    let r = run(&["--lock-ttl", "auto"]).await.expect("run");
    let h = holder_of(&r);
    let lease = r.u("/lock/lease_ms_max");
    let (blocked, retaken) = (n(&h, "blocked_ms_max"), n(&h, "retaken_ms_max"));
    assert!(lease < 1000, "auto lease {lease} ms");
    assert!(
        blocked <= lease,
        "blocked {blocked} ms, auto lease {lease} ms: {h}"
    );
    assert!(
        retaken <= lease + poll + slack,
        "taken again after {retaken} ms, auto lease {lease} ms: {h}"
    );
    let waited = n(&h, "waited_ms_max");
    assert!(
        waited <= lease + poll + load + slack,
        "waited {waited} ms, auto lease {lease} ms: {h}"
    );
    drop(servers);
    let out = stampede()
        .args(["run", "--strategy", "xfetch", "--fault", "holder-crash@1s"])
        .output()
        .expect("run stampede");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("takes none"), "{stderr}");
}
