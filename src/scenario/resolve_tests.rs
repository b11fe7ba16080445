//! Tests of [`super`]: flags and files resolved into one Scenario, and every refusal.

use std::time::Duration;

use super::*;
use crate::fault::FaultKind;
use crate::scenario::faults::PG_FAULT_DB_TIMEOUT;
use crate::strategy::lock::LockTimeoutPolicy;

#[test]
fn flags_win_over_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.toml");
    std::fs::write(&p, "rps = 500\nttl = \"2s\"\nkeys = 7\n").unwrap();
    let flags = {
        let mut f: RunFlags = Default::default();
        f.data.keys = Some(9);
        f
    };
    let s = resolve(Some(&p), flags).unwrap();
    assert_eq!(s.keys, 9);
    assert_eq!(s.ttl.0, Duration::from_secs(2));
    assert_eq!(
        s.load,
        LoadShape::Open {
            rps: 500.0,
            arrival: Arrival::Constant
        }
    );
    let flags = {
        let mut f: RunFlags = Default::default();
        f.load.clients = Some(3);
        f
    };
    assert_eq!(
        resolve(Some(&p), flags).unwrap().load,
        LoadShape::Closed { clients: 3 }
    );
}

#[test]
fn file_errors_name_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    for (text, needle) in [
        ("rpz = 5\n", "rpz"),
        ("rps = 0\n", "`rps` in"),
        ("zipf = -1\n", "`zipf` in"),
        ("duration = \"soon\"\n", "duration"),
        ("strategy = \"magic\"\n", "cache-aside"),
        ("rps = [\n", "line"),
    ] {
        std::fs::write(&p, text).unwrap();
        let e = resolve(Some(&p), RunFlags::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.toml"), "{text}: {e}");
        assert!(e.contains(needle), "{text}: {e}");
    }
}

fn dur(s: &str) -> Dur {
    s.parse().unwrap()
}

#[test]
fn bad_faults_are_usage_errors_that_say_why() {
    let case = |at: &[&str], down: &[&str], extra: RunFlags| {
        let flags = {
            let mut f = extra;
            f.faults.kill_redis_at = at.iter().map(|s| dur(s)).collect();
            f.faults.redis_down_for = down.iter().map(|s| dur(s)).collect();
            f
        };
        resolve(None, flags).unwrap_err().to_string()
    };
    let none = RunFlags::default;
    assert!(case(&["1s"], &[], none()).contains("needs --redis-down-for"));
    assert!(case(&[], &["1s"], none()).contains("needs --kill-redis-at"));
    assert!(case(&["1s", "5s"], &["1s"], none()).contains("paired in order"));
    assert!(case(&["9s"], &["2s"], none()).contains("still be down when the run ends"));
    assert!(case(&["1s", "2s"], &["3s", "1s"], none()).contains("must not overlap"));
    assert!(case(&["1s"], &["0s"], none()).contains("longer than 0"));
    let external = {
        let mut f: RunFlags = Default::default();
        f.servers.redis_url = Some("redis://127.0.0.1:1/".into());
        f
    };
    // SHUTDOWN NOSAVE loses every client's unsaved data: consent first, then the restart.
    let e = case(&["1s"], &["1s"], external.clone());
    assert!(e.contains("SHUTDOWN NOSAVE"), "{e}");
    assert!(e.contains("--allow-kill-external"), "{e}");
    assert!(e.contains("with --redis-restart-cmd"), "{e}");
    let consented = {
        let mut f = external.clone();
        f.faults.allow_kill_external = true;
        f
    };
    assert!(case(&["1s"], &["1s"], consented.clone()).contains("needs --redis-restart-cmd"));
    let restart_only = {
        let mut f = external.clone();
        f.faults.redis_restart_cmd = Some("redis-server".into());
        f
    };
    let e = case(&["1s"], &["1s"], restart_only.clone());
    assert!(e.contains("--allow-kill-external"), "{e}");
    assert!(!e.contains("with --redis-restart-cmd"), "{e}");
    resolve(None, {
        let mut f = restart_only;
        f.faults.kill_redis_at = vec![dur("1s")];
        f.faults.redis_down_for = vec![dur("1s")];
        f.faults.allow_kill_external = true;
        f
    })
    .unwrap();
    let managed_cmd = {
        let mut f: RunFlags = Default::default();
        f.faults.redis_restart_cmd = Some("redis-server".into());
        f
    };
    assert!(case(&[], &[], managed_cmd).contains("is a setting of an external Redis"));
    let heavy_with_cost = {
        let mut f: RunFlags = Default::default();
        f.db.db_query = Some(DbQuery::Heavy);
        f.db.db_cost = Some(dur("5ms"));
        f
    };
    assert!(case(&[], &[], heavy_with_cost).contains("drop --db-cost"));
}

