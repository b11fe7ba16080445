//! The app under test (`--target`), on real servers: stampede starts the example app
//! (examples/app) with `--app-cmd`, drives it over HTTP and reads its figures from the
//! servers. The herds come from the load ledger, the DB calls from pg_stat_statements; the
//! app is never left running. `conform` runs the Symfony and Rails reference apps
//! (examples/libraries) beside their presets.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, alive, cpu_turn, free_port, read_json, stampede};
use serde_json::Value;

/// One run at a time: each drives an app, two servers and the load generator on 2 cores.
const TARGET: &str = "http://127.0.0.1:{port}/items/{key}";

/// The example app's `--app-cmd` (built once per test binary, in tests/common).
fn app() -> &'static str {
    common::example_app()
}

fn u(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} missing in {v}"))
}

fn f(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{ptr} missing in {v}"))
}

/// The pid in the "app NAME started (pid N)" status line.
fn app_pid(stderr: &str) -> Option<u32> {
    let at = stderr.find("started (pid ")? + "started (pid ".len();
    stderr[at..].split(')').next()?.parse().ok()
}

/// Waits a little for a process we signalled to be gone (it is not our child: the tool reaps it).
fn gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(2);
    while alive(pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

#[test]
fn variants_herd_only_under_cache_aside_and_db_calls_match_the_ledger() {
    crate::common::light_turns();
    let app = app();
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().expect("temp dir");
    // A hot key (Zipf 1.2 over 50 keys) whose entry expires every second.
    let out = stampede()
        .args(["compare", "--target", TARGET, "--app-cmd", app])
        // One process: single-flight is per process (two would make a herd of two).
        .args(["--instances", "1"])
        .args(["--variant", "cache-aside=APP_STRATEGY=cache-aside"])
        .args(["--variant", "single-flight=APP_STRATEGY=single-flight"])
        .args(["--variant", "lock=APP_STRATEGY=lock"])
        .args([
            "--rps",
            "800",
            "--duration",
            "4s",
            "--keys",
            "50",
            "--zipf",
            "1.2",
        ])
        .args(["--ttl", "1s", "--db-cost", "20ms", "--quiet", "--out"])
        .arg(dir.path())
        .output()
        .expect("running stampede compare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = |name: &str| {
        read_json(&dir.path().join(format!("{name}.json")))
            .unwrap_or_else(|| panic!("{name}.json missing: {stderr}"))
    };
    for name in ["cache-aside", "single-flight", "lock"] {
        let v = r(name);
        assert_eq!(v["strategy"], name);
        let calls = u(&v, "/db/calls");
        assert!(calls > 0, "{name}: no DB calls: {}", v["app"]);
        // Every load went through the ledger function and was one statement of the app's role.
        assert_eq!(
            Some(calls),
            v.pointer("/app/ledger_loads").and_then(Value::as_u64),
            "{name}: pg_stat_statements and the ledger disagree: {}",
            v["app"]
        );
        assert_eq!(
            u(&v, "/http/status/2xx"),
            u(&v, "/requests/completed"),
            "{name}"
        );
        assert_eq!(u(&v, "/http/errors") + u(&v, "/http/timeouts"), 0, "{name}");
        assert_eq!(
            u(&v, "/outcomes/ok"),
            u(&v, "/requests/completed"),
            "{name}"
        );
        let pid = u(&v, "/app/pid") as u32;
        assert!(!alive(pid), "{name}: the app (pid {pid}) outlived its run");
    }
    let ca = r("cache-aside");
    assert!(
        u(&ca, "/db/peak_key_herd") >= 2 && u(&ca, "/db/redundant_loads") > 0,
        "cache-aside shows no herd in the ledger: {}",
        ca["db"]
    );
    for name in ["single-flight", "lock"] {
        let v = r(name);
        assert_eq!(u(&v, "/db/peak_key_herd"), 1, "{name}: {}", v["db"]);
        assert_eq!(u(&v, "/db/redundant_loads"), 0, "{name}: {}", v["db"]);
        assert!(
            u(&v, "/db/calls") < u(&ca, "/db/calls"),
            "{name} made no fewer DB calls than cache-aside"
        );
    }
}

/// An app that loads with its own query (not through the ledger's `stampede_load`): its herds
/// are unknown, never 0, a limit on them fails saying so, and the figures only the servers
/// can see carry their own names.
#[test]
fn an_app_that_bypasses_the_ledger_leaves_its_herds_unknown_and_a_limit_on_them_fails() {
    crate::common::light_turns();
    let app = format!("APP_LOADER=query {}", app());
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("r.json");
    let out = stampede()
        .args(["run", "--target", TARGET, "--app-cmd", &app])
        .args(["--rps", "300", "--duration", "2s", "--keys", "50"])
        .args(["--threshold", "peak_key_herd_max=5", "--out"])
        .arg(&json)
        .output()
        .expect("running stampede");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("peak_key_herd is unknown") && stderr.contains("stampede_load"),
        "{stderr}"
    );
    let v = read_json(&json).expect("results");
    let db = &v["db"];
    assert!(db["peak_key_herd"].is_null(), "{db}");
    assert!(db["redundant_loads"].is_null(), "{db}");
    assert!(
        v["unknown"]["db.peak_key_herd"]
            .as_str()
            .is_some_and(|w| w.contains("stampede_load")),
        "{db}"
    );
    assert!(db["peak_in_flight"].is_null(), "{db}");
    assert!(db["peak_active_sampled"].as_u64().is_some(), "{db}");
    assert!(u(&v, "/db/calls") > 0, "{db}");
    assert!(v["hit_rate"].is_null(), "{v}");
    assert!(v["unknown"]["hit_rate"].as_str().is_some(), "{v}");
    assert!(
        v.pointer("/redis/keyspace_hit_rate")
            .and_then(Value::as_f64)
            .is_some(),
        "{}",
        v["redis"]
    );
    assert_eq!(v["thresholds"][0]["passed"], false);
    assert!(v["thresholds"][0]["measured"].is_null());
    assert!(
        v["unknown"]["thresholds[0].measured"].as_str().is_some(),
        "{v}"
    );
    assert!(stdout.contains("peak herd unknown ("), "{stdout}");
}

