//! No secrets in results: results and baselines get committed, so every output (JSON,
//! Markdown, terminal, error messages) shows server URLs with the password redacted. The test
//! starts its own Redis and Postgres, gives both a password, passes URLs carrying them, and
//! searches everything the tool printed or wrote for either password.

mod common;

use std::path::Path;

use common::stampede;
use stampede::servers::postgres::PgStartOptions;
use stampede::servers::{ManagedPostgres, ManagedRedis};

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
        let redis = ManagedRedis::start().await.expect("starting redis-server");
        let pg = ManagedPostgres::start(PgStartOptions::default())
            .await
            .expect("starting postgres");
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
