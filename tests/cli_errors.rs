//! Bad input is refused before any server starts, with exit code 2 and a message naming the
//! flag or the scenario file and key; an unreachable server is exit 3, naming the URL.

use crate::common;

use std::time::{Duration, Instant};

use common::*;

fn fails_with(args: &[&str], code: i32, needles: &[&str]) {
    let out = stampede().args(args).output().expect("run stampede");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    for n in needles {
        assert!(
            stderr.contains(n),
            "{args:?}: stderr lacks {n:?}:\n{stderr}"
        );
    }
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    fails_with(&["run", "--rps", "0"], 2, &["--rps"]);
    fails_with(&["run", "--rps=-5"], 2, &["--rps"]);
    fails_with(&["run", "--rps", "lots"], 2, &["--rps", "lots"]);
    fails_with(&["run", "--zipf", "0"], 2, &["--zipf"]);
    fails_with(&["run", "--zipf=-1.5"], 2, &["--zipf"]);
    fails_with(&["run", "--duration", "ten"], 2, &["--duration"]);
    fails_with(&["run", "--duration", "10"], 2, &["--duration", "unit"]);
    fails_with(
        &["run", "--strategy", "magic"],
        2,
        &[
            "magic",
            "cache-aside",
            "mutex",
            "single-flight",
            "xfetch",
            "swr",
        ],
    );
    fails_with(
        &["run", "--strategy", "xfetch+swr+xfetch"],
        2,
        &["xfetch", "swr", "valid"],
    );
    fails_with(&["run", "--rps", "10", "--clients", "5"], 2, &["--clients"]);
    // One grammar for faults: the bad part is named, with what is allowed.
    fails_with(
        &["run", "--fault", "kil-redis@1s+1s"],
        2,
        &[
            "--fault",
            "`kil-redis` is not a fault kind",
            "kill-redis, kill-postgres",
        ],
    );
    fails_with(
        &["run", "--fault", "slow-db@1s+1s,fraction=10%"],
        2,
        &["--fault", "`fraction` is not a key of slow-db", "factor"],
    );
    fails_with(
        &[
            "run",
            "--fault",
            "kill-redis@1s+2s",
            "--fault",
            "pause-redis@2s+1s",
        ],
        2,
        &["--fault pause-redis@2s+1s", "must not overlap"],
    );
    fails_with(
        &[
            "sweep",
            "--strategies",
            "mutex",
            "--axis",
            "drop-cache.fraction=10%,50%",
            "--out",
            "/nonexistent/stampede-sweep",
        ],
        2,
        &["--axis drop-cache.fraction", "no drop-cache fault"],
    );
    fails_with(&["run", "--keys", "10", "--warm", "11"], 2, &["--warm"]);
    fails_with(&["run", "--jitter", "150%"], 2, &["--jitter"]);
    fails_with(
        &[
            "run",
            "--lock-timeout-policy",
            "stale",
            "--strategy",
            "mutex",
        ],
        2,
        &["swr"],
    );
    fails_with(
        &["run", "--scenario", "/nonexistent/s.toml"],
        2,
        &["/nonexistent/s.toml"],
    );
}

#[test]
fn bad_scenario_files_exit_2_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("rps = 0\n", &["`rps`"]),
        ("zipf = -1\n", &["`zipf`"]),
        ("duration = \"soon\"\n", &["duration"]),
        ("strategy = \"magic\"\n", &["`strategy`", "cache-aside"]),
        ("rpss = 100\n", &["rpss"]),
        ("keys = \"many\"\n", &["keys"]),
        ("rps = 100\nclients = 5\n", &["rps", "clients"]),
        ("rps = [1,\n", &["line"]),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&p, text).unwrap();
        let mut n: Vec<&str> = needles.to_vec();
        let name = format!("bad{i}.toml");
        n.push(&name);
        fails_with(&["run", "--scenario", p.to_str().unwrap()], 2, &n);
    }
}