/// The open loop opens no more connections than --http-conns: requests wait for a free one
/// (the wait counted in their latency) instead of each in flight opening its own.
#[test]
fn the_open_loop_keeps_to_its_connections() {
    crate::common::light_turns();
    let app = app();
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("r.json");
    let out = stampede()
        .args(["run", "--target", TARGET, "--app-cmd", app])
        .args(["--rps", "400", "--duration", "2s", "--keys", "50"])
        .args(["--http-conns", "3", "--out"])
        .arg(&json)
        .output()
        .expect("running stampede");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let v = read_json(&json).expect("results");
    let opened = u(&v, "/http/connections");
    assert!(
        (1..=3).contains(&opened),
        "{opened} connections: {}",
        v["http"]
    );
    let scheduled = u(&v, "/requests/scheduled");
    assert_eq!(u(&v, "/requests/completed"), scheduled, "{}", v["requests"]);
    assert_eq!(u(&v, "/http/status/2xx"), scheduled, "{}", v["http"]);
    assert!(
        stdout.contains(&format!("connections opened {opened}")),
        "{stdout}"
    );
}

#[test]
fn killing_redis_shows_in_the_apps_db_calls_and_latency() {
    crate::common::light_turns();
    let app = app();
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("r.json");
    // A TTL longer than the run: once the keys are cached, only the outage sends reads to
    // the database.
    let out = stampede()
        .args(["run", "--target", TARGET, "--app-cmd", app])
        .args([
            "--rps",
            "400",
            "--duration",
            "6s",
            "--keys",
            "100",
            "--ttl",
            "60s",
        ])
        .args([
            "--kill-redis-at",
            "3s",
            "--redis-down-for",
            "1500ms",
            "--quiet",
            "--out",
        ])
        .arg(&json)
        .output()
        .expect("running stampede");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v = read_json(&json).expect("results");
    let buckets = v["timeline"].as_array().expect("timeline");
    let in_range = |from: u64, to: u64| {
        buckets
            .iter()
            .filter(move |b| (from..to).contains(&u(b, "/t_ms")))
    };
    let before: Vec<&Value> = in_range(2000, 3000).collect();
    let during: Vec<&Value> = in_range(3200, 4500).collect();
    assert!(!before.is_empty() && !during.is_empty(), "{buckets:?}");
    let calls =
        |bs: &[&Value]| bs.iter().map(|b| u(b, "/db_calls")).sum::<u64>() as f64 / bs.len() as f64;
    let p99 = |bs: &[&Value]| bs.iter().map(|b| f(b, "/p99_ms")).fold(0.0, f64::max);
    assert!(
        calls(&during) > 5.0 * calls(&before) + 5.0,
        "the outage does not show in the app's DB calls: {:.1} per bucket before, {:.1} during",
        calls(&before),
        calls(&during)
    );
    assert!(
        p99(&during) >= 10.0 && p99(&during) > 2.0 * p99(&before),
        "the outage does not show in latency: p99 {:.2} ms before, {:.2} ms during",
        p99(&before),
        p99(&during)
    );
    // The app failed open: every request was answered.
    assert_eq!(u(&v, "/http/status/2xx"), u(&v, "/requests/completed"));
    assert_eq!(v["faults"][0]["kind"], "kill-redis", "{}", v["faults"]);
    assert!(!alive(u(&v, "/app/pid") as u32));
}