#[test]
fn more_fault_kinds_their_checks_and_the_default_db_deadline() {
    let err = |flags: RunFlags| resolve(None, flags).unwrap_err().to_string();
    let pg = |at: &str, down: &str| {
        let mut f: RunFlags = Default::default();
        f.faults.kill_postgres_at = vec![dur(at)];
        f.faults.postgres_down_for = vec![dur(down)];
        f
    };
    // A Postgres fault without --db-timeout gets the default deadline; the user's wins.
    let s = resolve(None, pg("1s", "2s")).unwrap();
    assert_eq!(s.faults[0].kind, FaultKind::KillPostgres);
    assert_eq!(s.db_timeout, Some(PG_FAULT_DB_TIMEOUT));
    let s = resolve(None, {
        let mut f = pg("1s", "2s");
        f.db.db_timeout = Some(dur("200ms"));
        f
    })
    .unwrap();
    assert_eq!(s.db_timeout, Some(dur("200ms")));
    assert_eq!(resolve(None, RunFlags::default()).unwrap().db_timeout, None);

    // Different servers may be down at once; one server may not be down twice.
    let mixed = {
        let mut f = pg("1s", "3s");
        f.faults.pause_redis_at = vec![dur("2s")];
        f.faults.pause_for = vec![dur("1s")];
        f.faults.kill_redis_at = vec![dur("5s")];
        f.faults.redis_down_for = vec![dur("1s")];
        f
    };
    let s = resolve(None, mixed.clone()).unwrap();
    let kinds: Vec<FaultKind> = s.faults.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            FaultKind::KillPostgres,
            FaultKind::PauseRedis,
            FaultKind::KillRedis
        ]
    );
    let e = err({
        let mut f = mixed;
        f.faults.pause_redis_at = vec![dur("5s")];
        f
    });
    assert!(e.contains("--pause-redis-at 5s --pause-for 1s"), "{e}");
    assert!(e.contains("must not overlap"), "{e}");
    assert!(err(pg("1s", "0s")).contains("longer than 0"));

    // External servers: a pause needs consent, a Postgres crash needs the user's commands.
    let pause_ext = {
        let mut f: RunFlags = Default::default();
        f.servers.redis_url = Some("redis://127.0.0.1:1/".into());
        f.faults.pause_redis_at = vec![dur("1s")];
        f.faults.pause_for = vec![dur("1s")];
        f
    };
    assert!(err(pause_ext.clone()).contains("--allow-pause-external"));
    resolve(None, {
        let mut f = pause_ext;
        f.faults.allow_pause_external = true;
        f
    })
    .unwrap();
    let pg_ext = {
        let mut f = pg("1s", "1s");
        f.servers.pg_url = Some("postgres://u@127.0.0.1:1/db".into());
        f
    };
    let e = err(pg_ext.clone());
    assert!(
        e.contains("needs --pg-kill-cmd and --pg-restart-cmd"),
        "{e}"
    );
    assert!(e.contains("pg_terminate_backend"), "{e}");
    let e = err({
        let mut f = pg_ext.clone();
        f.faults.pg_kill_cmd = Some("pg_ctl stop -m immediate".into());
        f
    });
    assert!(e.contains("needs --pg-restart-cmd"), "{e}");
    resolve(None, {
        let mut f = pg_ext;
        f.faults.pg_kill_cmd = Some("k".into());
        f.faults.pg_restart_cmd = Some("r".into());
        f
    })
    .unwrap();
    let e = err({
        let mut f: RunFlags = Default::default();
        f.faults.pg_restart_cmd = Some("r".into());
        f
    });
    assert!(e.contains("is a setting of an external Postgres"), "{e}");
    let e = err({
        let mut f: RunFlags = Default::default();
        f.faults.pg_kill_cmd = Some(" ".into());
        f
    });
    assert!(e.contains("--pg-kill-cmd is empty"), "{e}");
}