#[test]
fn shipped_scenarios_parse() {
    for entry in std::fs::read_dir("scenarios").unwrap() {
        let p = entry.unwrap().path();
        // A scenario that resolves gets as far as connecting: exit 3 on unreachable servers,
        // where a bad one would have stopped at 2.
        let out = stampede()
            .args(["run", "--scenario"])
            .arg(&p)
            .args([
                "--redis-url",
                "redis://127.0.0.1:1/",
                "--pg-url",
                "postgres://x@127.0.0.1:1/x",
                "--quiet",
                // Faults on external servers need their commands (and a pause or a shutdown
                // an opt-in) to be valid.
                "--redis-restart-cmd",
                "true",
                "--allow-pause-external",
                "--allow-kill-external",
                "--pg-kill-cmd",
                "true",
                "--pg-restart-cmd",
                "true",
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn unreachable_servers_exit_3_quickly_naming_the_url() {
    let t = Instant::now();
    fails_with(
        &[
            "run",
            "--redis-url",
            "redis://:secret@127.0.0.1:1/",
            "--pg-url",
            "postgres://u:pw@127.0.0.1:1/db",
            "--quiet",
        ],
        3,
        &["127.0.0.1:1"],
    );
    assert!(t.elapsed() < Duration::from_secs(15));
    let out = stampede()
        .args([
            "run",
            "--redis-url",
            "redis://:secret@127.0.0.1:1/",
            "--pg-url",
            "postgres://u:pw@127.0.0.1:1/db",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("secret") && !stderr.contains(":pw@"),
        "password leaked: {stderr}"
    );
}

#[test]
fn help_explains_every_run_flag() {
    let out = stampede().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--strategy",
        "--rps",
        "--clients",
        "--arrival",
        "--duration",
        "--warmup",
        "--keys",
        "--zipf",
        "--seed",
        "--value-size",
        "--ttl",
        "--db-cost",
        "--db-pool",
        "--instances",
        "--max-inflight",
        "--warm",
        "--redis-url",
        "--pg-url",
        "--redis-timeout",
        "--interval",
        "--out",
        "--quiet",
        "--scenario",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn settings_whose_resources_cannot_exist_are_refused_at_once() {
    let t = Instant::now();
    fails_with(
        &["run", "--db-pool", "100000", "--duration", "1s"],
        2,
        &["--db-pool", "2000"],
    );
    fails_with(
        &["run", "--instances", "200", "--db-pool", "100"],
        2,
        &["20000", "connections"],
    );
    fails_with(&["run", "--clients", "10000000"], 2, &["--clients"]);
    fails_with(&["run", "--redis-conns", "1000"], 2, &["--redis-conns"]);
    fails_with(&["run", "--keys", "100000000"], 2, &["--keys"]);
    fails_with(
        &["run", "--keys", "10000000", "--value-size", "4096"],
        2,
        &["GiB"],
    );
    fails_with(
        &["run", "--repeat", "3", "--out", "x.json"],
        2,
        &["directory"],
    );
    fails_with(
        &["compare", "--strategies", "all", "--repeat", "0"],
        2,
        &["--repeat"],
    );
    // Refused before anything starts: no server, no wait.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn compare_help_lists_no_strategy_flag_it_would_refuse() {
    let out = stampede().args(["compare", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--strategies"), "{help}");
    assert!(!help.contains("--strategy "), "{help}");
    assert!(!help.contains("-s,"), "{help}");
    let out = stampede().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    // The help lists every threshold the metric list allows.
    for t in stampede::metric::threshold_names().split(", ") {
        assert!(help.contains(t), "run --help lacks threshold {t}");
    }
    assert!(
        help.contains("Defaults:"),
        "run --help says why the defaults are what they are"
    );
}

/// Writes, an app under test, your own query and shards each need something the others take
/// away: refused before any server starts, each with the reason.
#[test]
fn combinations_that_cannot_hold_are_refused_with_the_reason() {
    let ext = [
        "--redis-url",
        "redis://127.0.0.1:1",
        "--pg-url",
        "postgres://u@127.0.0.1:1/db",
    ];
    let with_ext = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec!["run".into()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend(ext.iter().map(|s| s.to_string()));
        v
    };
    let check = |args: Vec<String>, needles: &[&str]| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&a, 2, needles);
    };
    check(
        with_ext(&[
            "--write-rps",
            "10",
            "--db-sql",
            "SELECT 1 WHERE $1::int8 > 0",
            "--keys-sql",
            "SELECT 1",
        ]),
        &["--write-rps", "--db-sql"],
    );
    check(
        with_ext(&[
            "--write-rps",
            "10",
            "--target",
            "http://127.0.0.1:1/items/{key}",
            "--schema",
            "theirs",
        ]),
        &["--write-rps", "--target"],
    );
    // The built-in app's policies mean nothing to an app under test: refused, not ignored.
    for policy in [
        ["--l1", "100"],
        ["--fail-safe", "10s"],
        ["--eager-refresh", "80%"],
        ["--db-rate", "100"],
    ] {
        let args = [
            policy[0],
            policy[1],
            "--target",
            "http://127.0.0.1:1/items/{key}",
            "--schema",
            "theirs",
        ];
        check(with_ext(&args), &[policy[0], "--target"]);
    }
    check(
        with_ext(&["--write-rps", "10", "--shard", "0/2"]),
        &["--write-rps", "shard"],
    );
}

/// A limit on a figure the mode can never know is refused before anything starts, naming the
/// figure and why (a limit on an unknown figure would otherwise pass on nothing measured).
#[test]
fn thresholds_on_figures_a_mode_can_never_know_are_refused() {
    let ext = [
        "--redis-url",
        "redis://127.0.0.1:1",
        "--pg-url",
        "postgres://u@127.0.0.1:1/db",
    ];
    let mut app = vec![
        "run",
        "--target",
        "http://127.0.0.1:1/items/{key}",
        "--schema",
        "theirs",
        "--threshold",
        "hit_rate_min=90%",
    ];
    app.extend(ext);
    fails_with(&app, 2, &["hit_rate_min", "--target", "keyspace_hit_rate"]);
    for t in ["peak_key_herd_max=3", "redundant_loads_max=10"] {
        let mut shard = vec!["run", "--shard", "0/2", "--threshold", t];
        shard.extend(ext);
        fails_with(&shard, 2, &[t.split('=').next().unwrap(), "sharded run"]);
    }
}

/// `--lease-ttl` sets the lease coordination's token life: given to a strategy without a lease
/// it would do nothing, so it is refused before any server starts, as `--invalidate` without
/// writes is. `compare` takes it when one of its strategies has a lease.
#[test]
fn lease_ttl_without_a_lease_is_a_usage_error() {
    let ext = [
        "--redis-url",
        "redis://127.0.0.1:1",
        "--pg-url",
        "postgres://u@127.0.0.1:1/db",
    ];
    let with_ext = |extra: &[&str]| -> Vec<String> {
        extra
            .iter()
            .chain(ext.iter())
            .map(|s| s.to_string())
            .collect()
    };
    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    for strategy in ["cache-aside", "mutex", "xfetch+single-flight"] {
        let args = with_ext(&["run", "--strategy", strategy, "--lease-ttl", "3s"]);
        fails_with(
            &strs(&args),
            2,
            &["--lease-ttl", strategy, "--strategy lease"],
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(&file, "strategy = \"mutex\"\nlease_ttl = \"3s\"\n").unwrap();
    let args = with_ext(&["run", "--scenario", file.to_str().unwrap()]);
    fails_with(&strs(&args), 2, &["lease_ttl", "mutex"]);
    let args = with_ext(&[
        "compare",
        "--strategies",
        "mutex,xfetch",
        "--lease-ttl",
        "3s",
    ]);
    fails_with(&strs(&args), 2, &["--lease-ttl", "mutex, xfetch"]);
    // With a lease the setting is used: the run gets as far as the (unreachable) servers.
    let args = with_ext(&["run", "--strategy", "swr+lease", "--lease-ttl", "3s"]);
    fails_with(&strs(&args), 3, &[]);
    let args = with_ext(&[
        "compare",
        "--strategies",
        "mutex,lease",
        "--lease-ttl",
        "3s",
    ]);
    fails_with(&strs(&args), 3, &[]);
}