#[test]
fn a_target_that_refuses_connections_ends_the_run_with_exit_3_and_the_app_stopped() {
    let app = app();
    let _turn = cpu_turn();
    // The app is ready on its own port; the target is a port nothing listens on.
    let refused = free_port();
    let target = format!("http://127.0.0.1:{refused}/items/{{key}}");
    let out = stampede()
        .args(["run", "--target", &target, "--app-cmd", app])
        .args(["--app-ready", "http://127.0.0.1:{port}/health"])
        .args(["--rps", "100", "--duration", "2s", "--keys", "10"])
        .output()
        .expect("running stampede");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("cannot reach the target") && stderr.contains("refused"),
        "{stderr}"
    );
    let pid = app_pid(&stderr).expect("the app's pid in the status lines");
    assert!(gone(pid), "the app (pid {pid}) outlived a failed run");
}

#[test]
fn an_app_that_is_never_ready_fails_the_run_and_is_stopped() {
    let app = app();
    let _turn = cpu_turn();
    let out = stampede()
        .args(["run", "--target", TARGET, "--app-cmd", app])
        .args(["--app-ready", "http://127.0.0.1:{port}/no-such-page"])
        .args([
            "--app-ready-timeout",
            "1s",
            "--rps",
            "100",
            "--duration",
            "2s",
        ])
        .output()
        .expect("running stampede");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("was not ready within 1s"), "{stderr}");
    let pid = app_pid(&stderr).expect("the app's pid in the status lines");
    assert!(gone(pid), "the app (pid {pid}) outlived a failed run");
}

#[test]
fn ctrl_c_stops_the_app_and_keeps_the_figures() {
    let app = app();
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("r.json");
    let mut child = Command::new(BIN)
        .args(["run", "--target", TARGET, "--app-cmd", app])
        .args([
            "--rps",
            "200",
            "--duration",
            "60s",
            "--keys",
            "100",
            "--out",
        ])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting stampede");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let pid = loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            panic!("stampede ended before it started the app");
        };
        if let Some(p) = app_pid(&line) {
            break p;
        }
    };
    // Keep reading stderr so the tool never blocks on a full pipe.
    let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    std::thread::sleep(Duration::from_secs(2));
    assert!(alive(pid), "the app is not running during the run");
    // SAFETY: signalling the child this test started; it stops its servers and app on SIGINT.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("waiting for stampede");
    let stderr = rest.join().unwrap_or_default().join("\n");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(gone(pid), "the app (pid {pid}) outlived Ctrl-C");
    let v = read_json(&json).expect("results written after Ctrl-C");
    assert_eq!(v["interrupted"], true);
    assert!(u(&v, "/requests/completed") > 0);
}