#[test]
fn the_fault_scenarios_resolve() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    for (file, kind) in [
        ("redis-outage.toml", FaultKind::KillRedis),
        ("redis-pause.toml", FaultKind::PauseRedis),
        ("postgres-crash.toml", FaultKind::KillPostgres),
    ] {
        let s = resolve(Some(&dir.join(file)), RunFlags::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(s.faults.len(), 1, "{file}");
        assert_eq!(s.faults[0].kind, kind, "{file}");
    }
}

#[test]
fn file_faults_of_every_kind_and_their_errors_name_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mixed.toml");
    std::fs::write(
        &p,
        "[[fault]]\nkind = \"kill-postgres\"\nat = \"1s\"\ndown_for = \"2s\"\n\
         [[fault]]\nkind = \"pause-redis\"\nat = \"2s\"\ndown_for = \"1s\"\n",
    )
    .unwrap();
    let s = resolve(Some(&p), RunFlags::default()).unwrap();
    assert_eq!(s.faults.len(), 2);
    assert_eq!(s.db_timeout, Some(PG_FAULT_DB_TIMEOUT));
    std::fs::write(
        &p,
        "[[fault]]\nkind = \"kill-redis\"\nat = \"1s\"\ndown_for = \"2s\"\n\
         [[fault]]\nkind = \"pause-redis\"\nat = \"2s\"\ndown_for = \"1s\"\n",
    )
    .unwrap();
    let e = resolve(Some(&p), RunFlags::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[[fault]] #2 (kind = \"pause-redis\") in"),
        "{e}"
    );
    assert!(e.contains("mixed.toml"), "{e}");
    assert!(e.contains("must not overlap"), "{e}");
    std::fs::write(&p, "allow_pause_external = true\npg_kill_cmd = \"\"\n").unwrap();
    let e = resolve(Some(&p), RunFlags::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("`pg_kill_cmd` in"), "{e}");
}

