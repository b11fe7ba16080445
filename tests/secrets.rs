//! No secrets in results: results and baselines get committed, so every output (JSON,
//! Markdown, HTML, terminal, error messages) shows what a user gave with its credentials
//! redacted. The first test gives real servers passwords and passes URLs carrying them; the
//! second plants one distinct secret in every position a user can put one (URL userinfo and
//! query parameters, fault commands, an app's command, target, readiness URL, headers and
//! variant environments) and searches everything the tool printed or wrote for each.

use crate::common;

use std::path::Path;

use common::{Servers, cpu_turn, example_app, read_json, stampede};

const REDIS_PW: &str = "hunter2-redis-Zq9";
const PG_PW: &str = "hunter2-pg-Xw7";

/// Every file under `dir`, as text.
fn files(dir: &Path) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(files(&p));
        } else {
            v.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap_or_default(),
            ));
        }
    }
    v
}

#[test]
fn passwords_never_reach_any_output() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Dropped at the end of the test, pass or fail: their Drop stops them and removes their dirs.
    let (redis, pg) = rt.block_on(async {
        let Servers { redis, pg } = Servers::start(None).await;
        let client = redis::Client::open(redis.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg(REDIS_PW)
            .query_async(&mut conn)
            .await
            .unwrap();
        let (pc, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        // The managed cluster trusts loopback, so the URL's password is accepted either way:
        // what matters here is that the URL carries one.
        pc.batch_execute(&format!("ALTER ROLE stampede PASSWORD '{PG_PW}'"))
            .await
            .unwrap();
        (redis, pg)
    });
    let redis_url = format!("redis://:{REDIS_PW}@127.0.0.1:{}/", redis.port());
    let pg_url = format!(
        "postgres://stampede:{PG_PW}@127.0.0.1:{}/postgres",
        pg.port()
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let load = ["--rps", "200", "--keys", "50", "--duration", "1s"];

    let mut outputs: Vec<(String, i32, String)> = Vec::new();
    let mut sh = |name: &str, args: Vec<String>| {
        let o = stampede().args(&args).output().unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        outputs.push((name.to_string(), o.status.code().unwrap_or(-1), all));
    };
    let with = |cmd: &[&str], extra: &[&str]| -> Vec<String> {
        cmd.iter()
            .chain(load.iter())
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let run_out = d.join("run.json").display().to_string();
    let cmp_out = d.join("cmp").display().to_string();
    sh(
        "run",
        with(
            &["run", "--redis-url", &redis_url, "--pg-url", &pg_url],
            &["--out", &run_out, "--threshold", "db_calls_max=1"],
        ),
    );
    sh(
        "compare",
        with(
            &[
                "compare",
                "--strategies",
                "cache-aside,mutex",
                "--redis-url",
                &redis_url,
                "--pg-url",
                &pg_url,
            ],
            &["--out", &cmp_out],
        ),
    );
    for format in ["text", "markdown"] {
        sh(
            "check",
            vec![
                "check".into(),
                cmp_out.clone(),
                "--baseline".into(),
                cmp_out.clone(),
                "--format".into(),
                format.into(),
            ],
        );
    }
    // Failures print URLs too: a wrong password, an unreachable server, a bad scheme.
    let wrong_redis = format!("redis://:{REDIS_PW}x@127.0.0.1:{}/", redis.port());
    let dead_redis = format!("redis://:{REDIS_PW}@127.0.0.1:1/");
    let dead_pg = format!("postgres://stampede:{PG_PW}@127.0.0.1:1/postgres");
    let bad_scheme = format!("http://:{REDIS_PW}@127.0.0.1:1/");
    sh(
        "wrong redis password",
        with(
            &["run", "--redis-url", &wrong_redis, "--pg-url", &pg_url],
            &[],
        ),
    );
    sh(
        "unreachable redis",
        with(
            &["run", "--redis-url", &dead_redis, "--pg-url", &pg_url],
            &[],
        ),
    );
    sh(
        "unreachable postgres",
        with(
            &["run", "--redis-url", &redis_url, "--pg-url", &dead_pg],
            &[],
        ),
    );
    sh(
        "bad scheme",
        with(&["run", "--redis-url", &bad_scheme], &[]),
    );

    let codes: Vec<(&str, i32)> = outputs.iter().map(|(n, c, _)| (n.as_str(), *c)).collect();
    assert_eq!(
        codes,
        [
            ("run", 1),
            ("compare", 0),
            ("check", 0),
            ("check", 0),
            ("wrong redis password", 3),
            ("unreachable redis", 3),
            ("unreachable postgres", 3),
            ("bad scheme", 2),
        ],
        "{outputs:#?}"
    );
    let mut searched = outputs
        .iter()
        .map(|(n, _, text)| (n.clone(), text.clone()))
        .collect::<Vec<_>>();
    searched.extend(files(d));
    assert!(searched.len() >= 8 + 5, "{searched:#?}");
    for (what, text) in &searched {
        for pw in [REDIS_PW, PG_PW] {
            assert!(!text.contains(pw), "{what} shows the password:\n{text}");
        }
    }
    // The URLs are shown, redacted: the search above looked at text that names the servers.
    let redacted_redis = format!("redis://:***@127.0.0.1:{}/", redis.port());
    let redacted_pg = format!("postgres://stampede:***@127.0.0.1:{}/postgres", pg.port());
    for (what, text) in searched
        .iter()
        .filter(|(w, _)| w == "run" || w.ends_with(".json") && !w.ends_with("summary.json"))
    {
        assert!(text.contains(&redacted_redis), "{what}: {text}");
        assert!(text.contains(&redacted_pg), "{what}: {text}");
    }
    drop((redis, pg));
}

/// One command's exit code and what it printed.
struct Ran {
    name: String,
    code: i32,
    text: String,
}

fn ran(name: &str, args: &[String]) -> Ran {
    let o = stampede().args(args).output().expect("running stampede");
    Ran {
        name: name.to_string(),
        code: o.status.code().unwrap_or(-1),
        text: format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_secret_in_any_position_reaches_no_output() {
    // Light: 0.43 busy cores in a CI run, and what it asserts is the output's text.
    crate::common::light_turns();
    let app = example_app();
    // Each secret names where it was planted, so a failure says which position leaked.
    let positions = [
        "redis-userinfo",
        "redis-query",
        "pg-userinfo",
        "pg-query",
        "requirepass",
        "redis-cli-a",
        "pgpassword-kill",
        "pgpassword-restart",
        "target-userinfo",
        "target-query",
        "app-cmd-env",
        "app-ready-query",
        "header-value",
        "variant-token",
        "variant-plain",
        "sslpassword",
        "passfile",
        "variant-error-value",
        "variant-error-part",
        "header-without-colon",
        "keyless-target-userinfo",
        "keyless-target-query",
        "unreachable-target-query",
    ];
    let secret = |pos: &str| format!("Zq{}-s3cr3t", pos.replace('-', ""));
    let s = |pos: &str| {
        assert!(positions.contains(&pos), "{pos} is not a planted position");
        secret(pos)
    };

    let rt = tokio::runtime::Runtime::new().unwrap();
    // Started here and given by URL (fault commands apply only to servers the tool did not
    // start); their Drop stops them, pass or fail.
    let (redis, pg) = rt.block_on(async {
        let Servers { redis, pg } = Servers::start(None).await;
        let client = redis::Client::open(redis.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg(secret("redis-userinfo"))
            .query_async(&mut conn)
            .await
            .unwrap();
        (redis, pg)
    });
    let (rp, pp) = (redis.port(), pg.port());
    // redis-rs reads no password from the query (tokio-postgres does): it is planted there
    // as a user would write it, and ignored by the server.
    let redis_url = format!(
        "redis://:{}@127.0.0.1:{rp}/?password={}",
        s("redis-userinfo"),
        s("redis-query")
    );
    // The managed cluster trusts loopback: any password is accepted.
    let pg_url = format!(
        "postgres://stampede:{}@127.0.0.1:{pp}/postgres?password={}&application_name=secrets",
        s("pg-userinfo"),
        s("pg-query")
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = |name: &str| d.join(name).display().to_string();
    let load = strings(&["--rps", "200", "--keys", "50", "--duration", "1s"]);
    let mut outputs: Vec<Ran> = Vec::new();
    let turn = cpu_turn();

    // The built-in app on the external servers, with fault commands; the kill command
    // fails and prints its password, which the fault's note quotes.
    let mut a = strings(&["run", "--redis-url", &redis_url, "--pg-url", &pg_url]);
    a.extend(strings(&[
        "--redis-restart-cmd",
        &format!(
            "redis-server --port 1 --requirepass {} && redis-cli -p 1 -a {} ping",
            s("requirepass"),
            s("redis-cli-a")
        ),
        "--pg-kill-cmd",
        &format!(
            "PGPASSWORD={} sh -c 'echo \"auth $PGPASSWORD refused\" >&2; exit 1'",
            s("pgpassword-kill")
        ),
        "--pg-restart-cmd",
        &format!("env PGPASSWORD={} true", s("pgpassword-restart")),
        "--kill-postgres-at",
        "300ms",
        "--postgres-down-for",
        "200ms",
        "--out",
        &path("builtin.json"),
    ]));
    a.extend(load.clone());
    outputs.push(ran("run with fault commands", &a));

    // An app under test on servers the tool starts, two variants.
    let mut b = strings(&[
        "compare",
        "--target",
        &format!(
            "http://u:{}@127.0.0.1:{{port}}/items/{{key}}?token={}",
            s("target-userinfo"),
            s("target-query")
        ),
        "--app-cmd",
        &format!("APP_SECRET={} exec {app}", s("app-cmd-env")),
        "--app-ready",
        &format!(
            "http://127.0.0.1:{{port}}/health?api_key={}",
            s("app-ready-query")
        ),
        "--header",
        &format!("Authorization: Bearer {}", s("header-value")),
        "--variant",
        &format!(
            "v1=APP_STRATEGY=cache-aside,APP_DB_TOKEN={}",
            s("variant-token")
        ),
        "--variant",
        &format!("v2=APP_STRATEGY=lock,APP_NOTE={}", s("variant-plain")),
        "--out",
        &path("app"),
    ]);
    b.extend(load.clone());
    outputs.push(ran("compare app variants", &b));
    drop(turn);

    let app_dir = path("app");
    for (name, args) in [
        ("report app", vec!["report", &app_dir]),
        (
            "report app html",
            vec!["report", &app_dir, "--html", &path("app.html")],
        ),
        (
            "report builtin html",
            vec![
                "report",
                &path("builtin.json"),
                "--html",
                &path("builtin.html"),
            ],
        ),
        (
            "check app markdown",
            vec![
                "check",
                &app_dir,
                "--baseline",
                &app_dir,
                "--format",
                "markdown",
            ],
        ),
        (
            "check builtin",
            vec![
                "check",
                &path("builtin.json"),
                "--baseline",
                &path("builtin.json"),
            ],
        ),
        (
            "cleanup",
            vec!["cleanup", "--redis-url", &redis_url, "--pg-url", &pg_url],
        ),
    ] {
        outputs.push(ran(name, &strings(&args)));
    }

    // Failures quote what they were given.
    let bad_pg = format!(
        "postgres://stampede@127.0.0.1:{pp}/postgres?sslpassword={}&passfile={}",
        s("sslpassword"),
        s("passfile")
    );
    let mut e = strings(&["run", "--redis-url", &redis_url, "--pg-url", &bad_pg]);
    e.extend(load.clone());
    outputs.push(ran("unknown Postgres URL parameters", &e));
    outputs.push(ran(
        "variant that does not parse",
        &strings(&[
            "compare",
            "--target",
            "http://127.0.0.1:{port}/items/{key}",
            "--app-cmd",
            "true",
            "--variant",
            &format!(
                "bad=APP_X={},{}",
                s("variant-error-value"),
                s("variant-error-part")
            ),
        ]),
    ));
    outputs.push(ran(
        "header without a colon",
        &strings(&[
            "run",
            "--target",
            "http://127.0.0.1:{port}/items/{key}",
            "--app-cmd",
            "true",
            "--header",
            &s("header-without-colon"),
        ]),
    ));
    outputs.push(ran(
        "target without {key}",
        &strings(&[
            "run",
            "--target",
            &format!(
                "http://u:{}@127.0.0.1:1/items?token={}",
                s("keyless-target-userinfo"),
                s("keyless-target-query")
            ),
            "--app-cmd",
            "true",
        ]),
    ));
    let mut u = strings(&[
        "run",
        "--target",
        &format!(
            "http://127.0.0.1:1/items/{{key}}?token={}",
            s("unreachable-target-query")
        ),
        "--schema",
        "secrets_app",
        "--redis-url",
        &redis_url,
        "--pg-url",
        &pg_url,
    ]);
    u.extend(load);
    outputs.push(ran("unreachable target", &u));

    let codes: Vec<(&str, i32)> = outputs.iter().map(|r| (r.name.as_str(), r.code)).collect();
    let expect = [
        ("run with fault commands", 0),
        ("compare app variants", 0),
        ("report app", 0),
        ("report app html", 0),
        ("report builtin html", 0),
        ("check app markdown", 0),
        ("check builtin", 0),
        ("cleanup", 0),
        ("unknown Postgres URL parameters", 3),
        ("variant that does not parse", 2),
        ("header without a colon", 2),
        ("target without {key}", 2),
        ("unreachable target", 3),
    ];
    let all = outputs
        .iter()
        .map(|r| format!("--- {} (exit {}):\n{}", r.name, r.code, r.text))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(codes, expect, "{all}");

    // Everything printed, every file written, and the names of the app's logs.
    let mut searched: Vec<(String, String)> = outputs
        .iter()
        .map(|r| (r.name.clone(), r.text.clone()))
        .collect();
    searched.extend(files(d));
    let mut logs = Vec::new();
    for v in ["v1", "v2"] {
        let j = read_json(&d.join("app").join(format!("{v}.json")))
            .unwrap_or_else(|| panic!("app/{v}.json missing:\n{all}"));
        let log = j["app"]["log"].as_str().expect("the app's log").to_string();
        searched.push((format!("{v}'s log path"), log.clone()));
        logs.push(log);
    }
    for log in &logs {
        let _ = std::fs::remove_file(log);
    }
    let names: Vec<&str> = searched.iter().map(|(n, _)| n.as_str()).collect();
    for f in [
        "builtin.json",
        "app.html",
        "builtin.html",
        "summary.md",
        "v1.json",
    ] {
        assert!(
            names.iter().any(|n| n.ends_with(f)),
            "{f} not searched: {names:?}"
        );
    }
    // Every leak at once, so a failure lists each position and where it showed.
    let leaks: Vec<String> = searched
        .iter()
        .flat_map(|(what, text)| {
            positions
                .iter()
                .filter(|pos| text.contains(&secret(pos)))
                .map(move |pos| format!("{what} shows the secret planted as {pos}"))
        })
        .collect();
    assert!(leaks.is_empty(), "{}\n\n{all}", leaks.join("\n"));

    // The places were there, redacted: the search looked at text that holds them.
    let builtin = std::fs::read_to_string(d.join("builtin.json")).unwrap();
    for shown in [
        "redis://:***@127.0.0.1",
        "/?password=***",
        "postgres://stampede:***@127.0.0.1",
        "/postgres?password=***&application_name=secrets",
        "--requirepass ***",
        "redis-cli -p 1 -a *** ping",
        "PGPASSWORD=*** sh -c",
        "env PGPASSWORD=*** true",
        "auth *** refused",
    ] {
        assert!(
            builtin.contains(shown),
            "builtin.json lacks {shown}: {builtin}"
        );
    }
    let v1 = std::fs::read_to_string(d.join("app").join("v1.json")).unwrap();
    for shown in [
        "http://u:***@127.0.0.1:{port}/items/{key}?token=***",
        "APP_SECRET=*** exec",
        "/health?api_key=***",
        "Authorization: <redacted>",
        "APP_DB_TOKEN=***",
        "APP_STRATEGY=***",
    ] {
        assert!(v1.contains(shown), "v1.json lacks {shown}: {v1}");
    }
    let text = |name: &str| {
        &outputs
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no output {name}"))
            .text
    };
    assert!(
        text("unknown Postgres URL parameters").contains("sslpassword=***&passfile=***"),
        "{all}"
    );
    assert!(text("unreachable target").contains("?token=***"), "{all}");
    drop((redis, pg));
}