/// An app already running (started here, as in a staging environment) on servers the tool
/// did not start, in the schema named with `--schema`. Where pg_stat_statements cannot be
/// read, the app's DB calls could never be known: the run is refused before traffic with the
/// fix, and leaves nothing behind. Where it can, they are counted by the server and the
/// schema is removed at the end.
#[test]
fn an_app_on_external_servers_is_measured_by_the_server_or_refused_with_the_fix() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let servers = rt.block_on(common::Servers::start(None));
    let (ru, pu) = servers.urls();
    rt.block_on(async {
        common::pg(&pu)
            .await
            .batch_execute("CREATE DATABASE nostats")
            .await
            .unwrap()
    });
    let schemas_named_shop = |url: &str| -> i64 {
        rt.block_on(async {
            common::pg(url)
                .await
                .query_one(
                    "SELECT count(*) FROM pg_namespace WHERE nspname = 'shop'",
                    &[],
                )
                .await
                .unwrap()
                .get(0)
        })
    };
    let run_against = |db_url: &str| {
        let port = free_port();
        let mut app_proc = Command::new(app());
        app_proc
            .env("REDIS_URL", &ru)
            .env("DATABASE_URL", db_url)
            .env("DB_SCHEMA", "shop")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _app = common::Children(vec![app_proc.spawn().expect("starting the example app")]);
        common::wait_for("the app to listen", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        let target = format!("http://127.0.0.1:{port}/items/{{key}}");
        let _turn = cpu_turn();
        let dir = tempfile::tempdir().expect("temp dir");
        let json = dir.path().join("r.json");
        let out = stampede()
            .args(["run", "--target", &target])
            .args(["--redis-url", &ru, "--pg-url", db_url, "--schema", "shop"])
            .args(["--rps", "200", "--duration", "2s", "--keys", "50", "--out"])
            .arg(&json)
            .output()
            .expect("running stampede");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), said, read_json(&json))
    };

    let nostats = pu.replace("/postgres", "/nostats");
    let (code, said, written) = run_against(&nostats);
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains("pg_stat_statements") && said.contains("CREATE EXTENSION"),
        "{said}"
    );
    assert!(written.is_none(), "no results of a run that never ran");
    assert_eq!(
        schemas_named_shop(&nostats),
        0,
        "the refused run left its schema"
    );

    let (code, said, written) = run_against(&pu);
    assert_eq!(code, Some(0), "{said}");
    let v = written.expect("results");
    let completed = u(&v, "/requests/completed");
    assert!(completed > 300, "{}", v["requests"]);
    let calls = u(&v, "/db/calls");
    // A cold cache over 50 keys: about one load a key drawn (a few more where two requests
    // of one key race), counted by the server.
    assert!(calls >= 25 && calls <= completed / 2, "{}", v["db"]);
    assert_eq!(v["db"]["calls_server"], v["db"]["calls"], "{}", v["db"]);
    assert_eq!(
        schemas_named_shop(&pu),
        0,
        "the schema --schema named was left behind"
    );
}

/// `conform --library NAME` on a cold hot key, short enough (3 s of a 30 s TTL) that the cold
/// miss is the only one: 8 clients over 2 instances, loads of 200 ms so a herd overlaps. Both
/// sides' trials and the comparison, read back from --out.
fn conform(library: &str, extra: &[&str]) -> (Value, tempfile::TempDir) {
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = stampede()
        .args(["conform", "--library", library, "--trials", "2", "--quiet"])
        .args(["--clients", "8", "--instances", "2", "--keys", "1"])
        .args(["--ttl", "30s", "--duration", "3s", "--db-cost", "200ms"])
        .args(extra)
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("running stampede conform");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "conform --library {library} failed (its runtime is installed by scripts/install-deps --for-tests): {stderr}"
    );
    let c = read_json(&dir.path().join("conform.json"))
        .unwrap_or_else(|| panic!("conform.json missing: {stderr}"));
    (c, dir)
}

/// A figure of conform.json: its verdict and each side's (lowest, highest) over the trials.
fn figure(c: &Value, key: &str) -> (String, (f64, f64), (f64, f64)) {
    let fig = c["figures"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["key"] == key))
        .unwrap_or_else(|| panic!("no figure {key} in {c}"));
    let side = |s: &str| (f(&fig[s], "/min"), f(&fig[s], "/max"));
    (
        fig["verdict"].as_str().unwrap_or("").to_string(),
        side("preset"),
        side("library"),
    )
}