#[test]
fn file_faults_are_tables_and_flags_replace_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("outage.toml");
    std::fs::write(
        &p,
        "duration = \"10s\"\n[[fault]]\nkind = \"kill-redis\"\nat = \"4s\"\ndown_for = \"3s\"\n",
    )
    .unwrap();
    let s = resolve(Some(&p), RunFlags::default()).unwrap();
    assert_eq!(s.faults.len(), 1);
    assert_eq!(
        (s.faults[0].at, s.faults[0].down_for),
        (dur("4s"), dur("3s"))
    );
    let flags = {
        let mut f: RunFlags = Default::default();
        f.faults.kill_redis_at = vec![dur("1s")];
        f.faults.redis_down_for = vec![dur("1s")];
        f
    };
    let s = resolve(Some(&p), flags).unwrap();
    assert_eq!(s.faults[0].at, dur("1s"), "flags replace the file's faults");

    for (text, needle) in [
        (
            "[[fault]]\nkind = \"kill-memcached\"\nat = \"1s\"\ndown_for = \"1s\"\n",
            "kill-postgres",
        ),
        (
            "[[fault]]\nkind = \"kill-redis\"\nat = \"1s\"\n",
            "down_for",
        ),
        (
            "[[fault]]\nkind = \"kill-redis\"\nat = \"1s\"\ndown_for = \"1s\"\nwhen = 1\n",
            "when",
        ),
        ("kill_redis_at = \"1s\"\n", "kill_redis_at"),
        // A key of another kind: refused by the kind's own list, as on the command line.
        (
            "[[fault]]\nkind = \"kill-redis\"\nat = \"1s\"\ndown_for = \"1s\"\nfraction = \"10%\"\n",
            "`fraction` is not a setting of kill-redis; kill-redis takes no keys besides at and for",
        ),
        (
            "[[fault]]\nkind = \"spike\"\nat = \"1s\"\nfor = \"1s\"\nslot = 3\n",
            "the keys of spike: factor",
        ),
        (
            "[[fault]]\nkind = \"kill-redis\"\nat = \"9s\"\ndown_for = \"5s\"\n",
            "[[fault]] #1",
        ),
    ] {
        std::fs::write(&p, text).unwrap();
        let e = resolve(Some(&p), RunFlags::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("outage.toml"), "{text}: {e}");
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn the_breaker_takes_its_defaults_and_its_settings_need_it() {
    let s = resolve(None, {
        let mut f: RunFlags = Default::default();
        f.protect.breaker = Some(true);
        f.protect.breaker_latency = Some(dur("200ms"));
        f.protect.db_limit = Some(4);
        f
    })
    .unwrap();
    let b = s.breaker.expect("on");
    assert_eq!(b.latency, dur("200ms"));
    assert_eq!(
        (b.error_rate, b.window, b.cooldown, b.probes, b.min_loads),
        (crate::values::Percent(0.5), dur("1s"), dur("2s"), 3, 20)
    );
    assert_eq!(s.db_limit, Some(4));
    let text = serde_json::to_string(&s).unwrap();
    let back: super::super::Scenario = serde_json::from_str(&text).unwrap();
    assert_eq!(back.breaker, Some(b));

    let e = resolve(None, {
        let mut f: RunFlags = Default::default();
        f.protect.breaker_probes = Some(5);
        f
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--breaker-probes") && e.contains("add --breaker"),
        "{e}"
    );
    let off = resolve(None, {
        let mut f: RunFlags = Default::default();
        f.protect.breaker = Some(false);
        f
    })
    .unwrap();
    assert!(off.breaker.is_none() && off.db_limit.is_none());

    // In a file: `breaker = true` and its keys; flags on top.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b.toml");
    std::fs::write(
        &p,
        "breaker = true\nbreaker_cooldown = \"500ms\"\ndb_limit = 2\n",
    )
    .unwrap();
    let s = resolve(Some(&p), RunFlags::default()).unwrap();
    assert_eq!(s.breaker.map(|b| b.cooldown), Some(dur("500ms")));
    assert_eq!(s.db_limit, Some(2));
    std::fs::write(&p, "breaker_window = \"2s\"\n").unwrap();
    assert!(resolve(Some(&p), RunFlags::default()).is_err());
}

#[test]
fn the_fail_safe_and_eager_refresh_take_the_presets_defaults_and_refuse_what_needs_them() {
    let with = |strategy: &str, f: RunFlags| {
        resolve(None, {
            let mut f = f;
            f.cache.strategy = Some(strategy.to_string());
            f
        })
    };
    let fusion = with("fusion", RunFlags::default()).unwrap();
    let fs = fusion.fail_safe.unwrap();
    assert_eq!(
        (fs.max.0, fs.throttle.0, fs.soft_timeout.map(|d| d.0)),
        (
            Duration::from_secs(30),
            Duration::from_secs(30),
            Some(Duration::from_millis(100))
        ),
        "10 × the 3 s TTL, FusionCache's recommended throttle and soft timeout"
    );
    assert_eq!(fusion.eager_refresh, Some(Percent(0.9)));
    let mine = with("fusion", {
        let mut f: RunFlags = Default::default();
        f.cache.fail_safe = Some(dur("5s"));
        f.cache.eager_refresh = Some(Percent(0.5));
        f
    })
    .unwrap();
    assert_eq!(mine.fail_safe.unwrap().max.0, Duration::from_secs(5));
    assert_eq!(mine.eager_refresh, Some(Percent(0.5)), "a flag overrides");
    assert_eq!(
        with("caffeine-refresh", RunFlags::default())
            .unwrap()
            .eager_refresh,
        Some(Percent(0.8))
    );
    let laravel = with("laravel-flexible", {
        let mut f: RunFlags = Default::default();
        f.data.ttl = Some(dur("4s"));
        f
    })
    .unwrap();
    assert_eq!(laravel.stale.0, Duration::from_secs(4), "stale = TTL");
    let plain = with("cache-aside", RunFlags::default()).unwrap();
    assert!(plain.fail_safe.is_none() && plain.eager_refresh.is_none());

    for (f, needle) in [
        (
            {
                let mut f: RunFlags = Default::default();
                f.cache.soft_timeout = Some(dur("100ms"));
                f
            },
            "--soft-timeout is a setting of the fail-safe",
        ),
        (
            {
                let mut f: RunFlags = Default::default();
                f.cache.fail_safe_throttle = Some(dur("1s"));
                f
            },
            "--fail-safe-throttle is a setting of the fail-safe",
        ),
        (
            {
                let mut f: RunFlags = Default::default();
                f.cache.eager_refresh = Some(Percent(1.0));
                f
            },
            "--eager-refresh must be between 0% and 100%",
        ),
        (
            {
                let mut f: RunFlags = Default::default();
                f.cache.fail_safe = Some(dur("0s"));
                f
            },
            "--fail-safe must be longer than 0",
        ),
        (
            {
                let mut f: RunFlags = Default::default();
                f.cache.lock_timeout_policy = Some(LockTimeoutPolicy::Stale);
                f.cache.strategy = Some("mutex".into());
                f
            },
            "add --fail-safe D",
        ),
    ] {
        let s = f
            .cache
            .strategy
            .clone()
            .unwrap_or_else(|| "cache-aside".into());
        let e = with(&s, f).unwrap_err();
        assert!(e.to_string().contains(needle), "{e}");
    }
    assert!(
        with("mutex", {
            let mut f: RunFlags = Default::default();
            f.cache.lock_timeout_policy = Some(LockTimeoutPolicy::Stale);
            f.cache.fail_safe = Some(dur("10s"));
            f
        })
        .is_ok(),
        "the fail-safe's kept value is what the lock-timeout policy stale serves"
    );
    let e = with("no-cache", {
        let mut f: RunFlags = Default::default();
        f.cache.fail_safe = Some(dur("1s"));
        f
    })
    .unwrap_err();
    assert!(e.to_string().contains("no-cache caches nothing"), "{e}");
}

/// The run flags of `stampede run ARGS`, as clap parses them.
fn run_flags(args: &[&str]) -> RunFlags {
    use clap::Parser;
    let cli = crate::cli::Cli::try_parse_from(["stampede", "run"].iter().chain(args))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    match cli.command {
        crate::cli::Command::Run(cmd) => cmd.setup.flags(),
        _ => unreachable!("a run"),
    }
}

fn json(s: &Scenario) -> serde_json::Value {
    serde_json::to_value(s).unwrap()
}

/// `--fault`, the per-kind shorthand flags and `[[fault]]` tables are three spellings of one
/// schedule: they resolve to the same scenario.
#[test]
fn fault_flag_shorthands_and_tables_resolve_alike() {
    let grammar = run_flags(&[
        "--fault",
        "kill-redis@3s+2s",
        "--fault",
        "drop-cache@4s,fraction=100%,order=hottest",
        "--fault",
        "slow-db@5s+3s,factor=4",
        "--fault",
        "spike@5s+2s,factor=3",
        "--fault",
        "kill-postgres@1s+1s",
        "--db-timeout",
        "1s",
    ]);
    let shorthands = run_flags(&[
        "--kill-redis-at",
        "3s",
        "--redis-down-for",
        "2s",
        "--drop-cache-at",
        "4s",
        "--drop-fraction",
        "100%",
        "--drop-order",
        "hottest",
        "--slow-db-at",
        "5s",
        "--slow-db-for",
        "3s",
        "--slow-db-factor",
        "4",
        "--spike-at",
        "5s",
        "--spike-for",
        "2s",
        "--spike-factor",
        "3",
        "--kill-postgres-at",
        "1s",
        "--postgres-down-for",
        "1s",
        "--db-timeout",
        "1s",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("faults.toml");
    std::fs::write(
        &p,
        "db_timeout = \"1s\"\n\
         [[fault]]\nkind = \"kill-redis\"\nat = \"3s\"\ndown_for = \"2s\"\n\
         [[fault]]\nkind = \"drop-cache\"\nat = \"4s\"\nfraction = \"100%\"\norder = \"hottest\"\n\
         [[fault]]\nkind = \"slow-db\"\nat = \"5s\"\nfor = \"3s\"\nfactor = 4\n\
         [[fault]]\nkind = \"spike\"\nat = \"5s\"\nfor = \"2s\"\nfactor = 3\n\
         [[fault]]\nkind = \"kill-postgres\"\nat = \"1s\"\ndown_for = \"1s\"\n",
    )
    .unwrap();
    let from_grammar = resolve(None, grammar).unwrap();
    assert_eq!(from_grammar.faults.len(), 5);
    assert_eq!(
        json(&from_grammar),
        json(&resolve(None, shorthands).unwrap())
    );
    // The same but for the file's name, which a scenario records.
    let mut from_file = json(&resolve(Some(&p), RunFlags::default()).unwrap());
    from_file["scenario_file"] = serde_json::Value::Null;
    assert_eq!(json(&from_grammar), from_file);

    // On a cluster: a migration's slot as a key, as --slot, and as the default.
    let cluster = |args: &[&str]| {
        let mut a = vec!["--redis-cluster"];
        a.extend(args);
        json(&resolve(None, run_flags(&a)).unwrap())
    };
    assert_eq!(
        cluster(&["--fault", "migrate-slot@2s,slot=12"]),
        cluster(&["--migrate-slot-at", "2s", "--slot", "12"])
    );
    assert_eq!(
        cluster(&["--fault", "migrate-slot@2s,slot=hottest"]),
        cluster(&["--migrate-slot-at", "2s"])
    );
    assert_eq!(
        cluster(&["--fault", "failover@2s"]),
        cluster(&["--failover-at", "2s"])
    );
    let e = resolve(
        None,
        run_flags(&[
            "--redis-cluster",
            "--slot",
            "3",
            "--fault",
            "migrate-slot@2s,slot=4",
        ]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--slot 3 and migrate-slot slot=4"), "{e}");
}

#[test]
fn command_line_faults_replace_the_files_and_errors_name_them_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("outage.toml");
    std::fs::write(
        &p,
        "[[fault]]\nkind = \"kill-redis\"\nat = \"4s\"\ndown_for = \"3s\"\n",
    )
    .unwrap();
    let s = resolve(Some(&p), run_flags(&["--fault", "drop-cache@1s"])).unwrap();
    let kinds: Vec<FaultKind> = s.faults.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [FaultKind::DropCache],
        "--fault replaces the file's faults"
    );
    // Both spellings on one command line make one schedule.
    let s = resolve(
        None,
        run_flags(&[
            "--fault",
            "drop-cache@1s",
            "--kill-redis-at",
            "4s",
            "--redis-down-for",
            "1s",
        ]),
    )
    .unwrap();
    assert_eq!(s.faults.len(), 2);
    for (args, words) in [
        (
            &[
                "--fault",
                "kill-redis@1s+2s",
                "--fault",
                "pause-redis@2s+1s",
            ][..],
            &["--fault pause-redis@2s+1s", "must not overlap"][..],
        ),
        (
            &["--fault", "kill-redis@8s+5s"][..],
            &["--fault kill-redis@8s+5s", "still be down"][..],
        ),
        (
            &["--fault", "drop-cache@1s,fraction=0%"][..],
            &["--fault drop-cache@1s,fraction=0%", "more than 0%"][..],
        ),
        (
            &["--fault", "spike@1s+1s,factor=1000"][..],
            &["factor 1000 is out of range"][..],
        ),
        (
            &["--fault", "drop-cache@1s", "--no-shocks"][..],
            &["--no-shocks"][..],
        ),
        (
            &["--drop-fraction", "50%"][..],
            &["--fault drop-cache@AT"][..],
        ),
        (&["--fault", "failover@1s"][..], &["Redis Cluster"][..]),
    ] {
        let e = resolve(None, run_flags(args)).unwrap_err().to_string();
        for w in words {
            assert!(e.contains(w), "{args:?}: {e}");
        }
    }
    // A bad --fault is clap's error, naming the flag and the bad part.
    use clap::Parser;
    let e =
        crate::cli::Cli::try_parse_from(["stampede", "run", "--fault", "drop-cache@1s,factr=2"])
            .unwrap_err()
            .to_string();
    assert!(
        e.contains("--fault") && e.contains("`factr` is not a key of drop-cache"),
        "{e}"
    );
}

/// A sweep axis on a fault's key lands on the run's one fault of that kind, from the flags
/// or the file; none or several is refused, naming the axis.
#[test]
fn a_fault_key_axis_sets_the_one_fault_of_its_kind() {
    use crate::fault::KeySet;
    let set = |v: &str| KeySet {
        kind: FaultKind::DropCache,
        key: "fraction".into(),
        value: v.into(),
    };
    let mut flags = run_flags(&["--fault", "drop-cache@4s"]);
    flags.faults.fault_keys = vec![set("10%")];
    let s = resolve(None, flags).unwrap();
    assert_eq!(s.faults[0].fraction, Some(Percent(0.1)));
    // The file's fault too.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("drop.toml");
    std::fs::write(&p, "[[fault]]\nkind = \"drop-cache\"\nat = \"2s\"\n").unwrap();
    let flags = {
        let mut f: RunFlags = Default::default();
        f.faults.fault_keys = vec![set("50%")];
        f
    };
    assert_eq!(
        resolve(Some(&p), flags).unwrap().faults[0].fraction,
        Some(Percent(0.5))
    );
    for (args, word) in [
        (&[][..], "the run has no drop-cache fault"),
        (
            &["--fault", "drop-cache@1s", "--fault", "drop-cache@2s"][..],
            "the run has 2 drop-cache faults",
        ),
    ] {
        let mut flags = run_flags(args);
        flags.faults.fault_keys = vec![set("10%")];
        let e = resolve(None, flags).unwrap_err().to_string();
        assert!(
            e.contains("--axis drop-cache.fraction") && e.contains(word),
            "{e}"
        );
    }
    let mut flags = run_flags(&["--fault", "drop-cache@4s"]);
    flags.faults.fault_keys = vec![set("0%")];
    let e = resolve(None, flags).unwrap_err().to_string();
    assert!(e.contains("more than 0%"), "{e}");
}

#[test]
fn a_holder_crash_needs_a_lock_and_a_surviving_instance() {
    let s = resolve(
        None,
        run_flags(&["--strategy", "mutex", "--fault", "holder-crash@1s"]),
    )
    .unwrap();
    assert_eq!(s.faults[0].kind, FaultKind::HolderCrash);
    assert!(s.faults[0].down_for.0.is_zero(), "+FOR is optional");
    let s = resolve(
        None,
        run_flags(&["--strategy", "swr+lease", "--fault", "holder-crash@1s+2s"]),
    )
    .unwrap();
    assert_eq!(s.faults[0].down_for, dur("2s"));
    // laravel-flexible refreshes under a lock (none on a miss): a holder can die.
    resolve(
        None,
        run_flags(&[
            "--strategy",
            "laravel-flexible",
            "--fault",
            "holder-crash@1s",
        ]),
    )
    .unwrap();
    for (args, needle) in [
        (&["--strategy", "xfetch"][..], "takes none"),
        (&["--strategy", "single-flight"][..], "takes none"),
        (
            &["--strategy", "mutex", "--instances", "1"][..],
            "leaves none",
        ),
    ] {
        let mut a = args.to_vec();
        a.extend(["--fault", "holder-crash@1s"]);
        let e = resolve(None, run_flags(&a)).unwrap_err().to_string();
        assert!(e.contains(needle), "{a:?}: {e}");
    }
}