/// Every trial of the library's side: its loads went through the ledger and were counted
/// exactly (ledger loads = the server's calls), by two processes of the app, both stopped.
fn library_trials_counted_exactly(dir: &std::path::Path, side: &str) -> Vec<Value> {
    (1..=2)
        .map(|t| {
            let p = dir.join(side).join(format!("trial-{t}.json"));
            let v = read_json(&p).unwrap_or_else(|| panic!("{} missing", p.display()));
            assert_eq!(
                v.pointer("/app/ledger_loads").and_then(Value::as_u64),
                Some(u(&v, "/db/calls")),
                "{side} trial {t}: ledger and pg_stat_statements disagree: {}",
                v["app"]
            );
            let procs = v["app"]["processes"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert_eq!(
                procs.len(),
                2,
                "{side}: one process per instance: {}",
                v["app"]
            );
            assert_ne!(procs[0]["port"], procs[1]["port"]);
            for p in &procs {
                let pid = u(p, "/pid") as u32;
                assert!(!alive(pid), "{side}: the app (pid {pid}) outlived its run");
            }
            assert_eq!(u(&v, "/http/errors") + u(&v, "/http/timeouts"), 0, "{side}");
            v
        })
        .collect()
}

/// Rails' race_condition_ttl takes no lock: at the cold miss every client loads, in the
/// library (puma's threads) and in its preset alike.
#[test]
fn rails_and_its_preset_herd_every_client_at_a_cold_miss() {
    let (c, dir) = conform("rails", &[]);
    assert_eq!(c["preset"], "rails-race-ttl");
    for key in ["db_calls", "peak_herd"] {
        let (verdict, preset, library) = figure(&c, key);
        assert_eq!(verdict, "agrees", "{key}: {c}");
        // 8 clients, each its own load of the key (a late one may start after the first
        // ended: at least 6 at once).
        for (side, (lo, hi)) in [("preset", preset), ("library", library)] {
            let floor = if key == "db_calls" { 8.0 } else { 6.0 };
            assert!(lo >= floor && hi <= 8.0, "{key} {side}: {lo}-{hi}: {c}");
        }
    }
    library_trials_counted_exactly(dir.path(), "rails-library");
}

/// Symfony's lock is an flock per host: one load per instance at the cold miss, in the library
/// (each instance with its own lock files) and in its preset (single-flight per instance); a
/// drop-cache empties the app's keys under CACHE_PREFIX and each instance loads once more.
#[test]
fn symfony_and_its_preset_load_once_per_instance_and_after_a_drop() {
    let (c, dir) = conform("symfony", &["--fault", "drop-cache@1500ms"]);
    // Debian's Symfony Cache is 5.4: its own preset is the one measured beside it.
    assert_eq!(c["preset"], "symfony-5.4");
    let (verdict, preset, library) = figure(&c, "peak_herd");
    assert_eq!(verdict, "agrees", "{c}");
    for (side, (lo, hi)) in [("preset", preset), ("library", library)] {
        assert!(lo >= 1.0 && hi <= 2.0, "peak herd {side}: {lo}-{hi}: {c}");
    }
    let (verdict, preset, library) = figure(&c, "db_calls");
    assert_eq!(verdict, "agrees", "{c}");
    // The cold miss and the drop: one load per instance each.
    for (side, (lo, hi)) in [("preset", preset), ("library", library)] {
        assert!(lo >= 2.0 && hi <= 4.0, "db calls {side}: {lo}-{hi}: {c}");
    }
    for v in library_trials_counted_exactly(dir.path(), "symfony-library") {
        assert!(
            v.pointer("/faults/0/removed").and_then(Value::as_u64) >= Some(1),
            "the drop removed none of the app's keys: {}",
            v["faults"]
        );
    }
}

/// A library with no reference app here is refused before anything starts, saying why.
#[test]
fn a_library_that_cannot_be_installed_here_is_refused_with_the_reason() {
    let out = stampede()
        .args(["conform", "--library", "laravel"])
        .output()
        .expect("running stampede conform");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot be run here") && stderr.contains("Composer"),
        "{stderr}"
    );
}
